"""`qzoo train --track`: Weights & Biases, offline (WANDB_MODE=offline, WANDB_DIR in a
temporary folder), read back from the offline run's own transaction log: the same
scalars as results.csv, the resolved config, the run folder's name; a resume and
`qzoo record` reattach to the same W&B run through the id kept in the folder."""

import csv
import json
import math
import os

import pytest
import wandb_files
from helpers import TINY_ARGS, replacing

from qzoo.cli.main import main


@pytest.fixture
def offline(tmp_path, monkeypatch):
    """W&B offline into this test's folder (wandb reads its settings once per process
    until teardown)."""
    import wandb

    wandb.teardown()
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")

    def runs():
        """The offline runs' files, once wandb's service has written them out."""
        wandb.teardown()
        return wandb_files.offline_runs(str(tmp_path))

    yield runs
    wandb.teardown()


def results(folder):
    with open(os.path.join(folder, "results.csv"), newline="") as f:
        return list(csv.DictReader(f))


def same(logged, written):
    """A logged number against its results.csv cell (nan equals nan)."""
    written = float(written)
    return (math.isnan(logged) and math.isnan(written)) or logged == written


def test_a_tracked_run_logs_its_rows_config_and_name(tmp_path, offline):
    folder = str(tmp_path / "cartpole-tracked")
    argv = ["train", "dqn", "--env", "CartPole-v1", "--run-dir", folder, "--track",
            "--learning-rate", "0.0005", *TINY_ARGS]  # fmt: skip
    assert main(argv) == 0
    with open(os.path.join(folder, "wandb.json")) as f:
        saved = json.load(f)
    assert saved["project"] == "qzoo" and saved["entity"] == ""
    [path] = offline()
    history, config, name, run_id = wandb_files.logged(path)
    assert run_id == saved["id"] and name == "cartpole-tracked"
    assert config["learning_rate"] == 0.0005 and config["env"] == "CartPole-v1"
    assert config["track"] is True and config["iterations"] == 2
    rows = results(folder)
    assert [h["iteration"] for h in history] == [0, 1, 2]
    for logged, row in zip(history, rows):
        numeric = {k: v for k, v in row.items() if v not in ("",)}
        assert set(numeric) <= set(logged) | {"iteration", "frame"}
        for key, value in numeric.items():
            assert same(logged[key], value), key
    assert history[2]["frame"] == 600 and history[2]["eval_episode_return"] == float(
        rows[2]["eval_episode_return"]
    )


def test_a_resume_and_a_recording_reattach_to_the_same_wandb_run(tmp_path, offline):
    folder = str(tmp_path / "run")
    argv = ["train", "dqn", "--env", "CartPole-v1", "--run-dir", folder, "--track", *TINY_ARGS]
    assert main(argv) == 0
    assert main(replacing(argv, ["--iterations", "3", "--accept-changes", "iterations"])) == 0
    video = str(tmp_path / "play.mp4")
    assert main(["record", folder, "--out", video, "--frames", "10"]) == 0
    first, second, third = offline()
    ids = {wandb_files.logged(p)[3] for p in (first, second, third)}
    with open(os.path.join(folder, "wandb.json")) as f:
        assert ids == {json.load(f)["id"]}
    assert [h["iteration"] for h in wandb_files.logged(second)[0]] == [3]  # only the new row
    [logged] = wandb_files.logged(third)[0]
    assert logged["video._type"] == "video-file" and logged["video_iteration"] == 3
    kept = os.path.join(os.path.dirname(third), "files", logged["video.path"])
    assert os.path.getsize(kept) == os.path.getsize(video) == logged["video.size"]


def test_an_untracked_run_writes_no_wandb_file(tiny_run):
    assert not os.path.exists(os.path.join(tiny_run, "wandb.json"))


def test_wandb_that_cannot_start_is_one_line(tmp_path, monkeypatch, capsys):
    import wandb

    wandb.teardown()
    for name in ("WANDB_API_KEY", "WANDB_SILENT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"WANDB_MODE": "online", "WANDB_DIR": str(tmp_path), "HOME": str(tmp_path),
                        "WANDB_CONFIG_DIR": str(tmp_path / "config")}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    try:
        argv = ["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "run"),
                "--track", *TINY_ARGS]  # fmt: skip
        assert main(argv) == 2
    finally:
        wandb.teardown()
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == f"run folder: {tmp_path / 'run'}"  # W&B starts in the run's folder
    err = "\n".join(lines[1:]) + "\n"
    assert err.startswith("qzoo: error: --track: W&B could not start (") and err.count("\n") == 1
    assert "WANDB_MODE=offline" in err
