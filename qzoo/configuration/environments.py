"""What a user's --env means: Atari games by any spelling and Gymnasium's Atari ids
(with the protocol their version implies), MinAtar's games, and any Gymnasium id with
discrete actions and a Box observation; each mapped to its domain (atari, minatar,
gym) and a canonical name, the first layer of a run's config (build.py)."""

import re

import gymnasium

from qzoo.configuration import user_envs
from qzoo.errors import UserError, closest, shown

# qzoo's own environments (qzoo/envs/memory.py registers them with Gymnasium).
QZOO_IDS = ("qzoo/StatelessCartPole-v1",)
MINATAR_GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")


def _atari_rom_ids():
    from ale_py import roms

    return tuple(roms.get_all_rom_ids())


def _key(name):
    """Spelling-free form of a game name: SpaceInvaders, space-invaders -> spaceinvaders."""
    return re.sub("[^a-z0-9]", "", name.lower())


def _atari_game(name):
    """The ale-py ROM id of a game name in any spelling, or None."""
    return {_key(rom): rom for rom in _atari_rom_ids()}.get(_key(name))


# Gymnasium's Atari ids: [ALE/]<Game>[-ram][NoFrameskip|Deterministic]-v<0|4|5>.
_ATARI_ID = re.compile(
    r"^(?:ALE/)?(?P<game>[A-Za-z0-9]+?)(?P<ram>-ram)?(?:NoFrameskip|Deterministic)?"
    r"-v(?P<version>[045])$"
)
_PREPROCESSING = (
    "qzoo's own preprocessing (max-pool, 84x84 grayscale, --action-repeats and --frame-stack, "
    "4 by default)"
)
_ACCEPTED = "an Atari game (pong, PongNoFrameskip-v4, ALE/Pong-v5), minatar/<game>, a "
_ACCEPTED += "Gymnasium id with discrete actions and a Box observation, or your own as "
_ACCEPTED += "module:EnvId"


def _env_error(name, expected, hint=None):
    return UserError(
        f"--env: bad value {shown(name)}; expected {expected}"
        + (f" (did you mean {hint}?)" if hint else "")
    )


def _gym_problem(name):
    """Why Gymnasium id `name` cannot be trained on, or None if it can."""
    return user_envs.problem(lambda: gymnasium.make(name, disable_env_checker=True))


def _registered_version(name):
    """The newest registered id of Gymnasium id `name`'s environment in another
    version (Taxi-v4 for Taxi-v3, which Gymnasium 1.x deprecates), or None."""
    from gymnasium.envs.registration import parse_env_id

    try:
        namespace, base, _ = parse_env_id(name)
    except gymnasium.error.Error:
        return None
    versions = [(spec.version or 0, key) for key, spec in gymnasium.registry.items()
                if spec.namespace == namespace and spec.name == base]  # fmt: skip
    return max(versions)[1] if versions else None


def _suggestion(name):
    """The closest name to `name` that resolves and can be trained on, or None."""
    known = list(_atari_rom_ids()) + ["minatar/" + g for g in MINATAR_GAMES]
    known += [k for k, spec in gymnasium.registry.items()
              if "/" not in k and not str(spec.entry_point).startswith("ale_py")]  # fmt: skip
    by_key = {k.lower(): k for k in known}
    hints = [by_key[k] for k in closest(name.lower(), by_key, n=6)]
    # Also by the name without its version (acrobot: Acrobot-v1), and the family a
    # longer name belongs to (MountainCarContinuous-v0: MountainCar-v0).
    by_base = {}
    for key in sorted(by_key, reverse=True):  # the newest version first
        by_base.setdefault(re.sub(r"-v\d+$", "", key), []).append(by_key[key])
    typed = re.sub(r"-v\d+$", "", name.lower())
    hints += [h for base in closest(typed, by_base, n=6) for h in by_base[base]]
    hints += [h for base in sorted(by_base, key=len, reverse=True)
              if len(base) >= 4 and typed.startswith(base) for h in by_base[base]]  # fmt: skip
    return next((h for h in hints if "-v" not in h or _gym_problem(h) is None), None)


