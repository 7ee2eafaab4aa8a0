"""The one error type for bad user input (unknown game, bad value, corrupt file).

The CLI prints it as a single line and exits with code 2, without a traceback; `bad_value`
writes the line for an option (`--name: bad value V; expected ...`).
"""

from collections.abc import Iterable, Mapping


class UserError(Exception):
    """A mistake in what the user asked for; its message names the bad value."""


# Options users type from other libraries' or papers' names: the option qzoo means by
# each (offered by `closest` when it is among the choices; spelling cannot find them).
OPTION_ALIASES = {
    "--lr": "--learning-rate", "--game": "--env", "--environment": "--env",
    "--gamma": "--discount", "--buffer-size": "--replay-capacity",
    "--replay-size": "--replay-capacity", "--memory-size": "--replay-capacity",
    "--target-update": "--target-network-update-period", "--ddqn": "--double-q",
    "--double-dqn": "--double-q", "--per": "--prioritized", "--multi-step": "--n-steps",
    "--num-actors": "--actors", "--logdir": "--run-dir", "--log-dir": "--run-dir",
}  # fmt: skip


def edit_distance(a: str, b: str) -> int:
    """Damerau-Levenshtein distance (optimal string alignment): insertions, deletions,
    substitutions and swaps of two neighbours each cost 1 (`trian` is 1 from `train`)."""
    previous: list[int] = []
    row = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        before, previous, row = previous, row, [i] + [0] * len(b)
        for j in range(1, len(b) + 1):
            row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] != b[j - 1]))
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                row[j] = min(row[j], before[j - 2] + 1)
    return row[-1]


def closest(
    name: str, choices: Iterable[str], n: int = 3, aliases: Mapping[str, str] = OPTION_ALIASES
) -> list[str]:
    """Up to `n` names from `choices` that `name` plausibly means, best first, for a
    "did you mean" in a message: a known alias (`--lr` -> `--learning-rate`); names at
    most a third of their length of edits away, case and leading dashes aside (never
    two names that merely share a prefix: `--env` is not `--num-envs`); else the one
    name whose first words `name` is, or the shortest when the others extend it
    (`--learning` -> `--learning-rate`, not `--learning-rate-decay`)."""
    names = list(choices)
    alias = aliases.get(name)
    if alias is not None and alias in names:
        return [alias]

    def key(text):
        return str(text).lower().lstrip("-")

    typed = key(name)
    scored = []
    for index, choice in enumerate(names):
        other = key(choice)
        if abs(len(other) - len(typed)) <= max(1, min(len(typed), len(other)) // 3):
            distance = edit_distance(typed, other)
            if distance <= max(1, min(len(typed), len(other)) // 3):
                scored.append((distance, index, choice))
    if scored:
        return [choice for _, _, choice in sorted(scored)[:n]]
    words = sorted((c for c in names if typed and key(c).startswith(typed + "-")), key=len)
    if words and all(key(w).startswith(key(words[0]) + "-") for w in words[1:]):
        return words[:1]  # one name, or one that the others extend (--learning-rate-decay)
    return []


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


class ConfigError(UserError, ValueError):
    """A bad option value, or options that do not go together (`qzoo.config`); its
    message is the line the command line prints for the same options."""
