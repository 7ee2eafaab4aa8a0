"""`qzoo bench`: speed and memory figures as JSON lines (never timed assertions).

qzoo bench replay [--env pong] [--replay-compression none|lz4|zstd] [--capacity N]
                  [--num-envs B] [--batch-size 32] [--seconds S] [--n-steps 1]
                  [--prioritized]
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

from qzoo.configuration import PRESETS, Config, build_config, option
from qzoo.configuration.values import Choice, Int, Real, Text
from qzoo.errors import bad_value
from qzoo.run.threads import usable_cores

_COMPRESSION = {f.name: f for f in dataclasses.fields(Config)}["replay_compression"].metadata


# The command line is parsed in cli/bench.py from these dataclasses, as `qzoo train` is
# from Config; this module never imports the cli package.
@dataclasses.dataclass
class ReplayBench:
    """The options of `qzoo bench replay`."""

    env: str = option("pong", "replay", "the game whose frames of play (random actions) fill "
                      "the replay; noise: random bytes, the worst case for compression",
                      Text(describe="an environment name or noise"))  # fmt: skip
    replay_compression: str = option("none", "replay", _COMPRESSION["help"],
                                     _COMPRESSION["domain"])  # fmt: skip
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
                   "eval_exploration_epsilon", "log_replay", "log_replay_capacity")  # fmt: skip


def emit(name, value, unit, **configuration):
    print(json.dumps({"name": name, "value": value, "unit": unit, **configuration}), flush=True)


def _machine():
    return {"machine": platform.machine(), "cpus": usable_cores(),
            "threads": torch.get_num_threads(), "torch": torch.__version__}  # fmt: skip


def _peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def bench_replay(env="pong", replay_compression="none", capacity=100_000, num_envs=1,
                 batch_size=32, seconds=3.0, n_steps=1, prioritized=False):  # fmt: skip
    """Bytes per transition of a replay filled with `env`'s frames of play, adds per
    second and batches sampled per second; with `prioritized`, also priority updates
    of a batch per second."""
    config = {"env": env, "replay_compression": replay_compression, "capacity": capacity,
              "num_envs": num_envs, "batch_size": batch_size, "n_steps": n_steps,
              "prioritized": prioritized, **_machine()}  # fmt: skip
    rss_before = _peak_rss_bytes()
    rows = play_rows(env, capacity, num_envs)
    replay = bench_storage(next(rows), capacity, num_envs, n_steps, prioritized,
                           replay_compression)  # fmt: skip
    add_seconds = fill(replay, rows)
    emit("replay_bytes_per_transition", replay_bytes(replay) / replay.size, "bytes", **config)
    emit("replay_adds_per_second", replay.size / add_seconds, "transitions/s", **config)
    emit("replay_batches_per_second", batches_per_second(replay, batch_size, seconds),
         "batches/s", **config)  # fmt: skip
    if prioritized:
        rng = np.random.RandomState(1)
        updates, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            batch = replay.sample(batch_size)
            replay.update_priorities(batch.indices, rng.random_sample(batch_size) * 2)
            updates += 1
        rate = updates / (time.perf_counter() - start)
        emit("replay_sample_and_update_per_second", rate, "batches/s", **config)
    emit("replay_peak_rss_growth", _peak_rss_bytes() - rss_before, "bytes", **config)


def play_rows(env, capacity, num_envs, seed=0):
    """Yields the frame description (shape, dtype, actions), then replay `Row`s until
    the replay is full: `env`'s frames of play with uniformly random actions, stored as
    the Actor stores them (clipped rewards, life loss zeroes the discount); or, for
    `env` "noise", random bytes in episodes of 1,000 rows (incompressible)."""
    from qzoo import envs
    from qzoo.replay import Row

    rows = -(-capacity // num_envs)
    if env == "noise":
        yield (84, 84), np.uint8, 18
        rng = np.random.RandomState(1)
        pool = rng.randint(0, 256, size=(64, num_envs, 84, 84), dtype=np.uint8)
        zeros, no = np.zeros(num_envs, np.int64), np.zeros(num_envs, bool)
        for t in range(rows):
            last = no | (t % 1000 == 999)
            yield Row(pool[t % 64], zeros, zeros.astype(np.float32), no | (t % 1000 == 0),
                      last, last)  # fmt: skip
        return
    config = build_config("dqn", {"env": env, "num_envs": num_envs, "seed": seed})
    vector = envs.make(config, num_envs, seed)
    try:
        info = vector.info
        yield info.frame_shape, info.frame_dtype, info.num_actions
        rng = np.random.default_rng(seed)
        step = vector.reset(seed=seed + 1)
        for _ in range(rows):
            actions = rng.integers(info.num_actions, size=num_envs)
            reward = np.clip(step.reward, -config.max_abs_reward, config.max_abs_reward)
            yield Row(step.frame, actions, reward, step.first, step.last,
                      step.terminated | step.life_loss)  # fmt: skip
            step = vector.step(actions)
    finally:
        vector.close()


def bench_storage(frames, capacity, num_envs, n_steps, prioritized, compression, seed=0):
    """An empty replay for frames described as `frames` (shape, dtype, num_actions),
    with stacks of 4 and the standard prioritized settings."""
    from qzoo.replay import FrameStorage, PrioritizedSampler, Replay, UniformSampler

    frame_shape, frame_dtype, num_actions = frames
    args = (capacity, num_envs, frame_shape, frame_dtype, num_actions, 4, n_steps, 0.99)
    if compression == "none":
        storage = FrameStorage(*args)
    else:
        from qzoo.replay.compressed import CompressedFrameStorage

        storage = CompressedFrameStorage(*args, compression)
    rng = np.random.default_rng(seed)
    if prioritized:
        return Replay(storage, PrioritizedSampler(storage, rng, priority_exponent=0.6,
                                                  uniform_sample_probability=1e-3))  # fmt: skip
    return Replay(storage, UniformSampler(storage, rng))


def fill(replay, rows):
    """Adds every row to `replay` (several replays: a list); returns the seconds the
    adds took (per replay), not counting the time to make the rows."""
    replays = replay if isinstance(replay, list) else [replay]
    seconds = [0.0] * len(replays)
    for row in rows:
        for i, r in enumerate(replays):
            start = time.perf_counter()
            r.add(row)
            seconds[i] += time.perf_counter() - start
    return seconds if isinstance(replay, list) else seconds[0]


def replay_bytes(replay):
    """Bytes the replay holds: its storage, and the sum tree of prioritized sampling."""
    tree = getattr(replay.sampler, "tree", None)
    return replay.storage.nbytes + (0 if tree is None else tree.nodes.nbytes)


def batches_per_second(replay, batch_size, seconds):
    """Batches sampled per second over `seconds` (at least one batch: a process paused
    for longer than `seconds` still measures a rate), after 3 untimed ones (the first
    batch pays one-time costs: numpy's lazy imports, the decode pool's allocation)."""
    for _ in range(3):
        replay.sample(batch_size)
    batches, start = 0, time.perf_counter()
    while not batches or time.perf_counter() - start < seconds:
        replay.sample(batch_size)
        batches += 1
    return batches / (time.perf_counter() - start)


def check_replay_bench(capacity, num_envs, n_steps, replay_compression="none", **unused):
    """The replay must hold a stack of 4 and its n-step return per environment; the
    codec's package must be installed."""
    if replay_compression != "none":
        from qzoo.configuration.rules.compression import require

        require(replay_compression)
    rows = -(-capacity // num_envs)
    if n_steps + 4 > rows:
        raise bad_value("capacity", capacity, f"room for a stack of 4 and --n-steps {n_steps} "
                        f"in each of the --num-envs {num_envs} columns: at least "
                        f"{(n_steps + 4) * num_envs}")  # fmt: skip


def bench_train(agent="dqn", env="pong", frames=20_000, warmup_transitions=5_000, **options):
    """Training throughput with the standard settings, after learning has started.

    `options` are train options (text or values), as for config.build_config."""
    from qzoo.run import threads

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
    from qzoo.run.trainer import Trainer

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
                 "batch_size": config.batch_size, "precision": config.precision,
                 "acting": config.acting, "replay_compression": config.replay_compression,
                 **_machine()}  # fmt: skip
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
