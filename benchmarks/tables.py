"""The docs' benchmark tables, written from the results kept under benchmarks/results/.

    python benchmarks/tables.py            # rewrite every generated table in docs/
    python benchmarks/tables.py --check    # exit 1, naming them, if any is out of date

A generated table sits in a docs page between two markers,

    <!-- table NAME (python benchmarks/tables.py, from benchmarks/results/...) -->

    | ... |

    <!-- end table -->

and NAME is one of TABLES: a function from the results files to the table's lines. A
figure that a benchmark measured thus lives once, in its results file (the JSON lines of
a script's `--out`, or a run's results.csv), and the page cannot drift from it; the prose
around a table stays hand-written. The test suite runs `--check`.
"""

import csv
import glob
import os
import re
import statistics
import sys

from harness import new_parser, read

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
PAGES = ("docs/benchmarks.md", "docs/pqn.md", "docs/atari100k.md", "docs/ray.md")
BLOCK = re.compile(r"(<!-- table (\S+) [^\n]*-->\n)(.*?)(<!-- end table -->)", re.DOTALL)


def _lines(name):
    return read(os.path.join(RESULTS, name))


def _number(value, digits=0):
    return f"{value:,.{digits}f}"


def _rates_median(runs):
    """A run line with the median frames and updates per second of `runs`."""
    rates = ("frames_per_second", "updates_per_second")
    return {**runs[0], **{key: statistics.median(r[key] for r in runs) for key in rates}}


