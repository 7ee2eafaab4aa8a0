"""The `qzoo` command.

  qzoo train AGENT --env ENV [--option value ...]   train, or resume a run folder
  qzoo agents                                        list the presets and their papers
  qzoo bench replay|train [...]                      speed and memory figures (JSON lines)

Every Config field is an option, with dashes: --learning-rate 1e-4, --num-envs 8.
"""

import dataclasses
import os
import sys

from qzoo import config as config_lib
from qzoo import envs
from qzoo.errors import Diverged, UserError

USAGE = __doc__

# Options a resumed run may change without changing its results. (Not --iterations:
# as in DQN Zoo, the epsilon decay length is a fraction of the whole run.)
RESUMABLE = ("device", "progress", "tensorboard", "run_dir")


def _is_bool(name):
    field = config_lib.FIELDS.get(name)
    return field is not None and isinstance(field.default, bool)


def parse_options(args):
    """['--a-b', '1', '--flag', '--no-other'] -> {'a_b': '1', 'flag': 'true',
    'other': 'false'} (values stay strings until config.parse_value)."""
    options, i = {}, 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("--"):
            raise UserError(f"unexpected argument {arg!r}; options look like --name value")
        name, has_value, value = arg[2:].partition("=")
        name = name.replace("-", "_")
        if not has_value:
            nxt = args[i + 1] if i + 1 < len(args) else None
            if nxt is not None and not nxt.startswith("--"):
                value, i = nxt, i + 1
            elif name.startswith("no_") and _is_bool(name[3:]):
                name, value = name[3:], "false"
            elif _is_bool(name):
                value = "true"
            else:
                raise UserError(f"option {arg} needs a value")
        options[name] = value
        i += 1
    return options


def build_config(agent, options):
    options = dict(options)
    env_name = options.pop("env", None) or config_lib.Config.env
    domain, env_name = envs.resolve(env_name)
    parsed = {k: config_lib.parse_value(k, v) for k, v in options.items()}
    for name in ("agent", "env"):
        parsed.pop(name, None)
    return config_lib.make_config(agent, env_name, domain, parsed)


def default_run_dir(config):
    return os.path.join("runs", f"{config.agent}-{config.env.replace('/', '_')}-{config.seed}")


def train(agent, options):
    from qzoo import rundir

    options = dict(options)
    # Not a Config field (yet): the options a resume may change, see rundir.ACCEPTABLE.
    accept = rundir.parse_accept(options.pop("accept_changes", ""))
    rundir.train(build_config(agent, options), accept)


def _check_same_run(saved, config, run_dir):
    if not isinstance(saved, dict):
        raise UserError(f"checkpoint in {run_dir!r} holds no config; it is not a qzoo run")
    current = dataclasses.asdict(config)
    for key, value in saved.items():
        if key not in RESUMABLE and current.get(key) != value:
            raise UserError(
                f"--{key.replace('_', '-')} {current.get(key)!r} differs from {value!r} "
                f"used by the run in {run_dir!r}; pass the same value or another --run-dir"
            )


def agents():
    for name, preset in config_lib.PRESETS.items():
        diff = ", ".join(f"{k}={v}" for k, v in preset["overrides"].items()) or "(the base)"
        print(f"{name:10s} {preset['paper']}\n{'':10s} differs from dqn: {diff}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        if not argv or argv[0] in ("-h", "--help", "help"):
            print(USAGE)
            return 0
        command, rest = argv[0], argv[1:]
        if command == "train":
            if not rest or rest[0].startswith("--"):
                raise UserError(
                    "train needs an agent; expected one of " + ", ".join(config_lib.PRESETS)
                )
            train(rest[0], parse_options(rest[1:]))
        elif command == "agents":
            agents()
        elif command == "bench":
            from qzoo import bench

            bench.main(rest)
        else:
            raise UserError(f"unknown command {command!r}; expected train, agents or bench")
    except UserError as e:
        print(f"qzoo: error: {e}", file=sys.stderr)
        return 2
    except Diverged as e:
        print(f"qzoo: diverged: {e}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        return 130
    return 0


def entry():
    sys.exit(main())


if __name__ == "__main__":
    entry()
