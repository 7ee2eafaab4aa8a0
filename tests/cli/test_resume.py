"""`qzoo resume RUN`: the options come from the run folder's config.json (or the
checkpoint's config where it was deleted), options after RUN may change only what a
resume may change, and bad input is one line, exit 2, the folder left as it was."""

import json
import os
import shutil

import pytest
from helpers import TINY_ARGS, ctrl_c_at_iteration

from qzoo.cli.main import main
from qzoo.run import trainer as loop

# Options a plain `qzoo train dqn` would not have: a resume must take them from the folder.
OWN = ["--learning-rate", "0.0005", "--seed", "7", "--mlp-hidden", "32", "--double-q"]


def _rows(run_dir):
    return (run_dir / "results.csv").read_text().splitlines()


def _snapshot(folder):
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                found[os.path.relpath(path, folder)] = f.read()
    return found


@pytest.fixture
def interrupted(tmp_path, monkeypatch, capsys):
    """A tiny run with OWN options, interrupted (KeyboardInterrupt) in iteration 2 of
    2; returns its folder and the last stderr line."""
    run_dir = tmp_path / "run"
    run_iteration = ctrl_c_at_iteration(monkeypatch, 2)
    argv = ["train", "dqn", "--env", "CartPole-v1", *TINY_ARGS, *OWN, "--run-dir", str(run_dir)]
    assert main(argv) == 130
    monkeypatch.setattr(loop.Trainer, "run_iteration", run_iteration)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"run folder: {os.path.abspath(run_dir)}" in err.splitlines()
    return run_dir, err.splitlines()[-1]


def test_the_printed_command_resumes_with_the_runs_own_options(interrupted, capsys):
    run_dir, line = interrupted
    assert line == f"qzoo: interrupted; resume with: qzoo resume {run_dir}"
    saved = json.loads((run_dir / "config.json").read_text())
    assert [r.split(",")[0] for r in _rows(run_dir)] == ["iteration", "0", "1"]
    assert main(["resume", str(run_dir)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert f"resuming {run_dir} at iteration 2" in err
    assert err[-1] == f"results: {os.path.abspath(run_dir / 'results.csv')}"
    assert [r.split(",")[0] for r in _rows(run_dir)] == ["iteration", "0", "1", "2"]
    # The same run: not a single option changed (the folder refuses a different run).
    after = json.loads((run_dir / "config.json").read_text())
    assert after == saved
    assert (after["learning_rate"], after["seed"], after["mlp_hidden"], after["double_q"]) == (
        0.0005, 7, 32, True,
    )  # fmt: skip


def test_options_after_run_may_extend_it_and_change_how_it_runs(interrupted, capsys):
    run_dir, _ = interrupted
    assert main(["resume", str(run_dir), "--iterations", "3", "--snapshot-interval", "0"]) == 0
    err = capsys.readouterr().err
    assert "accepting --iterations 3 (was 2)" in err
    assert [r.split(",")[0] for r in _rows(run_dir)] == ["iteration", "0", "1", "2", "3"]
    saved = json.loads((run_dir / "config.json").read_text())
    assert (saved["iterations"], saved["snapshot_interval"], saved["seed"]) == (3, 0, 7)
    networks = sorted(os.listdir(run_dir / "checkpoints" / "networks"))
    assert networks == ["iteration-0.safetensors", "iteration-1.safetensors"]  # none since
    # The extended run resumes as it now is: nothing more to do.
    assert main(["resume", str(run_dir)]) == 0
    assert f"{run_dir} is complete (3 iterations)" in capsys.readouterr().err


def test_a_deleted_config_json_resumes_from_the_checkpoints_config(interrupted):
    run_dir, _ = interrupted
    saved = json.loads((run_dir / "config.json").read_text())
    os.unlink(run_dir / "config.json")
    assert main(["resume", str(run_dir)]) == 0
    assert json.loads((run_dir / "config.json").read_text()) == saved
    assert len(_rows(run_dir)) == 1 + 3


@pytest.mark.parametrize("make, argv, message", [
    (None, ["resume"], "resume needs a run folder: qzoo resume RUN"),
    (None, ["resume", "{missing}"], "run folder {missing} does not exist; expected a folder"),
    ("file", ["resume", "{run}/results.csv"], "run folder {run}/results.csv is not a folder"),
    ("empty", ["resume", "{empty}"], "{empty} holds no qzoo run (no config.json and no "),
    ("cut", ["resume", "{run}"], "{run}/config.json is damaged ("),
    ("list", ["resume", "{run}"], "{run}/config.json is not a qzoo config; delete it"),
    ("value", ["resume", "{run}"], "{run}/config.json holds a config this qzoo refuses: --discount:"),
    # Issue 34 #5: was "--discount 0.95 differs from 0.99 used by the run ...; pass the
    # run's values or another --run-dir": nothing typed, and options resume does not take.
    ("edited", ["resume", "{run}"], ("{run}/config.json was edited (discount: 0.95 there, 0.99 in "
     "the checkpoint); a resume runs the config in the checkpoint: undo the edit, or delete "
     "config.json to resume with the checkpoint's\n")),
    ("longer", ["resume", "{run}"], ("{run}/config.json was edited (iterations: 4 there, 2 in the "
     "checkpoint); a resume runs the config in the checkpoint: undo the edit, or delete "
     "config.json to resume with the checkpoint's, or pass --iterations 4 to change the run's "
     "length\n")),
    (None, ["resume", "{run}", "--learning-rate", "1"], "qzoo resume takes no --learning-rate: a resume keeps"),
    (None, ["resume", "{run}", "--no-double-q"], "qzoo resume takes no --no-double-q"),
    (None, ["resume", "{run}", "--run-dir", "x"], "qzoo resume takes no --run-dir: RUN names"),
    (None, ["resume", "{run}", "--iterations", "x"], "--iterations: bad value x; expected"),
    (None, ["resume", "{run}", "--iteration", "3"], "unknown option --iteration; did you mean --iterations?"),
])  # fmt: skip
def test_bad_input_is_one_line_exit_2_and_changes_nothing(
    make, argv, message, interrupted, tmp_path, capsys
):
    run_dir, _ = interrupted
    names = {"run": run_dir, "missing": tmp_path / "missing", "empty": tmp_path / "empty"}
    (tmp_path / "empty").mkdir()
    config = run_dir / "config.json"
    if make == "cut":
        config.write_bytes(config.read_bytes()[:40])
    elif make == "list":
        config.write_text("[1, 2]")
    elif make == "value":
        config.write_text(config.read_text().replace('"discount": 0.99', '"discount": 2'))
    elif make == "edited":
        config.write_text(config.read_text().replace('"discount": 0.99', '"discount": 0.95'))
    elif make == "longer":
        config.write_text(config.read_text().replace('"iterations": 2', '"iterations": 4'))
    before = _snapshot(tmp_path)
    capsys.readouterr()
    assert main([a.format(**names) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("qzoo: error: " + message.format(**names)), err
    assert _snapshot(tmp_path) == before


def test_a_damaged_config_json_without_a_checkpoint_says_there_is_nothing_to_resume(
    tmp_path, capsys
):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.json").write_text("{")
    assert main(["resume", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err.endswith(
        "; there is no checkpoint either: start the run again with `qzoo train`\n"
    )
    shutil.rmtree(tmp_path / "run")
