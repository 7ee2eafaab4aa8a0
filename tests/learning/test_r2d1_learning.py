"""R2D1's memory test: on CartPole with its velocities masked (qzoo/StatelessCartPole-v1)
a feed-forward DQN that sees one observation (--frame-stack 1) cannot tell which way
the pole moves and stays below 70, while R2D1's LSTM infers it and passes 100 and
twice DQN's best (benchmarks/r2d1_memory.py; curves and seeds in BENCHMARKS.md).

Budget: at most 100 s on an idle 2-core CPU for both agents together (15,000 training
frames each, gym-domain presets, one PyTorch thread); measured 16.4 s (DQN) + 14.8 s
(R2D1) of CPU time on dev-cpu. Returns measured there, seed 1: DQN 9.4, 9.3, 36.8,
38.5, 42.7, 41.4; R2D1 9.3, 11.6, 11.0, 44.9, 67.7, 150.9.
"""

import pytest
import torch

from qzoo.configuration import build_config
from qzoo.envs.memory import STATELESS_CARTPOLE
from qzoo.run.trainer import Trainer, run


def _returns(agent):
    options = {"env": STATELESS_CARTPOLE, "iterations": "5", "train_frames": "3000",
               "eval_frames": "1500", "frame_stack": "1", "seed": "1"}  # fmt: skip
    return [row["eval_episode_return"] for row in run(Trainer(build_config(agent, options)))]


@pytest.mark.slow
def test_r2d1_remembers_where_feed_forward_dqn_cannot():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        dqn, r2d1 = _returns("dqn"), _returns("r2d1")
    finally:
        torch.set_num_threads(threads)
    assert dqn[0] < 40 and r2d1[0] < 40, (dqn, r2d1)  # untrained networks
    assert max(dqn) < 70, dqn  # reacting to the angle alone
    assert max(r2d1[1:]) > 100 and max(r2d1) > 2 * max(dqn), (dqn, r2d1)
