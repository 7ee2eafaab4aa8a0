"""`qzoo compare RUN... [--metric iqm|median|mean|optimality_gap] [--reps 50000] [--json]`

Aggregates the runs' scores over games and seeds the way rliable does (Agarwal et al.
2021, arXiv:2108.13264): the interquartile mean (default), median, mean or optimality
gap, with a 95% percentile confidence interval from a stratified bootstrap (runs
resampled within each game). Runs are grouped into agents by their preset (config.json's
agent) unless --label names them, and into games by their env. A run's score is its
human-normalized eval return at the last iteration (--last K: the mean of the last K
evaluations); human scores exist for Atari games only, so other runs need --raw (raw
eval returns). --out PREFIX also writes PREFIX-metrics.png (all four metrics with their
intervals), PREFIX-profile.png (performance profiles) and, for two agents or more,
PREFIX-improvement.png (probability of improvement of each pair); .svg with
--out PREFIX.svg. Statistics: qzoo/tools/stats.py (not rliable itself; see there).
"""

import json
import os
import sys

import numpy as np

from qzoo.errors import UserError
from qzoo.tools import stats
from qzoo.tools.args import integer_option


def parser():
    """The argument parser of `qzoo compare` (qzoo.cli.parser.Parser: one-line errors)."""
    from qzoo.cli.parser import Parser

    p = Parser(
        prog="qzoo compare",
        usage="qzoo compare RUN [RUN ...] [--metric iqm|median|mean|optimality_gap] "
        "[--reps 50000] [--json] [--out PREFIX]",
        description=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("runs", nargs="*", metavar="RUN", help="run folders written by qzoo train")
    p.add_argument("--metric", default="iqm", choices=tuple(stats.METRICS), help="(default: iqm)")
    p.add_argument(
        "--reps", default="50000", metavar="N", help="bootstrap resamples (default: 50000)"
    )
    p.add_argument(
        "--confidence", default="0.95", metavar="C", help="interval coverage (default: 0.95)"
    )
    p.add_argument("--seed", default="0", metavar="N", help="seed of the bootstrap (default: 0)")
    p.add_argument(
        "--last", default="1", metavar="K", help="score: mean of the last K evals (default: 1)"
    )
    p.add_argument("--raw", action="store_true", help="raw eval returns, not human-normalized")
    p.add_argument("--label", metavar="NAMES", help="agent names, comma-separated, one per RUN in order "
                   "(default: each run's preset)")  # fmt: skip
    p.add_argument("--json", action="store_true", help='one JSON object: {"metric": ..., '
                   '"agents": {name: {"estimate", "ci", "runs"}}}')  # fmt: skip
    p.add_argument(
        "--out", metavar="PREFIX", help="write PREFIX-metrics, -profile and -improvement figures"
    )
    return p


def _confidence(text):
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not 0 < value < 1:
        raise UserError(f"--confidence: bad value {text!r}; expected a number in (0, 1)")
    return value


def main(argv):
    """`qzoo compare` with the arguments after the command; UserError on bad input."""
    from qzoo.tools import results

    options = _parse(argv)
    prefix, ext = options["out"], ".png"
    if prefix is not None:
        ext = os.path.splitext(prefix)[1].lower() or ".png"
        results.check_out(prefix if os.path.splitext(prefix)[1] else prefix + ext,
                          (".png", ".svg"))  # fmt: skip
        prefix = os.path.splitext(prefix)[0]
    runs = results.read_all(options["runs"])
    labels = options["label"] or [r.config.agent for r in runs]
    if len(labels) != len(runs):
        raise UserError(
            f"--label: {len(labels)} names for {len(runs)} runs; give one per RUN, in order"
        )
    table = score_table(runs, labels, options["last"], options["raw"])
    _notes(runs, labels, table)
    rng = np.random.default_rng(options["seed"])
    metric, reps, confidence = options["metric"], options["reps"], options["confidence"]
    out = {"metric": metric, "agents": {}}
    for agent, games in table.items():
        estimate, low, high = stats.interval(
            stats.METRICS[metric], [list(games.values())], reps, rng, confidence
        )
        runs_n = sum(len(s) for s in games.values())
        out["agents"][agent] = {"estimate": float(estimate), "ci": [float(low), float(high)],
                                "runs": runs_n}  # fmt: skip
    if options["json"]:
        print(json.dumps(out))
    else:
        _print_table(out, table, options)
    if prefix is not None:
        from qzoo.tools import compare_plots

        for suffix, figure in compare_plots.figures(table, reps, rng, confidence,
                                                    options["raw"]):  # fmt: skip
            results.save_figure(figure, f"{prefix}-{suffix}{ext}")


def _parse(argv):
    from qzoo.cli.parser import parse

    options = parse(parser(), argv)
    if not options["runs"]:
        raise UserError("compare needs run folders (several seeds, games or agents)")
    options["reps"] = integer_option("reps", options["reps"], 1, 10_000_000)
    options["seed"] = integer_option("seed", options["seed"], 0, 2**32 - 1)
    options["last"] = integer_option("last", options["last"], 1, 1_000_000)
    options["confidence"] = _confidence(options["confidence"])
    if options["label"] is not None:
        options["label"] = [name.strip() for name in options["label"].split(",")]
        if not all(options["label"]):
            raise UserError(f"--label: bad value {options['label']!r}; expected names")
    return options


def score_table(runs, labels, last=1, raw=False):
    """{agent: {game: np.array of run scores}}: each run's mean over its last `last`
    evaluations of normalized_return (or eval_episode_return when `raw`)."""
    column = "eval_episode_return" if raw else "normalized_return"
    table, seen = {}, {}
    for run, agent in zip(runs, labels):
        game, seed = run.config.env, run.config.seed
        if (agent, game, seed) in seen:
            raise UserError(
                f"{run.path!r} and {seen[agent, game, seed]!r} are both {agent} on {game} with "
                f"seed {seed}; name them apart with --label"
            )
        seen[agent, game, seed] = run.path
        values = run.columns.get(column)
        if values is None:
            raise UserError(f"{run.path}/results.csv has no {column} column")
        if len(values) < last:
            raise UserError(f"--last {last}: {run.path!r} has only {len(values)} evaluations")
        values = values[-last:]
        if not np.isfinite(values).all():
            if not raw and not np.isfinite(values).any():
                raise UserError(
                    f"{run.path!r} ({game}) has no human-normalized score (human scores exist "
                    "for Atari games only); use --raw to compare raw eval returns"
                )
            raise UserError(f"{run.path!r} has missing {column} values in its last {last} rows")
        table.setdefault(agent, {}).setdefault(game, []).append(float(values.mean()))
    return {a: {g: np.array(s) for g, s in sorted(games.items())} for a, games in table.items()}


def _notes(runs, labels, table):
    """Warns (stderr) about comparisons that may mislead but are not wrong."""
    from qzoo.tools.results import setup

    for agent in table:
        setups = [setup(r.config) for r, a in zip(runs, labels) if a == agent]
        fields = sorted(k for k in setups[0] if k != "env" and any(s[k] != setups[0][k]
                                                                     for s in setups))  # fmt: skip
        if fields:
            print(f"qzoo: note: the runs named {agent} differ in {', '.join(fields)}; "
                  "name them apart with --label", file=sys.stderr)  # fmt: skip
    game_sets = {tuple(games) for games in table.values()}
    if len(game_sets) > 1:
        print("qzoo: note: the agents were run on different games; their aggregates are "
              "not directly comparable", file=sys.stderr)  # fmt: skip


def _print_table(out, table, options):
    what = "raw eval returns" if options["raw"] else "human-normalized scores"
    last = "last eval" if options["last"] == 1 else f"mean of the last {options['last']} evals"
    percent = f"{options['confidence'] * 100:g}%"
    print(f"{stats.NAMES[out['metric']]} of {what} ({last}), {percent} CIs from {options['reps']:,} "
          "stratified bootstrap resamples")  # fmt: skip
    width = max(6, *(len(a) for a in out["agents"]))
    print(f"{'agent':{width}s}  {'estimate':>10s}  {percent + ' CI':>22s}  {'runs':>5s}  games")
    for agent, row in out["agents"].items():
        ci = f"[{row['ci'][0]:.4g}, {row['ci'][1]:.4g}]"
        print(f"{agent:{width}s}  {row['estimate']:10.4g}  {ci:>22s}  {row['runs']:5d}  "
              f"{len(table[agent])}")  # fmt: skip
