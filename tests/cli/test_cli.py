"""Bad input: one line naming the bad value, exit code 2, nothing written lost."""

import subprocess
import sys

from qzoo.cli.main import main, parse, train_parser

TINY = ["--iterations", "1", "--train-frames", "300", "--eval-frames", "100",
        "--replay-capacity", "1000", "--min-replay-capacity-fraction", "0.1",
        "--no-tensorboard"]  # fmt: skip


def test_replay_that_cannot_fit_is_refused(capsys, tmp_path):
    run_dir = tmp_path / "run"
    assert main(["train", "dqn", "--replay-capacity", "100000000", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert "GiB" in err and err.count("\n") == 1 and not run_dir.exists()


def test_subprocess_has_no_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "qzoo", "train", "dqn", "--env", "pongg"],
        check=False, capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.startswith("qzoo: error: --env: bad value pongg;")
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1


def test_corrupt_checkpoint_is_reported_and_kept(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(run_dir)] + TINY) == 0
    ckpt = run_dir / "checkpoints" / "latest.safetensors"
    results = (run_dir / "results.csv").read_bytes()
    ckpt.write_bytes(b"not a checkpoint")
    capsys.readouterr()
    assert main(["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(run_dir)] + TINY) == 2
    err = capsys.readouterr().err
    assert "is corrupt" in err and str(ckpt) in err
    assert ckpt.read_bytes() == b"not a checkpoint"
    assert (run_dir / "results.csv").read_bytes() == results


def test_resume_with_different_settings_is_refused(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    assert main(["train", "dqn", "--env", "CartPole-v1", "--run-dir", run_dir] + TINY) == 0
    capsys.readouterr()
    code = main(
        ["train", "dqn", "--env", "CartPole-v1", "--run-dir", run_dir, "--seed", "7"] + TINY
    )
    assert code == 2 and "--seed 7 differs from 1" in capsys.readouterr().err


def test_finished_run_is_not_redone(tmp_path, capsys):
    run_dir = str(tmp_path / "run")
    argv = ["train", "double_q", "--env", "CartPole-v1", "--run-dir", run_dir] + TINY
    assert main(argv) == 0
    results = tmp_path / "run" / "results.csv"
    rows = results.read_text()
    assert rows.count("\n") == 3  # header, iteration 0, iteration 1
    assert main(argv) == 0 and "is complete" in capsys.readouterr().err
    assert results.read_text() == rows


def test_parse_keeps_the_given_options_as_typed():
    argv = ["dqn", "--learning-rate", "1e-4", "--double-q", "--no-tensorboard", "--dueling=yes",
            "--max-abs-reward", "-3", "--vmax=-inf", "--prioritized", "false"]  # fmt: skip
    assert parse(train_parser("dqn", argv), argv) == {
        "agent": "dqn", "learning_rate": "1e-4", "double_q": "true", "tensorboard": "false",
        "dueling": "yes", "max_abs_reward": "-3", "vmax": "-inf", "prioritized": "false",
    }  # fmt: skip


def test_tensorboard_scalars_are_written(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = tmp_path / "run"
    argv = ["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(run_dir)] + TINY[:-1]
    assert main(argv) == 0
    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert {"eval_episode_return", "train_loss", "train_mean_q", "train_frame_rate"} <= set(tags)
    assert [e.step for e in events.Scalars("eval_episode_return")] == [0, 300]


def test_bench_train_lines_say_what_was_measured(capsys):
    """Each JSON line names the agent and the options that change its speed, so that
    lines from different runs (an lz4 replay, bfloat16, async acting) can be told apart."""
    import json

    argv = ["bench", "train", "--agent", "dqn", "--env", "CartPole-v1", "--frames", "1000"]
    assert main(argv) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {line["name"] for line in lines} >= {"train_agent_steps_per_second",
                                                "train_updates_per_second"}  # fmt: skip
    for line in lines:
        assert (line["agent"], line["precision"], line["acting"]) == ("dqn", "float32", "serial")
        assert line["replay_compression"] == "none" and line["value"] > 0
