"""Ctrl-C before a new run's first checkpoint removes the folder the command made, all
of it: the TensorBoard writer is closed first, so its thread writes no event file into
the folder after it is gone (or while it is being removed)."""

import json
import os
import threading

from helpers import TINY_ARGS

from qzoo.cli.main import main
from qzoo.run import trainer as loop


def writer_threads():
    return {t for t in threading.enumerate() if type(t).__name__ == "_AsyncWriterThread"}


def test_ctrl_c_before_the_first_checkpoint_closes_tensorboard_and_leaves_no_folder(
    tmp_path, monkeypatch, capsys
):
    started = []

    def interrupted(self, progress=None):
        started.extend(writer_threads() - before)  # the run's writer is running by now
        raise KeyboardInterrupt

    before = writer_threads()
    monkeypatch.setattr(loop.Trainer, "run_iteration", interrupted)
    args = [a for a in TINY_ARGS if a != "--no-tensorboard"]
    run_dir = tmp_path / "run"
    assert main(["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(run_dir), *args]) == 130
    assert capsys.readouterr().err.endswith("before the first checkpoint; nothing was saved\n")
    assert len(started) == 1 and not started[0].is_alive()  # closed: it writes no more
    assert not run_dir.exists()


def test_ctrl_c_before_the_first_checkpoint_in_a_users_empty_folder_leaves_it_empty(
    tmp_path, monkeypatch, capsys
):
    """Issue 34 #9: "nothing was saved", yet config.json, checkpoints/threads.json and a
    TensorBoard file were left in a folder the user made, and a retry with other options
    was refused as another run."""
    run_iteration = loop.Trainer.run_iteration

    def interrupted(self, progress=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(loop.Trainer, "run_iteration", interrupted)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    args = [a for a in TINY_ARGS if a != "--no-tensorboard"]
    argv = ["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(run_dir), *args]
    assert main(argv) == 130
    assert capsys.readouterr().err.endswith("before the first checkpoint; nothing was saved\n")
    assert os.listdir(run_dir) == []
    monkeypatch.setattr(loop.Trainer, "run_iteration", run_iteration)
    assert main([*argv, "--seed", "2"]) == 0  # another run: nothing there says otherwise
    assert json.loads((run_dir / "config.json").read_text())["seed"] == 2
