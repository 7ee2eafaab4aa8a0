"""Opening a DQN Replay Dataset for an --offline run: which checkpoints it trains on
(--offline-checkpoints, --offline-reload), their first rows (batch_rl's smaller
datasets), memory-mapped and checked against the environment, as a DatasetStorage.
Beside it: the layout (offline/layout.py), conversion (offline/conversion.py),
inspection (offline/inspection.py) and the `qzoo dataset` command (cli/dataset.py)."""

import os

import numpy as np

from qzoo.errors import UserError
from qzoo.offline import dopamine
from qzoo.offline.conversion import qzoo_layout
from qzoo.offline.dataset_game import replay_logs
from qzoo.offline.layout import load_qzoo
from qzoo.offline.storage import DatasetStorage


def first_suffixes(config):
    """The checkpoints an --offline run opens first: every chosen one, or with
    --offline-reload R the first R (iteration 0 only evaluates; each training phase
    draws its own: offline/driver.py's OfflineDriver.train_phase)."""
    suffixes = dataset_suffixes(config.offline, config.offline_checkpoints, config.offline_reload)
    return suffixes[: config.offline_reload] if config.offline_reload else suffixes


def parse_slice(text):
    """'40:' -> slice(40, None); '' -> every checkpoint; UserError if not START:END."""
    if not text:
        return slice(None)
    start, colon, end = text.partition(":")
    try:
        if not colon:
            raise ValueError
        return slice(int(start) if start else None, int(end) if end else None)
    except ValueError:
        raise UserError(
            f"--offline-checkpoints: bad value {text!r}; expected START:END, a slice of the "
            "sorted checkpoint suffixes (e.g. 40: or :5 or 10:20)"
        ) from None


def dataset_suffixes(folder, checkpoints="", reload=0):
    """The suffixes `--offline folder --offline-checkpoints ...` trains on; UserError
    when there are none, or fewer than `reload` to draw from each iteration."""
    if os.path.exists(os.path.join(folder, "dataset.json")):
        found = sorted(load_qzoo(folder, verify=()))  # listed only: checked when opened
    else:
        found = dopamine.suffixes(replay_logs(folder))
    chosen = found[parse_slice(checkpoints)]
    if not chosen:
        raise UserError(
            f"--offline {folder}: no checkpoint to train on (found {len(found)}"
            + (f", --offline-checkpoints {checkpoints} keeps none" if checkpoints else "")
            + ")"
        )
    if reload > len(chosen):
        raise UserError(
            f"--offline-reload: bad value {reload}; expected at most the {len(chosen)} "
            f"checkpoints of {folder} it may draw from"
        )
    return chosen


def first_rows(checkpoint, rows):
    """batch_rl's smaller-dataset mode: the checkpoint as Dopamine's buffer of capacity
    `rows` sees it after slicing its arrays (rows past `rows` are never indexed, since
    every index is taken mod the capacity); add_count and invalid_range stay the file's,
    so a file written full is still full, with its cursor at add_count mod `rows`."""
    if not rows or rows >= len(checkpoint["action"]):
        return checkpoint
    return {k: v[:rows] if k in dopamine.STORE else v for k, v in checkpoint.items()}


def dataset_checkpoints(folder, info, suffixes=None, rows=0):
    """{suffix: arrays} of the checkpoints `suffixes` (default all) of `folder`,
    memory-mapped (Dopamine's gzip files are converted on first use, see qzoo_layout)
    and cut to their first `rows` (first_rows). Checks that their frames and actions
    fit the environment `info` describes."""
    checkpoints = load_qzoo(qzoo_layout(folder), None if suffixes is None else set(suffixes))
    checkpoints = {s: first_rows(c, rows) for s, c in checkpoints.items()}
    first = next(iter(checkpoints.values()))
    if tuple(first["observation"].shape[1:]) != tuple(info.frame_shape):
        raise UserError(
            f"--offline {folder}: frames of shape {tuple(first['observation'].shape[1:])}, "
            f"but {info.name} gives {tuple(info.frame_shape)}"
        )
    most = max(int(np.max(c["action"])) for c in checkpoints.values())
    if most >= info.num_actions:
        raise UserError(
            f"--offline {folder}: action {most} in the data, but {info.name} has "
            f"{info.num_actions} actions; the dataset is of another game"
        )
    return checkpoints


def open_dataset(folder, info, stack, n_steps, discount, suffixes=None, rows=0):
    """A DatasetStorage over the checkpoints `suffixes` (default all) of `folder`
    (dataset_checkpoints: memory-mapped, checked against the environment)."""
    checkpoints = dataset_checkpoints(folder, info, suffixes, rows)
    storage = DatasetStorage(
        [checkpoints[s] for s in sorted(checkpoints)], stack, n_steps, discount
    )
    storage.suffixes = sorted(checkpoints)
    if not storage.can_sample():
        raise UserError(f"--offline {folder}: no valid transition in the chosen rows")
    return storage
