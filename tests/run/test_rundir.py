"""The run folder under faults: kills during a save, damaged results.csv, concurrent
runs, planted pickles, full disks, bad resumes and divergence. Each refusal is one
line, exit code 2, and leaves the folder exactly as it was."""

import dataclasses
import fcntl
import json
import math
import os
import pickle
import re
import shutil

import pytest
import torch
from rundir_common import MORE, one_error_line, snapshot, train

from qzoo.cli import resume
from qzoo.cli.main import main
from qzoo.run import checkpoint

# ---- refusals: parametrized bad resumes, each changing nothing ---------------------


def edit_json(name, **changes):
    def prepare(run_dir):
        path = run_dir / name
        data = json.loads(path.read_text())
        data.update(changes)
        path.write_text(json.dumps(data))
        return run_dir

    return prepare


def write(name, data):
    def prepare(run_dir):
        (run_dir / name).parent.mkdir(exist_ok=True)
        (run_dir / name).write_bytes(data)
        return run_dir

    return prepare


def edit_checkpoint(edit):
    def prepare(run_dir):
        path = run_dir / "checkpoints" / "latest.safetensors"
        state = checkpoint.load(path)
        edit(state, run_dir)
        checkpoint.save(path, state)
        return run_dir

    return prepare


def other_agent(state, run_dir):
    state["config"]["agent"] = "c51"
    os.unlink(run_dir / "config.json")


def other_network(state, run_dir):
    online = state["trainer"]["learner"]["online"]
    name = next(k for k, v in online.items() if v.ndim == 2)
    online[name] = torch.zeros(online[name].shape[0] + 1, online[name].shape[1])


def planted_pickle(name):
    def prepare(run_dir):
        with open(run_dir / "checkpoints" / name, "wb") as f:
            pickle.dump(CreatesAFile(run_dir.parent / "pwned"), f, protocol=4)
        return run_dir

    return prepare


class CreatesAFile:
    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def foreign_safetensors(run_dir):
    import numpy as np
    from safetensors.numpy import save_file

    save_file({"w": np.ones(2, np.float32)}, str(run_dir / "checkpoints" / "latest.safetensors"))
    return run_dir


def truncate_checkpoint(run_dir):
    path = run_dir / "checkpoints" / "latest.safetensors"
    path.write_bytes(path.read_bytes()[:1000])
    return run_dir


def other_format_version(run_dir):
    path = run_dir / "checkpoints" / "latest.safetensors"
    path.write_bytes(path.read_bytes().replace(b'"format_version":"1"', b'"format_version":"9"'))
    return run_dir


def no_checkpoint(run_dir):
    shutil.rmtree(run_dir / "checkpoints")
    return run_dir


def foreign_folder(run_dir):
    shutil.rmtree(run_dir)
    run_dir.mkdir()
    (run_dir / "notes.txt").write_text("my thesis\n")
    return run_dir


def a_file(run_dir):
    shutil.rmtree(run_dir)
    run_dir.write_text("a file\n")
    return run_dir


def under_a_file(run_dir):
    return a_file(run_dir) / "sub"


def same(run_dir):
    return run_dir


def model_folder(run_dir):
    """A model folder `qzoo export` wrote (config.json, results.csv and no checkpoint)."""
    assert main(["export", str(run_dir), str(run_dir.parent / "model")]) == 0
    return run_dir.parent / "model"


