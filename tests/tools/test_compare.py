"""`qzoo compare` and its statistics (Agarwal et al. 2021), against numbers worked out
by hand on a small score table (and against SciPy's definitions where it is there)."""

import json

import numpy as np
import pytest
from analysis_runs import fake_run

from qzoo.cli.main import main
from qzoo.tools import stats

# Agent X: three games of three runs (human-normalized scores).
X = [[0.1, 0.5, 0.9], [1.2, -0.2, 0.4], [2.0, 3.0, 4.0]]
# By hand. Pooled and sorted: -0.2 0.1 0.4 0.5 0.9 1.2 2 3 4; int(0.25 * 9) = 2 cut at
# each end leaves 0.4 0.5 0.9 1.2 2, whose mean is 5.0 / 5 = 1.0. Game means: 0.5,
# 1.4 / 3 and 3.0; their mean is (0.5 + 0.46667 + 3) / 3 = 1.32222, their median 0.5.
# min(score, 1) sums to 0.1 + 0.5 + 0.9 + 1 - 0.2 + 0.4 + 1 + 1 + 1 = 5.7: the
# optimality gap is 1 - 5.7 / 9 = 0.36667.
HAND = {"iqm": 1.0, "mean": (0.5 + 1.4 / 3 + 3.0) / 3, "median": 0.5, "optimality_gap": 1 - 5.7 / 9}
# Agent Y on the same games, with ties.
Y = [[0.5, 0.5], [0.0, 2.0], [3.0, 3.0, 3.0]]
# P(X > Y) per game, ties counting 1/2: game 1: 0.1 beats none, 0.5 ties both, 0.9
# beats both: 3 / 6. Game 2: 1.2 and 0.4 beat 0.0: 2 / 6. Game 3: 3 ties thrice, 4
# beats thrice: 4.5 / 9. The average: (1/2 + 1/3 + 1/2) / 3 = 4/9.
HAND_POI = 4 / 9


@pytest.mark.parametrize("metric", list(HAND))
def test_metrics_equal_hand_computed_values(metric):
    assert stats.METRICS[metric](X) == pytest.approx(HAND[metric], abs=1e-12)


def test_iqm_of_four_scores_keeps_the_middle_two():
    # int(0.25 * 4) = 1 cut at each end: (2 + 3) / 2.
    assert stats.iqm([[4.0, 1.0], [3.0, 2.0]]) == 2.5


def test_performance_profile_values():
    # Fraction of the nine scores above each tau: 8 are > 0, five > 0.5 (0.9, 1.2, 2,
    # 3, 4), four > 1; a score equal to tau does not count (strictly greater).
    profile = stats.performance_profile(X, [0.0, 0.5, 1.0, 4.0, 5.0])
    np.testing.assert_allclose(profile, [8 / 9, 5 / 9, 4 / 9, 0, 0])


def test_probability_of_improvement_with_ties():
    assert stats.probability_of_improvement(X, Y) == pytest.approx(HAND_POI)
    assert stats.probability_of_improvement(Y, X) == pytest.approx(1 - HAND_POI)
    assert stats.probability_of_improvement(X, X) == pytest.approx(0.5)


def test_agrees_with_scipy_on_random_scores():
    scipy_stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(3)
    for runs in (3, 5, 7):
        games = [rng.normal(size=runs) for _ in range(4)]
        other = [rng.normal(size=runs + 1) for _ in range(4)]
        pooled = np.concatenate(games)
        assert stats.iqm(games) == pytest.approx(scipy_stats.trim_mean(pooled, 0.25))
        u = [scipy_stats.mannwhitneyu(x, y, alternative="greater").statistic / (len(x) * len(y))
             for x, y in zip(games, other)]  # fmt: skip
        assert stats.probability_of_improvement(games, other) == pytest.approx(np.mean(u))


def test_bootstrap_resamples_runs_within_each_game():
    rng = np.random.default_rng(0)
    # Each game's runs agree, so resampling within games changes nothing: the interval
    # is the estimate. A bootstrap that pooled runs across games would vary.
    estimate, low, high = stats.interval(stats.mean, [[[0.0, 0.0], [1.0, 1.0, 1.0]]], 500, rng)
    assert estimate == low == high == 0.5
    # One game with runs 0 and 1: a resample's mean is 0, 0.5 or 1 with probabilities
    # 1/4, 1/2, 1/4, so the 95% percentile interval is [0, 1].
    (draws,) = stats.resample([[0.0, 1.0]], 20_000, rng)
    means = draws.mean(axis=1)
    assert np.mean(means == 0.5) == pytest.approx(0.5, abs=0.02)
    assert np.mean(means == 0.0) == pytest.approx(0.25, abs=0.02)
    assert stats.interval(stats.mean, [[[0.0, 1.0]]], 20_000, rng)[1:] == (0.0, 1.0)


