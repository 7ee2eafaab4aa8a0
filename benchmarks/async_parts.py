"""Where the learner's thread spends a phase of --acting async on Pong (dqn_atari.py's
settings as benchmarks/peers.py runs qzoo, bfloat16, one PyTorch thread per Python
thread): one JSON line with agent steps/s and, per update, the learner's wall and CPU
milliseconds inside `Learner.learn`, publishing the weights to the actor, waiting at
the ratio gate and waiting for the prefetched batch.

    python benchmarks/async_parts.py [--steps 1500] [--warmup 2000] [--no-prefetch]
        [--precision bfloat16|float32] [--pin-threads] [--staged-weights]

Each part is timed by wrapping the method doing it. --staged-weights has the learner copy
its weights for the actor (as a compiled update does) instead of the actor pulling them.
"""

import os
import sys
import time

from qzoo.acting import asynchronous, prefetch
from qzoo.configuration import build_config
from qzoo.run import threads as qzoo_threads
from qzoo.run.trainer import Trainer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import emit, new_parser
from peers import qzoo_options  # benchmarks/ is not a package
from timing import timed


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--warmup", type=int, default=2000)
    parser.add_argument("--no-prefetch", action="store_true")
    parser.add_argument("--precision", choices=("float32", "bfloat16"), default="bfloat16")
    parser.add_argument("--pin-threads", action="store_true")
    parser.add_argument("--staged-weights", action="store_true")
    args = parser.parse_args()
    options = qzoo_options("pong", args.warmup, 1)
    options.update(precision=args.precision, acting="async",
                   prefetch_targets=not args.no_prefetch, pin_threads=args.pin_threads)  # fmt: skip
    config = build_config("dqn", options)
    qzoo_threads.apply(config)
    trainer = Trainer(config)
    if args.staged_weights:
        trainer.driver.actor_policy._source = None
    trainer.train_phase(config.min_replay_size * 4 + config.learn_period)  # warm-up
    parts = {"learn": [], "learn_cpu": [], "publish": [], "prefetch_wait": []}
    wall_clock = time.perf_counter
    timed(trainer.learner, "learn", parts["learn"].append, wall_clock)
    # Thread CPU time around the wall timer (its cost is under a microsecond).
    timed(trainer.learner, "learn", parts["learn_cpu"].append)
    timed(asynchronous.AsyncDriver, "publish", parts["publish"].append, wall_clock)
    timed(prefetch.Prefetcher, "get", parts["prefetch_wait"].append, wall_clock)
    started, cpu = time.perf_counter(), time.process_time()
    stats = trainer.train_phase(args.steps * 4)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    updates = len(parts["learn"])
    per_update = {f"{k}_ms": 1e3 * sum(v) / updates for k, v in parts.items()}
    per_update["gate_wait_ms"] = 1e3 * stats["learner_wait_fraction"] * wall / updates
    per_update["other_ms"] = 1e3 * wall / updates - sum(
        per_update[k] for k in ("learn_ms", "publish_ms", "prefetch_wait_ms", "gate_wait_ms")
    )
    emit(
        {
            "name": "async_parts",
            "precision": args.precision,
            "prefetch_targets": not args.no_prefetch,
            "pin_threads": args.pin_threads,
            "staged_weights": args.staged_weights,
            "agent_steps_per_second": args.steps / wall,
            "cores_busy": cpu / wall,
            "updates": updates,
            **{k: round(v, 3) for k, v in per_update.items()},
            "cpus": os.cpu_count(),
        }
    )


if __name__ == "__main__":
    main()
