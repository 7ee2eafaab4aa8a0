"""Bad input to `qzoo plot`, `compare` and `visualize`: one line `qzoo: error: ...` on
stderr naming the problem, exit code 2, no traceback, and no output file written."""

import os
import subprocess
import sys

import pytest
from analysis_runs import ROOT, fake_run

from qzoo.cli.main import main


@pytest.fixture
def folders(tmp_path):
    """{name: path} of good and bad run folders."""
    paths = {"good": fake_run(tmp_path / "good", "dqn", "pong", 1, [0.1, 0.2])}
    paths["cartpole"] = fake_run(tmp_path / "cp", "dqn", "CartPole-v1", 1, returns=[9.0, 20.0])
    paths["no_results"] = tmp_path / "no_results"
    fake_run(paths["no_results"], "dqn", "pong", 1, [0.1])
    os.remove(paths["no_results"] / "results.csv")
    paths["other_csv"] = fake_run(tmp_path / "other_csv", "dqn", "pong", 1, [0.1])
    (paths["other_csv"] / "results.csv").write_text("epoch,phase,average_reward\n1,test,3.5\n")
    paths["empty_csv"] = fake_run(tmp_path / "empty_csv", "dqn", "pong", 1, [0.1])
    (paths["empty_csv"] / "results.csv").write_text("")
    paths["no_config"] = fake_run(tmp_path / "no_config", "dqn", "pong", 1, [0.1])
    os.remove(paths["no_config"] / "config.json")
    paths["bad_config"] = fake_run(tmp_path / "bad_config", "dqn", "pong", 1, [0.1])
    (paths["bad_config"] / "config.json").write_text('{"frobnicate": 1}')
    paths["missing"] = tmp_path / "missing"
    paths["a_file"] = tmp_path / "a_file"
    paths["a_file"].write_text("not a folder")
    return {k: str(v) for k, v in paths.items()}


# (argv after `qzoo` with {name} for folders and {out} for the output, error fragment)
CASES = [
    # plot
    (["plot"], "plot needs at least one run folder"),
    (["plot", "{missing}", "--out", "{out}.png"], "does not exist"),
    (["plot", "{no_results}", "--out", "{out}.png"], "holds no results.csv"),
    (["plot", "{no_config}", "--out", "{out}.png"], "holds no config.json"),
    (["plot", "{bad_config}", "--out", "{out}.png"], "holds no qzoo config"),
    (["plot", "{other_csv}", "--out", "{out}.png"], "is not a qzoo results.csv"),
    (["plot", "{empty_csv}", "--out", "{out}.png"], "is not a qzoo results.csv"),
    (["plot", "{good}", "--out", "{out}.png", "--columns", "reward"], "unknown column 'reward'"),
    (["plot", "{good}", "--out", "{out}.png", "--columns", ","], "--columns: bad value"),
    (
        ["plot", "{cartpole}", "--out", "{out}.png", "--columns", "normalized_return"],
        "holds no numbers",
    ),
    (["plot", "{good}", "--out", "{out}.jpg"], "expected a file name ending in .png, .svg"),
    (["plot", "{good}", "--out", "{a_file}/x.png"], "is not a writable folder"),
    (["plot", "{good}", "{good}", "--out", "{out}.png"], "is given twice"),
    (["plot", "{good}", "--out", "{out}.png", "--group", "seed"], "--group: invalid choice"),
    (["plot", "{good}", "--out", "{out}.png", "--colums", "x"], "did you mean --columns?"),
    # compare
    (["compare"], "compare needs run folders"),
    (["compare", "{missing}"], "does not exist"),
    # Issue 34 #7: a file was said not to exist.
    (
        ["compare", "{a_file}", "--raw"],
        ("run folder '{a_file}' is a file, not a folder; expected a folder `qzoo train` wrote"),
    ),
    (["plot", "{a_file}", "--out", "{out}.png"], "run folder '{a_file}' is a file, not a folder"),
    (["visualize", "{a_file}", "--out", "{out}.html"], "'{a_file}' is a file, not a folder"),
    (["eval", "{a_file}"], "run folder '{a_file}' is a file, not a folder"),
    (["export", "{a_file}", "{out}"], "run folder '{a_file}' is a file, not a folder"),
    (["compare", "{other_csv}"], "is not a qzoo results.csv"),
    (["compare", "{good}", "--metric", "best"], "--metric: invalid choice: 'best'"),
    (["compare", "{good}", "--reps", "0"], "--reps: bad value '0'"),
    (["compare", "{good}", "--reps", "many"], "--reps: bad value 'many'"),
    (["compare", "{good}", "--confidence", "1"], "--confidence: bad value '1'"),
    (["compare", "{good}", "--last", "0"], "--last: bad value '0'"),
    (["compare", "{good}", "--last", "5"], "has only 2 evaluations"),
    (["compare", "{good}", "--seed", "-1"], "--seed: bad value"),
    (["compare", "{cartpole}"], "no human-normalized score"),
    (["compare", "{good}", "--label", "a,b"], "--label: 2 names for 1 runs"),
    (["compare", "{good}", "--out", "{out}.jpg"], "expected a file name ending in .png, .svg"),
    (["compare", "{good}", "--out", "{a_file}/x"], "is not a writable folder"),
    # visualize
    (["visualize"], "visualize needs a run folder"),
    (["visualize", "{missing}", "--out", "{out}.html"], "does not exist"),
    (["visualize", "{good}", "--out", "{out}.html"], "holds no checkpoint"),
    (["visualize", "{good}", "--out", "{out}.gif"], "expected a file name ending in .html, .png"),
    (["visualize", "{good}", "--out", "{a_file}/x.html"], "is not a writable folder"),
    (["visualize", "{good}", "--out", "{out}.html", "--maps", "0"], "--maps: bad value '0'"),
    (["visualize", "{good}", "{good}"], "unexpected argument"),
]


@pytest.mark.parametrize("argv, fragment", CASES, ids=lambda v: " ".join(v)[:60] if
                         isinstance(v, list) else None)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(argv, fragment, folders, tmp_path, capsys):
    out = str(tmp_path / "out")
    argv = [a.format(out=out, **folders) for a in argv]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    fragment = fragment.format(**folders)
    assert len(lines) == 1 and lines[0].startswith("qzoo: error: ") and fragment in lines[0], lines
    assert not [name for name in os.listdir(tmp_path) if name.startswith("out")]


def test_no_traceback_from_the_command_line(folders, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "qzoo", "compare", folders["other_csv"], "--reps", "0"],
        check=False, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT},
    )  # fmt: skip
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("qzoo: error: --reps") and result.stderr.count("\n") == 1
