"""Replay = storage (how transitions live) + sampler (which ones a batch holds).

Actors write `Row`s, the learner reads `Batch`es; neither sees how frames are stored
or how slots are drawn. Samplers address slots as (row, column) of a ring of rows
written in lockstep by N environments (see samplers.py for the few methods they use),
so any storage organised that way (deduplicated frames, a DQN Replay Dataset file, a
compressed or sequence storage) works with the uniform and the prioritized sampler.
"""

from qzoo.replay.batch import Batch, Row
from qzoo.replay.frames import FrameStorage
from qzoo.replay.samplers import PrioritizedSampler, UniformSampler

__all__ = ["Batch", "FrameStorage", "PrioritizedSampler", "Replay", "Row", "UniformSampler"]


class Replay:
    """A storage and a sampler working together."""

    def __init__(self, storage, sampler):
        self.storage, self.sampler = storage, sampler

    @property
    def size(self):
        return self.storage.size

    @property
    def num_adds(self):
        """Transitions ever added (rows times environments)."""
        return self.storage.num_adds * self.storage.num_envs

    def can_sample(self):
        return self.storage.can_sample()

    def add(self, row):
        self.sampler.added(self.storage.add(row))

    def sample(self, batch_size):
        t, b, weights = self.sampler.sample(batch_size)
        return self.storage.gather(t, b)._replace(weights=weights)

    def update_priorities(self, indices, priorities):
        self.sampler.update(indices, priorities)

    def state_dict(self):
        return {"storage": self.storage.state_dict(), "sampler": self.sampler.state_dict()}

    def load_state_dict(self, state):
        self.storage.load_state_dict(state["storage"])
        self.sampler.load_state_dict(state["sampler"])


def make_storage(config, info):
    """The frame storage `config` asks for: compressed with --replay-compression."""
    args = (config.replay_capacity, config.num_envs, info.frame_shape, info.frame_dtype,
            info.num_actions, config.frame_stack, config.n_steps, config.discount)  # fmt: skip
    if config.replay_compression == "none":
        return FrameStorage(*args)
    from qzoo.replay.compressed import CompressedFrameStorage

    return CompressedFrameStorage(*args, config.replay_compression)


def replay_bytes_needed(config, info):
    """The replay's host memory, for the check before a run starts: exact uncompressed;
    with --replay-compression an estimate (see compressed.py's `bytes_estimate`)."""
    args = (config.replay_capacity, config.num_envs, info.frame_shape, info.frame_dtype,
            info.num_actions)  # fmt: skip
    if config.replay_device == "cuda":  # in GPU memory: refused here if it cannot fit
        from qzoo.replay.device import check_gpu_memory

        check_gpu_memory(config, info)
        return 0
    if config.replay_compression == "none":
        return FrameStorage.bytes_needed(*args)
    from qzoo.replay.compressed import bytes_estimate

    return bytes_estimate(*args)


def make_replay(config, info, rng, generator=None):
    """The replay `config` asks for, drawing samples from `rng` (numpy Generator), or
    with --replay-device cpu|cuda from `generator` (torch, on that device)."""
    if config.replay_device != "host":  # replay/device.py
        from qzoo.replay.device import make_device_replay

        return make_device_replay(config, info, generator)
    if config.recurrent:  # R2D1's sequences (replay/sequences.py)
        from qzoo.replay.sequences import make_sequence_replay

        return make_sequence_replay(config, info, rng)
    storage = make_storage(config, info)
    return Replay(storage, make_sampler(config, storage, rng))


def make_sampler(config, storage, rng, prioritized=PrioritizedSampler):
    """The uniform sampler, or with --prioritized the `prioritized` class, over `storage`
    (anything with the interface samplers.py names)."""
    if not config.prioritized:
        return UniformSampler(storage, rng)
    return prioritized(
        storage, rng, priority_exponent=config.priority_exponent,
        uniform_sample_probability=config.uniform_sample_probability,
        normalize_weights=config.normalize_weights,
    )  # fmt: skip
