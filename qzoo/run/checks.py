"""What a run is refused for before anything is written or allocated: a replay log of
frames the DQN Replay Dataset cannot hold, a dataset that is not there, and a peak
memory the machine cannot hold."""

import os

import numpy as np
import torch

from qzoo.errors import UserError
from qzoo.replay import replay_bytes_needed


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
        from qzoo.offline.dataset import replay_logs

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

        dataset_suffixes(config.offline, config.offline_checkpoints, config.offline_reload)
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
