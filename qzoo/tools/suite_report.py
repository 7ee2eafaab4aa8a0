"""`qzoo suite report [--out DIR] [--agents A,B] [--games G,...|atari100k] [--reps N]`

Writes DIR/report.md and DIR/curves-<agent>.png from the run folders of `qzoo suite`
(DIR/<agent>/<game>-<seed>), against the published Atari-100k scores shipped in
qzoo/data/atari100k (see its README.md for their sources):

- per agent and game: qzoo's final score (the last results.csv row's eval return, and
  its number of episodes) of each finished run; the published mean; where per-run
  scores were published (drq_eps: 100 runs), the 5th-95th percentile range of the run
  scores, whether each qzoo run lies within it and its percentile rank among them, and
  whether qzoo's runs can be told from the published ones (against_published.py);
- per agent, over the games with finished runs: the human-normalized IQM, median and
  mean with 95% stratified bootstrap intervals (qzoo compare's statistics, stats.py),
  beside the same statistics of the published data on the same games (drq_eps: its 100
  runs per game; der: its per-game means, which give no interval);
- learning curves: one figure per agent, a panel per game, the train and eval returns
  of each run against training frames, with the published mean (and 5-95% band).

A run is scored only when finished (a DONE file, or results.csv at its config's last
iteration); unfinished runs and, with --games, games without a run are listed as such.
"""

import dataclasses
import math
import os
import time

import numpy as np

from qzoo.configuration import option
from qzoo.configuration.values import Int, Text
from qzoo.errors import UserError
from qzoo.tools import against_published, stats
from qzoo.tools import args as args_lib

LOW, HIGH = 5, 95  # the published spread: these percentiles of the run scores
METRICS = ("iqm", "median", "mean")


@dataclasses.dataclass
class ReportOptions:
    # fmt: off
    out: str = option("runs/suite", "report", "the suite's folder (its --out); report.md and "
                      "curves-<agent>.png are written there", Text())
    agents: str = option(None, "report", "agents, comma-separated", Text())
    games: str = option(None, "report", "the games the suite was to run, comma-separated or "
                        "atari100k: those without a run are listed", Text())
    reps: int = option(50_000, "report", "bootstrap resamples", Int(1, 10_000_000))
    seed: int = option(0, "report", "seed of the bootstrap", args_lib.SEED)
    # fmt: on


SHOWN = {"agents": "every folder in OUT", "games": "those run"}


@dataclasses.dataclass
class RunEntry:
    """One run folder as the report sees it."""

    agent: str
    game: str
    seed: int
    folder: str
    finished: bool
    status: str  # "finished", or why the run is not scored
    results: object = None  # results.RunResults, where readable

    @property
    def score(self):
        return float(self.results.columns["eval_episode_return"][-1])

    @property
    def episodes(self):
        values = self.results.columns.get("eval_num_episodes")
        return int(values[-1]) if values is not None and np.isfinite(values[-1]) else None


def main(argv):
    """`qzoo suite report ...`; returns 0."""
    _, options, _ = args_lib.parse_tool(
        ReportOptions, argv, "qzoo suite report",
        "qzoo suite report [--out DIR] [--agents A,B] [--games G,...|atari100k] [--reps N]",
        __doc__.split("\n\n", 1)[1], shown=SHOWN,
    )  # fmt: skip
    from qzoo.tools import suite_runs

    agents = suite_runs.names(options.agents, "agents") if options.agents else None
    games = None
    if options.games:
        from qzoo import envs

        games = [envs.interpret(g)[1] for g in suite_runs.expand_games(options.games)]
    entries = collect(options.out, agents)
    if not entries and not agents:
        raise UserError(
            f"{options.out!r} holds no suite runs (folders <agent>/<game>-<seed>); pass the "
            "suite's --out"
        )
    agents = agents or list(dict.fromkeys(e.agent for e in entries))
    rng = np.random.default_rng(options.seed)
    text = report(entries, agents, games, options.reps, rng, options.out)
    from qzoo.tools import results

    for agent in agents:
        runs = [e for e in entries if e.agent == agent and e.results is not None]
        if runs:
            path = os.path.join(options.out, f"curves-{agent}.png")
            results.save_figure(curves(agent, runs), path)
    path = os.path.join(options.out, "report.md")
    results.write_file(path, lambda f: f.write(text.encode()))
    print(f"wrote {path}")
    return 0


