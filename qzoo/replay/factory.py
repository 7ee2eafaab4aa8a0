"""The replay a config asks for: frames on the host (compressed with
--replay-compression), on a torch device (--replay-device), or R2D1's sequences; and the
memory it will take, for the check before a run starts."""

from qzoo.replay.frames import FrameStorage
from qzoo.replay.replay import Replay
from qzoo.replay.samplers import make_sampler


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
