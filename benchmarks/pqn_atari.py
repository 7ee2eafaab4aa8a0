"""A short real-Atari learning run of PQN: its curve, resumable, kept under results/.

    python benchmarks/pqn_atari.py [--env breakout] [--iterations 20]
        [--train-frames 250000] [--threads 1] [--seed 1] [--eval-period 20]
        [--run-dir runs/pqn_atari/breakout-1] [--keep benchmarks/results/pqn_atari]
        [--out FILE] [-- TRAIN OPTION ...]

Trains the `pqn` preset (128 environments, rollouts of 32 steps, Q(lambda) 0.65, no
replay, no target network) for `--iterations` x `--train-frames` frames, a few million
instead of the published 200M, with any `qzoo train` options after `--` (the docs' run
gives epsilon 40% of its frames to fall, `--exploration-epsilon-decay-frame-fraction
0.4`: the preset's 10% of 200M frames is 20M, and 10% of 5M left 1,000 steps per
environment to explore). Started again on the same run folder it resumes (`qzoo
resume`), so that it can be left running in the background and outlive a shell. Prints each results.csv row as a
JSON line (iteration, frames, training and evaluation returns, epsilon, frames per
second) and, once the run has its last iteration, copies results.csv and config.json
to `--keep`/<env>-<seed>/ (where benchmarks/tables.py reads them) and prints the curve's
summary: the first and last iterations'
training returns and the best evaluation.
"""

import csv
import math
import os
import shutil
import subprocess
import sys

from harness import emit, new_parser

COLUMNS = ["iteration", "frame", "train_episode_return", "eval_episode_return",
           "train_exploration_epsilon", "train_frame_rate", "train_loss"]  # fmt: skip


def number(text):
    value = float(text) if text not in ("", None) else math.nan
    return None if math.isnan(value) else value


def rows(run_dir):
    with open(os.path.join(run_dir, "results.csv")) as f:
        return [{k: number(row.get(k)) for k in COLUMNS} for row in csv.DictReader(f)]


def train(args):
    common = ["--threads", str(args.threads), "--progress", "false"]
    if os.path.exists(os.path.join(args.run_dir, "config.json")):
        argv = ["resume", args.run_dir, "--iterations", str(args.iterations), *common]
    else:
        argv = ["train", "pqn", "--env", args.env, "--seed", str(args.seed),
                "--iterations", str(args.iterations), "--train-frames", str(args.train_frames),
                "--eval-period", str(args.eval_period), "--run-dir", args.run_dir,
                *common, *args.train_options]  # fmt: skip
    if not complete(args):
        subprocess.run([sys.executable, "-m", "qzoo", *argv], check=True,
                       stdout=sys.stderr)  # fmt: skip


def complete(args):
    """Whether the run folder holds the row of its last iteration."""
    if not os.path.exists(os.path.join(args.run_dir, "results.csv")):
        return False
    return rows(args.run_dir)[-1]["iteration"] == args.iterations


def main():
    options = new_parser(__doc__)
    options.add_argument("--env", default="breakout")
    options.add_argument("--iterations", type=int, default=20)
    options.add_argument("--train-frames", type=int, default=250_000)
    options.add_argument("--threads", type=int, default=1)
    options.add_argument("--seed", type=int, default=1)
    options.add_argument("--eval-period", type=int, default=20)
    options.add_argument("--run-dir")
    options.add_argument("--keep", default="benchmarks/results/pqn_atari")
    options.add_argument("train_options", nargs="*", metavar="-- TRAIN OPTION")
    args = options.parse_args()
    args.run_dir = args.run_dir or os.path.join("runs", "pqn_atari", f"{args.env}-{args.seed}")
    train(args)
    curve = rows(args.run_dir)
    for row in curve:
        emit({"name": "pqn_atari_row", "env": args.env, **row})
    if not complete(args):
        return
    kept = os.path.join(args.keep, f"{args.env}-{args.seed}")
    os.makedirs(kept, exist_ok=True)
    for name in ("results.csv", "config.json"):
        shutil.copy2(os.path.join(args.run_dir, name), os.path.join(kept, name))
    trained = [r for r in curve if r["train_episode_return"] is not None]
    evals = [r["eval_episode_return"] for r in curve if r["eval_episode_return"] is not None]
    emit(
        {
            "name": "pqn_atari_curve",
            "env": args.env,
            "seed": args.seed,
            "frames": curve[-1]["frame"],
            "first_train_return": trained[0]["train_episode_return"],
            "last_train_return": trained[-1]["train_episode_return"],
            "best_eval_return": max(evals) if evals else None,
            "kept": kept,
        }
    )


if __name__ == "__main__":
    main()
