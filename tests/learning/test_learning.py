"""Learning tests, one per preset: each fails when that agent does not learn.

CartPole-v1 with qzoo's small-environment defaults, 2 iterations of 10,000 frames (a
test that passes after the first stops there).
A random policy averages about 22 and the untrained greedy network about 9; broken
learning stays there, while every agent here passes 100 (see BENCHMARKS.md for
seeds and curves). QR-DQN and IQN
use fewer quantiles / tau samples here than their Atari defaults (201 and 64), as
DQN Zoo's own smoke tests do, so that each test takes about a minute on 2 cores.
Ensemble-DQN and REM learn online with 4 heads (REM's online variant: 4 separate
networks; batch_rl's offline presets have 200 heads on one torso).
"""

import pytest
from helpers import returns_until

from qzoo.configuration import build_config
from qzoo.run.trainer import Trainer

SMALLER = {
    "qrdqn": {"num_quantiles": "32"},
    "iqn": {"tau_samples_policy": "16", "tau_samples_s_tm1": "16", "tau_samples_s_t": "16"},
    "ensemble": {"num_heads": "4"},
    "rem": {"num_heads": "4"},
}


@pytest.mark.slow
@pytest.mark.parametrize(
    "agent", ["dqn", "double_q", "prioritized", "c51", "qrdqn", "iqn", "rainbow", "ensemble", "rem"]
)
def test_learns_cartpole(agent):
    options = {"env": "CartPole-v1", "iterations": "2", "eval_frames": "2000", "seed": "1",
               **SMALLER.get(agent, {})}  # fmt: skip
    returns = returns_until(Trainer(build_config(agent, options)), 100)
    assert returns[0] < 40, returns  # the untrained network
    assert max(returns[1:]) > 100, returns


@pytest.mark.slow
def test_learns_cartpole_in_bfloat16():
    """DQN with --precision bfloat16 (the learner's passes under bfloat16 autocast)
    learns as the float32 one does. Budget 60 s (15 s on the 2-core dev machine)."""
    options = {"env": "CartPole-v1", "iterations": "2", "eval_frames": "2000", "seed": "1",
               "precision": "bfloat16"}  # fmt: skip
    returns = returns_until(Trainer(build_config("dqn", options)), 100)
    assert returns[0] < 40, returns
    assert max(returns[1:]) > 100, returns
