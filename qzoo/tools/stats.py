"""Aggregate statistics over games and runs, as rliable computes them.

Agarwal, Schwarzer, Castro, Courville & Bellemare 2021, "Deep Reinforcement Learning
at the Edge of the Statistical Precipice" (NeurIPS; arXiv:2108.13264), and its library
rliable (google-research/rliable 1.2, `metrics.py` and `library.py`). rliable itself
is not used: its release needs `arch` < 8, which fails to import next to pandas 3, so
these are the same definitions written with NumPy and checked against numbers worked
out by hand (tests/tools/test_compare.py).

Scores of one agent are a list with one 1-D array per game, holding that game's run
scores; games may have different numbers of runs (rliable needs a runs x games matrix;
with equal runs per game every function here equals rliable's). Every metric also
accepts arrays with leading batch axes ([reps, runs]), which is how the bootstrap
evaluates all its resamples at once.
"""

import numpy as np

# rliable evaluates bootstrap resamples in one array; chunks keep the memory of
# --reps 50000 over hundreds of runs to tens of megabytes.
CHUNK = 2000


def _pooled(games):
    return np.concatenate([np.asarray(g, float) for g in games], axis=-1)


def _game_means(games):
    return np.stack([np.mean(np.asarray(g, float), axis=-1) for g in games], axis=-1)


def iqm(games):
    """Interquartile mean: the mean of the middle 50% of all run scores, pooled over
    games (Agarwal et al. 2021, section 4.2; rliable's aggregate_iqm, which is
    scipy.stats.trim_mean(proportiontocut=0.25): int(0.25 n) scores cut at each end)."""
    scores = np.sort(_pooled(games), axis=-1)
    n = scores.shape[-1]
    cut = int(0.25 * n)
    return scores[..., cut : n - cut].mean(axis=-1)


def median(games):
    """The median over games of each game's mean run score (rliable's aggregate_median)."""
    return np.median(_game_means(games), axis=-1)


def mean(games):
    """The mean over games of each game's mean run score (rliable's aggregate_mean)."""
    return np.mean(_game_means(games), axis=-1)


def optimality_gap(games, gamma=1.0):
    """How far runs fall short of `gamma` (human level for normalized scores): gamma -
    mean over all run scores of min(score, gamma) (Agarwal et al. 2021, section 4.2)."""
    return gamma - np.mean(np.minimum(_pooled(games), gamma), axis=-1)


METRICS = {"iqm": iqm, "median": median, "mean": mean, "optimality_gap": optimality_gap}
NAMES = {"iqm": "IQM", "median": "Median", "mean": "Mean", "optimality_gap": "Optimality gap"}


def performance_profile(games, taus):
    """Run-score distribution: for each tau, the fraction of all runs (pooled over
    games) scoring more than tau (Agarwal et al. 2021, section 4.1; rliable's
    score_distributions). Returns [..., len(taus)]."""
    scores = _pooled(games)
    return (scores[..., :, None] > np.asarray(taus, float)).mean(axis=-2)


def probability_of_improvement(games_x, games_y):
    """P(X > Y): for each game, the probability that a run of X beats a run of Y, ties
    counting one half (the Mann-Whitney U statistic over nx * ny), averaged over games
    (Agarwal et al. 2021, section 4.3; rliable's probability_of_improvement)."""
    per_game = []
    for x, y in zip(games_x, games_y):
        x, y = np.asarray(x, float)[..., :, None], np.asarray(y, float)[..., None, :]
        wins = (x > y).mean(axis=(-2, -1)) + 0.5 * (x == y).mean(axis=(-2, -1))
        per_game.append(wins)
    return np.mean(np.stack(per_game, axis=-1), axis=-1)


def resample(games, reps, rng):
    """Stratified bootstrap resamples: within each game, its runs drawn with replacement
    (as many as it has), independently for each of `reps` resamples; games are kept,
    not resampled (rliable's StratifiedBootstrap, task_bootstrap=False)."""
    out = []
    for g in games:
        g = np.asarray(g, float)
        out.append(g[rng.integers(0, len(g), size=(reps, len(g)))])
    return out


def interval(statistic, samples, reps, rng, confidence=0.95):
    """(estimate, low, high): `statistic(*samples)` on the data, and the percentile
    confidence interval of its stratified bootstrap distribution over `reps` resamples
    (each of `samples`, one agent's games, resampled independently; rliable's
    get_interval_estimates with method="percentile"). Vector statistics (a performance
    profile) give arrays."""
    estimate = statistic(*samples)
    values = []
    for start in range(0, reps, CHUNK):
        n = min(CHUNK, reps - start)
        values.append(statistic(*(resample(games, n, rng) for games in samples)))
    values = np.concatenate(values, axis=0)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(values, [tail, 100 - tail], axis=0)
    return estimate, low, high
