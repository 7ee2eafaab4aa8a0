"""Offline learning on a dataset qzoo logged itself (a marked slow test, about 3
minutes on 2 CPU cores): DQN online on MinAtar Breakout logs its experience in the DQN
Replay Dataset's format; DQN and REM (batch_rl's own agent) then learn from that
dataset alone; QR-DQN trains on it briefly (a finite loss). QR-DQN's learning is
tested online (tests/learning/test_learning.py); offline it learned here too (2.99
after 50k frames, seed 1), and its full run was left out to keep the suite short.

Measured with seed 1 (BENCHMARKS.md, "Offline learning"): the logging agent's last
evaluation 3.06, offline DQN 2.75, REM 2.69 after 50k frames (after 25k, 1.36: below
the bar, hence two iterations); a random policy scores about 0.5. The test asks for
half the logger's score, and more than twice random.
"""

import numpy as np
import pytest
import torch

from qzoo.configuration import build_config
from qzoo.offline.conversion import to_dopamine, to_qzoo
from qzoo.run.trainer import Trainer, run

BASE = {"env": "minatar/breakout", "iterations": "3", "train_frames": "25000",
        "eval_frames": "5000", "learn_period": "4", "replay_capacity": "100000", "seed": "1"}  # fmt: skip


def returns(agent, **options):
    return [r["eval_episode_return"]
            for r in run(Trainer(build_config(agent, {**BASE, **options})))]  # fmt: skip


@pytest.mark.slow
def test_offline_agents_learn_from_a_logged_dataset(tmp_path):
    torch.set_num_threads(1)
    logged = tmp_path / "logged"
    logger = returns("dqn", log_replay=str(logged), log_replay_capacity="30000")
    assert logger[-1] > 2.0, logger  # the logging agent learned
    target = max(0.5 * logger[-1], 1.0)
    offline = {"offline": str(logged), "iterations": "2"}
    dqn = returns("dqn", **offline)
    rem = returns("rem", **offline, num_heads="4")
    assert max(rem[1:]) >= target, (rem, logger)
    assert max(dqn[1:]) >= target, (dqn, logger)
    # Dopamine -> qzoo -> Dopamine gives the same arrays, so the same training, exactly
    # (a short run on each: the arrays, not the length, are what is compared).
    to_qzoo(logged, tmp_path / "q", quiet=True)
    to_dopamine(tmp_path / "q", tmp_path / "again" / "replay_logs")
    short = {"iterations": "1", "train_frames": "4000", "eval_frames": "2000"}
    rows = [run(Trainer(build_config("dqn", {**BASE, **short, "offline": str(folder)})))
            for folder in (logged, tmp_path / "again")]  # fmt: skip
    for column in ("train_loss", "train_mean_q", "eval_episode_return"):
        np.testing.assert_array_equal(*[[r[column] for r in some] for some in rows])
    qrdqn = {**BASE, **short, "offline": str(logged), "num_quantiles": "32"}
    rows = list(run(Trainer(build_config("qrdqn", qrdqn))))
    assert np.isfinite(rows[-1]["train_loss"]) and rows[-1]["train_num_updates"] > 0, rows[-1]
