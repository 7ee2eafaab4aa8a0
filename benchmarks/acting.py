"""Agent steps per second of DQN under each --acting mode and number of environments,
with the realised replay ratio (rlpyt's samplers).

python benchmarks/acting.py [--env pong] [--modes serial,parallel,alternating,async,process]
    [--envs 1,8,16,32] [--steps 400] [--workers 2] [--replay-ratio 8] [--device auto]
    [--threads 0]
python benchmarks/acting.py --env-only [--envs 1,8,16,32] [--steps 400] [--workers 2]

For each (mode, N): fills the replay to its minimum (--min-replay 1000 transitions),
then times, from when its environments are built and reset, one training phase of
about --steps agent steps (all environments together, each stepping steps / N times)
with learning on.
Prints one JSON line per pair: agent steps/s (all environments together), updates/s,
and the replay ratio realised in the timed phase (transitions sampled / transitions
collected; the target is --replay-ratio). Modes that cannot run a size (alternating
needs an even number of workers, each with an environment) are skipped. Timings on a
shared machine are noisy: compare modes within one run.
"""

import time

import numpy as np
import torch
from harness import emit, new_parser

from qzoo.configuration import build_config
from qzoo.run import threads as qzoo_threads
from qzoo.run.trainer import Trainer


def measure(env, mode, num_envs, steps, workers, ratio, device, min_replay, threads):
    # "process": --acting async --actor-process (the actor in a process of its own, which
    # steps its environments itself: one worker)
    process = mode == "process"
    options = {"env": env, "num_envs": str(num_envs), "acting": "async" if process else mode,
               "device": device,
               "replay_ratio": str(ratio), "replay_capacity": str(max(20_000, 4 * min_replay)),
               "min_replay_capacity_fraction": str(min_replay / max(20_000, 4 * min_replay)),
               "progress": "false", "tensorboard": "false", "threads": str(threads)}  # fmt: skip
    if process:
        options["actor_process"] = "true"
    elif mode != "serial":
        options["actor_workers"] = str(min(workers, num_envs))
    config = build_config("dqn", options)
    qzoo_threads.apply(config)  # as `qzoo train` does (0: auto)
    trainer = Trainer(config)
    frames_per_step = config.action_repeats * num_envs
    warm = (min_replay // num_envs + 2) * frames_per_step
    trainer.train_phase(warm)
    trainer.learner.pop_statistics()
    sampled, collected = trainer.updates.transitions_sampled, trainer.updates.transitions_collected
    # Steady state: the clock starts once the phase's environments are built and reset
    # (ale-py builds and resets 32 games in seconds to tens of seconds on a loaded machine).
    actor, started = trainer.driver.actor, []
    start = actor.start
    actor.start = lambda: (start(), started.append(time.perf_counter()))
    before = time.perf_counter()
    stats = trainer.train_phase(steps * frames_per_step)
    # (The process actor starts its environments in its own process, unseen here: its
    # clock starts with the phase.)
    seconds = time.perf_counter() - (started[0] if started else before)
    updates = trainer.learner.pop_statistics()["num_updates"]
    new_sampled = trainer.updates.transitions_sampled - sampled
    new_collected = trainer.updates.transitions_collected - collected
    return {"name": "acting_steps_per_second", "env": env, "acting": mode, "num_envs": num_envs,
            "actor_workers": int(options.get("actor_workers", 1)), "device": str(trainer.learner.device),
            "value": new_collected / seconds, "unit": "agent steps/s",
            "updates_per_second": updates / seconds, "target_replay_ratio": ratio,
            "replay_ratio": new_sampled / new_collected,
            "learner_wait_fraction": stats.get("learner_wait_fraction"),
            # async: the largest relative distance from the target ratio during the phase
            "ratio_max_deviation": getattr(getattr(trainer.driver, "gate", None), "deviation", None),
            "threads": torch.get_num_threads(), "seconds": seconds}  # fmt: skip


def measure_envs(env, num_envs, workers, steps):
    """Environment steps/s alone (random actions, no network): ale-py's threaded vector
    environment in this process (what --acting serial steps) against `workers`
    processes (parallel, alternating), interleaved: A, B, A, B."""
    from qzoo import envs
    from qzoo.acting.workers import ProcessVectorEnv

    config = build_config("dqn", {"env": env, "num_envs": str(num_envs), "progress": "false"})
    info = envs.describe(config)
    makers = {"threads": lambda: envs.make(config, num_envs, 1),
              "processes": lambda: ProcessVectorEnv(config, num_envs, 1, info=info,
                                                    workers=min(workers, num_envs))}  # fmt: skip
    rates = {name: [] for name in makers}
    rng = np.random.default_rng(0)
    for _ in range(2):
        for name, make in makers.items():
            vector = make()
            vector.reset(seed=1)
            started = time.perf_counter()
            for _ in range(max(1, steps // num_envs)):
                vector.step(rng.integers(info.num_actions, size=num_envs))
            rates[name].append(
                max(1, steps // num_envs) * num_envs / (time.perf_counter() - started)
            )
            vector.close()
    for name, values in rates.items():
        emit(
            {
                "name": "env_steps_per_second",
                "env": env,
                "vector": name,
                "num_envs": num_envs,
                "workers": min(workers, num_envs),
                "value": float(np.mean(values)),
                "runs": values,
                "unit": "agent steps/s",
            }
        )


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--env", default="pong")
    parser.add_argument("--modes", default="serial,parallel,alternating,async")
    parser.add_argument("--envs", default="1,8,16,32")
    parser.add_argument(
        "--steps", type=int, default=400, help="timed agent steps, all environments together"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--replay-ratio", type=float, default=8.0)
    parser.add_argument("--min-replay", type=int, default=1000)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="PyTorch threads (0: auto)")
    parser.add_argument("--env-only", action="store_true", help="time the vector "
                        "environments alone: threads against processes")  # fmt: skip
    args = parser.parse_args()
    if args.env_only:
        for num_envs in map(int, args.envs.split(",")):
            measure_envs(args.env, num_envs, args.workers, args.steps)
        return
    for num_envs in map(int, args.envs.split(",")):
        for mode in args.modes.split(","):
            workers = min(args.workers, num_envs)
            if mode == "alternating" and (workers < 2 or workers % 2):
                continue
            steps = max(1, args.steps // num_envs)
            emit(
                measure(
                    args.env,
                    mode,
                    num_envs,
                    steps,
                    workers,
                    args.replay_ratio,
                    args.device,
                    args.min_replay,
                    args.threads,
                )
            )


if __name__ == "__main__":
    main()
