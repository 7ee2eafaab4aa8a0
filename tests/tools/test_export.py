"""qzoo export and qzoo push: the model folder, its card, loading it as a run, the
upload's arguments (the Hub's client monkeypatched: there is no network here)."""

import csv
import json
import os
import shlex
import shutil
import sys
import typing

import huggingface_hub
import pytest
import torch
import yaml
from safetensors.torch import load_file

from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.envs import EnvInfo
from qzoo.run.changes import RESUMABLE
from qzoo.tools import model_card
from qzoo.tools.runs import load_run

FILES = ["README.md", "config.json", "curves.png", "model.json", "model.safetensors",
         "results.csv"]  # fmt: skip


@pytest.fixture(scope="module")
def exported(tiny_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("models") / "cartpole-dqn"
    assert main(["export", str(tiny_run), str(out)]) == 0
    return out


def eval_json(capsys, *argv):
    capsys.readouterr()
    assert main(["eval", *map(str, argv), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def front_matter(folder):
    text = (folder / "README.md").read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1]), text


def results_rows(folder):
    with open(folder / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_export_writes_the_folder_and_eval_gives_the_runs_numbers(tiny_run, exported, capsys):
    assert sorted(os.listdir(exported)) == FILES
    assert not [n for n in os.listdir(exported.parent) if n.startswith(".tmp-")]
    args = ("--episodes", 4, "--epsilon", 0.3, "--seed", 7)
    of_run, of_model = eval_json(capsys, tiny_run, *args), eval_json(capsys, exported, *args)
    assert of_model["returns"] == of_run["returns"] and len(of_run["returns"]) == 4
    assert of_model["return"] == of_run["return"]
    assert of_model["checkpoint"] == of_run["checkpoint"] == 2 and of_model["latest"]
    # Greedy (epsilon 0) too: the same network, not merely the same random stream.
    assert eval_json(capsys, exported, "--episodes", 2)["returns"] == eval_json(
        capsys, tiny_run, "--episodes", 2
    )["returns"]  # fmt: skip


def test_the_weights_are_plain_safetensors_of_the_runs_network(tiny_run, exported):
    weights = load_file(str(exported / "model.safetensors"))  # the safetensors package
    network = load_run(tiny_run).network.state_dict()
    assert sorted(weights) == sorted(network)
    for key, tensor in network.items():
        assert torch.equal(weights[key], tensor), key
    manifest = json.loads((exported / "model.json").read_text())
    assert manifest["format"] == "qzoo-model" and manifest["iteration"] == 2
    assert (manifest["agent"], manifest["env"]) == ("dqn", "CartPole-v1")
    config = json.loads((exported / "config.json").read_text())
    assert config["run_dir"] == "" and config["agent"] == "dqn"  # no local path shared
    assert results_rows(exported) == results_rows(tiny_run)


def test_the_model_card(tiny_run, exported):
    meta, text = front_matter(exported)
    assert meta["library_name"] == "qzoo"
    assert meta["tags"] == ["reinforcement-learning", "deep-reinforcement-learning", "dqn",
                            "CartPole-v1"]  # fmt: skip
    last = float(results_rows(tiny_run)[-1]["eval_episode_return"])
    (result,) = meta["model-index"][0]["results"]
    assert result["dataset"]["name"] == "CartPole-v1"
    assert result["metrics"][0]["type"] == "mean_reward"
    assert result["metrics"][0]["value"] == last
    # The Hub's own reader accepts it (model-index parsed into evaluation results).
    card = huggingface_hub.ModelCard.load(exported / "README.md")
    assert card.data.eval_results[0].metric_value == last
    assert "Mnih et al. 2015" in text and "![learning curves](curves.png)" in text
    assert "n/a (human scores exist for Atari's 57 games only)" in text
    assert "Exported by qzoo 0.1.0" in text
    assert (exported / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_cards_command_trains_the_same_config(exported):
    _, text = front_matter(exported)
    command = text.split("```bash\n")[1].split("\n```")[0]
    argv = shlex.split(command)
    assert argv[:3] == ["qzoo", "train", "dqn"]
    options = {}
    for name, value in zip(argv[3::2], argv[4::2]):
        options[name[2:].replace("-", "_")] = value
    rebuilt = build_config("dqn", options).__dict__
    saved = json.loads((exported / "config.json").read_text())
    differ = {k for k in saved if saved[k] != rebuilt[k]}
    assert differ <= set(RESUMABLE) and "iterations" in options  # the tiny run's 2


def test_normalized_score_on_an_atari_game():
    config = build_config("dqn", {"env": "pong", "seed": "3"})
    info = EnvInfo("pong", "atari", 6, (84, 84), "uint8", "pong")
    # Pong's random and human scores are -20.7 and 14.6: -3.05 is half way.
    rows = [{"iteration": 0, "frame": 0, "eval_episode_return": -21.0},
            {"iteration": 1, "frame": 1000, "eval_episode_return": -3.05, "eval_num_episodes": 2}]  # fmt: skip
    text = model_card.card(config, info, rows, 1, {"README.md": "this card"}, "0.1.0", "pong")
    assert "| 1 | 1,000 | -3.05 | 2 | 0.500 (DQN Zoo's random and human scores) |" in text
    assert "protocol `dqn_zoo`" in text and "iteration 1, its last" in text
    assert "qzoo train dqn --env pong --seed 3\n" in text
    meta = yaml.safe_load(text.split("---\n")[1])
    assert meta["tags"][2:] == ["dqn", "pong"]
    assert meta["model-index"][0]["results"][0]["metrics"][0]["value"] == -3.05


def test_export_of_a_kept_iteration(tiny_run, tmp_path, capsys):
    out = tmp_path / "at1"
    assert main(["export", str(tiny_run), str(out), "--checkpoint", "1"]) == 0
    assert json.loads((out / "model.json").read_text())["iteration"] == 1
    args = ("--episodes", 3, "--epsilon", 0.2, "--seed", 2)
    of_model = eval_json(capsys, out, *args)
    assert of_model["returns"] == eval_json(capsys, tiny_run, *args, "--checkpoint", 1)["returns"]
    assert of_model["checkpoint"] == 1 and not of_model["latest"]  # the run went on to 2
    meta, _ = front_matter(out)
    row1 = float(results_rows(tiny_run)[1]["eval_episode_return"])
    assert meta["model-index"][0]["results"][0]["metrics"][0]["value"] == row1
    capsys.readouterr()
    assert main(["eval", str(out), "--checkpoint", "2"]) == 2
    assert "holds the network of iteration 1 only" in capsys.readouterr().err


def test_play_and_visualize_a_model_folder(exported, tmp_path, capsys):
    assert main(["play", str(exported), "--frames", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("frame ") == 3 and "iteration 2" in out and "Q-values" in out
    html = tmp_path / "v.html"
    assert main(["visualize", str(exported), "--out", str(html)]) == 0
    assert "weights after iteration 2" in capsys.readouterr().out and html.stat().st_size > 0


def test_a_model_folder_exports_again_unchanged(exported, tmp_path):
    again = tmp_path / "again"
    assert main(["export", str(exported), str(again)]) == 0
    for name in ("model.safetensors", "results.csv", "config.json", "model.json"):
        assert (again / name).read_bytes() == (exported / name).read_bytes(), name


def test_plot_reads_a_model_folder(exported, tmp_path):
    assert main(["plot", str(exported), "--out", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 0


def test_video(tiny_run, tmp_path, capsys):
    import imageio.v2 as imageio

    out = tmp_path / "with-video"
    assert main(["export", str(tiny_run), str(out), "--video"]) == 0
    line = capsys.readouterr().out
    assert "replay.mp4" in line and str(out) in line and line.count("\n") == 1
    frames = [frame for frame in imageio.get_reader(str(out / "replay.mp4"))]
    assert len(frames) > 1 and frames[0].std() > 0
    assert "| `replay.mp4` | one evaluation episode" in (out / "README.md").read_text()


def one_line_error(capsys, argv, fragment):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "Traceback" not in captured.err
    assert captured.err.startswith("qzoo: error: ") and fragment in captured.err, captured.err


def test_an_existing_folder_is_refused_unless_force(tiny_run, tmp_path, capsys):
    out = tmp_path / "model"
    assert main(["export", str(tiny_run), str(out), "--checkpoint", "0"]) == 0
    (out / "notes.txt").write_text("mine")
    one_line_error(capsys, ["export", str(tiny_run), str(out)], "exists; pass --force")
    # Issue 34 #13: --force deleted the user's notes.txt with the model it replaced.
    one_line_error(capsys, ["export", str(tiny_run), str(out), "--force"],
                   f"{str(out)!r} holds files qzoo export did not write (notes.txt), which "
                   "--force would delete: move them away, or pass a new DIR")  # fmt: skip
    assert (out / "notes.txt").read_text() == "mine"
    assert json.loads((out / "model.json").read_text())["iteration"] == 0
    os.unlink(out / "notes.txt")
    assert main(["export", str(tiny_run), str(out), "--force"]) == 0
    assert sorted(os.listdir(out)) == FILES  # replaced whole
    assert json.loads((out / "model.json").read_text())["iteration"] == 2
    assert sorted(os.listdir(tmp_path)) == ["model"]  # no temporary folder left
    # --force never replaces a folder qzoo export did not write, nor the run.
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    one_line_error(capsys, ["export", str(tiny_run), str(foreign), "--force"],
                   "is not a model folder qzoo export wrote")  # fmt: skip
    assert (foreign / "notes.txt").read_text() == "keep"
    one_line_error(capsys, ["export", str(tiny_run), str(tiny_run), "--force"], "is or holds")


def test_a_killed_exports_leftovers_go_and_a_model_folder_it_moved_aside_comes_back(
    tiny_run, exported, tmp_path, capsys
):
    """Issue 34 #11: SIGKILL during `qzoo export --video` left .tmp-DIR-*/ (MBs) that no
    later export removed. A kill leaves it unlocked (the kernel drops a dead process's
    flock); and a kill between --force's two renames leaves the previous model folder
    aside, which is put back (here: refused without --force, as the folder exists)."""
    out = tmp_path / "model"
    (tmp_path / ".tmp-model-k1ll3d").mkdir()
    (tmp_path / ".tmp-model-k1ll3d" / "replay.mp4").write_bytes(b"\0" * 1000)
    shutil.copytree(exported, tmp_path / ".tmp-model-old-k1ll3d" / "model")
    one_line_error(capsys, ["export", str(tiny_run), str(out)], "exists; pass --force")
    assert sorted(os.listdir(tmp_path)) == ["model"]
    assert sorted(os.listdir(out)) == FILES
    assert (out / "README.md").read_bytes() == (exported / "README.md").read_bytes()


def test_a_failed_export_leaves_nothing_and_keeps_the_old_folder(tiny_run, tmp_path, monkeypatch,
                                                                capsys):  # fmt: skip
    from qzoo.tools import export

    out = tmp_path / "model"
    assert main(["export", str(tiny_run), str(out), "--checkpoint", "0"]) == 0
    before = (out / "model.safetensors").read_bytes()

    def fail(folder, config):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "plot_curves", fail)
    one_line_error(capsys, ["export", str(tiny_run), str(out), "--force"], "No space left")
    assert (out / "model.safetensors").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["model"]
    one_line_error(capsys, ["export", str(tiny_run), str(tmp_path / "new")], "No space left")
    assert sorted(os.listdir(tmp_path)) == ["model"]


BAD = [
    (["export"], "needs a run folder and a new folder"),
    (["export", "{run}"], "needs a run folder and a new folder"),
    (["export", "{tmp}/missing", "{tmp}/out"], "does not exist"),
    (["export", "{run}", "{tmp}/out", "--checkpoint", "x"], "--checkpoint: bad value x"),
    (["export", "{run}", "{tmp}/out", "--checkpoint", "9"], "--checkpoint: bad value 9"),
    (["push", "{run}"], "needs --repo-id USER/NAME"),
    (["push", "{run}", "--repo-id", "noslash"], "--repo-id: bad value 'noslash'"),
    (["push", "{run}", "--repo-id", "a/b--c"], "--repo-id: bad value"),
]  # fmt: skip


@pytest.mark.parametrize("argv, fragment", BAD)
def test_bad_input_is_one_line_exit_2(argv, fragment, tiny_run, tmp_path, capsys):
    one_line_error(capsys, [a.format(run=tiny_run, tmp=tmp_path) for a in argv], fragment)
    assert os.listdir(tmp_path) == []


def test_a_broken_model_folder_is_one_line(exported, tmp_path, capsys):
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(exported, broken)
    (broken / "model.json").write_text('{"format": "other"}')
    one_line_error(capsys, ["eval", str(broken)], "is not a qzoo model's manifest")
    (broken / "model.json").write_text((exported / "model.json").read_text())
    (broken / "model.safetensors").write_bytes(b"\0" * 64)
    one_line_error(capsys, ["eval", str(broken)], "corrupt or not a qzoo checkpoint")


# ---- push --------------------------------------------------------------------------


class FakeApi:
    """Records what qzoo push asks of the Hub, and the folder as it was uploaded."""

    calls: typing.ClassVar[list] = []

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def upload_folder(self, **kwargs):
        folder = kwargs["folder_path"]
        files = {name: os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder)}
        with open(os.path.join(folder, "README.md")) as f:
            card = f.read()
        self.calls.append(("upload_folder", kwargs, files, card))

        class Info:
            commit_url = "https://huggingface.co/me/cartpole-dqn/commit/abc"

        return Info()


def test_push_exports_and_uploads(tiny_run, monkeypatch, capsys):
    FakeApi.calls = []
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    assert main(["push", str(tiny_run), "--repo-id", "me/cartpole-dqn"]) == 0
    (create, upload) = FakeApi.calls
    assert create == ("create_repo", "me/cartpole-dqn",
                      {"repo_type": "model", "exist_ok": True, "private": False})  # fmt: skip
    _, kwargs, files, card = upload
    assert kwargs["repo_id"] == "me/cartpole-dqn" and kwargs["repo_type"] == "model"
    assert kwargs["commit_message"].startswith("qzoo push: iteration 2 of ")
    assert sorted(files) == FILES and files["model.safetensors"] > 0
    assert "hf download me/cartpole-dqn --local-dir cartpole-dqn" in card
    assert "qzoo eval cartpole-dqn --episodes 30" in card
    assert not os.path.exists(kwargs["folder_path"])  # the temporary folder is gone
    out = capsys.readouterr().out
    assert out == "me/cartpole-dqn: iteration 2 of " + str(tiny_run) + " (dqn on CartPole-v1) " \
        "pushed; https://huggingface.co/me/cartpole-dqn/commit/abc\n"  # fmt: skip


def test_push_tells_a_hub_error_in_one_line(tiny_run, monkeypatch, capsys):
    class Refused(FakeApi):
        def create_repo(self, repo_id, **kwargs):
            raise OSError("401 Client Error: Unauthorized")

    monkeypatch.setattr(huggingface_hub, "HfApi", Refused)
    one_line_error(capsys, ["push", str(tiny_run), "--repo-id", "me/x"],
                   "cannot push to me/x: 401 Client Error: Unauthorized")  # fmt: skip


def test_push_without_huggingface_hub_names_the_extra(tiny_run, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # `import` fails
    one_line_error(capsys, ["push", str(tiny_run), "--repo-id", "me/x"],
                   "pip install 'qzoo[hub]'")  # fmt: skip
