"""When target copies fall due: DQN Zoo counts the period in frames from frame 0; rlpyt
(--target-count-updates, the R2D1 presets) in updates from the first update."""

import types

import pytest

from qzoo.configuration import build_config
from qzoo.run.factory import make_updates


class Counting:
    """A learner and a replay that only count: updates made, target copies after which."""

    def __init__(self):
        self.updates, self.copies, self.size = 0, [], 0

    def learn(self, batch):
        self.updates += 1

    def update_target(self, tau):
        self.copies.append(self.updates)

    # replay
    num_adds, sampler = 0, types.SimpleNamespace()

    def can_sample(self):
        return True

    def sample(self, batch_size):
        return types.SimpleNamespace(indices=None)


def copies_in(config, frames, step):
    """Update counts at each target copy over `frames` frames acted `step` at a time,
    the replay holding one transition per action_repeats frames."""
    counting = Counting()
    updates = make_updates(config, counting, counting)
    for frame in range(0, frames, step):
        counting.size = (frame + step) // config.action_repeats
        updates.learn_due(frame, frame + step)
    return counting, updates


@pytest.mark.parametrize(
    "agent, step, by_frames", [("r2d1", 128, [2_396, 4_896]), ("r2d1_long", 768, [2_487, 4_987])]
)
def test_r2d1_copies_every_2500_updates_from_the_first(agent, step, by_frames):
    """rlpyt's "r2d1": one update per 3,840 frames (32 environments: 128 frames a step)
    from 1e5 steps = 400,000 frames on, so the first at 105 x 3,840 = 403,200 and the
    k-th at 403,200 + (k - 1) 3,840; copies after 2,500 and 5,000 updates. Counted in
    frames from 0, the copies at 9.6M and 19.2M frames came after (9,600,000 - 403,200)
    / 3,840 + 1 = 2,396 and 4,896. "r2d1_long": one per 30,720 frames (192 environments,
    768 frames a step), learning from frame 400,128, the first at 14 x 30,720 = 430,080;
    by frames the copies at 76.8M and 153.6M came after 2,487 and 4,987 updates."""
    config = build_config(agent, {"env": "pong"})
    assert config.target_count_updates
    frames = config.learn_period * 5_200  # 5,200 updates' worth
    assert copies_in(config, frames, step)[0].copies == [2_500, 5_000]
    frame_counted = build_config(agent, {"env": "pong", "target_count_updates": False})
    assert copies_in(frame_counted, frames, step)[0].copies == by_frames


def test_dqn_zoo_counts_frames_from_frame_0():
    """dqn: one update per 16 frames from 50,000 transitions = 200,000 frames on (the
    first update at 200,000), a copy at every multiple of 40,000 frames from then:
    after updates 1, 2,501, 5,001, 7,501 (frame 320,000). Learning from 212,000
    frames (min replay 53,000): copies after (240,000 - 212,000) / 16 + 1 = 1,751
    updates, then 4,251, 6,751; counted in updates, after 2,500 and 5,000 (the 7,500th
    would be at 212,000 + 7,499 x 16 > 320,000)."""
    config = build_config("dqn", {"env": "pong"})
    assert not config.target_count_updates
    assert copies_in(config, 320_000, 4)[0].copies == [1, 2_501, 5_001, 7_501]
    late = build_config("dqn", {"env": "pong", "min_replay_capacity_fraction": 0.053})
    assert copies_in(late, 320_000, 4)[0].copies == [1_751, 4_251, 6_751]
    late_updates = build_config("dqn", {"env": "pong", "min_replay_capacity_fraction": 0.053,
                                        "target_count_updates": True})  # fmt: skip
    assert copies_in(late_updates, 320_000, 4)[0].copies == [2_500, 5_000]
