"""Atari in ale-py's asynchronous mode: each step acts on the environments that are
ready, not on all of them (--env-batch-size).

ale-py's threaded vector environment with `batch_size` B below `num_envs` N keeps
every environment busy: `recv()` returns the first B environments to finish a step
(their ids in `info["env_id"]`), and `send(actions)` gives the actions of exactly
those B, in the same order, back to the threads, so the policy never waits for the
slowest game. Each environment has at most one step in flight, so its own observations
arrive in order; only which environments share a batch depends on thread timing.

Every environment keeps DQN Zoo's protocol exactly as `AtariVector` does (the same
emulator settings); what `AtariVector.step` works out for all N at once (first
observations, life losses) is worked out here per environment id. Environment i is
seeded with seed + i at `reset(seed)`, as in synchronous mode."""

import numpy as np

from qzoo.envs.atari import AtariVector
from qzoo.envs.step import EnvStep


class AtariBatches(AtariVector):
    """N Atari games, stepped B at a time as they become ready (module docstring).

    `reset(seed)` and `step(actions)` return `(EnvStep, env_ids)`: the step of the B
    environments `env_ids` ([B] int64), to be answered by `step` with their actions
    in that order. An environment's first batch after `reset` holds its first
    observation (`first` set, reward 0).
    """

    def __init__(self, game, num_envs, batch_size, config):
        if not 0 < batch_size <= num_envs:
            raise ValueError(f"batch_size {batch_size} not in 1..num_envs {num_envs}")
        super().__init__(game, num_envs, config, batch_size=batch_size)
        self.batch_size = batch_size
        self._fresh = np.ones(num_envs, bool)  # reset, first observation not yet seen
        self._ids = None

    def reset(self, seed):
        # All N environments reset; the first B to finish come back now, the others
        # in later batches (still flagged `first`: `_fresh`).
        self._fresh[:] = True
        self._was_last[:] = False
        obs, info = self._env.reset(seed=int(seed))
        no = np.zeros(self.batch_size, np.float32)
        return self._batch(obs, no, no.astype(bool), no.astype(bool), info)

    def step(self, actions):
        actions = np.asarray(actions, dtype=np.int64)
        if actions.shape != (self.batch_size,):
            raise ValueError(f"{actions.shape[0]} actions for a batch of {self.batch_size}")
        self._env.send(actions)  # ale-py pairs them with the ids of the last recv
        obs, reward, terminated, truncated, info = self._env.recv()
        return self._batch(obs, reward, terminated, truncated, info)

    def _batch(self, obs, reward, terminated, truncated, info):
        ids = info["env_id"].astype(np.int64)
        first = self._fresh[ids] | self._was_last[ids]
        last = terminated | truncated
        lives = info["lives"]
        # As AtariVector.step: a lost life zeros the discount mid-episode only.
        life_loss = (lives < self._lives[ids]) & ~first & ~last & self._life_loss_signal
        self._lives[ids] = lives
        self._was_last[ids] = last
        self._fresh[ids] = False
        self._ids = ids
        step = EnvStep(
            frame=obs[:, -1],
            reward=np.where(first, 0.0, reward).astype(np.float32),
            first=first,
            last=last & ~first,
            terminated=terminated & ~first,
            life_loss=life_loss,
            real_steps=int((~first).sum()),
        )
        return step, ids


def make_batches(config, num_envs, seed, eval_mode=False):
    """`envs.make`'s counterpart for --env-batch-size: `AtariBatches` of
    `config.env_batch_size` (seeded at `reset`, as every vector environment)."""
    from qzoo import envs

    domain, game = envs.resolve(config.env)
    if domain != "atari":  # configuration/rules/acting.py's batch_relations refuses this first
        raise ValueError(f"{config.env}: only Atari has an asynchronous vector environment")
    return AtariBatches(game, num_envs, config.env_batch_size, config)
