"""Environment frames per second, synchronous against ale-py's asynchronous mode
(--env-batch-size B), environments alone and in a short DQN training run.

OMP_NUM_THREADS=1 python benchmarks/env_batches.py [--env pong] [--envs 8,16,32]
    [--fractions 2,4] [--frames 16000] [--rounds 3] [--train] [--train-frames 4000]
    [--replay-ratio 0]

For each N, the configurations B = 0 (all N together, synchronous) and B = N / f for
each f in --fractions run in interleaved rounds (sync, N/2, N/4, sync, N/2, ...).
Environments alone: random actions, the clock started after the environments are
built and reset, until --frames real environment frames (steps of the environments
that stepped x 4). Training (--train): DQN with DQN Zoo's learn period (one update per
16 frames; --replay-ratio R instead: rlpyt's, R 0.5 is an update every 256 frames, so
acting is the cost) from a replay filled to --min-replay transitions, one timed training
phase of --train-frames frames. One JSON line per measurement (frames/s, process CPU
seconds per wall second), then one summary line per configuration (median, and its
ratio to synchronous).
"""

import os
import statistics
import time

import numpy as np
from harness import emit, new_parser

from qzoo import envs
from qzoo.configuration import build_config
from qzoo.envs.atari_batches import make_batches


def _config(env, num_envs, batch, **extra):
    options = {"env": env, "num_envs": str(num_envs), "env_batch_size": str(batch),
               "progress": "false", "tensorboard": "false", **extra}  # fmt: skip
    return build_config("dqn", options)


def environments_alone(env, num_envs, batch, frames, rng):
    """Real frames/s of random play (module docstring)."""
    config = _config(env, num_envs, batch)
    vector = (make_batches if batch else envs.make)(config, num_envs, 1)
    step = vector.reset(seed=1)
    width = batch or num_envs
    actions = config.action_repeats
    done, clock, cpu = 0, time.perf_counter(), time.process_time()
    while done < frames:
        step = vector.step(rng.integers(vector.info.num_actions, size=width))
        done += (step[0] if batch else step).real_steps * actions
    wall, cpu = time.perf_counter() - clock, time.process_time() - cpu
    vector.close()
    return {"value": done / wall, "cpu_per_wall": cpu / wall, "seconds": wall}


def training(env, num_envs, batch, frames, min_replay, ratio):
    """Real frames/s of a DQN training phase (module docstring)."""
    from qzoo.run.trainer import Trainer

    capacity = max(20_000, 4 * min_replay)
    extra = {"replay_ratio": str(ratio)} if ratio else {}
    config = _config(env, num_envs, batch, replay_capacity=str(capacity),
                     min_replay_capacity_fraction=str(min_replay / capacity), **extra)  # fmt: skip
    trainer = Trainer(config)
    trainer.train_phase((min_replay // num_envs + 2) * num_envs * config.action_repeats)
    trainer.learner.pop_statistics()
    actor, started = trainer.driver.actor, []
    start = actor.start
    actor.start = lambda: (start(), started.append((time.perf_counter(), time.process_time())))
    before = trainer.frame_t
    trainer.train_phase(frames)
    wall = time.perf_counter() - started[0][0]
    cpu = time.process_time() - started[0][1]
    updates = trainer.learner.pop_statistics()["num_updates"]
    return {"value": (trainer.frame_t - before) / wall, "updates_per_second": updates / wall,
            "cpu_per_wall": cpu / wall, "seconds": wall}  # fmt: skip


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--env", default="pong")
    parser.add_argument("--envs", default="8,16,32")
    parser.add_argument("--fractions", default="2,4", help="B = N / f for each f")
    parser.add_argument("--frames", type=int, default=16_000, help="environments alone")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--train", action="store_true", help="a DQN training phase instead")
    parser.add_argument("--train-frames", type=int, default=4000)
    parser.add_argument("--min-replay", type=int, default=500)
    parser.add_argument("--replay-ratio", type=float, default=0.0, help="0: learn period 16")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    name = "train_frames_per_second" if args.train else "env_frames_per_second"
    for num_envs in map(int, args.envs.split(",")):
        batches = [0] + [num_envs // int(f) for f in args.fractions.split(",")]
        values = {b: [] for b in batches}
        for round_ in range(args.rounds):
            for batch in batches:  # interleaved: sync, N/2, N/4, sync, ...
                if args.train:
                    result = training(args.env, num_envs, batch, args.train_frames,
                                      args.min_replay, args.replay_ratio)  # fmt: skip
                else:
                    result = environments_alone(args.env, num_envs, batch, args.frames, rng)
                values[batch].append(result["value"])
                emit(
                    {
                        "name": name,
                        "env": args.env,
                        "num_envs": num_envs,
                        "env_batch_size": batch,
                        "round": round_,
                        **result,
                        "replay_ratio": args.replay_ratio if args.train else None,
                        "unit": "frames/s",
                        "load": os.getloadavg()[0],
                    }
                )
        sync = statistics.median(values[0])
        for batch in batches:
            median = statistics.median(values[batch])
            emit(
                {
                    "name": name + "_median",
                    "env": args.env,
                    "num_envs": num_envs,
                    "env_batch_size": batch,
                    "value": median,
                    "ratio_to_sync": median / sync,
                    "runs": values[batch],
                    "unit": "frames/s",
                }
            )


if __name__ == "__main__":
    main()