def pqn_vs_dqn():
    """PQN's and DQN's training frames per second per env (benchmarks/pqn.py)."""
    out = ["| env | PQN frames/s | DQN frames/s | PQN / DQN | PQN updates/s | DQN updates/s |",
           "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for path in sorted(glob.glob(os.path.join(RESULTS, "pqn", "vs_dqn_*.jsonl"))):
        runs = {}  # each agent's medians over the rounds (`--rounds N`)
        for r in read(path):
            if r["name"] == "pqn_vs_dqn_run":
                runs.setdefault(r["agent"], []).append(r)
        ratio = next(r["value"] for r in read(path) if r["name"] == "pqn_frames_per_second_vs_dqn")
        pqn, dqn = _rates_median(runs["pqn"]), _rates_median(runs["dqn"])
        out.append(
            f"| {pqn['env']} | {_number(pqn['frames_per_second'])} "
            f"| {_number(dqn['frames_per_second'])} | {ratio:.1f} "
            f"| {_number(pqn['updates_per_second'], 1)} | {_number(dqn['updates_per_second'], 1)} |"
        )
    return out


def pqn_vs_cleanrl():
    """qzoo's PQN next to CleanRL's pqn.py on CartPole (benchmarks/pqn_cleanrl.py)."""
    lines = _lines(os.path.join("pqn", "vs_cleanrl_cartpole.jsonl"))
    by = {r.get("program", r.get("name")): r for r in lines}
    theirs, ours = by["cleanrl_pqn"], by["qzoo_pqn"]
    ratio = by["qzoo_pqn_vs_cleanrl"]
    episodes = _number(theirs["episodes"])
    return [
        "| program | agent steps/s (training) | mean training return, last 10% of steps |",
        "|---|---:|---:|",
        f"| CleanRL pqn.py | {_number(theirs['steps_per_second'])} "
        + f"| {theirs['last_10pct_mean_return']:.1f} ({episodes} episodes in all) |",
        f"| qzoo `pqn` | {_number(ours['steps_per_second'])} | {ours['last_10pct_mean_return']:.1f} |",
        f"| qzoo / CleanRL | {ratio['steps_per_second_ratio']:.2f} | {ratio['return_ratio']:.2f} |",
    ]


def pqn_atari_curve():
    """PQN's short Atari run, iteration by iteration (benchmarks/pqn_atari.py)."""
    out = ["| run | iteration | frames | training return | epsilon | evaluation return | frames/s |",
           "|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for path in sorted(glob.glob(os.path.join(RESULTS, "pqn_atari", "*", "results.csv"))):
        run = os.path.basename(os.path.dirname(path))
        with open(path, newline="") as f:
            for row in list(csv.DictReader(f))[1:]:
                ret, evaluation = float(row["train_episode_return"]), row["eval_episode_return"]
                shown = "" if evaluation in ("", "nan") else f"{float(evaluation):.1f}"
                out.append(
                    f"| {run} | {row['iteration']} | {_number(int(row['frame']))} | {ret:.1f} "
                    f"| {float(row['train_exploration_epsilon']):.3f} | {shown} "
                    f"| {_number(float(row['train_frame_rate']))} |"
                )
    return out


MODES = {"qzoo_bfloat16": "serial, 2 PyTorch threads", "qzoo_bfloat16_1thread": "serial, 1 thread",
         "qzoo_bfloat16_async_pinned": "async: thread actor", "qzoo_bfloat16_actor_process":
         "async: process actor", "qzoo_cleanrl_mlp": "serial",
         "qzoo_cleanrl_mlp_async_pinned": "async: thread actor",
         "qzoo_cleanrl_mlp_actor_process": "async: process actor"}  # fmt: skip


def acting_modes_learner_bound():
    """The acting modes at the peers' settings, medians of 3 rounds (benchmarks/peers.py),
    against serial on 2 threads (Pong) or 1 (CartPole)."""
    medians = [r for r in _lines(os.path.join("acting", "modes.jsonl")) if r["name"] == "peer_median"]
    out = ["| env | acting | agent steps/s | x serial |", "|---|---|---:|---:|"]
    for env in ("pong", "cartpole"):
        rows = [r for r in medians if r["env"] == env]
        baseline = {"pong": "qzoo_bfloat16", "cartpole": "qzoo_cleanrl_mlp"}[env]
        serial = next(r["agent_steps_per_second"] for r in rows if r["peer"] == baseline)
        for r in rows:
            value = r["agent_steps_per_second"]
            out.append(f"| {env} | {MODES[r['peer']]} | {_number(value)} | {value / serial:.2f} |")
    return out


def acting_modes_acting_bound():
    """The acting modes where acting is the cost (benchmarks/acting.py, replay ratio 0.5):
    each round's agent steps/s, and the median's ratio to serial's."""
    lines = [r for r in _lines(os.path.join("acting", "modes.jsonl"))
             if r["name"] == "acting_steps_per_second"]  # fmt: skip
    out = ["| envs | acting | worker processes | agent steps/s per round | x serial (medians) |",
           "|---:|---|---:|---|---:|"]  # fmt: skip
    names = {"async": "async: thread actor", "process": "async: process actor"}
    for envs in sorted({r["num_envs"] for r in lines}):
        here = [r for r in lines if r["num_envs"] == envs]
        groups = {}
        for r in here:
            groups.setdefault((r["acting"], r["actor_workers"]), []).append(r["value"])
        serial = statistics.median(groups[("serial", 1)])
        for (mode, workers), values in groups.items():
            rounds = ", ".join(_number(v) for v in values)
            ratio = statistics.median(values) / serial
            out.append(f"| {envs} | {names.get(mode, mode)} | {workers if mode != 'serial' else ''} "
                       f"| {rounds} | {ratio:.2f} |")  # fmt: skip
    return out


def atari100k_drq_eps_seeds():
    """DrQ(eps)'s finished Atari-100k runs, per game and seed, against the 100 published
    runs (benchmarks/results/atari100k/drq_eps/<game>-<seed>/, as `qzoo suite` wrote them)."""
    from qzoo import data
    from qzoo.tools.against_published import percentile_rank
    from qzoo.tools.suite_report import collect, spread

    runs, scores = data.published_runs()["drq_eps"], {}
    for run in collect(os.path.join(RESULTS, "atari100k"), ["drq_eps"]):  # as the report reads them
        if run.finished:
            scores.setdefault(run.game, {})[run.seed] = run.score
    seeds = sorted({seed for by_seed in scores.values() for seed in by_seed})
    out = ["| game | " + " | ".join(f"seed {s}" for s in seeds) + " | published mean "
           "| published 5-95% of runs | percentile ranks among the published runs |",
           "|---|" + "---:|" * len(seeds) + "---:|---|---|"]  # fmt: skip
    for game, by_seed in sorted(scores.items()):
        low, high = spread(runs[game])
        shown = [_number(by_seed[s], 1 if by_seed[s] < 1000 else 0) if s in by_seed else ""
                 for s in seeds]  # fmt: skip
        ranks = ", ".join(f"{percentile_rank(v, runs[game]):.0f}" for _, v in sorted(by_seed.items()))
        mean = sum(runs[game]) / len(runs[game])
        out.append(f"| {game} | " + " | ".join(shown) + f" | {_number(mean, 1 if mean < 1000 else 0)} "
                   f"| {_number(low)}-{_number(high)} | {ranks} |")  # fmt: skip
    return out


def atari100k_der():
    """DER's finished Atari-100k runs against the DER paper's per-game means (van Hasselt
    et al. 2019; no published runs, so no percentile ranks), human-normalized beside."""
    from qzoo import data
    from qzoo.tools.suite_report import collect, normalized

    paper = {game: score for game, (score, _) in data.published_scores()["der"].items()}
    head = "| game | seed | qzoo `der` | DER paper | qzoo human-normalized | paper human-normalized |"
    out = [head, "|---|---:|---:|---:|---:|---:|"]
    for run in collect(os.path.join(RESULTS, "atari100k"), ["der"]):
        if run.finished:
            ours, theirs = run.score, paper[run.game]
            out.append(f"| {run.game} | {run.seed} | {_number(ours, 1 if ours < 1000 else 0)} "
                       f"| {_number(theirs, 1 if theirs < 1000 else 0)} "
                       f"| {normalized(run.game, ours):.3f} | {normalized(run.game, theirs):.3f} |")  # fmt: skip
    return out


def ray_niceness():
    """A short Ray run beside busy processes, its workers at each niceness, round by
    round (benchmarks/ray_niceness.py), and the medians' ratio."""
    runs = {}
    for r in _lines("ray_niceness/ray_niceness.jsonl"):
        runs.setdefault(r["worker_niceness"], []).append(r)
    out = ["| workers' niceness | run wall s | training frames/s | cores the busy processes got |",
           "|---:|---|---|---|"]  # fmt: skip
    for niceness, rs in sorted(runs.items(), reverse=True):
        cells = [", ".join(format(r[key], form) for r in rs)
                 for key, form in [("wall_s", ".0f"), ("train_frame_rate", ".0f"), ("load_cores", ".2f")]]  # fmt: skip
        out.append(f"| {niceness} | " + " | ".join(cells) + " |")
    (high, slow), (low, fast) = sorted(runs.items(), reverse=True)[:2]
    rate = statistics.median(r["train_frame_rate"] for r in fast) / statistics.median(
        r["train_frame_rate"] for r in slow)
    wall = statistics.median(r["wall_s"] for r in slow) / statistics.median(r["wall_s"] for r in fast)
    out.append(f"| {low} / {high} | {wall:.1f}x shorter | {rate:.1f}x | |")
    return out


TABLES = {"pqn_vs_dqn": pqn_vs_dqn, "pqn_vs_cleanrl": pqn_vs_cleanrl,
          "pqn_atari_curve": pqn_atari_curve, "atari100k_drq_eps_seeds": atari100k_drq_eps_seeds,
          "atari100k_der": atari100k_der,
          "acting_modes_learner_bound": acting_modes_learner_bound,
          "acting_modes_acting_bound": acting_modes_acting_bound, "ray_niceness": ray_niceness}  # fmt: skip


def rewrite(text, page):
    """`text` with every generated table written anew; ValueError for an unknown NAME."""

    def table(match):
        name = match.group(2)
        if name not in TABLES:
            raise ValueError(f"{page}: unknown table {name!r}; known: {', '.join(TABLES)}")
        # Blank lines around the table: Markdown ends an HTML block (the marker) at one.
        return match.group(1) + "\n" + "\n".join(TABLES[name]()) + "\n\n" + match.group(4)

    return BLOCK.sub(table, text)


def main():
    options = new_parser(__doc__)
    options.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    args = options.parse_args()
    stale = []
    for page in PAGES:
        path = os.path.join(ROOT, page)
        with open(path) as f:
            text = f.read()
        new = rewrite(text, page)
        if new != text:
            stale.append(page)
            if not args.check:
                with open(path + ".tmp", "w") as f:
                    f.write(new)
                os.replace(path + ".tmp", path)
    if stale:
        verb = "out of date" if args.check else "rewritten"
        print(f"tables {verb} in: {', '.join(stale)}", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
