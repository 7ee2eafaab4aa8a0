"""`qzoo plot RUN... [--out curves.png] [--columns a,b] [--title T] [--group config|folder]`

Learning curves from the results.csv of one or more run folders, one panel per column
(simple_dqn's plot.py layout: ceil(sqrt(n)) panels a row), against training frames.
Runs of the same setup (config.json equal but for the seed and how it was run, see
results.NOT_THE_SETUP) form one curve: the mean over runs, and a band from the lowest
to the highest run, at the frames every run reached. `--group folder` groups by folder
name without a trailing `-seed<k>` or `-<k>` instead. `--json` also prints every
plotted point as a JSON line, so that a figure's numbers can be kept on record.
"""

import json
import math
import os
import re

import numpy as np

from qzoo.errors import UserError

DEFAULT_COLUMNS = (
    "eval_episode_return", "train_episode_return", "normalized_return", "train_loss",
    "train_mean_q", "train_exploration_epsilon", "train_frame_rate",
)  # fmt: skip

TITLES = {
    "eval_episode_return": "Eval episode return",
    "train_episode_return": "Train episode return",
    "normalized_return": "Human-normalized eval return",
    "capped_normalized_return": "Capped human-normalized return",
    "train_loss": "Loss",
    "train_mean_q": "Mean Q-value (replay batches)",
    "train_state_value": "State value (acting)",
    "train_exploration_epsilon": "Exploration epsilon",
    "train_frame_rate": "Train frames per second",
    "eval_frame_rate": "Eval frames per second",
}

EXTENSIONS = (".png", ".svg")


def parser():
    """The argument parser of `qzoo plot` (qzoo.cli.parser.Parser: one-line errors)."""
    from qzoo.cli.parser import Parser

    p = Parser(
        prog="qzoo plot",
        usage="qzoo plot RUN [RUN ...] [--out curves.png] [--columns a,b,...] [--title T]",
        description=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("runs", nargs="*", metavar="RUN", help="run folders written by qzoo train")
    p.add_argument("--out", default="curves.png", metavar="FILE", help="output file: .png or .svg")
    p.add_argument(
        "--columns", metavar="NAMES", help="results.csv columns, comma-separated (default: "
        f"those of {', '.join(DEFAULT_COLUMNS)} that hold numbers)",
    )  # fmt: skip
    p.add_argument("--title", default=None, metavar="TEXT", help="figure title (default: the env)")
    p.add_argument("--group", default="config", choices=("config", "folder"),
                   help="runs on one curve: equal setups (config) or folder names without "
                   "-seed<k> (folder)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the plotted points as JSON lines")
    return p


def main(argv):
    """`qzoo plot` with the arguments after the command; UserError on bad input."""
    from qzoo.cli.parser import parse
    from qzoo.tools import results

    options = parse(parser(), argv)
    if not options["runs"]:
        raise UserError("plot needs at least one run folder")
    results.check_out(options["out"], EXTENSIONS)
    runs = results.read_all(options["runs"])
    columns = choose_columns(runs, options["columns"])
    if options["group"] == "config":
        labels = results.setup_labels([r.config for r in runs])
    else:
        labels = [folder_label(r.path) for r in runs]
    groups = {}
    for run, label in zip(runs, labels):
        groups.setdefault(label, []).append(run)
    envs = sorted({r.config.env for r in runs})
    title = options["title"] if options["title"] is not None else ", ".join(envs)
    figure, points = plot(groups, columns, title)
    results.save_figure(figure, options["out"])
    if options["json"]:
        for point in points:
            print(json.dumps(point))


def folder_label(path):
    """The folder's name without a trailing -seed<k> or -<k> (runs/dqn-pong-3: dqn-pong)."""
    return re.sub(r"-(seed)?\d+$", "", os.path.basename(os.path.normpath(path)))


def choose_columns(runs, text):
    """The columns to plot: those asked for (each must be in every run's results.csv
    and hold a number somewhere), or the defaults that do."""
    common = [c for c in runs[0].columns if all(c in r.columns for r in runs)]
    has_numbers = {c for c in common if any(np.isfinite(r.columns[c]).any() for r in runs)}
    if text is None:
        chosen = [c for c in DEFAULT_COLUMNS if c in has_numbers]
        return chosen or ["eval_episode_return"]
    chosen = [c.strip() for c in text.split(",") if c.strip()]
    if not chosen:
        raise UserError("--columns: bad value ''; expected column names, comma-separated")
    for column in chosen:
        if column not in common:
            plottable = [c for c in common if c not in ("iteration", "frame")]
            raise UserError(
                f"--columns: unknown column {column!r}; the runs' results.csv have "
                + ", ".join(plottable)
            )
        if column not in has_numbers:
            raise UserError(
                f"--columns: {column!r} holds no numbers in these runs"
                + (" (human scores exist only for Atari games)" if "normalized" in column else "")
            )
    return list(dict.fromkeys(chosen))


def curve(runs, column):
    """(frames, mean, low, high) over `runs` at the frames where every run has a
    finite value of `column`, so that a mean never mixes in a missing run."""
    by_run = [
        {f: v for f, v in zip(r.columns["frame"], r.columns[column]) if np.isfinite(v)}
        for r in runs
    ]
    frames = sorted(set.intersection(*(set(values) for values in by_run)))
    if not frames:  # e.g. an offline run's train returns: nothing to draw for this group
        empty = np.zeros(0)
        return empty, empty, empty, empty
    values = np.array([[values[f] for values in by_run] for f in frames])
    return np.array(frames), values.mean(1), values.min(1), values.max(1)


def plot(groups, columns, title):
    """A figure with one panel per column and one curve per group ({label: [RunResults]});
    also returns the plotted points as dicts."""
    from matplotlib.figure import Figure  # Agg, no display: never pyplot's global state

    cols = math.ceil(math.sqrt(len(columns)))
    rows = math.ceil(len(columns) / cols)
    figure = Figure(figsize=(5.5 * cols, 3.6 * rows + 0.4), layout="constrained")
    axes = figure.subplots(rows, cols, squeeze=False).ravel()
    points = []
    for ax, column in zip(axes, columns):
        for index, (label, runs) in enumerate(groups.items()):
            frames, mean, low, high = curve(runs, column)
            if not len(frames):
                continue
            color = f"C{index % 10}"
            ax.plot(frames, mean, marker="o", markersize=3, color=color,
                    label=f"{label} ({len(runs)} run{'s' if len(runs) > 1 else ''})")  # fmt: skip
            if len(runs) > 1:
                ax.fill_between(frames, low, high, color=color, alpha=0.2, linewidth=0)
            for f, m, lo, hi in zip(frames, mean, low, high):
                points.append({"name": column, "label": label, "frame": int(f), "value": float(m),
                               "min": float(lo), "max": float(hi), "runs": len(runs)})  # fmt: skip
        ax.set_title(TITLES.get(column, column))
        ax.set_xlabel("training frames")
        ax.grid(alpha=0.3)
    for ax in axes[len(columns) :]:
        ax.set_visible(False)
    axes[0].legend(fontsize=8)
    if title:
        figure.suptitle(title)
    return figure, points
