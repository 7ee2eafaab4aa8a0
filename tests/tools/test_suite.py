"""`qzoo suite` (agents x games x seeds as run folders, some at once, resumable) and
`qzoo suite report` (final scores against the published Atari-100k data): the runner
on tiny CartPole runs, its folder names and refusals, and the report's numbers worked
out by hand from fake run folders."""

import csv
import dataclasses
import errno
import os
import shlex
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import REPO, replacing

from qzoo import data
from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.envs.scores import ATARI_SCORES
from qzoo.tools import stats
from qzoo.tools import suite_report as report
from qzoo.tools import suite_runs as suite

ROOT = str(REPO)
TINY = ["--iterations", "4", "--train-frames", "300", "--eval-frames", "100",
        "--replay-capacity", "4000", "--no-progress"]  # fmt: skip


def fake_run(folder, agent, env, seed, evals, iterations=None, done=False, episodes=100):
    """A run folder as `qzoo train` leaves it: config.json (`iterations`, default: a
    complete run) and a results.csv with one row per eval return in `evals`."""
    iterations = len(evals) - 1 if iterations is None else iterations
    config = build_config(agent, {"env": env, "iterations": iterations})
    config = dataclasses.replace(config, seed=seed)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write(config.to_json())
    with open(os.path.join(folder, "results.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["iteration", "frame", "eval_episode_return", "train_episode_return",
                         "eval_num_episodes"])  # fmt: skip
        for i, value in enumerate(evals):
            writer.writerow([i, 40_000 * i, value, "nan" if i == 0 else value / 2, episodes])
    if done:
        open(os.path.join(folder, suite.DONE), "w").close()
    return folder


def run_cli(capsys, *argv):
    status = main(["suite", *argv])
    out, err = capsys.readouterr()
    return status, out, err


# --- the runner: folders, refusals ----------------------------------------------------


def test_folders_are_the_atari100k_layout_and_existing_runs_are_recognized(tmp_path, capsys):
    out = str(tmp_path / "atari100k")
    fake_run(os.path.join(out, "drq_eps", "amidar-1"), "drq_eps", "amidar", 1, list(range(11)))
    fake_run(os.path.join(out, "drq_eps", "battle_zone-1"), "drq_eps", "battle_zone", 1,
             [1, 2], iterations=10)  # fmt: skip
    status, text, _ = run_cli(
        capsys, "--agents", "drq_eps", "--games", "amidar,battle_zone,pong", "--seeds", "1",
        "--out", out, "--jobs", "2", "--dry-run", "--", "--threads", "1", "--eval-period", "10",
    )  # fmt: skip
    assert status == 0
    lines = text.splitlines()
    assert "1 complete, 1 to resume, 1 to start; 2 at a time (--jobs)" in lines[0]
    assert "complete" in lines[1] and "drq_eps amidar-1" in lines[1]
    assert "resumes after iteration 1 of 10" in lines[3]
    assert "new" in lines[5] and "drq_eps pong-1" in lines[5]
    for game, line in zip(("amidar", "battle_zone", "pong"), lines[2::2]):
        folder = os.path.join(out, "drq_eps", f"{game}-1")
        assert line.split()[1:] == [
            "-m", "qzoo", "train", "drq_eps", "--env", game, "--seed", "1", "--run-dir", folder,
            "--threads", "1", "--eval-period", "10",
        ]  # fmt: skip
    assert not os.path.exists(os.path.join(out, "drq_eps", "pong-1"))  # a dry run writes nothing


def test_atari100k_expands_to_the_published_games_seed_first(tmp_path, capsys):
    status, text, _ = run_cli(capsys, "--agents", "drq_eps,der", "--games", "atari100k",
                              "--seeds", "1-2", "--out", str(tmp_path), "--jobs", "1",
                              "--dry-run")  # fmt: skip
    assert status == 0
    games = data.atari100k_games()
    assert len(games) == 26 and set(games) <= set(ATARI_SCORES)
    assert set(data.published_scores()) == {"der", "drq_eps"}
    assert all(set(table) == set(games) for table in data.published_scores().values())
    names = [line.split()[2:4] for line in text.splitlines()[1::2]]
    assert len(names) == 2 * 2 * 26
    expected = [[a, f"{g}-{s}:"] for s in (1, 2) for a in ("drq_eps", "der") for g in games]
    assert names == expected


