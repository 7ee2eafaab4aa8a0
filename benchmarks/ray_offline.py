"""Offline training on Ray against the local offline run, on one generated DQN Replay
Dataset, as JSON lines.

  python benchmarks/ray_offline.py --folder /tmp/ray-offline/bench --transitions 200000 \
      --checkpoint-rows 100000 --source pong --shards 1 2 4 --rounds 2 --frames 3200

Writes the dataset as benchmarks/offline.py does (--reuse keeps FOLDER's), starts a
local Ray instance with this machine's cores, and builds, side by side, the local
offline Trainer and one on Ray per --shards K (qzoo/distributed/offline.py:
the dataset split across K shard processes, batches prefetched). Each is warmed up
(100 updates), then the modes are measured in turn, round after round, each round
starting one mode later (A B C, B C A, C A B), so that a change of the shared
machine's load falls on all of them alike:

  train   DQN's updates/s over --frames frames of a training phase (one update per 16
          frames), and for Ray the fraction of it the learner waited for a batch;
  sample  batches of 32 per second drawn for --seconds without learning: what the
          storage (local) or the shards (Ray) could feed a faster learner.

Each line carries the load average at its end.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import emit_value, new_parser
from offline import write_dataset  # benchmarks/offline.py


def emit(name, value, unit, **configuration):
    emit_value(name, value, unit, load=os.getloadavg()[0], **configuration)


def build(folder, shards):
    """The local Trainer (shards 0) or one over `shards` Ray shards."""
    from qzoo.configuration import build_config
    from qzoo.run.trainer import Trainer

    options = {"env": "pong", "offline": os.path.join(folder, "q"), "progress": "false",
               "tensorboard": "false", "protocol": "machado", "threads": "1"}  # fmt: skip
    if not shards:
        return Trainer(build_config("dqn", options))
    options.update(ray="true", replay_shards=str(shards))
    return Trainer(build_config("dqn", options))


def train_rate(trainer, frames):
    waited = getattr(trainer.replay, "waited", 0.0)
    stats = trainer.train_phase(frames)
    updates = trainer.learner.pop_statistics()["num_updates"]
    wait = (getattr(trainer.replay, "waited", 0.0) - waited) / stats["duration"]
    return updates / stats["duration"], wait


def sample_rate(trainer, seconds):
    started, batches = time.perf_counter(), 0
    while time.perf_counter() - started < seconds:
        trainer.replay.sample(32)
        batches += 1
    return batches / (time.perf_counter() - started)


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--transitions", type=int, default=200_000)
    parser.add_argument("--checkpoint-rows", type=int, default=100_000)
    parser.add_argument("--source", choices=("noise", "pong"), default="pong")
    parser.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--frames", type=int, default=3200)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--reuse", action="store_true", help="keep FOLDER's dataset")
    args = parser.parse_args()
    if not args.reuse:
        import shutil

        shutil.rmtree(args.folder, ignore_errors=True)
        # benchmarks/offline.py's writer: the same dataset for the same options.
        write_dataset(args, {"transitions": args.transitions, "source": args.source})
    import ray
    import torch

    from qzoo.distributed.cluster import machine_cpus

    torch.set_num_threads(1)
    ray.init(num_cpus=machine_cpus(), include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": {"OMP_NUM_THREADS": "1"}})  # fmt: skip
    modes = [0, *args.shards]  # 0: the local run
    trainers = {k: build(args.folder, k) for k in modes}
    try:
        for trainer in trainers.values():
            trainer.train_phase(1600)  # warm-up: processes, maps, allocator
            trainer.learner.pop_statistics()
        for round_ in range(args.rounds):
            # Each round starts one mode later (A B C D, B C D A, ...), so that a load
            # that rises or falls over a round does not favour the modes measured last.
            shift = round_ % len(modes)
            for k in modes[shift:] + modes[:shift]:
                described = {"shards": k or "local", "round": round_,
                             "transitions": args.transitions, "source": args.source}  # fmt: skip
                rate, wait = train_rate(trainers[k], args.frames)
                emit("offline_updates_per_second", rate, "updates/s", **described)
                emit("learner_wait_fraction", wait, "fraction", **described)
                batches = sample_rate(trainers[k], args.seconds)
                emit("batches_per_second", batches, "batches/s", **described)
    finally:
        for k in args.shards:
            trainers[k].finish()
        ray.shutdown()


if __name__ == "__main__":
    main()
