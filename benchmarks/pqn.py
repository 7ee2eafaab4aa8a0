"""PQN's training frames per second next to qzoo's DQN on the same game, in one run.

    python benchmarks/pqn.py [--env pong] [--frames 65536] [--threads 2] [--rounds 1]

Each agent trains one iteration of `--frames` frames with its preset (PQN: 128
environments, rollouts of 32 steps, 2 epochs of 32 minibatches; DQN: one environment, an
update every 4 agent steps) in a fresh `python -m qzoo train` process, with learning from
the start (DQN's replay starts learning after 1,000 transitions instead of 50,000, so
that both time their updates). Prints a JSON line per run (the train phase's frames and
agent steps per second, updates per second, the process's peak RSS) and the median
ratio of PQN's frames per second to DQN's over the rounds (the order alternates).
"""

import csv
import os
import resource
import statistics
import subprocess
import sys
import tempfile

from harness import emit, new_parser

ONLY_TRAINING = ["--eval-frames", "1024", "--eval-episodes", "0", "--no-tensorboard",
                 "--progress", "false"]  # fmt: skip
AGENTS = {
    "pqn": ["pqn"],
    "dqn": ["dqn", "--replay-capacity", "100000", "--min-replay-capacity-fraction", "0.01"],
}


def run(agent, env, frames, threads, work, round_):
    folder = os.path.join(work, f"{agent}-{round_}")  # a finished folder would not train again
    argv = [sys.executable, "-m", "qzoo", "train", *AGENTS[agent], "--env", env,
            "--iterations", "1", "--train-frames", str(frames), "--threads", str(threads),
            "--run-dir", folder, *ONLY_TRAINING]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{agent}: {done.stderr.strip().splitlines()[-1:]}")
    with open(os.path.join(folder, "results.csv")) as f:
        row = list(csv.DictReader(f))[-1]
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest child yet
    return {"name": "pqn_vs_dqn_run", "agent": agent, "env": env, "frames": int(row["frame"]),
            "frames_per_second": float(row["train_frame_rate"]),
            "steps_per_second": float(row["train_steps_per_second"]),
            "updates_per_second": float(row["train_updates_per_second"]),
            "threads": threads, "peak_rss_mb_so_far": peak_kb / 1024}  # fmt: skip


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--env", default="pong")
    parser.add_argument("--frames", type=int, default=65_536)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    ratios = []
    with tempfile.TemporaryDirectory(prefix="qzoo-pqn-bench-") as work:
        for round_ in range(args.rounds):
            order = ["pqn", "dqn"] if round_ % 2 == 0 else ["dqn", "pqn"]
            rates = {}
            for agent in order:
                line = run(agent, args.env, args.frames, args.threads, work, round_)
                emit({**line, "round": round_})
                rates[agent] = line["frames_per_second"]
            ratios.append(rates["pqn"] / rates["dqn"])
    emit(
        {
            "name": "pqn_frames_per_second_vs_dqn",
            "env": args.env,
            "value": statistics.median(ratios),
            "unit": "ratio",
            "rounds": args.rounds,
            "threads": args.threads,
        }
    )


if __name__ == "__main__":
    main()
