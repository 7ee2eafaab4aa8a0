"""Plots eval return against frames from one or more run folders' results.csv.

python benchmarks/minatar_curve.py OUT.png RUN_DIR [RUN_DIR ...]
Prints one JSON line per row read, so the figure's numbers are on record too.
"""

import csv
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main(out, run_dirs):
    fig, ax = plt.subplots(figsize=(6, 4))
    for run_dir in run_dirs:
        with open(os.path.join(run_dir, "results.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        frames = [int(r["frame"]) for r in rows]
        returns = [float(r["eval_episode_return"]) for r in rows]
        for frame, value in zip(frames, returns):
            print(json.dumps({"name": "eval_episode_return", "value": value, "unit": "return",
                              "frame": frame, "run": os.path.basename(run_dir)}))  # fmt: skip
        ax.plot(frames, returns, marker="o", label=os.path.basename(run_dir))
    ax.set_xlabel("training frames")
    ax.set_ylabel("eval episode return")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
