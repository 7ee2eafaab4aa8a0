"""Offline learning on a dataset qzoo logged itself (a marked slow test, ~5 minutes on
2 CPU cores): DQN online on MinAtar Breakout logs its experience in the DQN Replay
Dataset's format; DQN, QR-DQN and REM then learn from that dataset alone.

Measured with seed 1 (BENCHMARKS.md, "Offline learning"): the logging agent's last
evaluation 3.06, offline DQN 2.75, QR-DQN 3.04, REM 2.69 after 50k frames; a random
policy scores about 0.5. The test asks for half the logger's score, and more than
twice random.
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
    for agent, extra in (("qrdqn", {"num_quantiles": "32"}), ("rem", {"num_heads": "4"})):
        got = returns(agent, **offline, **extra)
        assert max(got[1:]) >= target, (agent, got, logger)
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
