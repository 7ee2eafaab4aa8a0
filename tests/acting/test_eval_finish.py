"""Evaluation by frames, two ways: DQN Zoo's (stop at the budget, drop the episode under
way) and Dopamine's (--eval-finish-episodes: the episode that crosses the budget plays
to its end and counts), on a hand-made environment whose returns are worked out by hand."""

import types

import numpy as np

from qzoo.acting.actor import Actor
from qzoo.acting.from_config import acting_of
from qzoo.acting.serial import run_phase
from qzoo.configuration import make_config
from qzoo.envs import EnvStep, first_step
from qzoo.envs.step import EnvInfo


class Episodes:
    """N environments playing fixed episodes: environment b's k-th episode lasts
    lengths[b][k] agent steps and pays rewards[b][k] at each; ale-py's next-step reset
    (the step after a last one is the new first observation, no real step)."""

    def __init__(self, lengths, rewards):
        self.lengths, self.rewards = lengths, rewards
        self.num_envs = len(lengths)
        self.info = EnvInfo("episodes", "gym", 2, (1,), np.float32, None)

    def reset(self, seed):
        n = self.num_envs
        self.k, self.t, self.was_last = [0] * n, [0] * n, np.zeros(n, bool)
        return first_step(np.zeros((n, 1), np.float32))

    def step(self, actions):
        n = self.num_envs
        first, last = self.was_last.copy(), np.zeros(n, bool)
        reward = np.zeros(n, np.float32)
        for b in range(n):
            if first[b]:
                self.k[b], self.t[b] = self.k[b] + 1, 0
                continue
            self.t[b] += 1
            reward[b] = self.rewards[b][self.k[b]]
            last[b] = self.t[b] == self.lengths[b][self.k[b]]
        self.was_last = last
        frame = np.array([[t] for t in self.t], np.float32)
        return EnvStep(frame, reward, first, last, last.copy(), np.zeros(n, bool),
                       int((~first).sum()))  # fmt: skip

    def close(self):
        pass


class FirstAction:
    def observe(self, first, reward):
        pass

    def __call__(self, observation, epsilon, generator):
        return np.zeros(len(observation), np.int64), 0.0


def evaluate(env, eval_frames, finish):
    config = make_config("dqn", "CartPole-v1", "gym", {"num_envs": env.num_envs,
                                                       "frame_stack": 1})  # fmt: skip
    stream = types.SimpleNamespace(numpy=np.random.default_rng(0), torch=None)
    actor = Actor(acting_of(config), env.info, FirstAction(), stream, lambda _: 0.0,
                  make_env=lambda *args: env, eval_mode=True)  # fmt: skip
    return run_phase(actor, eval_frames, None, lambda: 0, finish_episodes=finish)


def test_one_environment_as_dopamine_run_one_phase():
    # Episodes of 3, 5 and 4 steps paying 1, 2 and 3 per step: returns 3, 10, 12.
    # A budget of 7 steps (7 frames: one per step here): Dopamine plays episode 1 (3 steps < 7), then
    # episode 2 (8 steps >= 7: stop) and averages 3 and 10; DQN Zoo stops at step 7,
    # inside episode 2, and averages the completed one alone.
    lengths, rewards = [[3, 5, 4]], [[1, 2, 3]]
    dopamine = evaluate(Episodes(lengths, rewards), 7, finish=True)
    assert dopamine["num_episodes"] == 2 and dopamine["episode_return"] == 6.5
    assert dopamine["frame_rate"] > 0
    zoo = evaluate(Episodes(lengths, rewards), 7, finish=False)
    assert zoo["num_episodes"] == 1 and zoo["episode_return"] == 3.0
    # A budget met exactly at an episode's end (8 steps) starts no other episode.
    exact = evaluate(Episodes(lengths, rewards), 8, finish=True)
    assert exact["num_episodes"] == 2 and exact["episode_return"] == 6.5


def test_several_environments_finish_the_episodes_under_way():
    # Environment 0: episodes of 2, 6, 2 steps paying 1, 1, 5 (returns 2, 6, 10);
    # environment 1: 3, 3, 3 steps paying 2, 4, 8 (returns 6, 12, 24). Step by step
    # (2 frames a step while both play; a reset step adds only the other's 1):
    #   step 1-2: env 0 ends episode 1 (2) at step 2; 4 frames
    #   step 3:   env 0 resets, env 1 ends episode 1 (6); 5 frames
    #   step 4:   env 0 plays, env 1 resets; 6 frames: the budget of 6 is reached
    # DQN Zoo counts 2 and 6: mean 4. Dopamine's rule also plays env 0's episode 2 (under
    # way, ends at step 9: 6) and not env 1's (only its first observation): (2+6+6)/3.
    lengths, rewards = [[2, 6, 2], [3, 3, 3]], [[1, 1, 5], [2, 4, 8]]
    zoo = evaluate(Episodes(lengths, rewards), 6, finish=False)
    assert zoo["num_episodes"] == 2 and zoo["episode_return"] == 4.0
    dopamine = evaluate(Episodes(lengths, rewards), 6, finish=True)
    assert dopamine["num_episodes"] == 3 and dopamine["episode_return"] == 14 / 3


def test_batch_rl_presets_evaluate_as_dopamine_and_dqn_zoo_as_dqn_zoo():
    from qzoo.configuration import build_config

    for agent in ("offline_dqn", "offline_c51", "offline_qrdqn", "ensemble", "rem"):
        assert build_config(agent, {"env": "pong"}).eval_finish_episodes, agent
    for agent in ("dqn", "rainbow", "r2d1"):
        assert not build_config(agent, {"env": "pong"}).eval_finish_episodes, agent
