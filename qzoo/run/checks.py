"""What a run is refused for before anything is written or allocated: a replay log of
frames the DQN Replay Dataset cannot hold, a dataset that is not there, a peak memory
the machine cannot hold; and, before it trains, checkpoints its disk cannot hold."""

import math
import os
import shutil

import numpy as np
import torch

from qzoo.errors import UserError
from qzoo.files import size_text
from qzoo.replay import FrameStorage, replay_bytes_needed


def resolve_device(name):
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def _available_memory():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_run(config, info):
    """Refuses, before anything is written, what needs the environment to check:
    replay logging of observations that are not uint8 frames of one environment, and a
    run whose peak memory the machine cannot hold."""
    if config.log_replay and (config.num_envs != 1 or np.dtype(info.frame_dtype) != np.uint8):
        raise UserError(
            f"--log-replay {config.log_replay}: the DQN Replay Dataset holds uint8 frames of "
            f"one environment; {info.name} gives {np.dtype(info.frame_dtype)} observations "
            f"with --num-envs {config.num_envs}: use --num-envs 1 and an Atari or MinAtar game"
        )
    if config.offline:
        from qzoo.offline import dopamine
        from qzoo.offline.dataset_game import replay_logs

        layout = os.path.join(config.offline, "dataset.json")
        if not os.path.isdir(config.offline) or (
            not os.path.exists(layout) and not dopamine.suffixes(replay_logs(config.offline))
        ):
            from qzoo.offline.rlu import conversion_hint

            raise UserError(
                f"--offline {config.offline}: no DQN Replay Dataset there (neither "
                "*_ckpt.N.gz files nor `qzoo dataset convert`'s dataset.json)"
                + conversion_hint(config.offline)
            )
        from qzoo.offline.dataset import dataset_suffixes
        from qzoo.offline.dataset_game import check_game

        dataset_suffixes(config.offline, config.offline_checkpoints, config.offline_reload)
        check_game(config.offline, info)
    return check_peak_memory(config, info)


def check_peak_memory(config, info):
    """Refuses, before anything is allocated, a run whose peak memory the machine
    cannot hold: the replay (allocated up front; none offline), plus what a checkpoint
    save adds while streaming it (at most 10% of it or 256 MiB), plus networks and the
    process itself (a generous 1 GiB)."""
    replay = 0
    if not config.offline:
        replay = replay_bytes_needed(config, info)
    saving = max(replay // 10, 256 * 2**20) if config.checkpoint_replay else 0
    peak = replay + saving + 2**30
    available = _available_memory()
    if available is not None and peak > available:
        gib = 2**30
        raise UserError(
            f"--replay-capacity {config.replay_capacity}: the run needs about "
            f"{peak / gib:.1f} GiB at its peak (replay {replay / gib:.1f} GiB, checkpoint "
            f"save {saving / gib:.1f} GiB, networks and process 1.0 GiB) but "
            f"{available / gib:.1f} GiB is available; lower --replay-capacity"
        )
    return peak


def _array_bytes(tree, skip=("replay", "replay_log")):
    """Bytes of the arrays and tensors in `tree`, leaving out the subtrees `skip` names."""
    if isinstance(tree, dict):
        return sum(_array_bytes(v, skip) for k, v in tree.items() if k not in skip)
    if isinstance(tree, (list, tuple)):
        return sum(_array_bytes(v, skip) for v in tree)
    if isinstance(tree, torch.Tensor):
        return tree.numel() * tree.element_size()
    return tree.nbytes if isinstance(tree, np.ndarray) else 0


HEADER_BYTES = 64 * 2**10  # a checkpoint's JSON header: the tree, names and checksums


def checkpoint_bytes(config, info, state):
    """(replay, replay log, the rest): an estimate of a checkpoint's size once the
    replay (and --log-replay's buffer) are full, from a trainer's `state` (its learner:
    networks and optimizer, whose moments its first step makes; its random streams)
    and the capacities. The rest counts the network that --snapshot-interval keeps beside it."""
    replay = log = 0
    if config.checkpoint_replay and not config.offline:
        args = (config.replay_capacity, config.num_envs, info.frame_shape, info.frame_dtype,
                info.num_actions)  # fmt: skip
        on_gpu = config.replay_device == "cuda"  # replay_bytes_needed says 0 host bytes
        replay = FrameStorage.bytes_needed(*args) if on_gpu else replay_bytes_needed(config, info)
    if config.checkpoint_replay and config.log_replay:  # the writer's rows (writer.py)
        log = config.log_replay_capacity * (math.prod(info.frame_shape) + 4 + 4 + 1)
    learner = state.get("learner") or {}
    online = _array_bytes(learner.get("online"))
    rest = _array_bytes(state) + HEADER_BYTES
    if not (learner.get("optimizer") or {}).get("state"):  # made at the first step: Adam's 2
        rest += 2 * online
    if config.snapshot_interval:
        rest += online + HEADER_BYTES
    return replay, log, rest


def check_checkpoint_space(config, info, state, run_dir):
    """Refuses, before the run trains, a run whose checkpoint its disk cannot hold (a
    save needs the whole new file beside the previous one, renamed over it at the end)."""
    replay, log, rest = checkpoint_bytes(config, info, state)
    free = shutil.disk_usage(run_dir).free
    if replay + log + rest > free:
        parts = [f"replay at --replay-capacity {config.replay_capacity:,} {size_text(replay)}"]
        if log:
            parts.append(f"--log-replay buffer {size_text(log)}")
        parts.append(f"networks and the rest {size_text(rest)}")
        raise UserError(
            f"cannot save checkpoints in {run_dir}: one needs about "
            f"{size_text(replay + log + rest)} ({', '.join(parts)}) and its disk has "
            f"{size_text(free)} free; free some space, lower --replay-capacity, pass "
            "--no-checkpoint-replay, or use another --run-dir"
        )
