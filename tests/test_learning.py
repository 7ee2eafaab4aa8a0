"""Learning tests: fail when learning is broken. ~1 minute each on a 2-core CPU."""

import pytest

from qzoo.cli import build_config
from qzoo.loop import Trainer, run


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["dqn", "double_q"])
def test_learns_cartpole(agent):
    # 3 iterations of 10,000 frames with qzoo's small-environment defaults.
    config = build_config(agent, {"env": "CartPole-v1", "iterations": "3", "seed": "1"})
    rows = list(run(Trainer(config)))
    returns = [row["eval_episode_return"] for row in rows]
    assert returns[0] < 40  # the untrained (greedy) network
    # A random policy averages about 22; broken learning stays there.
    assert max(returns[2:]) > 100, returns
    assert rows[-1]["train_episode_return"] > rows[1]["train_episode_return"], returns
