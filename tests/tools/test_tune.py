"""`qzoo tune` (Optuna: TPE, median pruner, a study in SQLite shared by processes) on tiny
CartPole runs: two workers on one study take distinct trials and prune; the best
trial's printed command reproduces its value; a killed or interrupted study continues
with the same command, the interrupted trial redone in its own run folders; bad
search-space input is refused in one line."""

import csv
import os
import shlex
import signal
import subprocess
import sys
import time

import optuna
import pytest
from helpers import REPO, ctrl_c_at_iteration, small_disk

from qzoo.cli.main import main
from qzoo.errors import UserError
from qzoo.tools import tune_space

TRAIN = ["--iterations", "3", "--train-frames", "300", "--eval-frames", "100",
         "--replay-capacity", "1000", "--min-replay-capacity-fraction", "0.3",
         "--no-tensorboard", "--no-progress", "--threads", "1"]  # fmt: skip
SPACE = ["--space", "learning_rate=loguniform:1e-5:3e-2", "--space", "batch_size=choice:32,64",
         "--space", "n_steps=int:1:5", "--space", "mlp_hidden=off"]  # fmt: skip


# Five times the training frames: a study of seconds, so that a signal sent when the first
# row is seen still finds it running on a loaded machine (not already finished).
LONGER = [*TRAIN[:3], "1500", *TRAIN[4:]]


def tune_argv(out, trials, *more, train=TRAIN):
    return ["tune", "dqn", "--env", "CartPole-v1", "--trials", str(trials), "--out", str(out),
            "--startup-trials", "1", "--warmup-iterations", "1", *SPACE, *more, "--", *train]  # fmt: skip


def start(argv, log):
    return subprocess.Popen([sys.executable, "-m", "qzoo", *argv], cwd=str(REPO), stdout=log,
                            stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})  # fmt: skip


def study_of(out):
    return optuna.load_study(study_name="dqn-CartPole-v1", storage=f"sqlite:///{out}/study.db")


