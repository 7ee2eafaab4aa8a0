"""Run folders for the plot / compare / visualize tests: tiny real runs (a few hundred
frames) and hand-made ones whose numbers the tests choose."""

import csv
import os
import subprocess
import sys

from helpers import REPO

from qzoo.configuration import Config

ROOT = str(REPO)
TINY = ["--iterations", "2", "--train-frames", "300", "--eval-frames", "200",
        "--replay-capacity", "1000", "--min-replay-capacity-fraction", "0.1",
        "--no-tensorboard", "--no-progress", "--threads", "1"]  # fmt: skip


def train(run_dir, env, seed=1, agent="dqn"):
    """A real run folder: `qzoo train` for 2 iterations of 300 frames (seconds)."""
    env_vars = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    subprocess.run(
        [sys.executable, "-m", "qzoo", "train", agent, "--env", env, "--seed", str(seed),
         *TINY, "--run-dir", str(run_dir)],
        check=True, capture_output=True, env=env_vars,
    )  # fmt: skip
    return run_dir


def fake_run(run_dir, agent, env, seed, normalized=None, returns=None, **config):
    """A run folder with config.json and a results.csv holding the given eval returns
    and/or normalized returns (one row per value), as `qzoo train` writes them."""
    n = len(normalized if normalized is not None else returns)
    normalized = normalized if normalized is not None else [float("nan")] * n
    returns = returns if returns is not None else [10.0 * x for x in normalized]
    os.makedirs(run_dir, exist_ok=True)
    with open(os.path.join(run_dir, "config.json"), "w") as f:
        f.write(Config(agent=agent, env=env, seed=seed, **config).to_json())
    with open(os.path.join(run_dir, "results.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["iteration", "frame", "eval_episode_return", "train_episode_return",
                         "normalized_return", "train_loss"])  # fmt: skip
        for i, (r, x) in enumerate(zip(returns, normalized)):
            writer.writerow([i, 1000 * i, r, "nan" if i == 0 else r / 2, x, 0.5 / (i + 1)])
    return run_dir
