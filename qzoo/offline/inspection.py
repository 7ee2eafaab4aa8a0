"""What a DQN Replay Dataset folder holds (`qzoo dataset info`, cli/dataset.py): per
checkpoint its transitions, episodes and clipped returns, and its bytes on disk, read
from Dopamine's gzip files or qzoo's layout (offline/layout.py) without the frames."""

import functools
import os

import numpy as np

from qzoo.errors import UserError
from qzoo.offline import dopamine, rlu
from qzoo.offline.dataset_game import dataset_game, replay_logs
from qzoo.offline.layout import load_qzoo
from qzoo.offline.storage import DatasetStorage


def episode_returns(data):
    """(episodes ended in the file, returns of those seen whole) walking its rows in
    time order (§1.7: slot C-1 first in a full file, then 0 .. cursor-1), padding
    rows included (they carry reward 0). Rewards are the stored, clipped ones."""
    order = dopamine.time_order(len(data["action"]), int(data["add_count"]))
    terminal, reward = data["terminal"][order] != 0, data["reward"][order]
    ends = np.flatnonzero(terminal)
    sums = np.cumsum(reward)
    # An episode seen whole runs from after one terminal row through the next.
    return len(ends), np.diff(sums[ends]).tolist()


def info(folder, stack=None):
    """One dict per checkpoint suffix of `folder` (Dopamine's files, or `convert`'s qzoo
    layout), and the totals (transitions counted as valid for a frame stack of `stack`;
    by default the one the files were logged with, dopamine.logged_stack, or Dopamine's
    4 when they cannot tell)."""
    qzoo = os.path.exists(os.path.join(folder, "dataset.json"))  # convert's own layout
    folder = folder if qzoo else replay_logs(folder)
    mapped = load_qzoo(folder, verify=dopamine.DTYPES.keys() - {"observation"}) if qzoo else None
    found = sorted(mapped) if qzoo else dopamine.suffixes(folder)
    if not found:
        hint = rlu.conversion_hint(folder)
        what = "no DQN Replay Dataset checkpoint (six *_ckpt.N.gz files)"
        raise UserError(f"{folder} holds {what}{hint}")
    load = (
        mapped.__getitem__ if qzoo else functools.partial(dopamine.small_arrays, folder, whole=True)
    )
    logged = None if stack else dopamine.logged_stack(load(s) for s in found)  # a first pass
    if stack:
        stack_from = "option"
    else:
        stack, stack_from = (logged, "files") if logged else (4, "default")
    rows, total_valid, total_bytes = [], 0, 0
    for suffix in found:
        data = load(suffix)
        valid = DatasetStorage([data], stack=stack).valid_count()
        ended, returns = episode_returns(data)
        if qzoo:
            names = [os.path.join(f"ckpt.{suffix}", f"{a}.npy") for a in dopamine.DTYPES]
        else:
            names = [dopamine.file_name(a, suffix) for a in dopamine.DTYPES]
        size = sum(os.path.getsize(os.path.join(folder, name)) for name in names)
        rows.append(
            {
                "checkpoint": suffix,
                "add_count": int(data["add_count"]),
                "frame_shape": list(data["observation"].shape[1:]),
                "transitions": valid,
                "episodes_ended": ended,
                "mean_clipped_return": float(np.mean(returns)) if returns else None,
                "bytes": size,
            }
        )
        total_valid, total_bytes = total_valid + valid, total_bytes + size
    game = dataset_game(folder)[0]
    return {
        "folder": folder,
        "game": game,
        "checkpoints": rows,
        "transitions": total_valid,
        "stack": stack,
        "stack_from": stack_from,
        "bytes": total_bytes,
    }
