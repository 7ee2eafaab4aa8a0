"""Atari through ale-py's native vector environment, under DQN Zoo's protocol.

DQN Zoo's (dqn_zoo.md §2): no sticky actions, minimal action set, random no-op starts,
action repeat 4, max of the last two frames, grayscale, 84x84, reward summed over the
4 frames (clipped by the learner, not here: results report raw returns), a lost life
zeros the discount without ending the episode, episodes capped at 108,000 frames with
the cap treated as truncation. Machado et al. 2018's (Dopamine, the DQN Replay
Dataset): sticky actions with probability 0.25, no life-loss signal, no no-op starts,
the same cap. Mnih et al. 2015's evaluation ("noop30", `qzoo eval --protocol noop30`
only): up to 30 no-op frames, no sticky actions, episodes of at most 18,000 frames.

Deliberate differences from DQN Zoo, all from ale-py's C++ pipeline: resizing is
ale-py's (OpenCV INTER_AREA-like), not Pillow's BILINEAR; no-op starts are uniform on
0..30 (ale-py's noop_max), not 1..30; the 108,000-frame cap counts the no-op frames."""

import collections
import os

import numpy as np
from ale_py.vector_env import AtariVectorEnv

from qzoo.envs.step import EnvInfo, EnvStep, first_step

# What each protocol sets in the emulator. `max_frames` None keeps the config's
# --max-frames-per-episode; noop30 is an evaluation protocol with its own cap.
Protocol = collections.namedtuple("Protocol", "sticky noop_max life_loss max_frames")
PROTOCOLS = {
    "dqn_zoo": Protocol(sticky=0.0, noop_max=30, life_loss=True, max_frames=None),
    "machado": Protocol(sticky=0.25, noop_max=0, life_loss=False, max_frames=None),
    "noop30": Protocol(sticky=0.0, noop_max=30, life_loss=False, max_frames=18_000),
}


def protocol_settings(config):
    """The `Protocol` of `config.protocol`, its frame cap resolved (0: none)."""
    protocol = PROTOCOLS[config.protocol]
    if protocol.max_frames is None:
        protocol = protocol._replace(max_frames=config.max_frames_per_episode)
    return protocol


class AtariVector:
    """N Atari games stepped together by ale-py's threaded vector environment."""

    def __init__(self, game, num_envs, config, batch_size=0):
        """`batch_size`: ale-py's asynchronous mode, stepped by `AtariBatches`
        (atari_batches.py); 0 steps all `num_envs` together."""
        protocol = protocol_settings(config)
        self.game = game
        self.num_envs = num_envs
        self._life_loss_signal = protocol.life_loss
        self._action_repeats = config.action_repeats
        self._env = AtariVectorEnv(
            game,
            num_envs,
            batch_size=batch_size,
            num_threads=min(num_envs, os.cpu_count() or 1),
            max_num_frames_per_episode=protocol.max_frames or 10**9,
            repeat_action_probability=protocol.sticky,
            full_action_space=False,
            autoreset_mode="NextStep",
            img_height=84,
            img_width=84,
            grayscale=True,
            stack_num=1,  # qzoo stacks frames itself, identically for acting and replay
            frameskip=config.action_repeats,
            maxpool=True,
            noop_max=protocol.noop_max,
            episodic_life=False,
            reward_clipping=False,
            use_fire_reset=False,
        )
        self.info = EnvInfo(
            name=game,
            domain="atari",
            num_actions=int(self._env.single_action_space.n),
            frame_shape=(84, 84),
            frame_dtype=np.uint8,
            game=game,
        )
        self._lives = np.zeros(num_envs, np.int32)
        self._was_last = np.zeros(num_envs, bool)

    def reset(self, seed):
        obs, info = self._env.reset(seed=int(seed))
        self._lives = info["lives"].copy()
        self._was_last[:] = False
        return first_step(obs[:, -1])

    def step(self, actions):
        obs, reward, terminated, truncated, info = self._env.step(
            np.asarray(actions, dtype=np.int64)
        )
        first = self._was_last.copy()
        lives = info["lives"]
        last = terminated | truncated
        # As DQN Zoo's ZeroDiscountOnLifeLoss: only mid-episode steps (a LAST step's
        # discount comes from termination or truncation alone).
        life_loss = (lives < self._lives) & ~first & ~last & self._life_loss_signal
        self._lives = lives.copy()
        self._was_last = last.copy()
        return EnvStep(
            frame=obs[:, -1],
            reward=reward.astype(np.float32),
            first=first,
            last=last,
            terminated=terminated.copy(),
            life_loss=life_loss,
            real_steps=int((~first).sum()),
        )

    def close(self):
        self._env.close()
