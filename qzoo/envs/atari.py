"""Atari through ale-py's native vector environment, under DQN Zoo's protocol.

DQN Zoo's (dqn_zoo.md §2): no sticky actions, minimal action set, 1 to 30 no-op frames
at each episode start (uniform), action repeat 4, max of the last two frames, grayscale, 84x84, reward summed over the
4 frames (clipped by the learner, not here: results report raw returns), a lost life
zeros the discount without ending the episode, episodes capped at 108,000 frames with
the cap treated as truncation. Machado et al. 2018's (Dopamine, the DQN Replay
Dataset): sticky actions with probability 0.25, no life-loss signal, no no-op starts,
the same cap. Mnih et al. 2015's evaluation ("noop30", `qzoo eval --protocol noop30`
only): 0 to 29 no-op frames (ale-py's own draw), no sticky actions, episodes of at most
18,000 frames. The frame cap counts the frames after the no-ops (ale-py restarts its
count after them, as DQN Zoo's run loop never sees them).

ale-py draws a start's no-op count uniformly on 0..noop_max - 1 and reports it as the
episode's frame number; a draw under the protocol's minimum is drawn again by resetting
that environment alone (rejection: uniform on min..max). ale-py's asynchronous mode
(`batch_size` > 0) cannot reset one environment, so there the draw is 0..max.

Deliberate difference from DQN Zoo, from ale-py's C++ pipeline: resizing is ale-py's
(OpenCV INTER_AREA-like), not Pillow's BILINEAR."""

import collections
import os

import numpy as np
from ale_py.vector_env import AtariVectorEnv

from qzoo.envs.step import EnvInfo, EnvStep, first_step

# What each protocol sets in the emulator. `max_frames` None keeps the config's
# --max-frames-per-episode; noop30 is an evaluation protocol with its own cap.
# `noop_min`..`noop_max`: the no-op frames at an episode start, uniform, inclusive.
Protocol = collections.namedtuple("Protocol", "sticky noop_min noop_max life_loss max_frames")
PROTOCOLS = {
    "dqn_zoo": Protocol(sticky=0.0, noop_min=1, noop_max=30, life_loss=True, max_frames=None),
    "machado": Protocol(sticky=0.25, noop_min=0, noop_max=0, life_loss=False, max_frames=None),
    "noop30": Protocol(sticky=0.0, noop_min=0, noop_max=29, life_loss=False, max_frames=18_000),
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
        (atari_batches.py), where no-op counts are not drawn again (module docstring);
        0 steps all `num_envs` together."""
        protocol = protocol_settings(config)
        self._noop_min = protocol.noop_min if batch_size == 0 else 0
        self.start_noops = np.zeros(num_envs, np.int64)  # each episode's no-op frames
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
            noop_max=protocol.noop_max + 1 if protocol.noop_max else 0,  # draws 0..max
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
        frame, lives = self._starts(np.ones(self.num_envs, bool), obs[:, -1], info)
        self._lives = lives.copy()
        self._was_last[:] = False
        return first_step(frame)

    def _starts(self, fresh, frame, info):
        """(frame, lives) once the environments in `fresh`, which have just started an
        episode, hold at least the protocol's minimum of no-op frames: those short of
        it are reset again, alone (module docstring). Records `start_noops`."""
        lives, noops = info["lives"], info["episode_frame_number"]
        short = fresh & (noops < self._noop_min)
        if short.any():
            frame, lives, noops = frame.copy(), lives.copy(), noops.copy()
        while short.any():
            obs, again = self._env.reset(options={"reset_mask": short})
            frame[short] = obs[short, -1]
            lives[short] = again["lives"][short]
            noops[short] = again["episode_frame_number"][short]
            short &= noops < self._noop_min
        self.start_noops[fresh] = noops[fresh]
        return frame, lives

    def step(self, actions):
        obs, reward, terminated, truncated, info = self._env.step(
            np.asarray(actions, dtype=np.int64)
        )
        first = self._was_last.copy()
        frame, lives = obs[:, -1], info["lives"]
        if first.any():
            frame, lives = self._starts(first, frame, info)
        last = terminated | truncated
        # As DQN Zoo's ZeroDiscountOnLifeLoss: only mid-episode steps (a LAST step's
        # discount comes from termination or truncation alone).
        life_loss = (lives < self._lives) & ~first & ~last & self._life_loss_signal
        self._lives = lives.copy()
        self._was_last = last.copy()
        return EnvStep(
            frame=frame,
            reward=reward.astype(np.float32),
            first=first,
            last=last,
            terminated=terminated.copy(),
            life_loss=life_loss,
            real_steps=int((~first).sum()),
        )

    def close(self):
        self._env.close()
