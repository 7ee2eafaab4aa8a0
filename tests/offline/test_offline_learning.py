"""Offline learning on a dataset qzoo logged itself (a marked slow test, about a minute
and a half on 2 CPU cores): tests/data/minatar_breakout_dqn/ holds the experience of
DQN online on MinAtar Breakout, seed 1, in the DQN Replay Dataset's format (made by
tests/data/make_minatar_breakout_dqn.py; the logger's evaluations 0.49, 0.73, 2.03,
3.06). That logger's own learning is no longer run here: DQN online is tested on
CartPole (tests/learning/test_learning.py), not on MinAtar, and the writer in
tests/offline/test_offline_loop.py.
REM (batch_rl's own agent) learns from that dataset alone. DQN trains on it exactly as
on the same arrays written back by `qzoo dataset` (a short run on each), and QR-DQN
briefly (a finite loss). Offline DQN and QR-DQN learned here too (DQN 2.75 after 50k
frames, QR-DQN 3.04, seed 1; docs/benchmarks.md, "Offline learning"); their full runs
were left out to keep the suite short: they share REM's offline driver, dataset and
learner, and their objectives learn online (tests/learning/test_learning.py).

Measured with seed 1: REM 2.62 after 50k frames (1.46 after 25k: below the bar, hence
two iterations); a random policy scores about 0.5. The test asks for half the logger's
score, and more than twice random.
"""

import json
import shutil

import numpy as np
import pytest
import torch
from helpers import REPO

from qzoo.configuration import build_config
from qzoo.offline.conversion import to_dopamine, to_qzoo
from qzoo.run.trainer import Trainer, run

DATA = REPO / "tests" / "data" / "minatar_breakout_dqn"
BASE = {"env": "minatar/breakout", "iterations": "2", "train_frames": "25000",
        "eval_frames": "5000", "learn_period": "4", "replay_capacity": "100000", "seed": "1"}  # fmt: skip


def returns(agent, **options):
    return [r["eval_episode_return"]
            for r in run(Trainer(build_config(agent, {**BASE, **options})))]  # fmt: skip


@pytest.mark.slow
def test_rem_learns_from_a_logged_dataset_and_dqn_trains_on_it_exactly_after_a_round_trip(tmp_path):
    torch.set_num_threads(1)
    logged = tmp_path / "logged"  # a copy: the first offline run adds its converted layout
    shutil.copytree(DATA / "replay_logs", logged / "replay_logs")
    logger = json.loads((DATA / "logger.json").read_text())["eval_episode_returns"]
    assert logger[-1] > 2.0, logger  # the logging agent had learned
    target = max(0.5 * logger[-1], 1.0)
    rem = returns("rem", offline=str(logged), num_heads="4")
    assert max(rem[1:]) >= target, (rem, logger)
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
