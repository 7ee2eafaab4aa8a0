"""The run loop end to end: results.csv, checkpoints, and exact resume after SIGKILL,
Ctrl-C or SIGTERM."""

import csv
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from helpers import SMALL_HEADS

from qzoo.run.trainer import WALL_CLOCK_COLUMNS

DQN_ZOO_COLUMNS = [
    "iteration", "frame", "eval_episode_return", "train_episode_return",
    "eval_num_episodes", "train_num_episodes", "eval_frame_rate", "train_frame_rate",
    "train_exploration_epsilon", "train_state_value", "normalized_return",
    "capped_normalized_return", "human_gap",
]  # fmt: skip

ARGS = ["train", "dqn", "--env", "CartPole-v1", "--iterations", "3", "--train-frames", "600",
        "--eval-frames", "300", "--replay-capacity", "4000", "--min-replay-capacity-fraction",
        "0.1", "--no-tensorboard", "--no-progress"]  # fmt: skip


def qzoo(run_dir, extra=()):
    return [sys.executable, "-m", "qzoo", *ARGS, "--run-dir", str(run_dir), *extra]


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def comparable(rows):
    return [{k: v for k, v in row.items() if k not in WALL_CLOCK_COLUMNS} for row in rows]


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    subprocess.run(qzoo(run_dir), check=True, capture_output=True)
    return run_dir


def test_results_csv_has_dqn_zoo_columns(reference_run):
    rows = read_rows(reference_run / "results.csv")
    assert list(rows[0])[: len(DQN_ZOO_COLUMNS)] == DQN_ZOO_COLUMNS
    assert [int(r["iteration"]) for r in rows] == [0, 1, 2, 3]
    assert [int(r["frame"]) for r in rows] == [0, 600, 1200, 1800]
    first = rows[0]  # iteration 0 evaluates only
    assert first["train_num_episodes"] == "0" and float(first["train_exploration_epsilon"]) == 1.0
    assert math.isnan(float(first["train_episode_return"]))
    assert math.isnan(float(first["normalized_return"]))  # not an Atari game
    assert all(float(r["train_loss"]) >= 0 for r in rows[1:])
    assert all(int(r["train_num_updates"]) > 0 for r in rows[1:])
    assert sorted(os.listdir(reference_run)) == ["checkpoints", "config.json", "results.csv"]


def test_sigkill_at_any_moment_then_resume_gives_the_same_results(reference_run, tmp_path):
    run_dir = tmp_path / "run"
    rng = np.random.RandomState(0)
    kills = 0
    for attempt in range(21):
        process = subprocess.Popen(
            qzoo(run_dir), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            # Random moments (start-up, acting, learning, evaluating, checkpointing),
            # later on average as attempts go on; the last attempt runs to the end,
            # however loaded the machine (600 s only bounds a broken test).
            process.wait(timeout=rng.uniform(0.5, 3.0 + 0.5 * attempt) if attempt < 20 else 600)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
            kills += 1
            continue
        assert process.returncode == 0
        break
    else:
        pytest.fail("the run never finished")
    # Killed at least twice: the first waits (0.5-3.5 s) end before a run can (its
    # Python and PyTorch start-up alone takes about 3.5 CPU s).
    assert kills >= 2
    expected = comparable(read_rows(reference_run / "results.csv"))
    assert comparable(read_rows(run_dir / "results.csv")) == expected


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_then_qzoo_resume_gives_the_same_results(signum, reference_run, tmp_path):
    """SIGTERM (`kill`, a cluster scheduler) stops a run as Ctrl-C does: exit 130, the
    results of the last checkpoint, the resume line; the command it prints finishes
    the run as if it had never stopped."""
    run_dir = tmp_path / "run"
    # A shell's background jobs (CI runners, `cmd &`) inherit SIGINT as ignored, and
    # an ignored signal stays ignored across exec, so Python would never raise
    # KeyboardInterrupt. A handled one is reset to its default action, as a terminal's
    # Ctrl-C finds it: so the child starts while this process handles SIGINT.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = subprocess.Popen(qzoo(run_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    finally:
        signal.signal(signal.SIGINT, previous)
    checkpoint = run_dir / "checkpoints" / "latest.safetensors"
    # A generous deadline: on a loaded machine start-up alone can take minutes, and
    # signalling after the run has ended would test nothing.
    deadline = time.time() + 600
    while not checkpoint.exists() and time.time() < deadline and process.poll() is None:
        time.sleep(0.05)
    assert checkpoint.exists() and process.poll() is None, "the run ended before the signal"
    process.send_signal(signum)
    assert process.wait(timeout=600) == 130
    err = process.stderr.read().decode()
    assert "Traceback" not in err
    assert f"run folder: {os.path.abspath(run_dir)}" in err.splitlines()
    assert err.splitlines()[-1] == f"qzoo: interrupted; resume with: qzoo resume {run_dir}"
    assert 1 <= len(read_rows(run_dir / "results.csv")) < 4
    command = err.splitlines()[-1].split("resume with: qzoo ")[1].split()
    resumed = subprocess.run([sys.executable, "-m", "qzoo", *command], capture_output=True,
                             text=True, check=True)  # fmt: skip
    assert resumed.stderr.splitlines()[-1] == f"results: {run_dir / 'results.csv'}"
    expected = comparable(read_rows(reference_run / "results.csv"))
    assert comparable(read_rows(run_dir / "results.csv")) == expected


@pytest.mark.parametrize("agent, extra", [
    ("rainbow", {}), ("iqn", {}),
    # REM's mixtures; Dopamine's optimizers, whose state (TF1 Adam's step count) resumes.
    ("rem", {"optimizer": "adam_tf1", "cql_alpha": "0.5"}),
    ("offline_dqn", {"optimizer": "rmsprop_centered_tf1"}),
    # --compile (compiled.py): noise taped outside the graph, the optimizer in it; every
    # update compiled, the first after loading included.
    ("rainbow", {"compile": "true"}),
    # R2D1: sequence replay with input priorities, recurrent states in the checkpoint.
    ("r2d1", {"replay_capacity": "2000"}),
])  # fmt: skip
def test_state_round_trip_continues_identically(agent, extra, tmp_path):
    """Noise samples, taus, mixtures, priorities and beta all resume exactly from a
    checkpoint."""
    from qzoo.configuration import build_config
    from qzoo.run import checkpoint
    from qzoo.run.trainer import Trainer

    options = {"env": "CartPole-v1", "iterations": "3", "train_frames": "400",
               "eval_frames": "100", "replay_capacity": "1000",
               "min_replay_capacity_fraction": "0.1", **SMALL_HEADS, **extra}  # fmt: skip
    config = build_config(agent, options)
    first = Trainer(config)
    first.run_iteration(), first.run_iteration()
    path = tmp_path / "latest.safetensors"
    checkpoint.save(path, first.state_dict())
    a = first.run_iteration()
    # Every random stream comes back from the checkpoint; building `second` after
    # `first` has continued shows that nothing global carries over.
    second = Trainer(config)
    second.load_state_dict(checkpoint.load(path))
    b = second.run_iteration()
    assert [repr(v) for v in comparable([a])[0].values()] == [
        repr(v) for v in comparable([b])[0].values()
    ]
    assert a["train_num_updates"] > 0
