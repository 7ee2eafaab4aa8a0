"""What the run-folder tests share (test_rundir.py, test_rundir_failures.py; their
fixtures are in conftest.py): a tiny CartPole run's options and command, and how the
tests read a folder and an error."""

import os

from helpers import replacing

from qzoo.cli.main import main

ARGS = ["--env", "CartPole-v1", "--iterations", "1", "--train-frames", "300", "--eval-frames",
        "100", "--replay-capacity", "1000", "--min-replay-capacity-fraction", "0.1",
        "--no-tensorboard", "--no-progress"]  # fmt: skip
MORE = ["--iterations", "2", "--accept-changes", "iterations"]  # one more iteration


def train(run_dir, *extra, agent="dqn"):
    return main(["train", agent, "--run-dir", str(run_dir), *replacing(ARGS, extra)])


def snapshot(folder):
    """Every file under `folder` with its bytes (and every folder), to compare."""
    files = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs:
            files[os.path.relpath(os.path.join(root, name), folder)] = None
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, folder)] = f.read()
    return files


def one_error_line(err, alone=True):
    """The error line; `alone`: nothing else was printed (no progress lines before it)."""
    *before, line = err.splitlines()
    assert line.startswith("qzoo: error: ") and err.endswith("\n"), err
    assert not (alone and before) and "Traceback" not in err
    assert not any("qzoo:" in b for b in before)
    return line
