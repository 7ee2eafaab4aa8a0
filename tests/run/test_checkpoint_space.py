"""A run whose checkpoint its disk cannot hold is refused before it trains (one line
with the space needed and free, exit 2, nothing left), not after its first iteration;
the estimate it is refused by covers a real checkpoint with its replay full."""

import os
import shutil
from collections import namedtuple

import pytest
from helpers import TINY_ARGS

from qzoo import envs
from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.run import checks
from qzoo.run.trainer import Trainer

Usage = namedtuple("Usage", "total used free")
# CartPole with a replay of 200 rows that 300 training frames fill.
OPTIONS = {"env": "CartPole-v1", "replay_capacity": "200", "min_replay_capacity_fraction": "0.5",
           "snapshot_interval": "1"}  # fmt: skip


def argv(run_dir):
    args = list(TINY_ARGS)
    args[args.index("--replay-capacity") + 1] = "200"
    args[args.index("--min-replay-capacity-fraction") + 1] = "0.5"
    args[args.index("--iterations") + 1] = "1"
    return ["train", "dqn", "--run-dir", str(run_dir), "--env", "CartPole-v1", *args,
            "--snapshot-interval", "1"]  # fmt: skip


def needed():
    config = build_config("dqn", OPTIONS)
    info = envs.describe(config)
    trainer = Trainer(config, info)
    state = {"learner": trainer.learner.state_dict(), "streams": trainer.streams.state_dict()}
    return sum(checks.checkpoint_bytes(config, info, state))


@pytest.mark.parametrize("short", [1, 10**6])
def test_a_disk_too_small_for_a_checkpoint_is_refused_before_training(tmp_path, monkeypatch,
                                                                      capsys, short):  # fmt: skip
    need = needed()
    free = need - short
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2**40, 2**40, max(0, free)))
    run_dir = tmp_path / "run"
    assert main(argv(run_dir)) == 2
    out, err = capsys.readouterr()
    assert "iteration=" not in out and "Traceback" not in err
    assert err.startswith(f"qzoo: error: cannot save checkpoints in {run_dir}: one needs about ")
    assert "replay at --replay-capacity 200 " in err and "networks and the rest " in err
    assert "its disk has " in err and err.count("\n") == 1
    assert not run_dir.exists()


def test_the_estimate_holds_a_real_checkpoint_with_its_replay_full(tmp_path, monkeypatch):
    need = needed()
    monkeypatch.setattr(shutil, "disk_usage", lambda path: Usage(2**40, 0, need))
    run_dir = tmp_path / "run"
    assert main(argv(run_dir)) == 0  # exactly enough: trains
    checkpoints = run_dir / "checkpoints"
    written = os.path.getsize(checkpoints / "latest.safetensors") + os.path.getsize(
        checkpoints / "networks" / "iteration-1.safetensors"
    )
    # The replay is full after 300 frames: no more than the estimate, and not far below.
    assert written <= need <= 1.5 * written
