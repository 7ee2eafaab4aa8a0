"""One environment of a run's config under Gymnasium's API, its observations what the
run's network takes: the Atari protocol's preprocessing (or MinAtar's, or the
Gymnasium environment as it is) and the frame stack. What `Agent.make_env` gives, for
the user's own loop:

    env = agent.make_env(seed=0)
    obs, info = env.reset()
    while True:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs))
        if terminated or truncated:
            break

Rewards are the environment's own (summed over the action repeats, not clipped);
`info["life_loss"]` is the protocol's life-loss signal (DQN Zoo's protocol only)."""

import dataclasses
from typing import Any

import gymnasium
import numpy as np

from qzoo import envs
from qzoo.replay.frames import FrameStacker, observation_shape


class AgentEnv(gymnasium.Env):
    """qzoo's vector environment of one, stacked, behind reset() and step()."""

    metadata = {"render_modes": []}  # noqa: RUF012  (gymnasium.Env's own attribute)

    def __init__(self, config: Any, info: Any, protocol: str | None = None,
                 seed: int | None = None) -> None:  # fmt: skip
        """`config` and `info`: the run's; `protocol` replaces an Atari run's (dqn_zoo,
        machado, noop30); `seed` seeds the first reset (None: drawn at random)."""
        if protocol is not None:
            config = dataclasses.replace(config, protocol=protocol)
        self._vector = envs.make(config, 1, 0, eval_mode=True)
        self._stacker = FrameStacker(1, info.frame_shape, info.frame_dtype, config.frame_stack)
        shape = observation_shape(info.frame_shape, config.frame_stack)
        if np.dtype(info.frame_dtype) == np.uint8:
            high = 255 if info.domain == "atari" else 1
            self.observation_space = gymnasium.spaces.Box(0, high, shape, np.uint8)
        else:
            self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, shape, np.float32)
        self.action_space = gymnasium.spaces.Discrete(info.num_actions)
        self._seeds = np.random.default_rng(seed)
        self._last = True  # a step needs a reset first

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._seeds = np.random.default_rng(seed)
        step = self._vector.reset(seed=int(self._seeds.integers(2**31)))
        self._last = False
        return self._stacker.push(step.frame, step.first)[0].copy(), {}

    def step(self, action):
        if self._last:
            raise RuntimeError("AgentEnv.step after the episode ended: call reset() first")
        step = self._vector.step(np.asarray([int(action)], np.int64))
        self._last = bool(step.last[0])
        obs = self._stacker.push(step.frame, step.first)[0].copy()
        terminated = bool(step.terminated[0])
        truncated = self._last and not terminated
        info = {"life_loss": bool(step.life_loss[0])}
        return obs, float(step.reward[0]), terminated, truncated, info

    def close(self):
        self._vector.close()