def collect(out, agents=None):
    """RunEntry for every run folder under out/<agent>/ (all agents' folders, or
    `agents`'), sorted by agent, game and seed."""
    from qzoo.tools import results, suite_runs

    if not os.path.isdir(out):
        raise UserError(f"{out!r} is not a folder; pass the suite's --out")
    names = agents if agents is not None else sorted(os.listdir(out))
    entries = []
    for agent in names:
        agent_dir = os.path.join(out, agent)
        if not os.path.isdir(agent_dir):
            continue
        for name in sorted(os.listdir(agent_dir)):
            folder = os.path.join(agent_dir, name)
            game, _, seed = name.rpartition("-")
            if not os.path.isdir(folder) or not game or not seed.isdigit():
                continue
            try:
                run = results.read_results(folder)
            except UserError as e:
                entries.append(RunEntry(agent, game, int(seed), folder, False, str(e)))
                continue
            game, seed = run.config.env, run.config.seed
            last = run.columns["iteration"][-1]
            total = run.config.iterations
            finished = suite_runs.is_complete(folder) and np.isfinite(
                run.columns["eval_episode_return"][-1]
            )
            status = "finished" if finished else f"unfinished: iteration {int(last)} of {total}"
            entries.append(RunEntry(agent, game, seed, folder, finished, status, run))
    return sorted(entries, key=lambda e: (e.agent, e.game, e.seed))


def normalized(game, score):
    """Human-normalized score: (score - random) / (human - random), qzoo's table
    (envs/scores.py, equal to Atari 100k's on its 26 games); NaN outside Atari."""
    from qzoo.envs.scores import normalized_return

    return normalized_return(game, score)


def spread(run_scores):
    """(5th, 95th percentile) of published run scores (NumPy's linear interpolation)."""
    low, high = np.percentile(np.asarray(run_scores, float), [LOW, HIGH])
    return float(low), float(high)


def within(score, low_high):
    """Whether a score lies within the published spread, both ends included."""
    low, high = low_high
    return low <= score <= high


def aggregate(games, reps, rng, confidence=0.95):
    """{metric: (estimate, low, high)} of human-normalized scores, `games` a list with
    one array of run scores per game (qzoo compare's statistics and stratified bootstrap;
    with one score per game the interval is that estimate: nothing to resample)."""
    out = {}
    for metric in METRICS:
        estimate, low, high = stats.interval(stats.METRICS[metric], [games], reps, rng, confidence)
        out[metric] = (float(estimate), float(low), float(high))
    return out


def published(agent):
    """({game: mean}, {game: run scores} or {}, {source texts}) of `agent`."""
    from qzoo import data

    scores = data.published_scores().get(agent, {})
    means = {game: value for game, (value, _) in scores.items()}
    sources = sorted({source for _, source in scores.values()})
    return means, data.published_runs().get(agent, {}), sources


def _number(value):
    if value is None or not math.isfinite(value):
        return "n/a"
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:.0f}"


def _interval(estimate, low, high, single):
    text = f"{estimate:.3f}"
    return text + (" (no interval: one score per game)" if single else f" [{low:.3f}, {high:.3f}]")


def report(entries, agents, games, reps, rng, out):
    """report.md's text."""
    lines = [
        "# qzoo suite report",
        "",
        (
            f"Runs under `{out}`, read {time.strftime('%Y-%m-%d %H:%M')}. A run's score is "
            "its final evaluation: the last `results.csv` row's `eval_episode_return` (the "
            "mean return of its evaluation episodes). Only finished runs are scored. "
            "Human-normalized: (score - random) / (human - random) with qzoo's table "
            "(`qzoo/envs/scores.py`). Published data: `qzoo/data/atari100k` (its README.md "
            "gives the sources)."
        ),
        "",
    ]
    for agent in agents:
        lines += agent_section(agent, [e for e in entries if e.agent == agent], games, reps, rng)
    return "\n".join(lines) + "\n"


