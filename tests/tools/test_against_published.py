"""qzoo's runs against published runs (qzoo/tools/against_published.py): percentile
ranks and the stratified permutation test, on numbers worked out by hand."""

import numpy as np
import pytest

from qzoo.tools import against_published as ap


def test_percentile_rank_counts_the_runs_below_and_half_the_ties():
    runs = [1, 2, 5, 7]
    assert ap.percentile_rank(5, runs) == 62.5  # 2 below, 1 tie: (2 + 0.5) / 4
    assert ap.percentile_rank(0, runs) == 0.0 and ap.percentile_rank(8, runs) == 100.0
    assert ap.percentile_rank(3, runs) == 50.0


def test_positions_are_mid_ranks_scaled_into_zero_one():
    # sorted 1, 2, 3, 3: ranks 1, 2 and 3.5 (the tie), over n = 4 after - 1/2
    np.testing.assert_allclose(ap._positions([3, 1, 3, 2]), [3 / 4, 0.5 / 4, 3 / 4, 1.5 / 4])


def test_one_run_above_three_has_the_exact_permutation_p_value():
    # Pooled 1, 2, 3, 10: qzoo's run at position 3.5 / 4, location +0.375. Relabelled, the
    # run is any of the four alike: P(location >= 0.375) = 1/4, P(<=) = 1, so p = 0.5.
    # Spread |0.375| = 0.375, and the four positions' |u - 1/2| are 0.375, 0.125, 0.125,
    # 0.375: P(>=) = 1/2, P(<=) = 1, p = 1.
    test = ap.permutation_test([[10.0]], [[1.0, 2.0, 3.0]], 40_000, np.random.default_rng(0))
    assert test["location"][0] == pytest.approx(0.375) and test["spread"][0] == pytest.approx(0.375)
    assert test["location"][1] == pytest.approx(0.5, abs=0.02)
    assert test["spread"][1] == pytest.approx(1.0, abs=0.02)


def test_runs_above_every_published_run_are_told_apart_and_extremes_by_their_spread():
    rng = np.random.default_rng(1)
    theirs = [rng.normal(100 * g, 10, size=100) for g in range(1, 7)]
    above = [np.array([t.max() + 1, t.max() + 2]) for t in theirs]
    test = ap.permutation_test(above, theirs, 2000, np.random.default_rng(0))
    # Both runs of all six games at the top: no relabelling does as well, p = 2 / 2001.
    assert test["location"][1] == pytest.approx(2 / 2001)
    both_ends = [np.array([t.min() - 1, t.max() + 1]) for t in theirs]
    test = ap.permutation_test(both_ends, theirs, 2000, np.random.default_rng(0))
    assert test["location"][0] == pytest.approx(0.0) and test["location"][1] > 0.5
    assert test["spread"][0] == pytest.approx(0.5 - 0.5 / 102) and test["spread"][1] < 0.01


def test_runs_drawn_from_the_published_ones_are_not_told_apart():
    rng = np.random.default_rng(2)
    theirs = [rng.normal(100 * g, 10, size=100) for g in range(1, 7)]
    ours = [rng.choice(t, size=2) + rng.normal(0, 1, size=2) for t in theirs]
    lines = ap.report_lines("drq_eps", dict(enumerate(ours)), dict(enumerate(theirs)),
                            list(range(6)), 4000, np.random.default_rng(0))  # fmt: skip
    text = "\n".join(lines)
    assert "(12 qzoo runs on 6 games, 4,000 resamples and relabellings)" in text
    assert "are not distinguishable from the published ones" in text
    assert "understates the uncertainty" in text  # two runs per game
