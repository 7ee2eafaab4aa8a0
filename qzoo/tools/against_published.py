"""qzoo's runs against the published runs of the same agent, game by game: where each
run sits among them (its percentile rank) and whether qzoo's runs can be told apart
from them at all (`qzoo suite report`, where per-run scores were published).

Two views, both over games kept apart (stratified), as rliable does:
- the probability of improvement P(qzoo > published): for each game, the chance that
  a qzoo run beats a published one (ties one half), averaged over games, with its 95%
  stratified bootstrap interval (Agarwal et al. 2021, section 4.3); 0.5 is no
  difference;
- a stratified permutation test of exchangeability: if qzoo's runs were draws of the
  published runs' distribution, then within each game any of the pooled runs could
  have been qzoo's. The test compares two statistics of qzoo's runs' ranks among each
  game's pooled runs with their distribution over random relabellings: the location
  (are qzoo's runs placed high or low?) and the spread (do they sit at the extremes, or
  bunched in the middle?). Two-sided p-values; with two runs per game only large
  differences can show.
"""

import numpy as np

from qzoo.tools import stats

CHUNK = 5000  # relabellings evaluated at once


def percentile_rank(score, runs):
    """The percentage of `runs` below `score`, ties counting one half: 50 at the
    published median, 0 below every run, 100 above every run."""
    runs = np.asarray(runs, float)
    return float(100 * (np.mean(runs < score) + 0.5 * np.mean(runs == score)))


def _positions(pooled):
    """Each pooled score's mid-rank, scaled to (0, 1): (rank - 1/2) / n."""
    pooled = np.asarray(pooled, float)
    order = np.sort(pooled)
    below = np.searchsorted(order, pooled, side="left")
    ties = np.searchsorted(order, pooled, side="right") - below
    return (below + 0.5 * ties) / len(pooled)


def _statistics(u):
    """(location, spread) of positions `u` [..., runs]: mean(u - 1/2), mean |u - 1/2|."""
    centred = u - 0.5
    return centred.mean(axis=-1), np.abs(centred).mean(axis=-1)


def permutation_test(ours, theirs, reps, rng):
    """{"location": (statistic, p), "spread": (statistic, p)} for `ours` and `theirs`,
    one array of run scores per game each (module docstring). A statistic over qzoo's
    runs of all games together: location mean(u - 1/2) (0 expected, positive when
    qzoo's runs rank high), spread mean |u - 1/2| (about 0.25 expected); u a run's
    position among its game's pooled runs. p: twice the smaller tail of `reps` random
    relabellings within each game (the observed one counted in both), at most 1."""
    positions, counts = [], []
    for x, y in zip(ours, theirs, strict=True):
        positions.append(_positions(np.concatenate([np.asarray(x, float), np.asarray(y, float)])))
        counts.append(len(x))
    observed = _statistics(np.concatenate([u[:k] for u, k in zip(positions, counts)]))
    at_least, at_most = np.zeros(2), np.zeros(2)
    for start in range(0, reps, CHUNK):
        n = min(CHUNK, reps - start)
        drawn = [u[np.argsort(rng.random((n, len(u))), axis=1)[:, :k]]
                 for u, k in zip(positions, counts)]  # fmt: skip
        location, spread = _statistics(np.concatenate(drawn, axis=1))
        for i, values in enumerate((location, spread)):
            at_least[i] += np.sum(values >= observed[i] - 1e-12)
            at_most[i] += np.sum(values <= observed[i] + 1e-12)
    p = np.minimum(1.0, 2 * np.minimum(at_least + 1, at_most + 1) / (reps + 1))
    return {"location": (float(observed[0]), float(p[0])),
            "spread": (float(observed[1]), float(p[1]))}  # fmt: skip


def report_lines(agent, ours, theirs, games, reps, rng):
    """report.md's paragraph for `agent`: P(qzoo > published) with its interval and the
    permutation test, over `games` (ours and theirs: {game: run scores})."""
    x = [np.asarray(ours[g], float) for g in games]
    y = [np.asarray(theirs[g], float) for g in games]
    estimate, low, high = stats.interval(stats.probability_of_improvement, [x, y], reps, rng)
    test = permutation_test(x, y, reps, rng)
    (location, p_location), (spread, p_spread) = test["location"], test["spread"]
    n = sum(len(v) for v in x)
    # Two statistics tested: each against half the level (Bonferroni).
    apart = min(p_location, p_spread) < 0.025
    verdict = "distinguishable" if apart else "not distinguishable"
    few = max(len(v) for v in x) <= 2
    caveat = (" With one or two runs per game the bootstrap has little to resample: the "
              "interval understates the uncertainty." if few else "")  # fmt: skip
    head = (f"Against the published {agent} runs, game by game ({n} qzoo runs on "
            f"{len(games)} games, {reps:,} resamples and relabellings):")  # fmt: skip
    improvement = (f"- P(qzoo > published), the probability that a qzoo run beats a "
                   f"published run of the same game (ties one half), averaged over games: "
                   f"{estimate:.3f} [{low:.3f}, {high:.3f}] (0.5: no difference).{caveat}")  # fmt: skip
    permutation = (f"- Stratified permutation test of qzoo's runs being exchangeable with "
                   f"the published ones, on u, a run's position among its game's pooled "
                   f"runs: location mean(u - 1/2) = {location:+.3f}, p = {p_location:.3f} "
                   f"(placed higher or lower); spread mean|u - 1/2| = {spread:.3f}, p = "
                   f"{p_spread:.3f} (at the extremes or bunched; about 0.25 expected). "
                   f"qzoo's runs are {verdict} from the published ones at the 5% level "
                   f"(either p below 0.025: Bonferroni over the two).")  # fmt: skip
    return [head, "", improvement, permutation, ""]
