"""The `qzoo` command.

  qzoo train AGENT [--env ENV] [--option value ...]  train, or resume a run folder
  qzoo resume RUN [--option value ...]               resume run folder RUN as it was started
  qzoo agents                                        list the presets and their papers
  qzoo bench replay|train [...]                      speed and memory figures (JSON lines)
  qzoo --version;  qzoo train AGENT [--env ENV] --help: every option, AGENT's defaults

Every Config field is an option, with dashes: --learning-rate 1e-4, --num-envs 8;
booleans take --flag, --no-flag or --flag true|false. The parser is argparse, built
from the Config dataclass (each field's group, help and domain). Any mistake is one
line on stderr, `qzoo: error: ...`, and exit code 2, before anything is written.
"""

import dataclasses
import os
import sys

import qzoo.configuration as config_lib
from qzoo.cli import bench
from qzoo.cli.parser import Exit, Parser, parse, train_parser
from qzoo.configuration import build_config
from qzoo.errors import Diverged, UserError, closest
from qzoo.run import allocator
from qzoo.signals import term_as_interrupt
from qzoo.version import __version__

COMMANDS = {
    "train": "train an agent, or resume its run folder",
    "resume": "resume a run folder with the options it was started with",
    "agents": "list the presets, their papers and how each differs from dqn",
    "bench": "speed and memory figures as JSON lines: bench replay | bench train",
}

# Commands that live in their own module, as `qzoo.<module>.main(argv)`: each parses
# its own options with `Parser` (one-line errors through UserError) and does its work.
# A module listed here that does not exist yet is not offered.
TOOLS = {
    "eval": ("qzoo.tools.evaluate", "evaluate a run's snapshot: return statistics"),
    "play": ("qzoo.tools.play", "watch a run's agent play in the terminal"),
    "record": ("qzoo.tools.record", "record a run's agent as an MP4 video"),
    "plot": ("qzoo.tools.plot", "learning curves of runs from their results.csv"),
    "compare": ("qzoo.tools.compare", "IQM, median, mean, optimality gap with bootstrap CIs"),
    "visualize": ("qzoo.tools.visualize", "what the network responds to: saliency, filters"),
    "profile": ("qzoo.tools.profile", "where the time goes: train, act or env"),
    "dataset": ("qzoo.cli.dataset", "DQN Replay Dataset: info, convert"),
    "suite": ("qzoo.tools.suite", "agents x games x seeds as parallel, resumable runs; report"),
    "export": ("qzoo.tools.export", "a run's network as a model folder to share, with its card"),
    "push": ("qzoo.tools.push", "export a run and upload it to the Hugging Face Hub"),
    "tune": ("qzoo.tools.tune", "hyperparameter search (Optuna): TPE, median pruner, resumable"),
}


def _available_tools():
    import importlib.util

    found = {}
    for name, (module, what) in TOOLS.items():
        try:
            if importlib.util.find_spec(module) is not None:
                found[name] = (module, what)
        except ModuleNotFoundError:  # the parent package does not exist yet
            pass
    return found


def train_command(argv, on_row=None, resume_line=True):
    """`qzoo train AGENT [options]`: parse, check everything, then train (`on_row`,
    `resume_line`: see run_folder.train; qzoo tune's trials report each row to the pruner)."""
    first = argv[0] if argv and not argv[0].startswith("-") else None
    if first is not None:
        config_lib.check_agent(first)  # before --help shows its defaults
    options = parse(train_parser(first, argv), argv)
    agent = options.pop("agent", None)
    if agent is None:
        raise UserError(f"train needs an agent; expected one of {', '.join(config_lib.PRESETS)}")
    config = build_config(agent, options, strict=True)
    from qzoo.run import training

    training.train(config, on_row=on_row, resume_line=resume_line)


# The environment standing for each domain in `qzoo agents`: its values are those of
# every environment of the domain (configuration/domains.py, the presets' "domains").
DOMAIN_EXAMPLES = {"Gymnasium tasks": "CartPole-v1", "MinAtar": "minatar/breakout"}


