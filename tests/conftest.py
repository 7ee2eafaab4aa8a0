"""Fixtures shared by every test folder (pytest puts this folder on the path, so test
modules import tests/helpers.py's builders as `helpers`)."""

import os
import signal
import tempfile

# Each pytest-xdist worker compiles into an Inductor cache of its own: two workers
# compiling the same graph into the shared default cache raced, one loading the other's
# half-written kernel ("main.so: file too short", CI of stop 39). Set before torch loads,
# and inherited by the qzoo processes a worker starts.
_OWN_CACHE = os.path.join(tempfile.gettempdir(), f"qzoo-tests-inductor-{os.getuid()}-")
if os.environ.get("TORCHINDUCTOR_CACHE_DIR", _OWN_CACHE).startswith(_OWN_CACHE):
    # The controller's value reaches the workers too: each worker sets its own again.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = _OWN_CACHE + worker

import pytest
import torch
from helpers import TINY_ARGS

from qzoo.cli.main import main

# One PyTorch thread per test worker (its default is one per core): the suite runs on
# two workers, often beside a training run, and OpenMP's threads of one process spin
# waiting for each other while the scheduler runs another's (run/threads.py says why
# qzoo's own runs size their threads). Tests that need more threads set them.
if os.environ.get("PYTEST_XDIST_WORKER"):
    torch.set_num_threads(1)

# A shell without job control starts a background command with Ctrl-C ignored (POSIX),
# and a child inherits that: `pytest ... &` from a script would leave every qzoo the
# tests start deaf to the SIGINT that the Ctrl-C tests send. Python's own handler here
# is reset to the default in each child at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A finished tiny CartPole run folder (DQN, 2 iterations, trained by the command
    line), shared by a module's tests: they read it and never change it."""
    folder = tmp_path_factory.mktemp("runs") / "cartpole"
    assert main(["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(folder), *TINY_ARGS]) == 0
    return folder


# The files holding the longest tests (minutes, seconds in tens), collected first, and
# handed out in that order: on two workers (`-n 2 --dist loadfile`) the longest then
# starts at once instead of running alone at the end. pytest-xdist would otherwise sort
# the files by their number of tests (its loadscope reorder, off from 3.8 on).
LONGEST_FIRST = (
    "offline/test_offline_learning.py",
    "tools/test_tune.py",
    "distributed/test_ray.py",
    "learning/test_learning.py",
)


def pytest_configure(config):
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items):
    def rank(item):
        path = item.path.as_posix()
        return next((i for i, name in enumerate(LONGEST_FIRST) if path.endswith(name)),
                    len(LONGEST_FIRST))  # fmt: skip

    items.sort(key=rank)  # stable: the order within each file is kept
