"""The suite's run folders: DIR/<agent>/<game>-<seed>, which games --games names, and
whether a run is complete (its DONE file, or results.csv at its last iteration)."""

import csv
import dataclasses
import json
import os

from qzoo.errors import UserError, shown

DONE = "DONE"  # written in a run folder when its `qzoo train` ended well
ATARI100K = "atari100k"


@dataclasses.dataclass(eq=False)  # a key of the running runs: by identity
class Run:
    """One run of the suite: what it is, where, and the command that trains it."""

    index: int
    agent: str
    game: str  # the env as qzoo names it (config.env)
    seed: int
    folder: str
    config: object
    command: list
    threads: int = 1  # PyTorch threads it will use
    env: dict = dataclasses.field(default_factory=dict)  # variables set for it

    @property
    def name(self):
        return f"{self.agent} {os.path.basename(self.folder)}"

    @property
    def log(self):
        return self.folder + ".log"


def names(text, what):
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise UserError(f"--{what}: bad value {shown(text)}; expected names, comma-separated")
    return list(dict.fromkeys(names))


def parse_seeds(text):
    """'1,2,5-7' -> [1, 2, 5, 6, 7] (duplicates dropped, order kept)."""
    expected = "integers in [0, 2^32), comma-separated, or ranges such as 1-3"
    seeds = []
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            numbers = [int(low)] if not dash else list(range(int(low), int(high) + 1))
        except ValueError:
            numbers = []
        if not numbers or not all(0 <= s < 2**32 for s in numbers):
            raise UserError(f"--seeds: bad value {shown(text)}; expected {expected}")
        seeds += numbers
    return list(dict.fromkeys(seeds))


def expand_games(text):
    """The games named in --games, `atari100k` standing for Atari 100k's 26."""
    from qzoo import data

    games = []
    for name in names(text, "games"):
        games += list(data.atari100k_games()) if name.lower() == ATARI100K else [name]
    return list(dict.fromkeys(games))


def last_iteration(folder):
    """The last iteration in the folder's results.csv, None where there is none."""

    try:
        with open(os.path.join(folder, "results.csv"), newline="", encoding="utf-8") as f:
            rows = [r for r in csv.reader(f) if r]
        column = rows[0].index("iteration")
        return int(float(rows[-1][column])) if len(rows) > 1 else None
    except (OSError, ValueError, IndexError, UnicodeDecodeError, csv.Error):
        return None


def saved_iterations(folder):
    """The run's own number of iterations, from its config.json (None if unreadable)."""
    try:
        with open(os.path.join(folder, "config.json"), "rb") as f:
            value = json.loads(f.read().decode("utf-8")).get("iterations")
        return value if type(value) is int else None
    except (OSError, ValueError, AttributeError):
        return None


def is_complete(folder, wanted=None):
    """A run that needs nothing more: the suite's DONE file, or a results.csv that
    reached its config's last iteration; and, given `wanted` (the iterations the
    command asks for), no fewer iterations than that (a longer run is for `qzoo train`
    to refuse or, with --accept-changes iterations, to extend)."""
    total = saved_iterations(folder)
    if wanted is not None and total is not None and total < wanted:
        return False
    if os.path.exists(os.path.join(folder, DONE)):
        return True
    last = last_iteration(folder)
    return last is not None and total is not None and last >= total


def state(run):
    """(complete | resume | new, a few words on it)."""
    total = run.config.iterations
    if is_complete(run.folder, total):
        return "complete", f"complete ({saved_iterations(run.folder) or total} iterations)"
    last = last_iteration(run.folder)
    if last is not None:
        return "resume", f"resumes after iteration {last} of {total}"
    return "new", f"new ({total} iterations)"


def final_score(folder):
    """'eval return X (N episodes)' from the last row of results.csv, or ''."""

    try:
        with open(os.path.join(folder, "results.csv"), newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        score = float(rows[-1]["eval_episode_return"])
        episodes = rows[-1].get("eval_num_episodes")
        shown_episodes = f" ({int(float(episodes))} episodes)" if episodes else ""
        return f": eval return {score:.4g}{shown_episodes}"
    except (OSError, ValueError, KeyError, IndexError, TypeError, csv.Error):
        return ""


# Runs the command with a SIGINT due when the suite dies, however it dies (Linux's
# PR_SET_PDEATHSIG, kept across exec): a killed suite leaves no run training unseen,
# each saves and stops. A launcher rather than Popen's preexec_fn, which is unsafe in a
# process with threads. It checks the suite is still there after setting the signal.
