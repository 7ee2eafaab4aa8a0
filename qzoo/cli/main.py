"""The `qzoo` command.

  qzoo train AGENT [--env ENV] [--option value ...]  train, or resume a run folder
  qzoo agents                                        list the presets and their papers
  qzoo bench replay|train [...]                      speed and memory figures (JSON lines)
  qzoo --version;  qzoo train AGENT [--env ENV] --help: every option, AGENT's defaults

Every Config field is an option, with dashes: --learning-rate 1e-4, --num-envs 8;
booleans take --flag, --no-flag or --flag true|false. The parser is argparse, built
from the Config dataclass (each field's group, help and domain). Any mistake is one
line on stderr, `qzoo: error: ...`, and exit code 2, before anything is written.
"""

import argparse
import dataclasses
import os
import sys

import qzoo
from qzoo.config import options as options_lib
from qzoo.config import schema as config_lib
from qzoo.config.options import Bool, flag, shown
from qzoo.config.schema import build_config
from qzoo.errors import Diverged, UserError, closest
from qzoo.run import allocator

COMMANDS = {
    "train": "train an agent, or resume its run folder",
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
    "dataset": ("qzoo.offline.dataset", "DQN Replay Dataset: info, convert"),
    "suite": ("qzoo.tools.suite", "agents x games x seeds as parallel, resumable runs; report"),
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


class _Exit(Exception):
    """argparse finished early (--help, --version) with this exit status."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Shows a boolean as `--flag [BOOL], --no-flag`, not `[BOOL]` twice."""

    def _format_action_invocation(self, action):
        if isinstance(action, _BoolAction):
            return f"{action.option_strings[0]} [BOOL], {action.option_strings[1]}"
        return super()._format_action_invocation(action)


class Parser(argparse.ArgumentParser):
    """argparse with qzoo's errors: one line through UserError, never usage + exit.
    Abbreviations are off: `--learning 1` is a mistake, not --learning-rate."""

    def __init__(self, **kwargs):
        super().__init__(allow_abbrev=False, formatter_class=_Formatter, **kwargs)

    def error(self, message):
        # argparse's messages name options as "argument --seed/-s: ..."; keep the flag.
        if message.startswith("argument "):
            name, _, message = message[len("argument ") :].partition(": ")
            message = message.replace("expected one argument", "needs a value")
            message = f"{name.split('/')[0]}: {message}"
        raise UserError(message)

    def exit(self, status=0, message=None):
        if message:
            print(message, end="", file=sys.stderr)
        raise _Exit(status)


class _BoolAction(argparse.Action):
    """--flag, --flag VALUE (true/false/1/0/yes/no) and --no-flag, for one field."""

    def __call__(self, parser, namespace, value, option_string=None):
        if option_string.startswith("--no-"):
            if value is not None:
                raise UserError(f"{option_string} takes no value; got {shown(value)}")
            value = "false"
        setattr(namespace, self.dest, "true" if value is None else value)


def add_options(parser, fields, defaults, title=None):
    """One option per dataclass field, grouped by its metadata "group"; `defaults` are
    only shown (the parser leaves unset options out, so that the given ones are known)."""
    groups = {}
    for field in fields:
        group_name = title or field.metadata["group"]
        if group_name not in groups:
            groups[group_name] = parser.add_argument_group(f"{group_name} options")
        domain = field.metadata["domain"]
        meaning = f"{field.metadata['help']} (default: {shown(defaults[field.name])})"
        names = [flag(field.name)]
        if isinstance(domain, Bool):
            names.append(flag("no_" + field.name))
            kwargs = {"nargs": "?", "action": _BoolAction, "metavar": "BOOL"}
        else:
            kwargs = {"metavar": domain.metavar}
        groups[group_name].add_argument(
            *names, dest=field.name, default=argparse.SUPPRESS,
            help=meaning.replace("%", "%%"), **kwargs,
        )  # fmt: skip


def _join_negative_values(argv, parser):
    """`--vmax -1e5` -> `--vmax=-1e5`: argparse takes -1e5 and -inf for options."""
    out, i = [], 0
    takes_value = {
        s for a in parser._actions if a.nargs is None and a.option_strings for s in a.option_strings
    }
    while i < len(argv):
        token = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if token in takes_value and nxt is not None and nxt.startswith("-"):
            try:
                float(nxt)
            except ValueError:
                pass
            else:
                out.append(f"{token}={nxt}")
                i += 2
                continue
        out.append(token)
        i += 1
    return out


def parse(parser, argv, refused=None):
    """{name: text} of the options given, refusing unknown ones with a suggestion, or
    with the reason in `refused` ({option: why}) for options this command leaves out."""
    namespace, extra = parser.parse_known_args(_join_negative_values(argv, parser))
    if extra:
        first = extra[0]
        if not first.startswith("-"):
            raise UserError(f"unexpected argument {first!r}; options look like --name value")
        name = first.partition("=")[0]
        if name in (refused or {}):
            raise UserError(f"{parser.prog} takes no {name}: {refused[name]}")
        known = [s for a in parser._actions for s in a.option_strings if s.startswith("--")]
        hint = closest(name, known)
        raise UserError(f"unknown option {name}" + (f"; did you mean {hint[0]}?" if hint else ""))
    return vars(namespace)


def _value_of(option, argv):
    """The text after `option` in `argv` (--env pong or --env=pong), or None."""
    for i, token in enumerate(argv):
        if token == option and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith(option + "="):
            return token[len(option) + 1 :]
    return None


def _defaults(agent, argv):
    """The values `--help` shows: the preset's, over the domain of a given --env."""
    env = _value_of("--env", argv) or config_lib.Config.env
    return dataclasses.asdict(build_config(agent, {"env": env}))


def _config_fields():
    """Config's fields as options, in --help's group order (agent is positional)."""
    fields = [f for f in dataclasses.fields(config_lib.Config) if f.name != "agent"]
    return sorted(fields, key=lambda f: config_lib.GROUPS.index(f.metadata["group"]))


def train_parser(agent, argv):
    """`qzoo train AGENT` with every Config field as an option."""
    shown_agent = agent or "dqn"
    paper = config_lib.PRESETS[shown_agent]["paper"]
    parser = Parser(
        prog="qzoo train",
        usage="qzoo train AGENT [--env ENV] [--option value ...]",
        description=f"AGENT: one of {', '.join(config_lib.PRESETS)} (qzoo agents).\n"
        f"Defaults shown: {shown_agent}'s on the --env given (else pong); {shown_agent}:\n"
        f"  {paper}.\n"
        "Booleans: --flag, --no-flag or --flag true|false. Schedules are in frames.",
    )
    parser.add_argument("agent", nargs="?", help=argparse.SUPPRESS)
    wants_help = any(token in ("-h", "--help") for token in argv)
    # Defaults are only shown, so only worked out for --help (it may build an env).
    defaults = _defaults(shown_agent, argv) if wants_help else dict.fromkeys(config_lib.FIELDS)
    add_options(parser, _config_fields(), defaults)
    return parser


def train_command(argv):
    """`qzoo train AGENT [options]`: parse, check everything, then train."""
    from qzoo.run import threads

    first = argv[0] if argv and not argv[0].startswith("-") else None
    if first is not None:
        config_lib.check_agent(first)  # before --help shows its defaults
    options = parse(train_parser(first, argv), argv)
    agent = options.pop("agent", None)
    if agent is None:
        raise UserError(f"train needs an agent; expected one of {', '.join(config_lib.PRESETS)}")
    config = build_config(agent, options, strict=True)
    from qzoo.run import rundir

    run_dir, notes = config.run_dir or config_lib.default_run_dir(config), []
    threads.apply(config, rundir.saved_threads(run_dir), notes)  # a resume keeps its count
    rundir.train(config, notes=notes)


def agents():
    for name, preset in config_lib.PRESETS.items():
        diff = ", ".join(f"{k}={v}" for k, v in preset["overrides"].items()) or "(the base)"
        print(f"{name:10s} {preset['paper']}\n{'':10s} differs from dqn: {diff}")
        if preset.get("online"):  # values that apply only without --offline
            online = ", ".join(f"{k}={v}" for k, v in preset["online"].items())
            print(f"{'':10s} without --offline, also: {online}")
        for domain, values in preset.get("domains", {}).items():  # e.g. R2D1 on CartPole
            also = ", ".join(f"{k}={v}" for k, v in values.items())
            print(f"{'':10s} on {domain} environments, also: {also}")


def bench_command(argv):
    """`qzoo bench replay [options]` or `qzoo bench train [train options]`."""
    from qzoo.run import bench

    kind = argv[0] if argv else None
    usage = {
        "replay": "qzoo bench replay [--option value ...]",
        "train": "qzoo bench train [--agent A] [--frames N] [--warmup-transitions N] "
        "[train option ...]",
    }.get(kind, "qzoo bench replay|train [--option value ...]")
    parser = Parser(
        prog=f"qzoo bench {kind}", usage=usage, description=bench.__doc__.split("\n\n")[1]
    )
    if kind in ("-h", "--help"):
        parser.print_help()
    elif kind == "replay":
        _bench_replay(parser, argv[1:])
    elif kind == "train":
        _bench_train(parser, argv[1:])
    else:
        hint = closest(kind or "", ("replay", "train"))
        raise UserError(
            f"bench needs replay or train, got {shown(kind or 'nothing')}"
            + (f" (did you mean {hint[0]}?)" if hint else "")
        )


def _bench_replay(parser, argv):
    from qzoo.run import bench

    fields = {f.name: f for f in dataclasses.fields(bench.ReplayBench)}
    values = dataclasses.asdict(bench.ReplayBench())
    add_options(parser, fields.values(), values)
    for name, text in parse(parser, argv).items():
        values[name] = options_lib.parse(fields[name], text)
    bench.check_replay_bench(**values)
    bench.bench_replay(**values)


def _bench_train(parser, argv):
    from qzoo.run import bench, threads

    own = {f.name: f for f in dataclasses.fields(bench.TrainBench)}
    own_values = dataclasses.asdict(bench.TrainBench())
    shown_defaults = dict(own_values)
    if any(token in ("-h", "--help") for token in argv):
        agent = _value_of("--agent", argv) or own_values["agent"]
        config_lib.check_agent(agent)
        shown_defaults.update(_defaults(agent, argv), agent=agent)
    add_options(parser, own.values(), shown_defaults, title="bench train")
    fields = [f for f in _config_fields() if f.name not in bench.UNUSED_BY_BENCH]
    add_options(parser, fields, {**dict.fromkeys(config_lib.FIELDS, ""), **shown_defaults})
    why = "it writes nothing and does not evaluate"
    refused = {flag(prefix + name): why for name in bench.UNUSED_BY_BENCH for prefix in ("", "no_")}
    options = parse(parser, argv, refused)
    for name, field in own.items():
        if name in options:
            own_values[name] = options_lib.parse(field, options.pop(name))
    config = build_config(own_values["agent"], options, strict=True)
    bench.check_train_bench(config, own_values["warmup_transitions"])
    threads.apply(config)
    bench.measure_train(config, own_values["frames"], own_values["warmup_transitions"])


def main(argv=None):
    """Runs the `qzoo` command line `argv` (default sys.argv[1:]); returns the exit
    status: 0, 2 for bad input (one line on stderr), 130 for Ctrl-C."""
    argv = sys.argv[1:] if argv is None else list(argv)
    allocator.keep_freed_memory()  # replay batches: ~6x faster sampling (allocator.py)
    try:
        command = argv[0] if argv else None
        if command == "train":
            train_command(argv[1:])
        elif command == "agents":
            parse(Parser(prog="qzoo agents", description=COMMANDS["agents"]), argv[1:])
            agents()
        elif command == "bench":
            bench_command(argv[1:])
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
            top.add_argument("--version", action="version", version=f"qzoo {qzoo.__version__}")
            top.add_argument(
                "command", nargs="?", metavar="COMMAND",
                help="; ".join(f"{name}: {what}" for name, what in commands.items()),
            )  # fmt: skip
            options = parse(top, argv)
            if options.get("command") is None:
                top.print_help()
                return 0
            hint = closest(options["command"], commands)
            raise UserError(
                f"unknown command {options['command']!r}; expected {', '.join(commands)}"
                + (f" (did you mean {hint[0]}?)" if hint else "")
            )
    except _Exit as e:
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
