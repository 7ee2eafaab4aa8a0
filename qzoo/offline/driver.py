"""Training from a dataset (`--offline DIR`): a driver that learns without acting.

A training phase makes the SGD steps and target copies due over its frames, as if the
replayed transitions had been collected then (batch_rl's 250,000 training steps =
1,000,000 frames = 62,500 updates at one update per 16 frames); evaluation plays as in
an online run. With --offline-reload each phase first reloads that many checkpoints
drawn from the replay stream (batch_rl's FixedReplayBuffer).
"""

import hashlib
import math
import sys
import time

from qzoo.acting.actor import EpisodeStats
from qzoo.acting.driver import Progress
from qzoo.acting.from_config import serial_parts
from qzoo.acting.serial import SerialDriver
from qzoo.data import atari_py_rom_md5
from qzoo.offline.dataset import dataset_suffixes, first_suffixes, open_dataset
from qzoo.offline.storage import CheckpointPerBatchSampler
from qzoo.replay import Replay, UniformSampler


def local_dataset(parts):
    """`open(suffixes)`: the chosen checkpoints of --offline (all of them for None), in
    this process, sampled as batch_rl does (one checkpoint per batch with --offline-reload)."""
    config = parts.config

    def open_(suffixes=None):
        if suffixes is None:
            suffixes = first_suffixes(config)
        storage = open_dataset(config.offline, parts.info, config.frame_stack, config.n_steps,
                               config.discount, suffixes, config.offline_transitions)  # fmt: skip
        print(f"offline: {len(storage.suffixes)} checkpoints of {config.offline} (suffixes "
              f"{', '.join(map(str, storage.suffixes))}), {storage.valid_count():,} "
              "transitions", file=sys.stderr)  # fmt: skip
        sampler = CheckpointPerBatchSampler if config.offline_reload else UniformSampler
        return Replay(storage, sampler(storage, parts.streams.replay.numpy))

    return open_


def rom_warning(info):
    """One line when the Atari game `info` evaluates on runs on a ROM other than atari-py
    0.2.5's, on which the DQN Replay Dataset was recorded (qzoo/data/roms/); else None."""
    legacy = atari_py_rom_md5().get(info.game) if info.domain == "atari" else None
    if legacy is None:
        return None
    from ale_py import roms

    with open(roms.get_rom_path(info.game), "rb") as rom:
        md5 = hashlib.md5(rom.read()).hexdigest()
    if md5 == legacy:
        return None
    return (f"offline: warning: {info.game}'s ROM in ale-py (md5 {md5}) is not atari-py "
            f"0.2.5's (md5 {legacy}), on which the DQN Replay Dataset was recorded: "
            "evaluation plays another dump of the game (docs/offline.md)")  # fmt: skip


class OfflineDriver(SerialDriver):
    """Learns from a dataset; evaluates as SerialDriver does (its training actor never
    starts). `open_dataset(suffixes)` makes the replay of the chosen checkpoints."""

    def __init__(self, parts, policy, evaluation, open_dataset=None):
        super().__init__(**serial_parts(parts, policy, evaluation))
        self.parts, self.config = parts, parts.config
        warning = rom_warning(parts.info)
        if warning is not None:
            print(warning, file=sys.stderr)
        self.open_dataset = open_dataset or local_dataset(parts)
        self.updates.use_replay(self.open_dataset(None))

    def train_phase(self, num_frames: int, progress: Progress = None) -> dict:
        config, updates = self.config, self.updates
        if config.offline_reload:  # batch_rl reloads N random checkpoints every iteration
            found = dataset_suffixes(config.offline, config.offline_checkpoints)
            rng = self.parts.streams.replay.numpy
            chosen = sorted(rng.choice(found, config.offline_reload, replace=False).tolist())
            updates.use_replay(self.open_dataset(chosen))
        started, frames, empty = time.perf_counter(), 0, EpisodeStats(0)
        while frames < num_frames:
            step = min(config.learn_period, num_frames - frames)
            updates.learn_due(updates.frame_t, updates.frame_t + step)
            updates.advance(step)
            frames += step
            if progress is not None:
                progress(step, empty)
        duration = time.perf_counter() - started
        return {"episode_return": math.nan, "num_episodes": 0, "state_value": math.nan,
                "frame_rate": frames / duration, "steps_per_second": math.nan,
                "duration": duration}  # fmt: skip

    def epsilon(self, frame_t: int) -> float:
        return math.nan  # no acting
