"""The PyTorch threads a run started with, recorded in its folder
(checkpoints/threads.json) so that an auto resume keeps the count (threads.py): results
on a CPU can depend on it. config.json keeps what the user asked for."""

import json
import os

import torch

from qzoo.files import atomic_write
from qzoo.run import folder_files as folder
from qzoo.run import threads
from qzoo.run.folder_files import CHECKPOINT

THREADS = os.path.join("checkpoints", "threads.json")


def saved_threads(run_dir):
    """What threads.apply needs to know of a run folder for an auto resume: None where
    it holds no checkpoint (a new run chooses afresh) or its last start ran on a GPU,
    else the thread count its last start ran with on the CPU, or 0 where no start
    recorded one (a run saved before the record existed). Never raises: what is wrong
    with the folder is for train() to say."""
    if not os.path.lexists(os.path.join(run_dir, CHECKPOINT)):
        return None
    try:
        with open(os.path.join(run_dir, THREADS), "rb") as f:
            record = json.loads(f.read().decode("utf-8"))
        count, device = record["threads"], record["device"]
    except (OSError, ValueError, TypeError, KeyError):
        return 0
    if device != "cpu":
        return None
    return count if type(count) is int and count >= 1 else 0


def record_threads(run_dir, config, after=""):
    """Writes THREADS with the count in effect (torch.get_num_threads()), atomically."""
    device = "cuda" if threads.on_gpu(config) else "cpu"
    text = json.dumps({"threads": torch.get_num_threads(), "device": device}) + "\n"
    path = os.path.join(run_dir, THREADS)
    with folder.os_errors("write", path, after):
        atomic_write(path, lambda f: f.write(text.encode()))