def interpret(name):
    """What a user's --env means: (domain, canonical name, options it implies, note).

    Atari games by any spelling (pong, Pong, SpaceInvaders), Gymnasium's Atari ids
    (PongNoFrameskip-v4, Pong-v4, ALE/Pong-v5; sticky-action ids v0 and v5 imply
    --protocol machado), minatar/<game> and MinAtar's ids, any Gymnasium id with
    discrete actions and a Box observation, and the user's own (user_envs.py:
    module:EnvId, module:factory). `note` (or None) says how a Gymnasium Atari id maps
    onto qzoo's protocol. Raises UserError naming a name that works.
    """
    if not name.strip():
        raise _env_error(name, _ACCEPTED)
    if user_envs.is_user_env(name):
        problem = user_envs.problem(user_envs.maker(name, checking=True))
        if problem is not None:
            raise _env_error(name, problem)
        return "gym", name, {}, None
    lowered = name.lower()
    for prefix in ("minatar/", "minatar-"):
        if lowered.startswith(prefix):
            # Also accepts MinAtar's own Gymnasium ids, e.g. MinAtar/SpaceInvaders-v1.
            game = lowered[len(prefix) :].split("-v")[0]
            game = game.replace("spaceinvaders", "space_invaders")
            if game in MINATAR_GAMES:
                return "minatar", "minatar/" + game, {}, None
            hint = closest(game, MINATAR_GAMES)
            raise _env_error(
                name, "minatar/ followed by " + ", ".join(MINATAR_GAMES),
                hint and "minatar/" + hint[0],
            )  # fmt: skip
    game = _atari_game(name)
    if game is not None:
        return "atari", game, {}, None
    match = _ATARI_ID.match(name)
    game = match and _atari_game(match["game"])
    if game is not None:
        if match["ram"]:
            raise _env_error(name, "screen observations: qzoo learns from pixels", game)
        sticky = match["version"] in "05"  # Gymnasium's v0 and v5 ids repeat actions at 0.25
        protocol = "machado" if sticky else "dqn_zoo"
        how = (
            f"v{match['version']}'s sticky actions make --protocol machado the default "
            "(--protocol dqn_zoo for DQN Zoo's)"
            if sticky
            else "with no sticky actions, as in v4, --protocol dqn_zoo stays the default"
        )
        note = f"{name} runs as Atari {game!r} under {_PREPROCESSING}; {how}"
        return "atari", game, {"protocol": protocol}, note
    if name in QZOO_IDS:  # registered by qzoo/envs/memory.py when environments are made
        return "gym", name, {}, None
    if name in gymnasium.registry:
        problem = _gym_problem(name)
        if problem is not None:
            raise _env_error(name, problem, _suggestion(name))
        return "gym", name, {}, None
    other = _registered_version(name)
    if other is not None:  # an old version: say what is wrong with the one there is
        problem = _gym_problem(other)
        if problem is not None:
            raise UserError(f"--env: bad value {shown(name)} ({other} in Gymnasium "
                            f"{gymnasium.__version__}); expected {problem}")  # fmt: skip
        raise _env_error(name, "a registered Gymnasium id", other)
    hint = _suggestion(match["game"] if match else name)
    raise _env_error(name, _ACCEPTED, hint)


def resolve(name):
    """Maps an env name to (domain, canonical name); UserError if unknown. Names in a
    saved config are already canonical (see `interpret` for what users may type)."""
    if user_envs.is_user_env(name):
        return "gym", name  # checked when the config was built; imported when made
    if (name in QZOO_IDS or name in gymnasium.registry) and _ATARI_ID.match(name) is None:
        return "gym", name  # checked when the config was built
    return interpret(name)[:2]
