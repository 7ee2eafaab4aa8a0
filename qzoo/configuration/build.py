"""A run's config, built in layers, later ones winning:
  1. `Config()` defaults: DQN Zoo's flags shared by all agents.
  2. The agent preset (`PRESETS`, one per paper).
  3. Domain defaults for non-Atari environments (`DOMAIN_DEFAULTS`): DQN Zoo's numbers
     are for 200M Atari frames; on CartPole or MinAtar they would never start learning,
     so the domain's scale (periods, replay, exploration) replaces the preset's Atari
     scale, while the preset's algorithm stays; then the preset's own values for that
     domain.
  4. What an environment id implies (ALE/Pong-v5: sticky actions, so --protocol machado).
  5. The user's overrides.
then checked whole (validate.py) before any work starts."""

import dataclasses
import os
import sys

from qzoo.configuration import environments, user_modules
from qzoo.configuration import validate as validate_lib
from qzoo.configuration import values as values_lib
from qzoo.configuration.domains import DOMAIN_DEFAULTS
from qzoo.configuration.presets import PRESETS
from qzoo.configuration.schema import FIELDS, Config
from qzoo.errors import UserError, closest, flag


def check_agent(agent):
    """Raises UserError unless `agent` names a preset."""
    if agent not in PRESETS:
        hint = closest(agent, PRESETS)
        raise UserError(
            f"unknown agent {agent!r}; expected one of {', '.join(PRESETS)}"
            + (f" (did you mean {hint[0]}?)" if hint else "")
        )


def build_config(agent, options, strict=False):
    """The Config of `agent` with `options` ({field name: text or value}) over the
    preset and the environment's domain defaults, checked before any work starts.

    `options["env"]` may be any name environments.interpret accepts (PongNoFrameskip-v4,
    ALE/Pong-v5, ...); a one-line note on stderr says how such a name is mapped. With
    `strict` (the command line), options that would have no effect for this agent and
    environment are refused; without it (scripts), one options dict may serve several
    agents, and those options are merely unused.
    """
    check_agent(agent)
    options = {name: value for name, value in options.items() if name != "agent"}
    given = list(options) if strict else None
    for name in options:
        if name not in FIELDS:
            hint = closest(flag(name), [flag(field) for field in FIELDS])
            raise UserError(
                f"unknown option {flag(name)}" + (f"; did you mean {hint[0]}?" if hint else "")
            )
    # The user's modules first: they register the environment and torso named below.
    packages = values_lib.parse(FIELDS["gym_packages"], options.get("gym_packages", ""))
    user_modules.import_modules(packages)
    env = values_lib.parse(FIELDS["env"], options.pop("env", Config.env))
    domain, env, implied, note = environments.interpret(env)
    parsed = {name: values_lib.parse(FIELDS[name], value) for name, value in options.items()}
    config = make_config(agent, env, domain, {**implied, **parsed}, given)
    if note:  # only for a config that will run: a refusal stays one line
        print(f"qzoo: note: {note}", file=sys.stderr)
    return config


def preset_values(agent, offline):
    """The preset's overrides; training online (not `offline`), also its "online" ones
    (REM's online variant differs from its fixed-replay one)."""
    preset = PRESETS[agent]
    return {**preset["overrides"], **({} if offline else preset.get("online", {}))}


def make_config(agent, env, domain, overrides, given=None):
    """The layers of the module docstring for `agent` on canonical `env` of `domain`,
    with `overrides` (typed values) on top; validated (validate.validate, with `given`)."""
    check_agent(agent)
    config = Config(agent=agent, env=env, **layered_values(agent, domain, overrides))
    validate_lib.validate(config, domain, given)
    return config


def layered_values(agent, domain, overrides):
    """The values `agent`'s Config takes over Config's defaults on an environment of
    `domain`: its preset, the domain's defaults, the preset's for that domain, then
    `overrides` (unchecked)."""
    # A run is offline when it names a dataset (--offline DIR).
    preset = preset_values(agent, offline=bool(overrides.get("offline")))
    # A preset's own values for a domain (R2D1's sequences on CartPole) come after the
    # domain's defaults.
    domain_preset = PRESETS[agent].get("domains", {}).get(domain, {})
    values = {**preset, **DOMAIN_DEFAULTS.get(domain, {}), **domain_preset, **overrides}
    if values.get("ray") and "num_envs" not in overrides:
        # On Ray each actor steps --envs-per-actor environments: a preset's --num-envs
        # (R2D1's 4 on CartPole, 32 on Atari) is the serial loop's and gives way.
        values["num_envs"] = 1
    return values


def default_values(saved):
    """What each option of Config was in a run saved as the dict `saved`, when that
    run was made by a qzoo without the option: Config's default under the run's agent,
    environment and offline-ness (it ran as if so)."""
    domain = environments.interpret(saved["env"])[0]
    layers = layered_values(saved["agent"], domain, {"offline": saved.get("offline", "")})
    return {
        field.name: layers.get(field.name, field.default) for field in dataclasses.fields(Config)
    }


def default_run_dir(config):
    """runs/<agent>-<env>-<seed>, with the env's slashes (minatar/breakout) and colons
    (my_envs:Corridor-v0) made safe for every file system and shell."""
    env = config.env.replace("/", "_").replace(":", "_").replace("#", "_")
    return os.path.join("runs", f"{config.agent}-{env}-{config.seed}")
