"""The replay a config asks for: frames on the host (compressed with
--replay-compression), on a torch device (--replay-device), or R2D1's sequences; and the
memory it will take, for the check before a run starts. The one module of replay/ that
reads a Config: storages and samplers take typed arguments."""

import sys

import numpy as np

from qzoo.errors import UserError
from qzoo.replay.frames import FrameStorage, bytes_per_transition
from qzoo.replay.replay import Replay
from qzoo.replay.samplers import PrioritizedSampler, UniformSampler


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
    with --replay-compression an estimate (see compressed.py's `bytes_estimate`). PQN
    keeps one rollout instead: its observations and their stacks."""
    if config.rollout_steps:
        stack = config.frame_stack * int(np.prod(info.frame_shape))
        return (
            (config.rollout_steps + 1)
            * config.num_envs
            * stack
            * np.dtype(info.frame_dtype).itemsize
        )
    args = (config.replay_capacity, config.num_envs, info.frame_shape, info.frame_dtype,
            info.num_actions)  # fmt: skip
    if config.replay_device == "cuda":  # in GPU memory: refused here if it cannot fit
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
        return make_device_replay(config, info, generator)
    if config.recurrent:  # R2D1's sequences (replay/sequences.py)
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


def make_sequence_replay(config, info, rng):
    """R2D1's replay for `config`, drawing from `rng`."""
    from qzoo.replay.sequences import (
        SequencePrioritizedSampler,
        SequenceReplay,
        SequenceSlots,
        SequenceStorage,
    )

    storage = SequenceStorage(
        config.replay_capacity, config.num_envs, info.frame_shape, info.frame_dtype,
        info.num_actions, config.frame_stack, config.n_steps, config.discount,
        config.burn_in_steps, config.sequence_steps, config.store_state_interval,
        config.lstm_size, config.episodic_lives,
    )  # fmt: skip
    frame = bytes_per_transition(info.frame_shape, info.frame_dtype, info.num_actions)
    print(f"r2d1: sequence replay of {storage.num_rows:,} rows x {storage.num_envs} "
          f"environments, {storage.bytes_per_transition:,.1f} bytes per transition ({frame:,} "
          f"frame storage + {storage.bytes_per_transition - frame:,.1f} recurrent states, one "
          f"per {storage.interval} rows)", file=sys.stderr)  # fmt: skip
    sampler = make_sampler(config, SequenceSlots(storage), rng, SequencePrioritizedSampler)
    return SequenceReplay(storage, sampler, config.input_priorities, config.priority_eta,
                          config.value_rescale_eps)  # fmt: skip


def make_device_replay(config, info, generator):
    """The replay of `--replay-device cpu|cuda`: device storage and the uniform (or
    with --prioritized the prioritized) sampler drawing from `generator` (the replay
    stream's torch generator on that device)."""
    import torch  # here, not at the top: a replay shard's process never loads PyTorch

    from qzoo.replay.device import DeviceFrameStorage
    from qzoo.replay.device_samplers import DevicePrioritizedSampler, DeviceUniformSampler

    device = torch.device(config.replay_device)
    args = (config.replay_capacity, config.num_envs, info.frame_shape, info.frame_dtype,
            info.num_actions)  # fmt: skip
    storage = DeviceFrameStorage(*args, config.frame_stack, config.n_steps, config.discount,
                                 device)  # fmt: skip
    if not config.prioritized:
        return Replay(storage, DeviceUniformSampler(storage, generator))
    return Replay(storage, DevicePrioritizedSampler(
        storage, generator, priority_exponent=config.priority_exponent,
        uniform_sample_probability=config.uniform_sample_probability,
        normalize_weights=config.normalize_weights,
    ))  # fmt: skip


def check_gpu_memory(config, info):
    """Refuses, before anything is written (run/checks.py), a replay that the GPU's
    free memory cannot hold."""
    import torch  # here, not at the top: a replay shard's process never loads PyTorch

    args = (config.replay_capacity, config.num_envs, info.frame_shape, info.frame_dtype,
            info.num_actions)  # fmt: skip
    needed, (free, _) = FrameStorage.bytes_needed(*args), torch.cuda.mem_get_info()
    if needed > free:
        raise UserError(
            f"--replay-capacity {config.replay_capacity}: the replay needs {needed:,} bytes "
            f"({needed / 2**30:.2f} GiB) of GPU memory and {free:,} bytes are free; lower "
            "--replay-capacity or use --replay-device host"
        )