def last_return(folder):
    with open(os.path.join(folder, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    return int(rows[-1]["iteration"]), float(rows[-1]["eval_episode_return"])


@pytest.mark.slow
def test_two_workers_share_one_study_prune_and_the_best_command_reproduces(tmp_path):
    out = tmp_path / "study"
    paths = [tmp_path / f"worker-{i}.log" for i in range(2)]
    with paths[0].open("w") as log0, paths[1].open("w") as log1:
        workers = [start(tune_argv(out, 8, "--sampler", "random", "--sampler-seed", str(i)), log)
                   for i, log in enumerate((log0, log1))]  # fmt: skip
        assert [w.wait(timeout=600) for w in workers] == [0, 0]
    texts = [path.read_text() for path in paths]
    study = study_of(out)
    trials = study.get_trials()
    states = [t.state for t in trials]
    finished = [t for t in trials if t.state.is_finished()]
    assert states.count(optuna.trial.TrialState.FAIL) == 0
    # Each trial ran once, by one worker: its number in one log only, its folder its own.
    ran = [[t for t in finished if f"trial {t.number}, seed 1:" in text] for text in texts]
    assert all(ran) and sorted(t.number for r in ran for t in r) == sorted(
        t.number for t in finished
    )
    assert 8 <= len(finished) <= 9  # two workers may both start the 8th trial
    assert sorted(os.listdir(out)) == sorted(
        ["study.db", *(f"trial-{t.number}-seed-1" for t in finished)]
    )
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned, "no trial was pruned"
    for t in pruned:  # stopped at the saved iteration it fell below the median at
        iteration, value = last_return(out / f"trial-{t.number}-seed-1")
        assert iteration >= 1 and max(t.intermediate_values) == iteration  # after the warmup
        assert t.intermediate_values[iteration] == value
    for t in finished:
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert last_return(out / f"trial-{t.number}-seed-1") == (3, t.value)
    # The best trial's command, run afresh, gives the value the study reports.
    best = study.best_trial
    summary = texts[0][texts[0].index("qzoo tune: study") :]
    assert f"best: trial {best.number}, value {best.value:g}" in summary
    command = summary.split("reproduce with:\n", 1)[1].splitlines()[0].strip()
    argv = shlex.split(command)
    assert argv[:3] == ["qzoo", "train", "dqn"] and "--learning-rate" in argv
    assert main(argv[1:]) == 0
    folder = argv[argv.index("--run-dir") + 1]
    assert last_return(folder) == (3, best.value)
    assert float(argv[argv.index("--learning-rate") + 1]) == best.params["learning_rate"]


@pytest.mark.slow
@pytest.mark.parametrize("stop", ["SIGINT", "SIGKILL"])
def test_a_stopped_study_continues_with_the_same_command(tmp_path, stop):
    out = tmp_path / "study"
    argv = tune_argv(out, 2, "--heartbeat", "1", train=LONGER)
    with open(tmp_path / "first.log", "w+") as log:
        worker = start(argv, log)
        results = out / "trial-0-seed-1" / "results.csv"
        deadline = time.time() + 600  # a bound on a broken test: minutes under load
        while not (results.exists() and len(results.read_text().splitlines()) >= 2):
            assert worker.poll() is None and time.time() < deadline
            time.sleep(0.05)
        assert worker.poll() is None, "the study ended before it could be stopped"
        worker.send_signal(getattr(signal, stop))
        status = worker.wait(timeout=600)
    text = (tmp_path / "first.log").read_text()
    if stop == "SIGINT":
        assert status == 130 and "trial 0 will be redone" in text, text[-4000:]
    else:
        assert status == -signal.SIGKILL, text[-4000:]
    with open(tmp_path / "second.log", "w+") as log:
        assert start(argv, log).wait(timeout=600) == 0
    text = (tmp_path / "second.log").read_text()
    trials = study_of(out).get_trials()
    states = {t.number: t.state for t in trials}
    assert states[0] == optuna.trial.TrialState.FAIL
    done = [t for t in trials if t.state.is_finished() and t.state.name != "FAIL"]
    assert len(done) == 2  # nothing counted twice
    retry = [t for t in done if t.user_attrs["folder_trial"] == 0 and t.number != 0]
    assert len(retry) == 1 and retry[0].params == trials[0].params
    # The retry resumed trial 0's folder (one row was saved), and made no folder of its own.
    assert f"resuming {out / 'trial-0-seed-1'} at iteration" in text
    assert f"trial-{retry[0].number}-seed-1" not in os.listdir(out)
    if retry[0].state == optuna.trial.TrialState.COMPLETE:
        assert last_return(out / "trial-0-seed-1") == (3, retry[0].value)


@pytest.mark.parametrize(
    "space, says",
    [
        ("learning_rate=loguniform:1e-3:1e-5", "expected LOW < HIGH (got 0.001 and 1e-05)"),
        (
            "learning_rate=loguniform:0:1e-3",
            "bad value 0 in loguniform:0:1e-3; --learning-rate takes a number in (0, 1]",
        ),
        (
            "exploration_epsilon_end_value=loguniform:0:0.1",
            "expected loguniform bounds > 0 (got 0)",
        ),
        ("learning_rate=gaussian:0:1", "expected loguniform:LOW:HIGH, uniform:LOW:HIGH"),
        ("batch_size=uniform:16:64", "expected int:LOW:HIGH or logint:LOW:HIGH"),
        ("batch_size=choice:32,0", "bad value 0 in choice:32,0; --batch-size takes"),
        ("n_steps=int:1:2.5", "bad value 2.5 in int:1:2.5"),
        ("learning_rte=uniform:0:1", "unknown option 'learning_rte'; did you mean learning_rate?"),
        ("seed=int:1:3", "seed is not searched"),
        ("learning_rate", "expected NAME=SPEC"),
        ("dueling=int:0:1", "expected choice:A,B,... (--dueling takes true or false)"),
    ],
)
def test_bad_search_space_is_refused_in_one_line(tmp_path, capsys, space, says):
    argv = ["tune", "dqn", "--env", "CartPole-v1", "--out", str(tmp_path / "s"),
            "--space", space, "--", *TRAIN]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("qzoo: error: --space") and says in err, err
    assert not (tmp_path / "s").exists()  # refused before the study is made


def test_a_space_bound_that_qzoo_train_refuses_is_refused(tmp_path, capsys):
    argv = ["tune", "dqn", "--env", "CartPole-v1", "--out", str(tmp_path / "s"),
            "--space", "batch_size=choice:32,512", "--", *TRAIN]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("qzoo: error: --space batch_size: 512: --min-replay-capacity-fraction")


def test_the_space_is_the_presets_with_the_command_line_over_it():
    import optuna.distributions as od

    space = tune_space.search_space(
        "prioritized", "gym", tune_space.parse_spaces(["learning-rate=loguniform:1e-5:1e-3",
                                                       "n_steps=off", "dueling=choice:true,false"]),
        fixed={"batch_size"},
    )  # fmt: skip
    assert space["learning_rate"] == od.FloatDistribution(1e-5, 1e-3, log=True)
    assert space["dueling"] == od.CategoricalDistribution([True, False])
    assert space["priority_exponent"] == od.FloatDistribution(0.3, 0.9)  # the preset's
    assert space["target_network_update_period"] == od.CategoricalDistribution(
        [100, 250, 500, 1000, 2000]
    )  # the domain's, in frames
    assert "n_steps" not in space and "batch_size" not in space
    assert tune_space.as_option(0.1 + 0.2) == "0.30000000000000004"  # exact on the command line


def test_a_trial_of_several_seeds_is_their_mean_and_each_seed_a_run_folder(tmp_path, capsys):
    out = tmp_path / "study"
    argv = ["tune", "dqn", "--env", "CartPole-v1", "--trials", "1", "--seeds", "2",
            "--out", str(out), "--space", "learning_rate=choice:0.001", "--space", "n_steps=off",
            "--space", "batch_size=off", "--space", "discount=off", "--space", "learn_period=off",
            "--space", "exploration_epsilon_end_value=off", "--space", "mlp_hidden=off",
            "--space", "exploration_epsilon_decay_frame_fraction=off",
            "--space", "target_network_update_period=off", "--", *TRAIN]  # fmt: skip
    assert main(argv) == 0
    [trial] = study_of(out).get_trials()
    returns = [last_return(out / f"trial-0-seed-{seed}")[1] for seed in (1, 2)]
    assert trial.value == sum(returns) / 2
    assert [trial.user_attrs["seed_1"], trial.user_attrs["seed_2"]] == returns
    # The pruner saw seed 2's iteration i at step 4 + i (3 iterations and iteration 0).
    assert sorted(trial.intermediate_values) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert trial.intermediate_values[7] == returns[1]
    printed = capsys.readouterr().out
    assert f"mean of seed 1: {returns[0]:g}, seed 2: {returns[1]:g}" in printed
    assert "--seed 2 --run-dir" in printed and "--learning-rate 0.001" in printed


def test_iqm_of_a_trials_seeds_cuts_a_quarter_at_each_end():
    from qzoo.tools.tune_trial import aggregate

    assert aggregate([1.0, 2.0, 3.0, 4.0, 100.0], "iqm") == 3.0  # int(5/4) = 1 cut each end
    assert aggregate([1.0, 2.0, 3.0, 4.0, 100.0], "mean") == 22.0


def test_an_out_that_is_a_file_is_refused_in_one_line(tmp_path, capsys):
    """Issue 34 #1: was a FileExistsError traceback from open_study."""
    (tmp_path / "notes.txt").write_text("mine\n")
    argv = ["tune", "dqn", "--env", "CartPole-v1", "--trials", "1",
            "--out", str(tmp_path / "notes.txt"), "--", *TRAIN]  # fmt: skip
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"qzoo: error: --out {tmp_path / 'notes.txt'}: a file; expected a folder (a new one, "
        "or the study's)\n"
    )
    assert (tmp_path / "notes.txt").read_text() == "mine\n"
    assert os.listdir(tmp_path) == ["notes.txt"]


def test_a_storage_that_cannot_be_opened_leaves_no_folder_behind(tmp_path, capsys, monkeypatch):
    """Issue 34 #10: the refusal left an empty OUT folder. It is said at once: only the
    race of processes creating the tables together is tried again (this waited 8 s)."""
    from qzoo.tools import tune

    slept = []
    monkeypatch.setattr(tune.time, "sleep", slept.append)
    out = tmp_path / "runs" / "study"
    argv = ["tune", "dqn", "--env", "CartPole-v1", "--trials", "1", "--out", str(out),
            "--storage", f"sqlite:///{tmp_path}", "--", *TRAIN]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"qzoo: error: --storage: cannot open 'sqlite:///{tmp_path}' (")
    assert err.count("\n") == 1
    assert os.listdir(tmp_path) == []
    assert slept == []


