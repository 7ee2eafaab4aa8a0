"""The tools' command lines, parsed as `qzoo train`'s is: each tool names its options
in a dataclass of `config.option` fields (group, help, domain), cli/parser.py's `Parser`
reads them, and configuration/values.py's `parse` checks each value against its domain, so
that every mistake is one line, `qzoo: error: --name: bad value X; expected ...`, exit
code 2."""

import argparse
import dataclasses

from qzoo.configuration import values as options_lib
from qzoo.configuration.values import Choice, Int, Real
from qzoo.errors import UserError

SEED = Int(0, 2**32 - 1, "an integer in [0, 2^32)")
EPSILON = Real(0, 1)
PROTOCOL = Choice("dqn_zoo", "machado", "noop30")


class Snapshot:
    """`--checkpoint`: `latest` or an iteration whose network the run kept."""

    metavar = "K|latest"
    expected = "latest or an iteration number (an integer >= 0)"

    def parse(self, text):
        return text if text == "latest" else Int(0, 10**9).parse(text)

    def accepts(self, value):
        return value == "latest" or Int(0, 10**9).accepts(value)


class Path:
    """A path whose name must end with `suffix` (record's --out: ffmpeg picks the
    container from the name)."""

    metavar = "PATH"

    def __init__(self, suffix):
        self.suffix = suffix
        self.expected = f"a path ending in {suffix}"

    def parse(self, text):
        return text

    def accepts(self, value):
        return isinstance(value, str) and value.lower().endswith(self.suffix) and "\0" not in value


class Words:
    """A default that --help shows as words, unquoted ("the run's")."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text


def parse_tool(cls, argv, prog, usage, description, positional=None, shown=None,
               needs="a run folder", check=None):  # fmt: skip
    """Parses `argv` for a tool whose options are the fields of dataclass `cls`.

    `positional`: the name of one required positional argument (the run folder), or
    None; `needs` says what it is when it is missing. `shown`: {field: text} for
    defaults that --help should describe in words (None defaults that mean "the
    run's"). Returns (the positional value, an instance of `cls`, the set of option
    names the user gave). `check`, of the positional value, refuses a bad one before
    any word after it is blamed. Raises UserError; --help raises the parser's early exit, which
    cli/main.py turns into exit status 0."""
    from qzoo.cli import parser as cli

    parser = cli.Parser(prog=prog, usage=usage, description=description)
    if positional:
        parser.add_argument(positional, nargs="?", default=None, help=argparse.SUPPRESS)
    fields = dataclasses.fields(cls)
    defaults = dataclasses.asdict(cls())
    words = {name: Words(text) for name, text in (shown or {}).items()}
    cli.add_options(parser, fields, {**defaults, **words}, title=prog.split()[-1])
    given = cli.parse(
        parser, argv, check=check and (lambda options: check(options.get(positional)))
    )
    value = given.pop(positional, None) if positional else None
    if positional and value is None:
        raise UserError(f"{prog} needs {needs}; see {prog} --help")
    by_name = {f.name: f for f in fields}
    typed = {name: options_lib.parse(by_name[name], text) for name, text in given.items()}
    return value, cls(**{**defaults, **typed}), set(typed)


def integer_option(name, text, low, high):
    """`text` as an integer in [low, high]; UserError naming --`name` otherwise."""
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or not low <= value <= high:
        raise UserError(f"--{name}: bad value {text!r}; expected an integer in [{low}, {high}]")
    return value
