"""The figures of `qzoo compare --out PREFIX`, after rliable's plot_utils (Agarwal et al.
2021, arXiv:2108.13264, figures 5, 7 and 8): aggregate metrics with their confidence
intervals, performance profiles with pointwise bands, and the probability of improvement
of each pair of agents. Matplotlib's Figure directly: no pyplot state, no display."""

import itertools

import numpy as np

from qzoo.tools import stats

TAUS = 101  # points of a performance profile


def figures(table, reps, rng, confidence, raw):
    """Yields (suffix, Figure) for `table` ({agent: {game: scores}})."""
    yield "metrics", metrics_figure(table, reps, rng, confidence, raw)
    yield "profile", profile_figure(table, reps, rng, confidence, raw)
    if len(table) > 1:
        yield "improvement", improvement_figure(table, reps, rng, confidence)


def _figure(width, height):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def metrics_figure(table, reps, rng, confidence, raw):
    """One panel per metric: each agent's estimate and interval as a horizontal bar."""
    agents = list(table)
    figure = _figure(12, 1.2 + 0.45 * len(agents))
    axes = figure.subplots(1, len(stats.METRICS), sharey=True)
    for ax, (name, metric) in zip(axes, stats.METRICS.items()):
        for row, agent in enumerate(agents):
            estimate, low, high = stats.interval(metric, [list(table[agent].values())], reps,
                                                 rng, confidence)  # fmt: skip
            color = f"C{row % 10}"
            ax.barh(row, high - low, left=low, height=0.6, color=color, alpha=0.75)
            ax.vlines(estimate, row - 0.3, row + 0.3, color="black", linewidth=1.5)
        ax.set_title(stats.NAMES[name])
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(agents)), agents)
    axes[0].invert_yaxis()
    figure.supxlabel("raw eval return" if raw else "human-normalized score")
    return figure


def tau_grid(table):
    """TAUS thresholds from just below the lowest run score to the highest, so that
    each profile falls from 1 to 0 across the plot."""
    scores = np.concatenate([s for games in table.values() for s in games.values()])
    low, high = float(scores.min()), float(scores.max())
    margin = 0.05 * (high - low) or 0.05 * max(1.0, abs(high))
    return np.linspace(low - margin, high, TAUS)


def profile_figure(table, reps, rng, confidence, raw):
    """Fraction of runs scoring above tau, per agent, with its bootstrap band."""
    taus = tau_grid(table)
    figure = _figure(6.5, 4.2)
    ax = figure.subplots()
    for index, (agent, games) in enumerate(table.items()):
        profile, low, high = stats.interval(
            lambda g: stats.performance_profile(g, taus), [list(games.values())], reps, rng,
            confidence,
        )  # fmt: skip
        color = f"C{index % 10}"
        ax.plot(taus, profile, color=color, label=agent)
        ax.fill_between(taus, low, high, color=color, alpha=0.2, linewidth=0)
    ax.set_xlabel(f"{'raw eval return' if raw else 'human-normalized score'} (tau)")
    ax.set_ylabel("fraction of runs with score > tau")
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return figure


def improvement_figure(table, reps, rng, confidence):
    """P(X > Y) over the games both played, for each pair of agents, with intervals
    from resampling each agent's runs independently within each game."""
    pairs = []
    for x, y in itertools.combinations(table, 2):
        games = [g for g in table[x] if g in table[y]]
        if games:
            samples = [[table[x][g] for g in games], [table[y][g] for g in games]]
            pairs.append((x, y, *stats.interval(stats.probability_of_improvement, samples, reps,
                                                rng, confidence)))  # fmt: skip
    figure = _figure(6.5, 1.2 + 0.45 * max(1, len(pairs)))
    ax = figure.subplots()
    for row, (x, y, estimate, low, high) in enumerate(pairs):
        ax.barh(row, high - low, left=low, height=0.6, color=f"C{row % 10}", alpha=0.75)
        ax.vlines(estimate, row - 0.3, row + 0.3, color="black", linewidth=1.5)
    ax.set_yticks(range(len(pairs)), [f"P({x} > {y})" for x, y, *_ in pairs])
    ax.invert_yaxis()
    ax.axvline(0.5, color="grey", linestyle="--", linewidth=1)
    ax.set_xlim(0, 1)
    ax.set_xlabel("probability of improvement")
    if not pairs:
        ax.set_title("no pair of agents shares a game")
    return figure