def test_ctrl_c_in_a_trial_says_one_thing_how_to_continue(tmp_path, monkeypatch, capfd):
    """Issue 34 #2: Optuna's "Trial 0 failed" warning and a KeyboardInterrupt traceback
    came before qzoo's line, and the trial's run folder printed its own resume command."""
    ctrl_c_at_iteration(monkeypatch, 2)
    out = tmp_path / "study"
    argv = tune_argv(out, 1)
    assert main(argv) == 130
    captured = capfd.readouterr()  # Optuna logs to the stderr it found at import
    assert "Traceback" not in captured.err and "failed" not in captured.err
    assert "qzoo resume" not in captured.err + captured.out
    assert captured.err.splitlines()[-1] == (
        "qzoo tune: interrupted; trial 0 will be redone, resuming its run folders; continue "
        f"with: {shlex.join(['qzoo', *argv])}"
    )
    assert [r.split(",")[0] for r in (out / "trial-0-seed-1" / "results.csv").read_text().split()][
        :3
    ] == ["iteration", "0", "1"]


def test_a_study_on_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, capsys):
    """SQLite cannot create the study's tables: the empty database file and the folder
    the command made went unremoved (issue 34's fault pass)."""
    # lazily unmounted: SQLAlchemy's pool may hold the removed file open until collected
    with small_disk(tmp_path / "disk", lazy=True) as disk:
        argv = ["tune", "dqn", "--env", "CartPole-v1", "--trials", "1", "--out",
                str(disk / "study"), "--space", "batch_size=off", "--", *TRAIN]  # fmt: skip
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"qzoo: error: --storage: cannot open 'sqlite:///{disk}/study/")
        assert err.count("\n") == 1 and "full" in err, err
        assert os.listdir(disk) == ["filler"]


