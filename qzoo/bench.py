"""`qzoo bench`: speed and memory figures as JSON lines (never timed assertions).

qzoo bench replay [--capacity N] [--num-envs B] [--batch-size 32] [--seconds S]
qzoo bench train [--agent dqn] [--env pong] [--frames N] [--num-envs B] [--device D]
                 [--warmup-transitions 5000] [any train option]
"""

import json
import platform
import resource
import time

import numpy as np
import torch

from qzoo.errors import UserError


def emit(name, value, unit, **configuration):
    print(json.dumps({"name": name, "value": value, "unit": unit, **configuration}), flush=True)


def _machine():
    return {"machine": platform.machine(), "cpus": torch.get_num_threads(),
            "torch": torch.__version__}  # fmt: skip


def _peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def bench_replay(capacity=100_000, num_envs=1, batch_size=32, seconds=3.0, n_steps=1,
                 prioritized=False):  # fmt: skip
    """Adds per second, batches sampled per second and bytes per Atari transition;
    with `prioritized`, also priority updates of a batch per second."""
    from qzoo.replay import FrameStorage, PrioritizedSampler, Replay, Row, UniformSampler

    config = {"capacity": capacity, "num_envs": num_envs, "batch_size": batch_size,
              "n_steps": n_steps, "prioritized": prioritized, **_machine()}  # fmt: skip
    rss_before = _peak_rss_bytes()
    storage = FrameStorage(capacity, num_envs, (84, 84), np.uint8, 18, 4, n_steps, 0.99)
    sample_rng = np.random.default_rng(0)
    if prioritized:
        sampler = PrioritizedSampler(
            storage, sample_rng, priority_exponent=0.6, uniform_sample_probability=1e-3
        )
    else:
        sampler = UniformSampler(storage, sample_rng)
    replay = Replay(storage, sampler)
    rng = np.random.RandomState(1)
    pool = rng.randint(0, 256, size=(64, num_envs, 84, 84), dtype=np.uint8)
    actions = np.zeros(num_envs, np.int64)
    rewards = np.zeros(num_envs, np.float32)
    rows = storage.num_rows
    # Episodes of ~1,000 steps, so that boundaries are exercised.
    first = (np.arange(rows) % 1000) == 0
    last = (np.arange(rows) % 1000) == 999
    no = np.zeros(num_envs, bool)
    start = time.perf_counter()
    for t in range(rows):
        replay.add(Row(pool[t % 64], actions, rewards, no | first[t], no | last[t], no | last[t]))
    add_seconds = time.perf_counter() - start
    stored = sum(
        a.nbytes for a in (storage.frames, storage.actions, storage.rewards, storage.flags)
    )
    if prioritized:
        stored += sampler.tree.nodes.nbytes
    emit("replay_bytes_per_transition", stored / (rows * num_envs), "bytes", **config)
    emit("replay_adds_per_second", rows * num_envs / add_seconds, "transitions/s", **config)
    batches, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        replay.sample(batch_size)
        batches += 1
    emit(
        "replay_batches_per_second", batches / (time.perf_counter() - start), "batches/s", **config
    )
    if prioritized:
        updates, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            batch = replay.sample(batch_size)
            replay.update_priorities(batch.indices, rng.random_sample(batch_size) * 2)
            updates += 1
        rate = updates / (time.perf_counter() - start)
        emit("replay_sample_and_update_per_second", rate, "batches/s", **config)
    emit("replay_peak_rss_growth", _peak_rss_bytes() - rss_before, "bytes", **config)


def bench_train(agent="dqn", env="pong", frames=20_000, warmup_transitions=5_000, **options):
    """Training throughput with the standard settings, after learning has started."""
    from qzoo.cli import build_config
    from qzoo.loop import Trainer

    options = {"env": env, **{k: str(v) for k, v in options.items()}}
    config = build_config(agent, options)
    fraction = max(warmup_transitions, config.batch_size * 4) / config.replay_capacity
    config.min_replay_capacity_fraction = fraction
    trainer = Trainer(config)
    device = trainer.learner.device
    warm_frames = trainer.config.min_replay_size * config.action_repeats + config.learn_period
    trainer.train_phase(warm_frames)
    trainer.learner.pop_statistics()
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    stats = trainer.train_phase(frames)
    updates = trainer.learner.pop_statistics()["num_updates"]
    described = {"agent": agent, "env": config.env, "num_envs": config.num_envs,
                 "device": str(device), "frames": frames, "learn_period": config.learn_period,
                 "batch_size": config.batch_size, **_machine()}  # fmt: skip
    if device.type == "cuda":
        described["gpu"] = torch.cuda.get_device_name(device)
    results = {"steps_per_second": stats["steps_per_second"], "frames_per_second": stats["frame_rate"],
               "updates_per_second": updates / stats["duration"]}  # fmt: skip
    emit("train_agent_steps_per_second", stats["steps_per_second"], "steps/s", **described)
    emit("train_frames_per_second", stats["frame_rate"], "frames/s", **described)
    emit("train_updates_per_second", updates / stats["duration"], "updates/s", **described)
    emit("train_peak_rss", _peak_rss_bytes(), "bytes", **described)
    if device.type == "cuda":
        emit("train_peak_gpu_memory", torch.cuda.max_memory_allocated(device), "bytes", **described)
    return results


def _boolean(text):
    if text.lower() not in ("true", "false", "1", "0"):
        raise ValueError(text)
    return text.lower() in ("true", "1")


def main(argv):
    from qzoo.cli import parse_options

    if not argv or argv[0] not in ("replay", "train"):
        raise UserError(f"bench needs 'replay' or 'train', got {' '.join(argv[:1]) or 'nothing'}")
    options = parse_options(argv[1:])
    if argv[0] == "replay":
        kinds = {"capacity": int, "num_envs": int, "batch_size": int, "seconds": float,
                 "n_steps": int, "prioritized": _boolean}  # fmt: skip
        parsed = {}
        for key, value in options.items():
            if key not in kinds:
                raise UserError(
                    f"bench replay: unknown option --{key.replace('_', '-')}; "
                    f"expected {', '.join('--' + k.replace('_', '-') for k in kinds)}"
                )
            try:
                parsed[key] = kinds[key](value)
            except ValueError:
                raise UserError(
                    f"bench replay: --{key.replace('_', '-')}: bad value {value!r}"
                ) from None
            if parsed[key] is not True and parsed[key] <= 0 and kinds[key] is not _boolean:
                raise UserError(
                    f"bench replay: --{key.replace('_', '-')}: bad value {value!r}; "
                    "expected a positive number"
                )
        bench_replay(**parsed)
    else:
        agent = options.pop("agent", "dqn")
        for key in ("frames", "warmup_transitions"):
            if key in options:
                try:
                    options[key] = int(options[key])
                except ValueError:
                    raise UserError(
                        f"bench train: --{key.replace('_', '-')}: bad value "
                        f"{options[key]!r}; expected an integer"
                    ) from None
        options.setdefault("progress", "false")
        options.setdefault("tensorboard", "false")
        bench_train(agent, **options)
