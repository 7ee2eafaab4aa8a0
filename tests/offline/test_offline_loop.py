"""Logging a run's experience in the DQN Replay Dataset's format, and training on a
dataset without acting."""

import json

import numpy as np

from qzoo.configuration import build_config
from qzoo.offline import dopamine
from qzoo.offline.storage import CheckpointPerBatchSampler
from qzoo.offline.writer import LoggedReplayWriter, RowLogger
from qzoo.replay import Row
from qzoo.run import checkpoint
from qzoo.run.trainer import Trainer, run


def qzoo_row(frame, action, reward, first=False, last=False, zero=False):
    return Row(np.full((1, 2, 2), frame, np.uint8), np.array([action]), np.array([reward]),
               np.array([first]), np.array([last]), np.array([zero]))  # fmt: skip


def test_rows_become_dopamine_rows(tmp_path):
    writer = LoggedReplayWriter(tmp_path, 100, (2, 2))
    logger = RowLogger(writer)
    stream = [
        qzoo_row(1, 0, 0.0, first=True),  # episode A
        qzoo_row(2, 1, 1.0, zero=True),  # a life lost on arrival: not terminal
        qzoo_row(3, 2, -1.0, last=True),  # A ends; its final frame is never stored
        qzoo_row(4, 3, 0.0, first=True),  # episode B
        qzoo_row(5, 4, 1.0),
        qzoo_row(6, 5, 0.0, first=True),  # B abandoned (a phase ended): C starts
        qzoo_row(7, 0, 0.0),
    ]
    for row in stream:
        logger.add(row)
    n = writer.add_count
    # Padding, A's rows (o_t, a_t, r_{t+1}, terminal_{t+1}), padding, B's one row
    # (terminal: cut short), padding, C's first row.
    assert writer.observation[:n, 0, 0].tolist() == [0, 0, 0, 1, 2, 0, 0, 0, 4, 0, 0, 0, 6]
    assert writer.action[:n].tolist() == [0, 0, 0, 0, 1, 0, 0, 0, 3, 0, 0, 0, 5]
    assert writer.reward[:n].tolist() == [0, 0, 0, 1, -1, 0, 0, 0, 1, 0, 0, 0, 0]
    assert writer.terminal[:n].tolist() == [0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0]


OPTIONS = {"env": "minatar/breakout", "iterations": "3", "train_frames": "700",
           "eval_frames": "100", "replay_capacity": "3000",
           "min_replay_capacity_fraction": "0.1", "log_replay_capacity": "500",
           "learn_period": "8"}  # fmt: skip


def logged_files(folder):
    """The dataset's arrays by file name (and logged.json's text: the run that logged)."""
    logs = folder / "replay_logs"
    files = {name: dopamine.read_array(logs / name, name.split("_ckpt")[0].replace("$store$_", ""))
             for name in sorted(p.name for p in logs.iterdir()) if "_ckpt." in name}  # fmt: skip
    return {**files, "logged.json": (logs / "logged.json").read_text()}


def test_a_resumed_run_logs_the_same_files(tmp_path):
    whole = tmp_path / "whole"
    list(run(Trainer(build_config("dqn", {**OPTIONS, "log_replay": str(whole)}))))
    cut = tmp_path / "cut"
    config = build_config("dqn", {**OPTIONS, "log_replay": str(cut)})
    first = Trainer(config)
    first.run_iteration(), first.run_iteration()
    checkpoint.save(tmp_path / "state.safetensors", first.state_dict())
    first.run_iteration()  # written past the checkpoint, then "killed"
    second = Trainer(config)
    second.load_state_dict(checkpoint.load(tmp_path / "state.safetensors"))
    rows = list(run(second))
    assert [r["iteration"] for r in rows] == [2, 3]
    expected, got = logged_files(whole), logged_files(cut)
    # 2,100 rows (MinAtar: a frame per step) in a buffer of 500: 4 full snapshots, 1 final.
    assert sorted(expected) == sorted(got) and len(expected) == 6 * 5 + 1
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
    assert json.loads(got["logged.json"]) == {"env": "minatar/breakout", "agent": "dqn", "seed": 1}


def test_offline_training_reads_the_logged_dataset_and_never_acts(tmp_path):
    logged = tmp_path / "logged"
    list(run(Trainer(build_config("dqn", {**OPTIONS, "log_replay": str(logged)}))))
    options = {**OPTIONS, "offline": str(logged), "iterations": "2", "train_frames": "200"}
    trainer = Trainer(build_config("dqn", options))
    rows = list(run(trainer))
    assert [r["train_num_updates"] for r in rows] == [0, 25, 25]  # one per 8 frames
    assert all(r["train_num_episodes"] == 0 for r in rows)
    assert np.isfinite(rows[-1]["train_loss"]) and rows[-1]["eval_num_episodes"] > 0
    assert trainer.replay.storage.suffixes == [0, 1, 2, 3, 4]


