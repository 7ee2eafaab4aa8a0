"""Run folders as `plot` and `compare` read them: config.json and results.csv only.

Neither tool needs the network or the replay, so they read no checkpoint: a folder
copied without its (large) checkpoints still plots and compares. Every problem with
a folder or an output path is a UserError naming it; figures are written through a
temporary file and a rename, so an existing figure is replaced whole or not at all.
"""

import csv
import dataclasses
import json
import math
import os
from typing import NamedTuple

import numpy as np

from qzoo.errors import UserError
from qzoo.files import atomic_write
from qzoo.tools.runs import config_from_dict

# What makes a CSV a qzoo results.csv: DQN Zoo's first columns.
REQUIRED = ("iteration", "frame", "eval_episode_return")

# Config fields that say where and how a run was executed, not what was trained: two
# seeds of one command differ only in these.
NOT_THE_SETUP = (
    "seed", "run_dir", "device", "threads", "checkpoint_replay", "tensorboard", "progress",
    "accept_changes",
)  # fmt: skip


class RunResults(NamedTuple):
    """One run folder: its `path`, `config` (Config) and `columns` ({name: float
    array over results rows}, in the file's order; unparsable cells are NaN)."""

    path: str
    config: object
    columns: dict


def read_results(run_dir):
    """Reads `run_dir`'s config.json and results.csv; UserError if either is missing,
    unreadable, or not what `qzoo train` writes."""
    if not os.path.isdir(run_dir):
        what = "is a file, not a folder" if os.path.exists(run_dir) else "does not exist"
        raise UserError(f"run folder {run_dir!r} {what}; expected a folder `qzoo train` wrote")
    config_path = os.path.join(run_dir, "config.json")
    results_path = os.path.join(run_dir, "results.csv")
    for path in (config_path, results_path):
        if not os.path.isfile(path):
            raise UserError(f"{run_dir!r} holds no {os.path.basename(path)}; train it first")
    try:
        with open(config_path, encoding="utf-8") as f:
            saved = json.load(f)
        with open(results_path, newline="", encoding="utf-8") as f:
            table = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as e:
        raise UserError(f"cannot read {run_dir}: {str(e).splitlines()[0]}") from None
    config = config_from_dict(saved, config_path)
    if not table or not set(REQUIRED) <= set(table[0]):
        raise UserError(
            f"{results_path} is not a qzoo results.csv: its header lacks "
            f"{', '.join(c for c in REQUIRED if not table or c not in table[0])}"
        )
    header, rows = table[0], [r for r in table[1:] if r]
    if not rows:
        raise UserError(f"{results_path} has no rows yet; let the run finish an iteration")
    if any(len(r) != len(header) for r in rows):
        raise UserError(f"{results_path} has rows of the wrong length; `qzoo train` repairs it")
    columns = {name: np.array([_number(r[i]) for r in rows]) for i, name in enumerate(header)}
    return RunResults(run_dir, config, columns)


def _number(text):
    try:
        return float(text)
    except ValueError:  # an empty cell: a column a later qzoo added to later rows
        return math.nan


def read_all(run_dirs):
    """read_results for each folder, refusing one given twice (it would count twice)."""
    seen = {}
    for run_dir in run_dirs:
        key = os.path.realpath(run_dir)
        if key in seen:
            raise UserError(f"{run_dir!r} is given twice (also as {seen[key]!r})")
        seen[key] = run_dir
    return [read_results(run_dir) for run_dir in run_dirs]


def setup(config):
    """The config's fields that define what was trained (all but NOT_THE_SETUP)."""
    values = dataclasses.asdict(config)
    return {k: v for k, v in values.items() if k not in NOT_THE_SETUP}


def setup_labels(configs):
    """A short label per config: its agent; its env where the configs' envs differ;
    and where several setups share one agent and env, the fields that tell them apart
    (`dqn dueling=True`). Configs with equal setups get equal labels."""
    setups = [setup(c) for c in configs]
    envs = {s["env"] for s in setups}
    labels = []
    for s in setups:
        label = s["agent"] + (f" {s['env']}" if len(envs) > 1 else "")
        alike = [o for o in setups if o["agent"] == s["agent"] and o["env"] == s["env"]]
        differing = [k for k in s if any(o[k] != s[k] for o in alike)]
        shown = {k: "''" if s[k] == "" else s[k] for k in differing}  # an empty text: ''
        labels.append(" ".join([label] + [f"{k}={shown[k]}" for k in differing]))
    return labels


def check_out(path, extensions):
    """Refuses an --out whose extension is not in `extensions` (with the dot) or whose
    folder cannot be written, before any work is done."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in extensions:
        raise UserError(
            f"--out: bad value {path!r}; expected a file name ending in {', '.join(extensions)}"
        )
    if os.path.isdir(path):
        raise UserError(f"--out: {path!r} is a folder; expected a file name")
    folder = os.path.dirname(os.path.abspath(path))
    existing = folder
    while not os.path.exists(existing):  # atomic_write creates missing folders
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing) or not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"--out: cannot write {path!r}: {existing!r} is not a writable folder")
    return ext


def write_file(path, write):
    """atomic_write with OS errors as one-line UserErrors."""
    try:
        atomic_write(path, write)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None


def save_figure(figure, path):
    """Writes a Matplotlib figure as PNG or SVG (from the extension), atomically."""
    fmt = os.path.splitext(path)[1].lower().lstrip(".")
    write_file(path, lambda f: figure.savefig(f, format=fmt, dpi=100))
