"""qzoo.register_torso: a body of one's own under qzoo's heads, selectable as --torso
NAME from Python and (through --gym-packages) from the command line; one line for a
torso that cannot be built or gives no feature vector."""

import json
import os
import subprocess
import sys

import pytest
import torch
from helpers import REPO, TINY
from torch import nn

import qzoo
from qzoo.networks.heads import Head

OPTIONS = {**TINY, "tensorboard": False, "progress": False}


def wide(shape):
    """shape is the observation's, (4,) on CartPole."""
    return nn.Sequential(nn.Linear(shape[0], 48), nn.Tanh())


def test_a_registered_torso_under_dueling_and_distributional_heads(tmp_path):
    qzoo.register_torso("wide_tanh", wide)
    result = qzoo.train("dqn", env="CartPole-v1", torso="wide_tanh", dueling=True,
                        run_dir=str(tmp_path / "dueling"), **OPTIONS)  # fmt: skip
    network = result.load().network
    assert isinstance(network.torso[1], nn.Tanh) and network.torso.out_features == 48
    assert isinstance(network.head, Head) and network.head.dueling
    # head_hidden's default, 0: each stream is one layer from the torso's 48 features.
    assert [type(m) for m in network.head.advantage] == [nn.Linear]
    assert network.head.advantage[0].in_features == 48
    qzoo.register_torso("wide_tanh_hidden", wide, head_hidden=32)
    result = qzoo.train("c51", env="CartPole-v1", torso="wide_tanh_hidden", num_atoms=11,
                        run_dir=str(tmp_path / "c51"), **OPTIONS)  # fmt: skip
    agent = result.load()
    assert [m.out_features for m in agent.network.head.net if isinstance(m, nn.Linear)] == [32, 22]
    assert agent.distribution(torch.zeros(4))[0].shape == (2, 11)


@pytest.mark.parametrize(
    "name, build, head_hidden, message",
    [("mlp", wide, 0, "register_torso: bad name 'mlp'; expected a name of letters"),
     ("ok", 3, 0, "register_torso: bad build 3; expected a function of the observation shape"),
     ("ok", wide, -1, "register_torso: bad head_hidden -1; expected an integer in [0, 10_000]")],
)  # fmt: skip
def test_bad_registrations(name, build, head_hidden, message):
    with pytest.raises(qzoo.ConfigError) as refused:
        qzoo.register_torso(name, build, head_hidden=head_hidden)
    assert str(refused.value).startswith(message)


def test_torsos_that_cannot_serve_are_one_line(tmp_path):
    qzoo.register_torso("fails", lambda shape: nn.Linear(shape[1], 3))
    qzoo.register_torso("grid", lambda shape: nn.Unflatten(1, (2, 2)))
    qzoo.register_torso("not_module", lambda shape: "conv")
    for name, message in (
        ("fails", ("--torso fails: its build failed for observations of shape (4,) "
                  "(IndexError: tuple index out of range)")),
        ("grid", ("--torso grid: it gives features of shape (2, 2) per observation; "
                 "expected one vector (flatten them)")),
        ("not_module", "--torso not_module: its build returned str; expected a torch.nn.Module"),
    ):  # fmt: skip
        with pytest.raises(qzoo.UserError) as refused:
            qzoo.train(
                "dqn", env="CartPole-v1", torso=name, run_dir=str(tmp_path / name), **OPTIONS
            )
        assert str(refused.value) == message
        assert not (tmp_path / name).exists()
    with pytest.raises(qzoo.ConfigError, match="--torso: bad value nope; expected one of auto"):
        qzoo.config("dqn", env="CartPole-v1", torso="nope")


NETS = """
from torch import nn
import qzoo

qzoo.register_torso("tiny_net", lambda shape: nn.Sequential(nn.Linear(shape[0], 8), nn.ReLU()),
                    head_hidden=8)
"""


def test_the_command_line_finds_a_torso_through_gym_packages(tmp_path):
    (tmp_path / "my_nets.py").write_text(NETS)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    argv = [sys.executable, "-m", "qzoo", "train", "dqn", "--env", "CartPole-v1",
            "--gym-packages", "my_nets", "--torso", "tiny_net", "--run-dir", "run",
            "--iterations", "1", "--train-frames", "300", "--eval-frames", "100",
            "--replay-capacity", "1000", "--min-replay-capacity-fraction", "0.1",
            "--no-tensorboard", "--no-progress"]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    saved = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (saved["torso"], saved["gym_packages"]) == ("tiny_net", "my_nets")
    done = subprocess.run([sys.executable, "-m", "qzoo", "eval", "run", "--episodes", "1"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    argv[argv.index("my_nets")] = "os"  # a module that registers no torso
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
    assert (
        done.returncode == 2 and "--torso: bad value tiny_net; expected one of auto" in done.stderr
    )


def test_a_torso_whose_out_features_is_wrong_is_one_line(tmp_path):
    def lies(shape):
        body = nn.Sequential(nn.Linear(shape[0], 16), nn.ReLU())
        body.out_features = 99
        return body

    qzoo.register_torso("lies", lies)
    with pytest.raises(qzoo.UserError) as refused:
        qzoo.train("dqn", env="CartPole-v1", torso="lies", run_dir=str(tmp_path / "r"), **OPTIONS)
    assert str(refused.value) == (
        "--torso lies: its out_features says 99 but it gives 16 features; expected them to agree"
    )
    assert not (tmp_path / "r").exists()


def test_the_module_that_registered_a_torso_is_kept_with_the_run(tmp_path, monkeypatch):
    (tmp_path / "kept_nets.py").write_text(NETS.replace("tiny_net", "kept_net"))
    monkeypatch.syspath_prepend(str(tmp_path))
    import kept_nets  # noqa: F401  registers kept_net

    config = qzoo.config("dqn", env="CartPole-v1", torso="kept_net")
    assert config.gym_packages == "kept_nets"
    assert qzoo.config("dqn", env="CartPole-v1", torso="kept_net",
                       gym_packages="os").gym_packages == "os,kept_nets"  # fmt: skip


SCRIPT = """
import qzoo
from torch import nn

qzoo.register_torso("in_script", lambda shape: nn.Sequential(nn.Linear(shape[0], 8), nn.ReLU()))
qzoo.train("dqn", env="CartPole-v1", torso="in_script", run_dir="run", progress=False,
           iterations=1, train_frames=300, eval_frames=100, replay_capacity=1000,
           min_replay_capacity_fraction=0.1, tensorboard=False)
"""


def test_a_torso_of_the_training_script_is_named_where_it_is_missing(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    (tmp_path / "train.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = subprocess.run([sys.executable, "-m", "qzoo", "eval", "run"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith(
        "qzoo: error: the run's torso 'in_script' is not registered "
        "in this process: import the module that registers it"
    )