def test_checkpoint_subsets_and_batch_rl_reloading(tmp_path, capsys):
    logged = tmp_path / "logged"
    list(run(Trainer(build_config("dqn", {**OPTIONS, "log_replay": str(logged)}))))
    offline = {**OPTIONS, "offline": str(logged), "iterations": "3", "train_frames": "80"}
    # The last two of the five checkpoints (batch_rl's replay_file_start_index 3).
    last = Trainer(build_config("dqn", {**offline, "offline_checkpoints": "3:"}))
    assert last.replay.storage.suffixes == [3, 4]
    # The first 300 rows of each checkpoint, as a buffer of capacity 300.
    small = Trainer(build_config("dqn", {**offline, "offline_transitions": "300"}))
    assert small.replay.storage.num_rows == 300
    assert small.run_iteration() and small.run_iteration()["train_num_updates"] == 10
    # Two random checkpoints per iteration, each batch from one of them.
    config = build_config("dqn", {**offline, "offline_reload": "2"})
    trainer = Trainer(config)
    chosen = []
    for _ in range(4):
        trainer.run_iteration()
        chosen.append(trainer.replay.storage.suffixes)
        # Drawn with a generator of the test's own, not the run's replay stream.
        sampler = CheckpointPerBatchSampler(trainer.replay.storage, np.random.default_rng(0))
        for _ in range(5):
            _, b, _ = sampler.sample(32)
            assert len(set(b.tolist())) == 1  # one checkpoint per batch
    assert all(len(c) == 2 and set(c) <= {0, 1, 2, 3, 4} for c in chosen)
    assert len({tuple(c) for c in chosen[1:]}) > 1  # a new draw every iteration
    # The draws come from the replay stream: a resumed run draws the same ones.
    again = Trainer(config)
    again.run_iteration(), again.run_iteration()
    state = again.state_dict()
    resumed = Trainer(config)
    resumed.load_state_dict(state)
    resumed.run_iteration()
    assert resumed.replay.storage.suffixes == chosen[2]


def test_dopamine_files_are_converted_once_on_first_use(tmp_path):
    logged = tmp_path / "logged"
    list(run(Trainer(build_config("dqn", {**OPTIONS, "log_replay": str(logged)}))))
    options = {**OPTIONS, "offline": str(logged)}
    first = Trainer(build_config("dqn", options))
    assert isinstance(first.replay.storage.columns[0]["observation"], np.memmap)
    manifest = logged / "qzoo" / "dataset.json"
    made = manifest.stat().st_mtime_ns
    Trainer(build_config("dqn", options))  # the copy is reused, not made again
    assert manifest.stat().st_mtime_ns == made
    original = dopamine.read_checkpoint(logged / "replay_logs", 4)
    np.testing.assert_array_equal(first.replay.storage.columns[4]["observation"],
                                  original["observation"])  # fmt: skip


def test_a_new_run_is_refused_a_folder_holding_another_runs_dataset(tmp_path, capsys):
    """It would replace some of those checkpoints and leave the rest beside its own;
    the run that wrote them may still resume into it."""
    from qzoo.cli.main import main

    logs = tmp_path / "logs"
    small = ["--env", "minatar/breakout", "--train-frames", "700", "--eval-frames", "100",
             "--replay-capacity", "3000", "--min-replay-capacity-fraction", "0.1",
             "--log-replay-capacity", "500", "--log-replay", str(logs)]  # fmt: skip
    first = ["train", "dqn", *small, "--run-dir", str(tmp_path / "a")]
    assert main([*first, "--iterations", "1"]) == 0
    before = {p.name: p.read_bytes() for p in (logs / "replay_logs").iterdir()}
    capsys.readouterr()
    assert (
        main(["train", "dqn", *small, "--iterations", "1", "--run-dir", str(tmp_path / "b")]) == 2
    )
    err = capsys.readouterr().err
    assert err.startswith(f"qzoo: error: --log-replay {logs}: {logs / 'replay_logs'} already "
                          "holds a DQN Replay Dataset") and err.count("\n") == 1  # fmt: skip
    assert {p.name: p.read_bytes() for p in (logs / "replay_logs").iterdir()} == before
    assert not (tmp_path / "b").exists()
    assert main([*first, "--iterations", "2", "--accept-changes", "iterations"]) == 0
