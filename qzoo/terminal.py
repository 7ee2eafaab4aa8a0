"""What a long piece of work shows on the terminal: a progress bar on stderr, or
nothing when stderr is not a terminal (logs and pipes get no control characters)."""

import sys


def progress_bar(total, desc, unit, force=False):
    """The progress bar of every long command: a tqdm bar on stderr with the count, the
    rate and the time left, cleared when done. None (quiet) when stderr is not a
    terminal, so that logs and pipes get no control characters, unless `force`."""
    if not (force or sys.stderr.isatty()):
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, leave=False)