def test_bootstrap_is_reproducible_and_brackets_the_estimate():
    def ci(seed, reps=3000):
        return stats.interval(stats.iqm, [X], reps, np.random.default_rng(seed))

    assert ci(1) == ci(1)
    estimate, low, high = ci(1)
    assert low <= estimate <= high and low < high
    draws = [stats.resample(X, 10, np.random.default_rng(seed))[0] for seed in (1, 1, 2)]
    assert (draws[0] == draws[1]).all() and not (draws[0] == draws[2]).all()


@pytest.fixture
def table_runs(tmp_path):
    """X's and Y's scores as Atari run folders (games pong, breakout, boxing)."""
    dirs = []
    for agent, table in (("dqn", X), ("rainbow", Y)):
        for game, scores in zip(("pong", "breakout", "boxing"), table):
            for seed, score in enumerate(scores):
                # The first rows are earlier evaluations: only the last one counts.
                run = tmp_path / f"{agent}-{game}-{seed}"
                dirs.append(str(fake_run(run, agent, game, seed, [-1.0, 7.0, score])))
    return dirs


def compare(args, capsys):
    assert main(["compare", *args]) == 0
    return capsys.readouterr()


@pytest.mark.parametrize("metric", list(HAND))
def test_compare_json_gives_the_hand_computed_estimates(table_runs, capsys, metric):
    out = compare([*table_runs, "--json", "--metric", metric, "--reps", "200"], capsys).out
    result = json.loads(out)
    assert set(result) == {"metric", "agents"} and result["metric"] == metric
    assert list(result["agents"]) == ["dqn", "rainbow"]
    dqn = result["agents"]["dqn"]
    assert set(dqn) == {"estimate", "ci", "runs"}
    assert dqn["estimate"] == pytest.approx(HAND[metric]) and dqn["runs"] == 9
    assert len(dqn["ci"]) == 2 and dqn["ci"][0] <= dqn["estimate"] <= dqn["ci"][1]
    assert result["agents"]["rainbow"]["runs"] == 7


def test_compare_is_seeded_labels_and_last_k(table_runs, capsys):
    args = [*table_runs, "--json", "--reps", "300", "--seed", "5"]
    assert compare(args, capsys).out == compare(args, capsys).out
    labels = ",".join(["a"] * 9 + ["b"] * 7)
    out = json.loads(compare([*args, "--label", labels], capsys).out)
    assert list(out["agents"]) == ["a", "b"]
    # --last 2: each dqn run scores (7 + score) / 2, whose IQM is (7 + 1) / 2 = 4.
    out = json.loads(compare([*args, "--last", "2"], capsys).out)
    assert out["agents"]["dqn"]["estimate"] == pytest.approx(4.0)


def test_compare_writes_the_figures(table_runs, tmp_path, capsys):
    from matplotlib.image import imread

    out = compare([*table_runs, "--reps", "200", "--out", str(tmp_path / "fig" / "cmp")], capsys)
    assert "IQM of human-normalized scores" in out.out and "dqn" in out.out
    for name in ("metrics", "profile", "improvement"):
        image = imread(tmp_path / "fig" / f"cmp-{name}.png")
        assert image.ndim == 3 and image.shape[0] > 100
    compare([*table_runs[:9], "--reps", "50", "--out", str(tmp_path / "one.svg")], capsys)
    assert (tmp_path / "one-profile.svg").read_text().lstrip().startswith("<?xml")
    assert not (tmp_path / "one-improvement.svg").exists()  # one agent: no pair


def test_compare_needs_raw_outside_atari(tmp_path, capsys):
    runs = [str(fake_run(tmp_path / f"cp-{s}", "dqn", "CartPole-v1", s, returns=[9.0, r]))
            for s, r in ((1, 100.0), (2, 300.0))]  # fmt: skip
    assert main(["compare", *runs]) == 2
    assert "no human-normalized score" in capsys.readouterr().err
    out = json.loads(compare([*runs, "--raw", "--json", "--metric", "mean"], capsys).out)
    assert out["agents"]["dqn"]["estimate"] == 200.0


def test_compare_notes_mixed_setups_under_one_name(tmp_path, capsys):
    runs = [str(fake_run(tmp_path / "a", "dqn", "pong", 1, [0.5])),
            str(fake_run(tmp_path / "b", "dqn", "pong", 2, [0.7], dueling=True))]  # fmt: skip
    err = compare([*runs, "--reps", "10"], capsys).err
    assert "the runs named dqn differ in dueling" in err
