"""`qzoo plot`: learning curves from run folders, a real tiny run and hand-made ones."""

import json

import numpy as np
import pytest
from analysis_runs import fake_run, train

from qzoo.cli.main import main


@pytest.fixture(scope="module")
def cartpole_run(tmp_path_factory):
    return str(train(tmp_path_factory.mktemp("plot") / "run", "CartPole-v1"))


def test_plot_of_a_real_run_is_a_png_with_the_default_columns(cartpole_run, tmp_path, capsys):
    from matplotlib.image import imread

    out = tmp_path / "curves.png"
    assert main(["plot", cartpole_run, "--out", str(out), "--json"]) == 0
    image = imread(out)
    assert image.ndim == 3 and image.shape[1] > 1000  # 3 x 2 panels
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    names = {p["name"] for p in points}
    # normalized_return is all NaN outside Atari, so not a default panel.
    assert names == {"eval_episode_return", "train_episode_return", "train_loss",
                     "train_mean_q", "train_exploration_epsilon", "train_frame_rate"}  # fmt: skip
    evals = [p for p in points if p["name"] == "eval_episode_return"]
    assert [p["frame"] for p in evals] == [0, 300, 600] and evals[0]["label"] == "dqn"
    # Iteration 0 only evaluates: train columns start at the first training iteration.
    assert min(p["frame"] for p in points if p["name"] == "train_loss") == 300


def test_seeds_are_one_curve_with_mean_and_min_max_band(tmp_path, capsys):
    runs = [str(fake_run(tmp_path / f"dqn-pong-{s}", "dqn", "pong", s, returns=r))
            for s, r in ((1, [0.0, 2.0, 4.0]), (2, [2.0, 4.0, 10.0]))]  # fmt: skip
    runs.append(str(fake_run(tmp_path / "c51-pong-1", "c51", "pong", 1, returns=[1.0, 1.0])))
    out = tmp_path / "curves.svg"
    args = ["plot", *runs, "--out", str(out), "--columns", "eval_episode_return", "--json"]
    assert main(args) == 0
    assert out.read_text().lstrip().startswith("<?xml") and "<svg" in out.read_text()
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    dqn = [p for p in points if p["label"] == "dqn"]
    assert [(p["frame"], p["value"], p["min"], p["max"], p["runs"]) for p in dqn] == [
        (0, 1.0, 0.0, 2.0, 2), (1000, 3.0, 2.0, 4.0, 2), (2000, 7.0, 4.0, 10.0, 2)]  # fmt: skip
    assert [p["frame"] for p in points if p["label"] == "c51"] == [0, 1000]


def test_labels_tell_setups_apart_and_group_by_folder(tmp_path, capsys):
    runs = [str(fake_run(tmp_path / "a-seed1", "dqn", "pong", 1, returns=[1.0, 2.0])),
            str(fake_run(tmp_path / "a-seed2", "dqn", "pong", 2, returns=[3.0, 4.0],
                         dueling=True)),
            str(fake_run(tmp_path / "b-seed1", "dqn", "breakout", 1, returns=[5.0, 6.0]))]  # fmt: skip
    out = str(tmp_path / "c.png")
    assert main(["plot", *runs, "--out", out, "--columns", "eval_episode_return", "--json"]) == 0
    labels = {json.loads(line)["label"] for line in capsys.readouterr().out.splitlines()}
    assert labels == {"dqn pong dueling=False", "dqn pong dueling=True", "dqn breakout"}
    assert main(["plot", *runs, "--out", out, "--group", "folder", "--json"]) == 0
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    a = [p for p in points if p["label"] == "a" and p["name"] == "eval_episode_return"]
    assert [p["value"] for p in a] == [2.0, 3.0] and {p["label"] for p in points} == {"a", "b"}


def test_normalized_score_and_several_columns(tmp_path, capsys):
    run = str(fake_run(tmp_path / "r", "dqn", "pong", 1, normalized=[0.1, np.nan, 0.3]))
    args = ["plot", run, "--out", str(tmp_path / "n.png"), "--columns",
            "normalized_return,train_loss", "--json"]  # fmt: skip
    assert main(args) == 0
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    normalized = [p["frame"] for p in points if p["name"] == "normalized_return"]
    assert normalized == [0, 2000]  # a NaN evaluation is left out, not drawn as 0


def test_a_column_one_group_never_filled_is_drawn_for_the_others(tmp_path, capsys):
    """An offline run has no train returns (all NaN): the online run's curve is drawn,
    the offline one is simply absent from that panel."""
    online = fake_run(tmp_path / "online", "dqn", "pong", 1, returns=[0.0, 2.0, 4.0])
    offline = fake_run(tmp_path / "offline", "dqn", "pong", 1, returns=[1.0, 1.0, 1.0],
                       offline="data")  # fmt: skip
    with open(offline / "results.csv") as f:
        text = f.read()
    lines = text.splitlines()
    rows = [line.split(",") for line in lines[1:]]
    for row in rows:
        row[3] = "nan"  # train_episode_return
    (offline / "results.csv").write_text("\n".join([lines[0]] + [",".join(r) for r in rows]))
    out = tmp_path / "curves.png"
    args = ["plot", str(online), str(offline), "--out", str(out), "--json",
            "--columns", "eval_episode_return,train_episode_return"]  # fmt: skip
    assert main(args) == 0 and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    points = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    train = {p["label"] for p in points if p["name"] == "train_episode_return"}
    evals = {p["label"] for p in points if p["name"] == "eval_episode_return"}
    assert len(evals) == 2 and len(train) == 1
