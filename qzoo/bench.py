"""`qzoo bench`: speed and memory figures as JSON lines (never timed assertions).

qzoo bench replay [--capacity N] [--num-envs B] [--batch-size 32] [--seconds S]
                  [--n-steps 1] [--prioritized]
qzoo bench train [--agent dqn] [--env pong] [--frames N] [--warmup-transitions 5000]
                 [any train option that changes training: --num-envs, --device, ...]
"""

import dataclasses
import json
import platform
import resource
import time

import numpy as np
import torch

from qzoo.config import PRESETS, build_config, option
from qzoo.options import Choice, Int, Real, bad_value
from qzoo.threads import usable_cores


# The command line is parsed in cli.py from these dataclasses, as `qzoo train` is from
# Config; this module never imports cli.py.
@dataclasses.dataclass
class ReplayBench:
    """The options of `qzoo bench replay`."""

    capacity: int = option(100_000, "replay", "transitions", Int(1, 10**9))
    num_envs: int = option(1, "replay", "environments writing a row at once", Int(1, 1024))
    batch_size: int = option(32, "replay", "transitions per sampled batch", Int(1, 65_536))
    seconds: float = option(3.0, "replay", "seconds each timed loop runs",
                            Real(0, 3600, low_open=True))  # fmt: skip
    n_steps: int = option(1, "replay", "n-step returns assembled per sample", Int(1, 1000))
    prioritized: bool = option(False, "replay", "sum-tree sampling and priority updates")


@dataclasses.dataclass
class TrainBench:
    """The options of `qzoo bench train` besides the train options it accepts."""

    agent: str = option("dqn", "bench", "the preset to time", Choice(*PRESETS))
    frames: int = option(20_000, "bench", "frames timed, after the warm-up", Int(1, 10**9))
    warmup_transitions: int = option(5_000, "bench", "transitions stored before timing "
                                     "(learning starts there)", Int(1, 10**9))  # fmt: skip


# Train options a benchmark never uses: it writes nothing and does not evaluate.
UNUSED_BY_BENCH = ("run_dir", "tensorboard", "progress", "checkpoint_replay", "eval_frames",
                   "eval_exploration_epsilon")  # fmt: skip


def emit(name, value, unit, **configuration):
    print(json.dumps({"name": name, "value": value, "unit": unit, **configuration}), flush=True)


def _machine():
    return {"machine": platform.machine(), "cpus": usable_cores(),
            "threads": torch.get_num_threads(), "torch": torch.__version__}  # fmt: skip


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


def check_replay_bench(capacity, num_envs, n_steps, **unused):
    """The replay must hold a stack of 4 and its n-step return per environment."""
    rows = -(-capacity // num_envs)
    if n_steps + 4 > rows:
        raise bad_value("capacity", capacity, f"room for a stack of 4 and --n-steps {n_steps} "
                        f"in each of the --num-envs {num_envs} columns: at least "
                        f"{(n_steps + 4) * num_envs}")  # fmt: skip


def bench_train(agent="dqn", env="pong", frames=20_000, warmup_transitions=5_000, **options):
    """Training throughput with the standard settings, after learning has started.

    `options` are train options (text or values), as for config.build_config."""
    from qzoo import threads

    options = {"progress": False, "tensorboard": False, **options, "env": env}
    config = build_config(agent, options)
    threads.apply(config)
    return measure_train(config, frames, warmup_transitions)


def check_train_bench(config, warmup_transitions):
    """The warm-up (and four batches) must fit in the replay."""
    needed = max(warmup_transitions, config.batch_size * 4)
    if needed > config.replay_capacity:
        raise bad_value("warmup_transitions", warmup_transitions,
                        f"at most --replay-capacity {config.replay_capacity} (the warm-up, "
                        f"at least 4 x --batch-size, must fit in the replay)")  # fmt: skip


def measure_train(config, frames, warmup_transitions):
    """`frames` frames of training under `config`, timed once the replay holds
    `warmup_transitions` transitions; emits and returns the rates."""
    from qzoo.loop import Trainer

    check_train_bench(config, warmup_transitions)
    agent = config.agent
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
