"""The one error type for bad user input (unknown game, bad value, corrupt file).

The CLI prints it as a single line and exits with code 2, without a traceback; `bad_value`
writes the line for an option (`--name: bad value V; expected ...`).
"""

import difflib


class UserError(Exception):
    """A mistake in what the user asked for; its message names the bad value."""


def closest(name, choices, n=3):
    """Returns up to `n` names from `choices` that look like `name`, for messages."""
    return difflib.get_close_matches(name, list(choices), n=n, cutoff=0.5)


# Messages about a bad option value: `--name: bad value V; expected ...`.
def flag(name):
    """`replay_capacity` -> `--replay-capacity`."""
    return "--" + name.replace("_", "-")


def shown(value):
    """A value as a message shows it: as typed, quoted only when that would be unclear."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))  # 0, not 0.0
    if isinstance(value, str) and (not value or value != value.strip() or " " in value):
        return repr(value)
    return str(value)


def bad_value(name, value, expected):
    """The UserError for option `name` holding `value`, saying what is accepted."""
    return UserError(f"{flag(name)}: bad value {shown(value)}; expected {expected}")


class WorkerDied(Exception):
    """A process the run forked (--actor-process's actor) ended without a word: killed
    (for memory, say) or crashed. The run stops in one line, keeping the last
    checkpoint, and exits with code 2 as for memory that runs out."""


class Diverged(Exception):
    """A loss or Q-value became NaN or infinite: the run stops, keeping the last good
    checkpoint. The CLI exits with code 3 (distinct from bad input's 2)."""
