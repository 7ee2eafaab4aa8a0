"""The one error type for bad user input (unknown game, bad value, corrupt file).

The CLI prints it as a single line and exits with code 2, without a traceback.
"""

import difflib


class UserError(Exception):
    """A mistake in what the user asked for; its message names the bad value."""


def closest(name, choices, n=3):
    """Returns up to `n` names from `choices` that look like `name`, for messages."""
    return difflib.get_close_matches(name, list(choices), n=n, cutoff=0.5)


class Diverged(Exception):
    """A loss or Q-value became NaN or infinite: the run stops, keeping the last good
    checkpoint. The CLI exits with code 3 (distinct from bad input's 2)."""