def test_a_process_left_waiting_for_anothers_trial_ends_within_a_second(tmp_path, monkeypatch):
    """With no trial left to start, a process looked at the study once a heartbeat (60 s
    by default): it ended up to a minute after the other's last trial. It looks each
    second; the other's trial completes during the third look's sleep here. Stale trials
    are still looked for once a heartbeat, not at each look: two waiting processes
    failing one stale trial together would each enqueue a retry."""
    from qzoo.tools import tune

    study = optuna.create_study(storage=f"sqlite:///{tmp_path}/study.db", direction="maximize")
    running = study.ask()  # another process's trial, the last of --trials 1
    slept, stale_looks = [], []

    def sleep(seconds):
        slept.append(seconds)
        if len(slept) == 3:
            study.tell(running, 1.0)

    monkeypatch.setattr(tune.time, "sleep", sleep)
    monkeypatch.setattr(optuna.storages, "fail_stale_trials", stale_looks.append)
    tune._run_trials(study, objective=None, options=tune.TuneOptions(trials=1, heartbeat=60))
    assert slept == [1.0, 1.0, 1.0]
    assert len(stale_looks) == 1  # the three seconds are within one heartbeat
    assert [t.state for t in study.get_trials()] == [optuna.trial.TrialState.COMPLETE]


@pytest.mark.parametrize(
    "statement, cause, retried",
    [
        ("CREATE TABLE studies (study_name VARCHAR(512), UNIQUE (study_name))",
         "table studies already exists", True),
        ("INSERT INTO alembic_version (version_num) VALUES (?)",
         "UNIQUE constraint failed: alembic_version.version_num", True),
        ("CREATE UNIQUE INDEX ix_studies_study_name ON studies (study_name)",
         "database or disk is full", False),
    ],
)  # fmt: skip
def test_only_the_race_to_create_the_tables_is_tried_again(tmp_path, monkeypatch, statement,
                                                           cause, retried):  # fmt: skip
    """Processes started together race to create the study's tables: the loser's error
    is tried again. Any other error is said at once, even from a statement whose SQL
    says UNIQUE (SQLAlchemy's message holds the statement; the driver's does not)."""
    import sqlite3

    import sqlalchemy.exc

    from qzoo.tools import tune

    calls, slept = [], []

    class FirstFails(optuna.storages.RDBStorage):
        def __init__(self, *args, **kwargs):
            calls.append(1)
            if len(calls) == 1:
                error = sqlite3.OperationalError(cause)
                raise sqlalchemy.exc.OperationalError(statement, (), error)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(optuna.storages, "RDBStorage", FirstFails)
    monkeypatch.setattr(tune.time, "sleep", slept.append)
    plan = tune.Plan("dqn", "CartPole-v1", [], [1], str(tmp_path / "study"), 3, "mean")
    if retried:
        study = tune.open_study(plan, tune.TuneOptions())
        assert study.study_name == "dqn-CartPole-v1" and slept == [0.5]
    else:
        with pytest.raises(UserError, match=f"--storage: cannot open .*{cause}"):
            tune.open_study(plan, tune.TuneOptions())
        assert slept == [] and not (tmp_path / "study").exists()
