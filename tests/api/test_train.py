"""qzoo.train and qzoo.resume: the command line's run from Python (the same rows for the
same options), callbacks that stop a run at a row or within an iteration, and the
resume that then gives what an uninterrupted run gives."""

import csv
import multiprocessing
import threading

import pytest
from helpers import TINY, TINY_ARGS, replacing

import qzoo
from qzoo.cli.main import main
from qzoo.run.trainer import WALL_CLOCK_COLUMNS

OPTIONS = {**TINY, "iterations": 3, "tensorboard": False}


def rows_of(run_dir):
    """results.csv's rows without the wall-clock columns (they differ between runs)."""
    with open(run_dir / "results.csv", newline="") as f:
        return [{k: v for k, v in row.items() if k not in WALL_CLOCK_COLUMNS}
                for row in csv.DictReader(f)]  # fmt: skip


def without_clock(rows):
    """The rows without the wall-clock columns, each value as its repr (NaN == NaN)."""
    return [{k: repr(v) for k, v in row.items() if k not in WALL_CLOCK_COLUMNS} for row in rows]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("api") / "whole"
    result = qzoo.train("dqn", env="CartPole-v1", run_dir=str(folder), progress=False, **OPTIONS)
    return folder, result


def test_python_and_command_line_give_identical_rows(uninterrupted, tmp_path):
    folder, result = uninterrupted
    argv = ["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "cli"),
            *replacing(TINY_ARGS, ["--iterations", "3", "--train-frames", "400",
                                   "--eval-frames", "200", "--learn-period", "4"])]  # fmt: skip
    assert main(argv) == 0
    assert rows_of(tmp_path / "cli") == rows_of(folder)
    assert len(result.rows) == 4 and result.stopped is None
    assert result.final_return == result.rows[-1]["eval_episode_return"]
    assert without_clock(result.rows) == [
        {
            k: repr(float(v) if "." in v or "e" in v or v == "nan" else int(v))
            for k, v in row.items()
        }
        for row in rows_of(folder)
    ]


def test_a_config_object_and_options_over_it(uninterrupted, tmp_path):
    config = qzoo.config("dqn", env="CartPole-v1", **{**OPTIONS, "iterations": 1})
    result = qzoo.train(config, run_dir=str(tmp_path / "r"), progress=False, iterations=3)
    assert result.config.iterations == 3 and result.config.learn_period == 4
    assert without_clock(result.rows) == without_clock(uninterrupted[1].rows)
    with pytest.raises(qzoo.ConfigError, match="--train-frames: bad value 0"):
        qzoo.train(config, train_frames=0)


def test_a_callback_that_returns_false_stops_and_resume_completes_the_same_run(
    uninterrupted, tmp_path
):
    seen = []

    def stop_after_first(row):
        seen.append(row["iteration"])
        return row["iteration"] < 1  # False at iteration 1

    folder = tmp_path / "stopped"
    result = qzoo.train("dqn", env="CartPole-v1", run_dir=str(folder), progress=False,
                        callbacks=[stop_after_first], **OPTIONS)  # fmt: skip
    assert seen == [0, 1] and [r["iteration"] for r in result.rows] == [0, 1]
    assert "stop_after_first returned False at iteration 1" in result.stopped
    assert [r["iteration"] for r in rows_of(folder)] == ["0", "1"]
    resumed = qzoo.resume(str(folder), progress=False)
    assert resumed.stopped is None
    assert rows_of(folder) == rows_of(uninterrupted[0])
    assert without_clock(resumed.rows) == without_clock(uninterrupted[1].rows)


class StopAtFrame(qzoo.Callback):
    frame_period = 100

    def __init__(self, frame):
        self.frame, self.calls = frame, []

    def on_frames(self, frame):
        self.calls.append(frame)
        return frame < self.frame


def test_a_frame_callback_stops_within_an_iteration_and_resume_redoes_it(uninterrupted, tmp_path):
    folder, stop = tmp_path / "mid", StopAtFrame(1000)
    result = qzoo.train("dqn", env="CartPole-v1", run_dir=str(folder), progress=False,
                        callbacks=[stop], **OPTIONS)  # fmt: skip
    # Iteration 3 trains frames 800 to 1,200: the stop falls inside it, after row 2.
    assert stop.calls == list(range(100, 1001, 100))
    assert [r["iteration"] for r in result.rows] == [0, 1, 2]
    assert "returned False at frame 1,000" in result.stopped
    qzoo.resume(str(folder), progress=False)
    assert rows_of(folder) == rows_of(uninterrupted[0])


def test_built_in_stops(tmp_path):
    result = qzoo.train("dqn", env="CartPole-v1", run_dir=str(tmp_path / "a"), progress=False,
                        callbacks=[qzoo.StopAtReturn(5.0)], **OPTIONS)  # fmt: skip
    first = result.rows[0]["eval_episode_return"]
    assert first >= 5.0 and len(result.rows) == 1
    assert result.stopped == f"eval_episode_return {first:g} reached 5 at iteration 0"
    result = qzoo.train("dqn", env="CartPole-v1", run_dir=str(tmp_path / "b"), progress=False,
                        callbacks=[qzoo.StopAfterTime(0.0)], **OPTIONS)  # fmt: skip
    assert len(result.rows) == 1 and "budget of 0 s" in result.stopped


@pytest.mark.parametrize(
    "mode", [{"acting": "async"}, {"acting": "parallel", "actor_workers": 2, "num_envs": 2}]
)
def test_a_stop_within_an_iteration_leaves_no_thread_or_process(mode, tmp_path):
    threads = threading.active_count()
    folder = tmp_path / "run"
    result = qzoo.train("dqn", env="CartPole-v1", run_dir=str(folder), progress=False,
                        callbacks=[StopAtFrame(500)], **OPTIONS, **mode)  # fmt: skip
    assert [r["iteration"] for r in result.rows] == [0, 1] and result.stopped
    assert threading.active_count() == threads
    assert multiprocessing.active_children() == []
    resumed = qzoo.resume(str(folder), progress=False)
    assert [r["iteration"] for r in resumed.rows] == [0, 1, 2, 3]


def test_resume_refuses_options_that_make_another_run(uninterrupted):
    with pytest.raises(qzoo.ConfigError, match="--learning-rate: a resume keeps the run's"):
        qzoo.resume(str(uninterrupted[0]), learning_rate=1e-3)
    with pytest.raises(qzoo.UserError, match="does not exist"):
        qzoo.resume("no/such/run")
