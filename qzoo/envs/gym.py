"""Gymnasium environments with discrete actions, and MinAtar, as a vector env.

Steps each environment in turn (they are cheap) with the same next-step autoreset
contract as ale-py's vector environment (see qzoo/envs/__init__.py).
"""

import numpy as np
from gymnasium import spaces

from qzoo.envs.step import EnvInfo, EnvStep, first_step
from qzoo.errors import UserError
from qzoo.signals import deferred


def minatar_environment():
    """minatar.Environment, imported with Ctrl-C and SIGTERM held until the import ends:
    minatar imports matplotlib inside a bare `except:`, which swallows the
    KeyboardInterrupt a signal raises there, and the command went on as if never
    stopped."""
    with deferred():
        from minatar import Environment
    return Environment


class MinAtarEnv:
    """MinAtar (Young & Tian 2019, arXiv:1903.03176) with channel-first uint8 frames.

    Uses MinAtar's defaults: all 6 actions, sticky actions with probability 0.1,
    difficulty ramping.
    """

    def __init__(self, game):
        self._env = minatar_environment()(game)
        shape = self._env.state_shape()
        self.observation_space = spaces.Box(0, 1, (shape[2], shape[0], shape[1]), np.uint8)
        self.action_space = spaces.Discrete(self._env.num_actions())

    def _obs(self):
        return np.ascontiguousarray(self._env.state().transpose(2, 0, 1), dtype=np.uint8)

    def reset(self, seed=None):
        if seed is not None:
            self._env.seed(seed)
        self._env.reset()
        return self._obs(), {}

    def step(self, action):
        reward, terminated = self._env.act(int(action))
        return self._obs(), float(reward), bool(terminated), False, {}

    def close(self):
        pass


class GymVector:
    """`num_envs` copies of one environment, stepped in lockstep."""

    def __init__(self, make_env, num_envs, name, config):
        self.num_envs = num_envs
        self._envs = [make_env() for _ in range(num_envs)]
        space = self._envs[0].action_space
        obs_space = self._envs[0].observation_space
        if not isinstance(space, spaces.Discrete):
            raise UserError(f"environment {name!r} has action space {space}; qzoo needs Discrete")
        if not isinstance(obs_space, spaces.Box):
            raise UserError(
                f"environment {name!r} has observation space {obs_space}; qzoo needs a Box"
            )
        domain = "minatar" if name.startswith("minatar/") else "gym"
        dtype = np.uint8 if obs_space.dtype == np.uint8 else np.float32
        self.info = EnvInfo(
            name=name,
            domain=domain,
            num_actions=int(space.n),
            frame_shape=tuple(obs_space.shape),
            frame_dtype=dtype,
            game=name,
        )
        self._dtype = dtype
        self._max_steps = config.max_frames_per_episode // max(1, config.action_repeats)
        self._steps = np.zeros(num_envs, np.int64)
        self._was_last = np.zeros(num_envs, bool)

    def reset(self, seed):
        frames = [env.reset(seed=int(seed) + i)[0] for i, env in enumerate(self._envs)]
        for i, env in enumerate(self._envs):
            env.action_space.seed(int(seed) + i)
        self._steps[:] = 0
        self._was_last = np.zeros(self.num_envs, bool)
        return first_step(np.stack(frames).astype(self._dtype))

    def step(self, actions):
        # Python lists, one array each at the end: with cheap environments (CartPole)
        # NumPy's per-call overhead on a few elements would dominate.
        frames, reward, terminated, truncated = [], [], [], []
        first = self._was_last.copy()
        for i, env in enumerate(self._envs):
            if first[i]:
                frame, _ = env.reset()
                self._steps[i] = 0
                r, term, trunc = 0.0, False, False
            else:
                frame, r, term, trunc, _ = env.step(int(actions[i]))
                self._steps[i] += 1
                trunc = trunc or (0 < self._max_steps <= self._steps[i])
            frames.append(frame)
            reward.append(r)
            terminated.append(term)
            truncated.append(trunc)
        terminated = np.array(terminated, bool)
        last = terminated | np.array(truncated, bool)
        self._was_last = last
        return EnvStep(
            frame=np.array(frames, self._dtype),
            reward=np.array(reward, np.float32),
            first=first,
            last=last,
            terminated=terminated,
            life_loss=np.zeros(len(frames), bool),
            real_steps=len(frames) - int(first.sum()),
        )

    def close(self):
        for env in self._envs:
            env.close()
