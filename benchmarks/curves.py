"""Plots eval return against training frames from run folders' results.csv.

python benchmarks/curves.py OUT.png [--title T] RUN_DIR [RUN_DIR ...]

Run folders named `<label>-seed<k>` are grouped by label: the line is the mean over
seeds and the band spans the lowest and highest seed. Prints one JSON line per
label and frame (mean, min, max, seeds), so the figure's numbers are on record too.
"""

import argparse
import collections
import csv
import json
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def read_curve(run_dir):
    """{frame: eval_episode_return} of one run."""
    with open(os.path.join(run_dir, "results.csv"), newline="") as f:
        return {int(r["frame"]): float(r["eval_episode_return"]) for r in csv.DictReader(f)}


def group(run_dirs):
    """{label: [curve, ...]}, label = folder name without a trailing -seed<k>."""
    groups = collections.defaultdict(list)
    for run_dir in run_dirs:
        label = re.sub(r"-seed\d+$", "", os.path.basename(os.path.normpath(run_dir)))
        groups[label].append(read_curve(run_dir))
    return groups


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("run_dirs", nargs="+")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, curves in group(args.run_dirs).items():
        # Frames every seed reached, so a mean never mixes in missing seeds.
        frames = sorted(set.intersection(*(set(c) for c in curves)))
        values = [[c[f] for c in curves] for f in frames]
        mean = [sum(v) / len(v) for v in values]
        for frame, v, m in zip(frames, values, mean):
            print(json.dumps({"name": "eval_episode_return", "label": label, "frame": frame,
                              "value": m, "min": min(v), "max": max(v), "seeds": len(v)}))  # fmt: skip
        (line,) = ax.plot(frames, mean, marker="o", markersize=3, label=f"{label} ({len(curves)})")
        ax.fill_between(frames, [min(v) for v in values], [max(v) for v in values],
                        color=line.get_color(), alpha=0.15)  # fmt: skip
    ax.set_xlabel("training frames")
    ax.set_ylabel("eval episode return")
    ax.set_title(args.title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)


if __name__ == "__main__":
    main()
