"""What a run folder may hold, and OS errors told as user errors: the checks
`qzoo train` (run_folder.py) makes before it writes anything into a folder."""

import contextlib
import dataclasses
import json
import os
import shutil

import numpy as np
import torch

import qzoo.configuration as config_lib
from qzoo.errors import UserError

QZOO_NAMES = ("config.json", "results.csv", "checkpoints", "tensorboard", "videos", ".lock",
              "wandb.json")  # fmt: skip
CHECKPOINT = os.path.join("checkpoints", "latest.safetensors")
NETWORKS = os.path.join("checkpoints", "networks")  # per-iteration online networks
MODEL_MANIFEST = "model.json"  # what makes a folder one `qzoo export` wrote (model_folder.py)


def config_fields():
    return {f.name for f in dataclasses.fields(config_lib.Config)}


def inode(path):
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return None


def is_model_folder(path):
    """Whether `path` is an exported model folder: a manifest and no run checkpoint."""
    return os.path.isfile(os.path.join(path, MODEL_MANIFEST)) and not os.path.lexists(
        os.path.join(path, CHECKPOINT)
    )


def check_is_a_run_folder(run_dir):
    """Refuses, before creating anything in it, a non-empty folder that holds no run (a
    model folder `qzoo export` wrote holds a config.json and a results.csv, and no run)."""
    if not os.path.isdir(run_dir):
        return
    if is_model_folder(run_dir):
        raise UserError(
            f"run folder {run_dir} is a model folder (`qzoo export` wrote it), not a run: "
            "qzoo writes no run into it; pass a new or empty --run-dir"
        )
    with os_errors("read run folder", run_dir):
        names = os.listdir(run_dir)
    if "config.json" in names or "checkpoints" in names:
        return
    foreign = sorted(n for n in names if n not in QZOO_NAMES and not n.startswith(".tmp-"))
    if foreign:
        raise UserError(
            f"run folder {run_dir} holds files qzoo did not write ({', '.join(foreign[:3])}"
            f"{', ...' if len(foreign) > 3 else ''}) and no run; pass a new or empty --run-dir"
        )


def remove_added(run_dir, found):
    """Removes what a start that saved no checkpoint added to `run_dir` (`found`: the
    names there when it started): its config.json, checkpoints/threads.json, TensorBoard
    files, ..., so that nothing says there is a run, and another command may start one."""
    try:
        added = sorted(set(os.listdir(run_dir)) - set(found))
    except OSError:
        return
    for name in added:
        path = os.path.join(run_dir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def remove_temporary_files(run_dir):
    """Removes `.tmp-*` files that a kill during atomic_write left behind."""
    for where in (run_dir, os.path.join(run_dir, "checkpoints"), os.path.join(run_dir, NETWORKS)):
        if os.path.isdir(where):
            for name in os.listdir(where):
                if name.startswith(".tmp-"):
                    os.unlink(os.path.join(where, name))


def read_config_json(path):
    """config.json's dict, None if there is none; UserError if qzoo did not write it."""
    try:
        with open(path, "rb") as f:
            saved = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        return None
    except (UnicodeDecodeError, ValueError):
        saved = None
    check_config_dict(saved, path)
    return saved


def holds_a_run(state):
    """Whether a loaded checkpoint is the tree that `_Run.train` saves."""
    if not isinstance(state, dict) or set(state) != {"config", "trainer", "rows"}:
        return False
    rows = state["rows"]
    return (
        isinstance(rows, list)
        and bool(rows)
        and all(isinstance(r, dict) and type(r.get("iteration")) is int for r in rows)
    )


def first_non_finite(tree, where=""):
    """(path, count) of the first floating-point array in `tree` (a loaded state: dicts,
    lists, tuples of tensors and arrays) holding NaN or an infinity; None if there is
    none. A learner's weights and optimizer state are never saved so (a run whose loss
    or Q-values stop being finite stops before its save): in a file, they are damage."""
    if isinstance(tree, dict):
        items = [(f"{where}/{k}", v) for k, v in tree.items()]
    elif isinstance(tree, (list, tuple)):
        items = [(f"{where}/{i}", v) for i, v in enumerate(tree)]
    elif isinstance(tree, torch.Tensor) and tree.is_floating_point():
        count = int((~torch.isfinite(tree)).sum())
        return (where.lstrip("/"), count) if count else None
    elif isinstance(tree, np.ndarray) and np.issubdtype(tree.dtype, np.floating):
        count = int((~np.isfinite(tree)).sum())
        return (where.lstrip("/"), count) if count else None
    else:
        return None
    for path, value in items:
        found = first_non_finite(value, path)
        if found:
            return found
    return None


def check_config_dict(saved, where):
    unknown = sorted(set(saved) - config_fields()) if isinstance(saved, dict) else []
    if not isinstance(saved, dict) or not {"agent", "env"} <= set(saved) or unknown:
        raise UserError(
            f"{where} is not a qzoo config"
            + (f" (unknown keys: {', '.join(unknown[:5])})" if unknown else "")
            + "; qzoo does not overwrite it: move it away or use another --run-dir"
        )


@contextlib.contextmanager
def os_errors(action, path, after=""):
    """OS errors are the user's to fix: one line naming the path and the OS's reason."""
    try:
        yield
    except OSError as e:
        raise UserError(os_message(action, path, e, after)) from None


def os_message(action, path, error, after=""):
    reason = error.strerror or first_line(error)
    if error.filename and os.fspath(error.filename) != os.fspath(path):
        reason = f"{error.filename}: {reason}"
    return f"cannot {action} {path}: {reason}{after}"


def first_line(error):
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