def busy(run_dir):
    """The folder's lock held, as by a run in another process (flock: per open file)."""
    fd = os.open(run_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.write(fd, b"pid 1 on host elsewhere\n")
    return run_dir


BAD_RESUMES = {
    "edited seed": (edit_json("config.json", seed=2), [], "config.json was edited (seed: 2 "),
    "edited lr": (edit_json("config.json", learning_rate=1.0), [], "learning_rate: 1.0 instead"),
    "config not json": (write("config.json", b"{nope"), [], "is not a qzoo config"),
    "config a list": (write("config.json", b"[1, 2]"), [], "is not a qzoo config"),
    "config foreign keys": (
        write("config.json", b'{"agent": "x", "env": "y", "name": "z"}'),
        [],
        "unknown keys: name",
    ),
    "results other columns": (write("results.csv", b"a,b\n1,2\n"), [], "was not written by qzoo"),
    "results without checkpoint": (no_checkpoint, [], "no checkpoint to rebuild it from"),
    "other seed": (same, ["--seed", "2"], "--seed 2 differs from 1 used by the run in"),
    "other replay size": (same, ["--replay-capacity", "2000"], "2000 differs from 1000 (replay"),
    "other network": (same, ["--mlp-hidden", "32"], "32 differs from 64 (network shape)"),
    "other mlp layers": (same, ["--mlp-layers", "120,84"], "'120,84' differs from '' (network"),
    "more iterations": (same, ["--iterations", "5"], "--accept-changes iterations to change"),
    "accept a seed": (same, ["--seed", "2", "--accept-changes", "seed"], "'seed' cannot be"),
    "old latest.pt": (planted_pickle("latest.pt"), [], "old pickle-based checkpoint"),
    "pickle as safetensors": (planted_pickle("latest.safetensors"), [], "is a pickle file"),
    "foreign safetensors": (foreign_safetensors, [], "no qzoo metadata"),
    "truncated checkpoint": (truncate_checkpoint, [], "is corrupt"),
    "format version": (other_format_version, [], "qzoo format version '9'"),
    "checkpoint of c51": (edit_checkpoint(other_agent), [], "belongs to a c51 run on CartPole"),
    "network shape": (edit_checkpoint(other_network), MORE, "(network shape differs)"),
    "foreign folder": (foreign_folder, [], "holds files qzoo did not write (notes.txt)"),
    "run folder is a file": (a_file, [], "is a file, not a folder"),
    "under a file": (under_a_file, [], "run/sub: Not a directory"),
    # Issue 34 #8: was taken for a half-made run ("delete its config.json", "move
    # results.csv away"), advice that mixes a run into the model folder.
    "model folder": (model_folder, [], "model is a model folder (`qzoo export` wrote it), not"),
    "busy": (busy, [], "is in use by pid 1 on host elsewhere; wait for it to end or stop it"),
}


@pytest.mark.parametrize("case", BAD_RESUMES)
def test_bad_resume_is_refused_and_changes_nothing(case, run_dir, capsys):
    prepare, extra, message = BAD_RESUMES[case]
    target = prepare(run_dir)
    before = snapshot(run_dir.parent)
    capsys.readouterr()
    assert train(target, *extra) == 2
    err = one_error_line(capsys.readouterr().err)
    assert message in err
    assert snapshot(run_dir.parent) == before
    assert not (run_dir.parent / "pwned").exists()  # no pickle ever ran


# Options `qzoo resume` takes: its messages name no other (issue 34 #5, #6: they advised
# "another --run-dir", and named options of a config.json edit as if typed).
RESUME_TAKES = {"--" + n.replace("_", "-") for n in resume.OPTIONS}


# Those whose refusal comes from the command (dqn), not the folder: `qzoo resume`
# resumes the c51 run the checkpoint holds.
FROM_THE_COMMAND = ("checkpoint of c51",)


@pytest.mark.parametrize("case", [c for c, (_, extra, _) in BAD_RESUMES.items()
                                  if not extra and c not in FROM_THE_COMMAND])  # fmt: skip
def test_bad_resume_by_qzoo_resume_names_only_its_own_options(case, run_dir, capsys):
    prepare, _, _ = BAD_RESUMES[case]
    target = prepare(run_dir)
    before = snapshot(run_dir.parent)
    capsys.readouterr()
    assert main(["resume", str(target)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert set(re.findall(r"--[a-z][a-z-]*", line)) <= RESUME_TAKES, line
    assert snapshot(run_dir.parent) == before
    assert not (run_dir.parent / "pwned").exists()


def test_fewer_iterations_than_trained_are_refused_and_change_nothing(run_dir, capsys):
    """Issue 34 #4: `qzoo resume RUN --iterations 1` on a run of 2 said "RUN is complete
    (1 iterations)" and rewrote config.json, after which the run's own command was
    refused."""
    assert train(run_dir, *MORE) == 0  # iterations 0, 1 and 2
    before = snapshot(run_dir.parent)
    capsys.readouterr()
    expected = (f"qzoo: error: --iterations: bad value 1; expected at least the 2 iterations "
                f"the run in {run_dir} has trained")  # fmt: skip
    assert main(["resume", str(run_dir), "--iterations", "1"]) == 2
    assert one_error_line(capsys.readouterr().err) == expected
    assert train(run_dir, "--iterations", "1", "--accept-changes", "iterations") == 2
    assert one_error_line(capsys.readouterr().err) == expected
    assert snapshot(run_dir.parent) == before
    assert train(run_dir, *MORE) == 0  # the run's own command: complete, as it was
    assert f"{run_dir} is complete (2 iterations)" in capsys.readouterr().err
    assert main(["resume", str(run_dir), "--iterations", "2"]) == 0


def test_a_deleted_config_json_is_rewritten_from_the_checkpoint(run_dir):
    config = (run_dir / "config.json").read_bytes()
    os.unlink(run_dir / "config.json")
    assert train(run_dir) == 0
    assert (run_dir / "config.json").read_bytes() == config


# ---- results.csv is derived from the checkpoint's rows -----------------------------


def _garble_rows(data):
    """Garbage 50 bytes into the first row (not the header, which grows with columns)."""
    h = data.index(b"\n") + 1
    return data[: h + 50] + b"\xff\xfe garbage,,,\n" * 3 + data[h + 70 :]


DAMAGE = {
    "deleted": lambda data: None,
    "empty": lambda data: b"",
    "cut in the header": lambda data: data[:20],
    "cut in a row": lambda data: data[:-30],
    "last row dropped": lambda data: data[: data.rindex(b"\n", 0, -1) + 1],
    "garbled rows": lambda data: _garble_rows(data),
    "NUL bytes appended": lambda data: data + b"\0" * 4096,
    "NUL bytes inside": lambda data: data[:400] + b"\0" * 100 + data[500:],
    "all NUL bytes": lambda data: b"\0" * len(data),
    "row repeated": lambda data: data + data[data.index(b"\n") + 1 :],
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_damaged_results_csv_is_rebuilt_exactly(damage, run_dir):
    path = run_dir / "results.csv"
    good = path.read_bytes()
    damaged = DAMAGE[damage](good)
    if damaged is None:
        path.unlink()
    else:
        path.write_bytes(damaged)
    assert train(run_dir) == 0  # a finished run: only results.csv is rebuilt
    assert path.read_bytes() == good


def test_cut_results_csv_then_more_iterations_has_each_row_once(run_dir, capsys):
    path = run_dir / "results.csv"
    path.write_bytes(path.read_bytes()[:50])
    assert train(run_dir, *MORE) == 0
    assert "accepting --iterations 2 (was 1): epsilon's decay" in capsys.readouterr().err
    lines = path.read_text().splitlines()
    assert [line.split(",")[0] for line in lines] == ["iteration", "0", "1", "2"]
    assert json.loads((run_dir / "config.json").read_text())["iterations"] == 2
    assert train(run_dir, "--iterations", "2") == 0  # the run is now a 2-iteration run


def test_results_csv_takes_a_column_that_later_rows_add(tmp_path):
    from qzoo.run.logs import CsvLog

    log = CsvLog(tmp_path / "results.csv")
    rows = [{"iteration": 0, "loss": math.nan}, {"iteration": 1, "loss": 0.5, "new": 2}]
    log.write(rows)
    assert (tmp_path / "results.csv").read_bytes() == b"iteration,loss,new\r\n0,nan,\r\n1,0.5,2\r\n"
    log.check(rows)  # what it wrote is qzoo's


def test_an_option_newer_than_the_run_is_compared_with_what_the_run_ran_with(tmp_path):
    """A run saved by a qzoo without --mlp-layers ran with its default (none): resuming
    it with --mlp-layers is refused as a change, resuming it as it was is not."""
    import qzoo.configuration as config_lib
    from qzoo.run.changes import differences

    current = dataclasses.asdict(config_lib.build_config("dqn", {"env": "CartPole-v1"}))
    old = {k: v for k, v in current.items() if k not in ("mlp_layers", "pin_threads")}
    assert differences(old, current, ()) == []
    changed = {**current, "mlp_layers": "120,84"}
    assert differences(old, changed, ()) == [("mlp_layers", "", "120,84")]
    # The default is the agent's and environment's: R2D1's CartPole sequences.
    r2d1 = dataclasses.asdict(config_lib.build_config("r2d1", {"env": "CartPole-v1"}))
    assert differences({k: v for k, v in r2d1.items() if k != "burn_in_steps"}, r2d1, ()) == []


def test_resuming_an_older_runs_folder_with_a_newer_option_is_refused(tmp_path, capsys):
    run = tmp_path / "run"
    assert train(run) == 0
    saved = json.loads((run / "config.json").read_text())
    saved.pop("mlp_layers")
    (run / "config.json").write_text(json.dumps(saved))
    shutil.rmtree(run / "checkpoints")  # config.json alone: the check a start makes
    capsys.readouterr()
    assert train(run, "--mlp-layers", "32,32") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--mlp-layers '32,32' differs from ''" in err
