"""Atomic checkpoints: write to a temporary file in the same folder, then rename.

A run killed at any moment leaves either the previous checkpoint or the new one,
never half of one.
"""

import os
import pickle
import tempfile

import torch

from qzoo.errors import UserError


def atomic_write(path, write):
    """Calls write(file) on a temporary file next to `path`, then renames it."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600 files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def save(path, state):
    atomic_write(path, lambda f: torch.save(state, f, pickle_protocol=4))


def load(path):
    """Loads a checkpoint; a missing or corrupt file is a UserError."""
    if not os.path.exists(path):
        raise UserError(f"checkpoint {path!r} does not exist")
    try:
        # The file holds numpy random states and arrays, not only tensors.
        return torch.load(path, map_location="cpu", weights_only=False)
    except (pickle.UnpicklingError, EOFError, RuntimeError, ValueError, KeyError) as e:
        raise UserError(
            f"checkpoint {path!r} is corrupt or not a qzoo checkpoint ({type(e).__name__}); "
            "delete it to start over"
        ) from None