def domain_values(agent, env, atari):
    """{option: value} where `agent` on `env` differs from `atari`, its config on Atari:
    the domain defaults and the preset's own values for that domain, as build_config
    resolves them (compared as a resumed run's options are: run/changes.py)."""
    from qzoo.run.changes import differences

    there = build_config(agent, {"env": env})
    found = differences(dataclasses.asdict(atari), dataclasses.asdict(there), ("env",))
    return {name: getattr(there, name) for name, _, _ in found}


def agents():
    for name, preset in config_lib.PRESETS.items():
        atari = build_config(name, {"env": "pong"})
        diff = ", ".join(f"{k}={v}" for k, v in preset["overrides"].items()) or "(the base)"
        print(f"{name:10s} {preset['paper']}\n{'':10s} differs from dqn: {diff}")
        if preset.get("online"):  # values that apply only without --offline
            online = ", ".join(f"{k}={v}" for k, v in preset["online"].items())
            print(f"{'':10s} without --offline, also: {online}")
        for domain, env in DOMAIN_EXAMPLES.items():
            values = ", ".join(f"{k}={v}" for k, v in domain_values(name, env, atari).items())
            if values:
                print(f"{'':10s} on {domain} (as {env}), instead: {values}")


def _check_command(options, commands):
    """Refuses an unknown command, before any word after it (`qzoo trian dqn`)."""
    command = options.get("command")
    if command is not None:
        hint = closest(command, commands)
        raise UserError(
            f"unknown command {command!r}; expected {', '.join(commands)}"
            + (f" (did you mean {hint[0]}?)" if hint else "")
        )


def main(argv=None):
    """Runs the `qzoo` command line `argv` (default sys.argv[1:]); returns the exit
    status: 0, 2 for bad input (one line on stderr), 130 for Ctrl-C or SIGTERM."""
    argv = sys.argv[1:] if argv is None else list(argv)
    allocator.keep_freed_memory()  # replay batches sampled without page faults (run/allocator.py)
    with term_as_interrupt():  # `kill` or a scheduler's SIGTERM stops a run as Ctrl-C does
        return _run_command(argv)


def _run_command(argv):
    try:
        command = argv[0] if argv else None
        if command == "train":
            train_command(argv[1:])
        elif command == "resume":
            from qzoo.cli.resume import resume_command

            resume_command(argv[1:])
        elif command == "agents":
            parse(Parser(prog="qzoo agents", description=COMMANDS["agents"]), argv[1:])
            agents()
        elif command == "bench":
            bench.bench_command(argv[1:])
        elif command in _available_tools():
            import importlib

            status = importlib.import_module(_available_tools()[command][0]).main(argv[1:])
            if status:  # a tool's own exit status (qzoo suite: 1 when a run failed)
                return status
        else:
            commands = {**COMMANDS, **{k: v[1] for k, v in _available_tools().items()}}
            top = Parser(
                prog="qzoo",
                description="Fast PyTorch DQN-family agents (DQN Zoo's seven) for Atari, "
                "MinAtar and Gymnasium.",
                epilog="qzoo COMMAND --help shows each command's options.",
            )
            top.add_argument("--version", action="version", version=f"qzoo {__version__}")
            top.add_argument(
                "command", nargs="?", metavar="COMMAND",
                help="; ".join(f"{name}: {what}" for name, what in commands.items()),
            )  # fmt: skip
            parse(top, argv, check=lambda options: _check_command(options, commands))
            top.print_help()
            return 0
    except Exit as e:
        return e.status
    except Diverged as e:
        print(f"qzoo: diverged: {e}", file=sys.stderr)
        return 3
    except UserError as e:
        print(f"qzoo: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


def entry():
    """The `qzoo` console script."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # `qzoo ... | head`: the reader left; no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 1
    sys.exit(status)


if __name__ == "__main__":
    entry()
