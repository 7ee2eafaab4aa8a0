"""The command line's parser: argparse with one-line errors (`qzoo: error: ...`, exit
code 2, no traceback), options made from dataclass fields (each field's group, help and
domain), and `qzoo train`'s options from the Config schema. Every command and tool
parses with it."""

import argparse
import dataclasses
import re
import sys

import qzoo.configuration as config_lib
from qzoo.configuration import build_config
from qzoo.configuration.values import Bool
from qzoo.errors import UserError, closest, flag, shown


class Exit(Exception):
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
        # A subcommand that is not one (qzoo dataset infoo): named, with what was meant.
        wrong = re.match(r"argument (\S+): invalid choice: '?([^' ]*)'? \(choose from (.*)\)$",
                         message)  # fmt: skip
        if wrong and "|" in wrong[1]:
            choices = [c.strip("' ") for c in wrong[3].split(",")]
            hint = closest(wrong[2], choices)
            raise UserError(f"{self.prog} needs {' or '.join(choices)}, got {wrong[2]!r}"
                            + (f" (did you mean {hint[0]}?)" if hint else ""))  # fmt: skip
        # argparse's messages name options as "argument --seed/-s: ..."; keep the flag.
        if message.startswith("argument "):
            name, _, message = message[len("argument ") :].partition(": ")
            message = message.replace("expected one argument", "needs a value")
            message = f"{name.split('/')[0]}: {message}"
        raise UserError(message)

    def exit(self, status=0, message=None):
        if message:
            print(message, end="", file=sys.stderr)
        raise Exit(status)


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


def _check_repeated(parser, argv):
    """Refuses an option given twice (`--seed 1 --seed 2`, `--dueling --no-dueling`):
    argparse would keep the last one without a word."""
    actions, seen = parser._option_string_actions, {}
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for i, token in enumerate(argv):
        if token == "--":
            break
        if subcommands and token in subcommands[0].choices:  # qzoo dataset info ...
            _check_repeated(subcommands[0].choices[token], argv[i + 1 :])
            argv = argv[:i]
            break
        name, equals, _ = token.partition("=")
        action = actions.get(name)
        if action is None or isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        value = argv[i + 1] if not equals and i + 1 < len(argv) else None
        takes = action.nargs is None or action.nargs == "?" and not str(value).startswith("-")
        given = f"{token} {value}" if takes and value is not None else token
        if action.dest in seen:
            raise UserError(f"{action.option_strings[0]}: given twice ({seen[action.dest]} and "
                            f"{given}); expected it once")  # fmt: skip
        seen[action.dest] = given


def parse(parser, argv, refused=None, check=None):
    """{name: text} of the options given, refusing unknown ones with a suggestion, or
    with the reason in `refused` ({option: why}) for options this command leaves out.
    `check` (of the options parsed) refuses a bad positional word, such as an unknown
    command, before the words after it are blamed: the first mistake is named."""
    argv = _join_negative_values(argv, parser)
    namespace, extra = parser.parse_known_args(argv)
    if check is not None and not (extra and argv and argv[0].startswith("-")):
        check(vars(namespace))  # the word comes first: it is the first mistake
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
    _check_repeated(parser, argv)
    return vars(namespace)


def value_of(option, argv):
    """The text after `option` in `argv` (--env pong or --env=pong), or None."""
    for i, token in enumerate(argv):
        if token == option and i + 1 < len(argv):
            return argv[i + 1]
        if token.startswith(option + "="):
            return token[len(option) + 1 :]
    return None


def defaults_for(agent, argv):
    """The values `--help` shows: the preset's, over the domain of a given --env."""
    env = value_of("--env", argv) or config_lib.Config.env
    return dataclasses.asdict(build_config(agent, {"env": env}))


def config_fields():
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
    defaults = defaults_for(shown_agent, argv) if wants_help else dict.fromkeys(config_lib.FIELDS)
    add_options(parser, config_fields(), defaults)
    return parser