def agent_section(agent, entries, games, reps, rng):
    means, runs, sources = published(agent)
    lines = [f"## {agent}", ""]
    if not entries and not games:
        return lines + ["No run folders.", ""]
    finished = [e for e in entries if e.finished]
    if finished:
        c = finished[0].results.config
        steps = c.iterations * c.train_frames // c.action_repeats
        evaluation = (
            f"{c.eval_episodes} episodes" if c.eval_episodes else f"{c.eval_frames:,} frames"
        )
        setup = (
            f"Setup (first finished run): {c.iterations} iterations of {c.train_frames:,} "
            f"frames ({steps:,} agent steps), evaluation {evaluation}, protocol {c.protocol}."
        )
        lines += [setup, ""]
    lines += [
        (
            f"| game | finished runs | qzoo score (seed: score) | episodes | published mean | "
            f"published {LOW}-{HIGH}% of runs | within the published spread | percentile rank "
            "among the published runs | qzoo normalized | published normalized |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    shown_games = list(dict.fromkeys([e.game for e in entries] + list(games or [])))
    scored, raw = {}, {}  # game: [normalized qzoo scores], [qzoo scores]
    for game in sorted(shown_games):
        done = [e for e in finished if e.game == game]
        all_runs = [e for e in entries if e.game == game]
        mean = means.get(game)
        band = spread(runs[game]) if game in runs else None
        if done:
            scores = [e.score for e in done]
            shown = ", ".join(f"{e.seed}: {_number(e.score)}" for e in done)
            if len(done) > 1:
                shown = f"{_number(float(np.mean(scores)))} ({shown})"
            episodes = ", ".join(str(n) for n in sorted({e.episodes for e in done if e.episodes}))
            ranks = "n/a"
            if band is None:
                inside = "n/a (no per-run data)" if mean is not None else "n/a"
            else:
                raw[game] = scores
                ranks = ", ".join(f"{e.seed}: {against_published.percentile_rank(e.score, runs[game]):.0f}"
                                  for e in done)  # fmt: skip
                hits = sum(within(s, band) for s in scores)
                inside = ("yes" if hits else "no") if len(done) == 1 else f"{hits} of {len(done)}"
            norms = [normalized(game, s) for s in scores]
            if all(math.isfinite(x) for x in norms):
                scored[game] = norms
            qzoo_norm = _number(float(np.mean(norms)))
        else:
            shown = "not scored: " + ("; ".join(f"seed {e.seed} {e.status}" for e in all_runs)
                                      if all_runs else "no run")  # fmt: skip
            episodes, inside, ranks, qzoo_norm = "", "", "", ""
        band_text = f"{_number(band[0])} to {_number(band[1])}" if band else "n/a"
        pub_norm = _number(normalized(game, mean)) if mean is not None else "n/a"
        lines.append(
            f"| {game} | {len(done)} of {len(all_runs)} | {shown} | {episodes} | "
            f"{_number(mean)} | {band_text} | {inside} | {ranks} | {qzoo_norm} | {pub_norm} |"
        )
    unfinished = [e for e in entries if not e.finished]
    no_run = [g for g in shown_games if not any(e.game == g for e in entries)]
    counts = (
        f"{len(finished)} finished run{'s' if len(finished) != 1 else ''} scored; "
        f"{len(unfinished)} not finished (not scored); {len(no_run)} of the games asked for "
        "without a run."
    )
    lines += ["", counts, ""]
    lines += aggregate_lines(agent, scored, means, runs, reps, rng)
    if raw:
        lines += against_published.report_lines(agent, raw, runs, sorted(raw), reps, rng)
    if sources:
        lines += ["Published scores: " + "; ".join(sources) + ".", ""]
    lines += [f"![{agent} learning curves](curves-{agent}.png)", ""]
    return lines


def aggregate_lines(agent, scored, means, runs, reps, rng):
    """The aggregate table of one agent: qzoo's runs beside the published data on the
    same games."""
    if not scored:
        return ["No human-normalized aggregate: no finished runs on Atari games.", ""]
    games = sorted(scored)
    ours = aggregate([np.array(scored[g]) for g in games], reps, rng)
    ours_single = all(len(scored[g]) == 1 for g in games)
    n_runs = sum(len(scored[g]) for g in games)
    header = f"| statistic | qzoo ({n_runs} runs, {len(games)} games) |"
    theirs, theirs_single = None, True
    if all(g in runs for g in games):
        theirs = aggregate([np.array([normalized(g, s) for s in runs[g]]) for g in games],
                           reps, rng)  # fmt: skip
        theirs_single = False
        header += f" published {agent} ({len(runs[games[0]])} runs per game) |"
    elif all(g in means for g in games):
        theirs = aggregate([np.array([normalized(g, means[g])]) for g in games], reps, rng)
        header += f" published {agent} (per-game means) |"
    missing = [g for g in games if g not in means]
    lines = [
        (
            f"Human-normalized scores over the {len(games)} games with finished runs "
            f"({', '.join(games)}), 95% stratified bootstrap intervals ({reps:,} resamples; "
            "the statistics of `qzoo compare`):"
        ),
        "",
        header,
        "|---|---|" + ("---|" if theirs else ""),
    ]
    for metric in METRICS:
        row = f"| {stats.NAMES[metric]} | {_interval(*ours[metric], ours_single)} |"
        if theirs:
            row += f" {_interval(*theirs[metric], theirs_single)} |"
        lines.append(row)
    lines.append("")
    if missing:
        names = ", ".join(missing)
        lines += [f"No published {agent} scores for {names}: the published column is left out.", ""]
    return lines


def curves(agent, entries):
    """One panel per game: each run's train and eval returns against frames, the
    published mean (dotted) and 5-95% band of published runs (shaded)."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter

    # 400,000 frames in full overlap in a panel a third of a page wide: 400k
    thousands = FuncFormatter(lambda x, _: f"{x / 1000:g}k" if x else "0")
    means, runs, _ = published(agent)
    games = sorted({e.game for e in entries})
    cols = math.ceil(math.sqrt(len(games)))
    rows = math.ceil(len(games) / cols)
    figure = Figure(figsize=(4.2 * cols, 3.0 * rows + 0.5), layout="constrained")
    axes = figure.subplots(rows, cols, squeeze=False).ravel()
    for ax, game in zip(axes, games):
        for index, e in enumerate(e for e in entries if e.game == game):
            frames = e.results.columns["frame"]
            color = f"C{index % 10}"
            suffix = "" if e.finished else " (unfinished)"
            for column, style, what in (("eval_episode_return", "-", "eval"),
                                        ("train_episode_return", "--", "train")):  # fmt: skip
                values = e.results.columns.get(column)
                if values is None:
                    continue
                keep = np.isfinite(values)
                ax.plot(frames[keep], values[keep], style, color=color, marker="o" if
                        what == "eval" else None, markersize=3,
                        label=f"seed {e.seed} {what}{suffix}")  # fmt: skip
        if game in runs:
            low, high = spread(runs[game])
            ax.axhspan(low, high, color="gray", alpha=0.15, linewidth=0,
                       label=f"published {LOW}-{HIGH}%")  # fmt: skip
        if game in means:
            ax.axhline(means[game], color="black", linestyle=":", label="published mean")
        ax.set_title(game)
        ax.set_xlabel("training frames")
        ax.set_xlim(left=0)  # every panel from the start, finished with an eval or not
        ax.xaxis.set_major_formatter(thousands)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    for ax in axes[len(games) :]:
        ax.set_visible(False)
    figure.suptitle(f"{agent}: train (dashed) and eval (solid) episode returns")
    return figure