def test_default_jobs_from_cores_and_memory(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    status, text, _ = run_cli(capsys, "--agents", "dqn", "--games", "CartPole-v1", "--seeds",
                              "1-3", "--out", str(tmp_path), "--dry-run")  # fmt: skip
    cores = len(os.sched_getaffinity(0))
    jobs = min(3, cores)  # an mlp: 1 thread a run; CartPole's replay is tiny
    assert status == 0
    assert f"{jobs} at a time ({cores} usable cores, 1 thread a run; memory for " in text


def test_a_run_is_complete_at_its_last_iteration_or_with_done(tmp_path):
    run = fake_run(str(tmp_path / "a"), "dqn", "CartPole-v1", 1, [1, 2, 3])  # 2 iterations
    assert suite.is_complete(run) and suite.is_complete(run, 2)
    assert not suite.is_complete(run, 5)  # asked for more: qzoo train's to refuse or extend
    cut = fake_run(str(tmp_path / "b"), "dqn", "CartPole-v1", 1, [1, 2], iterations=3)
    assert not suite.is_complete(cut) and suite.last_iteration(cut) == 1
    open(os.path.join(cut, suite.DONE), "w").close()
    assert suite.is_complete(cut)
    assert suite.last_iteration(str(tmp_path / "none")) is None


@pytest.mark.parametrize("argv, message", [
    (["--agents", "dqm", "--games", "pong"], "unknown agent 'dqm'; expected one of"),
    (["--agents", "dqn", "--games", "amidr"], "--games: bad value amidr; expected"),
    (["--agents", "dqn"], "suite needs --games"),
    (["--games", "pong"], "suite needs --agents"),
    (["--agents", "dqn", "--games", "pong", "--jobs", "0"], "--jobs: bad value 0; expected an"),
    (["--agents", "dqn", "--games", "pong", "--seeds", "1,x"], "--seeds: bad value 1,x"),
    (["--agents", "dqn", "--games", "pong", "--seeds", "3-1"], "--seeds: bad value 3-1"),
    (["--agents", "dqn", "--games", "pong,Pong"], "'pong' and 'Pong' are the same game"),
    (["--agents", "dqn", "--games", "pong", "--", "--env", "breakout"],
     "--env after --: give the games with --games"),
    (["--agents", "dqn", "--games", "pong", "--", "--run-dir=x"], "--run-dir after --"),
    (["--agents", "dqn", "--games", "CartPole-v1", "--", "--learning-rate", "-1"],
     "dqn on CartPole-v1: --learning-rate: bad value -1"),
    (["--agents", "dqn", "--games", "pong", "--", "--learning-rat", "1"],
     "dqn on pong: unknown option --learning-rat; did you mean --learning-rate?"),
    (["--agents", "dqn", "--games", "pong", "--job", "2"], "unknown option --job"),
    (["report", "--out", "/nonexistent/suite"], "'/nonexistent/suite' is not a folder"),
    (["report", "--reps", "0"], "--reps: bad value 0"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    status, out, err = run_cli(capsys, *argv)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("qzoo: error: ") and message in err, err
    assert os.listdir(tmp_path) == []


def test_a_failed_run_is_reported_with_its_log_and_exit_1(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("PYTHONPATH", ROOT)
    out = str(tmp_path / "s")
    folder = os.path.join(out, "dqn", "CartPole-v1-1")
    os.makedirs(folder)
    open(os.path.join(folder, "notes.txt"), "w").close()  # not a run: qzoo train refuses
    status, text, _ = run_cli(capsys, "--agents", "dqn", "--games", "CartPole-v1", "--out", out,
                              "--", *TINY)  # fmt: skip
    assert status == 1
    failed = [line for line in text.splitlines() if "FAILED" in line]
    assert len(failed) == 1 and "dqn CartPole-v1-1 (exit 2)" in failed[0]
    assert "holds files qzoo did not write" in failed[0] and failed[0].endswith(folder + ".log")
    assert "1 failed (dqn CartPole-v1-1; their logs say why)" in text.splitlines()[-1]


def test_an_out_that_cannot_be_a_folder_is_one_line_before_any_run(tmp_path, capsys,
                                                                     monkeypatch):  # fmt: skip
    """Was an OSError traceback from the scheduler (issue 34's fault pass)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("mine")
    for out, message in (("afile", "--out afile: a file; expected a folder"),
                         ("afile/s", "cannot create afile/s: Not a directory")):  # fmt: skip
        status, text, err = run_cli(capsys, "--agents", "dqn", "--games", "CartPole-v1",
                                    "--out", out, "--", *TINY)  # fmt: skip
        assert (status, text, err) == (2, "", f"qzoo: error: {message}\n")
    assert os.listdir(tmp_path) == ["afile"]


def test_a_log_that_cannot_be_written_fails_its_run_and_the_others_go_on(tmp_path, capsys,
                                                                         monkeypatch):  # fmt: skip
    """A disk that fills up under a suite: the run whose log cannot be made fails, said in
    its line, and the suite ends as for any failed run (was a traceback, which left the
    runs under way running on their own)."""
    from qzoo.tools import suite_scheduler

    makedirs = os.makedirs

    def full(path, *args, **kwargs):  # the runs' folders: OUT/dqn
        if os.path.basename(path) != "dqn":
            return makedirs(path, *args, **kwargs)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)

    monkeypatch.setattr(suite_scheduler.os, "makedirs", full)  # os's own: suite's too
    out = str(tmp_path / "s")
    status, text, _ = run_cli(capsys, "--agents", "dqn", "--games", "CartPole-v1", "--out", out,
                              "--", *TINY)  # fmt: skip
    assert status == 1
    log = os.path.join(out, "dqn", "CartPole-v1-1.log")
    assert (f"[1/1] FAILED   dqn CartPole-v1-1: cannot write {log}: "
            f"{os.path.join(out, 'dqn')}: No space left on device") in text.splitlines()  # fmt: skip
    assert "1 failed (dqn CartPole-v1-1; their logs say why)" in text.splitlines()[-1]


# --- the runner: parallel runs, Ctrl-C, resume -----------------------------------------


def _suite(out, seeds, *extra):
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "qzoo", "suite", "--agents", "dqn", "--games", "CartPole-v1",
         "--seeds", seeds, "--jobs", "2", "--out", out, *extra, "--", *TINY],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip


def _rows(folder):
    return suite.last_iteration(folder)


def test_parallel_runs_ctrl_c_and_resume(tmp_path):
    out = str(tmp_path / "suite")
    folder = {s: os.path.join(out, "dqn", f"CartPole-v1-{s}") for s in (1, 2, 3)}
    # Two runs at once: both start before either ends.
    proc = _suite(out, "1,2", "--status-period", "1")
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, text
    kinds = [line.split()[1] for line in text.splitlines() if line.startswith("[")]
    assert kinds == ["start", "start", "done", "done"], text
    assert "  running  dqn CartPole-v1-" in text  # the status lines
    assert all(os.path.exists(os.path.join(folder[s], suite.DONE)) for s in (1, 2))
    assert all(_rows(folder[s]) == 4 for s in (1, 2))
    kept = {s: os.stat(os.path.join(folder[s], "results.csv")) for s in (1, 2)}

    # A third seed, interrupted mid-way by a SIGTERM to the suite (what a scheduler
    # sends; Ctrl-C's SIGINT takes the same path): it stops its run, which saves and
    # prints its resume line; the finished runs are left alone.
    proc = _suite(out, "1,2,3")
    deadline = time.monotonic() + 600  # a bound on a broken test: minutes under load
    while _rows(folder[3]) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _rows(folder[3]) is not None and proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 130, text
    assert "skip     dqn CartPole-v1-1" in text and "skip     dqn CartPole-v1-2" in text
    assert "stopped  dqn CartPole-v1-3" in text and "the same command resumes" in text
    stopped_at = _rows(folder[3])
    assert stopped_at < 4 and not os.path.exists(os.path.join(folder[3], suite.DONE))
    with open(folder[3] + ".log") as f:
        assert f"qzoo: interrupted; resume with: qzoo resume {folder[3]}\n" in f.read()

    # The same command again: the finished runs untouched, the third resumed to its end.
    proc = _suite(out, "1,2,3")
    text = proc.communicate(timeout=600)[0]
    assert proc.returncode == 0, text
    assert f"resume   dqn CartPole-v1-3: resumes after iteration {stopped_at} of 4" in text
    assert "done     dqn CartPole-v1-3" in text and "] start" not in text
    with open(folder[3] + ".log") as f:
        assert f"resuming {folder[3]} at iteration {stopped_at + 1}" in f.read()
    assert _rows(folder[3]) == 4 and os.path.exists(os.path.join(folder[3], suite.DONE))
    for s in (1, 2):
        now = os.stat(os.path.join(folder[s], "results.csv"))
        assert (now.st_mtime_ns, now.st_size, now.st_ino) == (
            kept[s].st_mtime_ns, kept[s].st_size, kept[s].st_ino)  # fmt: skip


def test_a_suite_started_as_a_scripts_background_job_still_stops_its_runs(tmp_path):
    """`qzoo suite ... &` in a shell script starts it with SIGINT ignored. Were its
    children to inherit that, their Python would install no Ctrl-C handler and the
    suite's SIGINT (its way to stop a run) would do nothing; the suite sets its own
    handler before it starts them, which exec resets to the default, so they stop."""
    out = str(tmp_path / "suite")
    folder = os.path.join(out, "dqn", "CartPole-v1-1")
    env = {**os.environ, "PYTHONPATH": ROOT, "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "qzoo", "suite", "--agents", "dqn", "--games",
               "CartPole-v1", "--out", out, "--", *replacing(TINY, ["--iterations", "200"])]  # fmt: skip
    # `trap '' INT` is what bash does for a background job of a script; exec keeps it.
    proc = subprocess.Popen(["bash", "-c", f"trap '' INT; exec {shlex.join(command)}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=env)  # fmt: skip
    try:
        deadline = time.monotonic() + 600  # a bound on a broken test: minutes under load
        while _rows(folder) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _rows(folder) is not None and proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        text = proc.communicate(timeout=600)[0]
    finally:
        if proc.poll() is None:  # the run ignored the suite's SIGINT: a second signal
            proc.send_signal(signal.SIGTERM)  # kills it
            proc.communicate(timeout=600)
    assert proc.returncode == 130 and "stopped  dqn CartPole-v1-1" in text, text
    with open(folder + ".log") as f:
        assert f"qzoo: interrupted; resume with: qzoo resume {folder}\n" in f.read()


# --- the report: statistics by hand ----------------------------------------------------


def test_human_normalization_is_qzoos_table():
    # Breakout: random 1.7, human 30.5: (16.1 - 1.7) / 28.8 = 0.5. Pong: -20.7, 14.6.
    assert report.normalized("breakout", 16.1) == pytest.approx(0.5)
    assert report.normalized("pong", -20.7) == 0.0 and report.normalized("pong", 14.6) == 1.0
    assert np.isnan(report.normalized("CartPole-v1", 100.0))


def test_iqm_median_mean_of_a_hand_made_set():
    # Normalized: breakout 16.1 -> 0.5 and 44.9 -> 1.5; pong -20.7 -> 0, 14.6 -> 1; boxing
    # (0.1, 12.1) 24.1 -> 2. Pooled and sorted 0, 0.5, 1, 1.5, 2: int(0.25 * 5) = 1 cut at
    # each end, IQM = (0.5 + 1 + 1.5) / 3 = 1. Game means 1, 0.5, 2: median 1, mean 3.5 / 3.
    raw = {"breakout": [16.1, 44.9], "pong": [-20.7, 14.6], "boxing": [24.1]}
    games = [np.array([report.normalized(g, s) for s in scores]) for g, scores in raw.items()]
    result = report.aggregate(games, 500, np.random.default_rng(0))
    assert result["iqm"][0] == pytest.approx(1.0)
    assert result["median"][0] == pytest.approx(1.0)
    assert result["mean"][0] == pytest.approx(3.5 / 3)
    for estimate, low, high in result.values():
        assert low <= estimate <= high


def test_within_the_published_spread():
    runs = np.arange(101.0)  # 0..100: the 5th and 95th percentiles are 5 and 95
    band = report.spread(runs)
    assert band == (5.0, 95.0)
    assert report.within(5.0, band) and report.within(95.0, band) and report.within(50, band)
    assert not report.within(4.99, band) and not report.within(95.01, band)


def test_published_aggregates_equal_the_rliable_release():
    # PRESETS section 5 (qzoo/data/atari100k/README.md): DrQ(eps)'s 100 runs x 26 games
    # give median 0.3129, mean 0.4647 (rliable's colab), IQM 0.280; DER's table 0.161, 0.285.
    runs = data.published_runs()["drq_eps"]
    games = [np.array([report.normalized(g, s) for s in runs[g]]) for g in sorted(runs)]
    assert all(len(g) == 100 for g in games)
    assert stats.median(games) == pytest.approx(0.3129, abs=5e-5)
    assert stats.mean(games) == pytest.approx(0.4647, abs=5e-5)
    assert stats.iqm(games) == pytest.approx(0.280, abs=5e-4)
    means = data.published_scores()
    for game, scores in runs.items():  # drq_eps's published means are its runs' means
        assert means["drq_eps"][game][0] == pytest.approx(np.mean(scores), abs=1e-3)
    der = [np.array([report.normalized(g, m)]) for g, (m, _) in means["der"].items()]
    assert stats.median(der) == pytest.approx(0.161, abs=5e-4)
    assert stats.mean(der) == pytest.approx(0.285, abs=5e-4)


def test_report_from_fake_run_folders(tmp_path, capsys):
    out = str(tmp_path)
    # Pong at the published mean (inside the spread), Breakout far above it, Alien
    # unfinished (iteration 1 of 2: not scored).
    fake_run(os.path.join(out, "drq_eps", "pong-1"), "drq_eps", "pong", 1, [-21, -15, -9.057])
    fake_run(os.path.join(out, "drq_eps", "breakout-1"), "drq_eps", "breakout", 1,
             [0, 5, 1000.0], done=True)  # fmt: skip
    fake_run(os.path.join(out, "drq_eps", "alien-1"), "drq_eps", "alien", 1, [200, 300],
             iterations=2)  # fmt: skip
    status, text, _ = run_cli(capsys, "report", "--out", out, "--reps", "200",
                              "--games", "pong,breakout,alien,amidar")  # fmt: skip
    assert status == 0 and text.strip() == f"wrote {os.path.join(out, 'report.md')}"
    with open(os.path.join(out, "report.md")) as f:
        md = f.read()
    rows = {line.split(" | ")[0][2:]: line for line in md.splitlines() if line.startswith("| ")}
    # Pong's published drq_eps runs: 5-95% from -19.02 to 11.3 (np.percentile).
    assert rows["pong"].startswith("| pong | 1 of 1 | 1: -9.057 | 100 | -9.057 | -19.02 to 11.3 "
                                   "| yes |")  # fmt: skip
    assert rows["breakout"].startswith(
        "| breakout | 1 of 1 | 1: 1000 | 100 | 19.76 | 12.59 to 29.24 | no | 1: 100 |"
    )
    pong_runs = np.asarray(data.published_runs()["drq_eps"]["pong"])
    below = np.mean(pong_runs < -9.057) + 0.5 * np.mean(pong_runs == -9.057)
    assert f"| yes | 1: {100 * below:.0f} |" in rows["pong"]
    assert "not scored: seed 1 unfinished: iteration 1 of 2" in rows["alien"]
    assert "| amidar | 0 of 0 | not scored: no run |" in rows["amidar"]
    # Two games, one run each: pooled n = 2, nothing cut, so IQM = median = mean of
    # (-9.057 + 20.7) / 35.3 = 0.32983 and (1000 - 1.7) / 28.8 = 34.663: 17.496.
    expected = ((-9.057 + 20.7) / 35.3 + (1000 - 1.7) / 28.8) / 2
    for name in ("IQM", "Median", "Mean"):
        assert rows[name].startswith(f"| {name} | {expected:.3f} (no interval: one score per game)")
    # The published side: DrQ(eps)'s 100 runs on the same two games, with an interval.
    published = [np.array([report.normalized(g, s) for s in data.published_runs()["drq_eps"][g]])
                 for g in ("breakout", "pong")]  # fmt: skip
    assert f"| {stats.iqm(published):.3f} [" in rows["IQM"]
    assert "over the 2 games with finished runs (breakout, pong)" in md
    # P(qzoo > published): Breakout's run beats all 100, Pong's `below` of them.
    assert "(2 qzoo runs on 2 games, 200 resamples and relabellings)" in md
    assert f"averaged over games: {(1 + below) / 2:.3f} [" in md
    assert os.path.getsize(os.path.join(out, "curves-drq_eps.png")) > 10_000
