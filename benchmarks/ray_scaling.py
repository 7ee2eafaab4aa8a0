"""Frames per second of a Ray run against the number of actors, as JSON lines.

  python benchmarks/ray_scaling.py --agent dqn --env CartPole-v1 --actors 1 2 4 8 \
      --mode collect --seconds 20

For each actor count N it starts a local Ray instance with max(N, cores) logical CPUs
(so 8 actors may share 2 cores: the figures then show what oversubscription costs),
builds the run's Ray driver (qzoo/distributed/driver.py) with N actors and min(N, --shards)
replay shards, lets every actor send a few chunks (warm-up: processes start, torch
imports), then measures for --seconds:

  --mode collect  acting and replay writes only: the replay's minimum fill is set above
                  what the run collects, so the learner never updates (what N actors
                  and the shards can produce);
  --mode train    the whole run: the learner updates at the agent's replay ratio and
                  throttles the actors when it falls behind.

Each line: actors, frames/s, agent steps/s, updates/s, the realised replay ratio, the
learner's waiting fraction, the bytes actors send to the shards per second (chunks:
frame, action, reward, flags, priority per transition) and the bytes of each weight
publication. Scaling efficiency = frames/s with N actors / (N x frames/s with one).
"""

import os
import platform
import time

import numpy as np
import ray
import torch
from harness import emit, new_parser

from qzoo import envs
from qzoo.configuration import build_config
from qzoo.distributed.cluster import machine_cpus
from qzoo.distributed.workers import CHUNK_STEPS, to_numpy
from qzoo.run.trainer import Trainer


def chunk_bytes_per_transition(config, info):
    """What an actor sends per transition: the frame, the action (int64), the reward
    (float32), three flags, and its initial priority (float32) when prioritized; R2D1's
    actors (distributed/recurrent.py) send two Q-values (float32) instead of a priority,
    and an (h, c) float32 state every --store-state-interval rows."""
    frame = int(np.prod(info.frame_shape)) * np.dtype(info.frame_dtype).itemsize
    if config.recurrent:
        return frame + 8 + 4 + 3 + 8 + 2 * config.lstm_size * 4 / config.store_state_interval
    return frame + 8 + 4 + 3 + (4 if config.prioritized else 0)


def measure(args, actors):
    options = {"env": args.env, "ray": "true", "actors": str(actors),
               "replay_shards": str(min(actors, args.shards)),
               "envs_per_actor": str(args.envs_per_actor), "progress": "false",
               "iterations": "1000", "threads": "1"}  # fmt: skip
    options["replay_capacity"] = str(args.capacity)
    if args.mode == "collect":
        options["min_replay_capacity_fraction"] = "1"
    config = build_config(args.agent, options)
    info = envs.describe(config)
    ray.init(num_cpus=max(actors, machine_cpus()), include_dashboard=False,
             log_to_driver=False, runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})  # fmt: skip
    try:
        run = Trainer(config, info)
        trainer = run.driver  # the Ray loop itself
        # Warm-up: every process started, and in train mode the replay's minimum fill.
        trainer.collect_until(3 * actors * trainer.chunk_frames)
        while args.mode == "train" and trainer.learn_start_frame is None:
            trainer.collect_until(trainer.frame_t + trainer.chunk_frames)
        started, frames, updates, waited = (time.perf_counter(), trainer.frame_t,
                                            trainer.updates, trainer.waited)  # fmt: skip
        while time.perf_counter() - started < args.seconds:
            trainer.collect_until(trainer.frame_t + actors * trainer.chunk_frames)
        elapsed = time.perf_counter() - started
        frames, updates = trainer.frame_t - frames, trainer.updates - updates
        transitions = frames / config.action_repeats
        weights = sum(a.nbytes for a in to_numpy(run.learner.weights()).values())
        start = trainer.learn_start_frame
        ratio = (trainer.updates * config.batch_size * config.action_repeats
                 / (trainer.frame_t - start)) if start is not None else None  # fmt: skip
        run.finish()
    finally:
        ray.shutdown()
    return {
        "name": "ray_scaling", "mode": args.mode, "agent": args.agent, "env": args.env,
        "actors": actors, "envs_per_actor": args.envs_per_actor,
        "replay_shards": min(actors, args.shards), "seconds": round(elapsed, 2),
        "frames_per_second": frames / elapsed, "steps_per_second": transitions / elapsed,
        "updates_per_second": updates / elapsed, "replay_ratio": ratio,
        "learner_wait_fraction": (trainer.waited - waited) / elapsed,
        "actor_to_shard_bytes_per_second": transitions / elapsed
        * chunk_bytes_per_transition(config, info),
        "weights_bytes": weights, "chunk_steps": CHUNK_STEPS,
        "cores": machine_cpus(), "machine": platform.node(), "torch": torch.__version__,
        "ray": ray.__version__,
    }  # fmt: skip


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--agent", default="dqn")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--envs-per-actor", type=int, default=1)
    parser.add_argument("--shards", type=int, default=2, help="at most this many shards")
    parser.add_argument("--mode", choices=("collect", "train"), default="collect")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--capacity", type=int, default=200_000,
                        help="replay capacity (collect mode: never filled; train mode: "
                        "learning starts at the agent's fraction of it)")  # fmt: skip
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    for actors in args.actors:
        emit(measure(args, actors))


if __name__ == "__main__":
    main()
