"""qzoo.load and the Agent: a run folder (latest or an iteration), a model folder, a Hub
repo id; act, q_values and distribution on single and batched observations, NumPy and
torch; make_env's Gymnasium environment; qzoo.evaluate against `qzoo eval --json`."""

import json
import shutil
from typing import ClassVar

import gymnasium
import numpy as np
import pytest
import torch
from helpers import SMALL_HEADS, TINY

import qzoo
from qzoo.cli.main import main

OPTIONS = {**TINY, "tensorboard": False, "progress": False}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Tiny CartPole runs of a Q-value, a categorical, a quantile, an IQN and an R2D1
    agent."""
    root, found = tmp_path_factory.mktemp("agents"), {}
    heads = {"dqn": (), "c51": ("num_atoms",), "qrdqn": ("num_quantiles",),
             "iqn": ("tau_samples_policy", "tau_samples_s_tm1", "tau_samples_s_t")}  # fmt: skip
    for agent, names in heads.items():
        small = {name: SMALL_HEADS[name] for name in ("mlp_hidden", *names)}
        found[agent] = qzoo.train(agent, env="CartPole-v1", run_dir=str(root / agent),
                                  **OPTIONS, **small).run_dir  # fmt: skip
    found["r2d1"] = qzoo.train("r2d1", env="CartPole-v1", run_dir=str(root / "r2d1"),
                               **{**OPTIONS, "train_frames": 2000}).run_dir  # fmt: skip
    return found


def test_load_a_run_folder_latest_and_an_iteration(runs):
    latest, first = qzoo.load(runs["dqn"]), qzoo.load(runs["dqn"], iteration=1)
    assert latest.iteration == 2 and first.iteration == 1
    assert latest.observation_shape == (4,) and latest.num_actions == 2
    assert latest.config.agent == "dqn" and len(latest.rows) == 3
    obs = np.array([0.01, -0.02, 0.03, 0.04], np.float32)
    assert not np.allclose(latest.q_values(obs), first.q_values(obs))
    with pytest.raises(qzoo.UserError, match="iteration: 7; "):
        qzoo.load(runs["dqn"], iteration=7)


def test_act_and_q_values_on_single_and_batched_observations(runs):
    agent = qzoo.load(runs["dqn"])
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    q = agent.q_values(obs)
    assert q.shape == (5, 2) and isinstance(q, np.ndarray)
    expected = agent.network(torch.as_tensor(obs)).q_values.detach().numpy()
    np.testing.assert_allclose(q, expected, rtol=1e-6)
    assert np.array_equal(agent.act(obs), q.argmax(1))
    assert agent.act(obs[0]) == int(q[0].argmax()) and isinstance(agent.act(obs[0]), int)
    assert agent.act(obs.astype(np.float64)).tolist() == q.argmax(1).tolist()  # any float
    tensor = agent.act(torch.as_tensor(obs))
    assert isinstance(tensor, torch.Tensor) and tensor.tolist() == q.argmax(1).tolist()
    assert isinstance(agent.q_values(torch.as_tensor(obs)), torch.Tensor)
    # Epsilon 1: uniform actions from the agent's own seeded stream.
    draws = [qzoo.load(runs["dqn"], seed=5).act(obs, epsilon=1.0).tolist() for _ in range(2)]
    assert draws[0] == draws[1]
    wide = qzoo.load(runs["dqn"], seed=5).act(np.repeat(obs, 40, 0), epsilon=1.0)
    assert set(wide.tolist()) == {0, 1}
    with pytest.raises(ValueError, match=r"observation of shape \(5, 3\); expected \(4,\)"):
        agent.act(obs[:, :3])


def test_distributions(runs):
    obs = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    for name, atoms in (("c51", SMALL_HEADS["num_atoms"]), ("qrdqn", SMALL_HEADS["num_quantiles"]),
                        ("iqn", SMALL_HEADS["tau_samples_policy"])):  # fmt: skip
        agent = qzoo.load(runs[name])
        values, probs = agent.distribution(obs)
        assert values.shape == probs.shape == (3, 2, atoms), name
        np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=1e-5)
        if name != "iqn":  # IQN's taus are drawn anew for each call
            np.testing.assert_allclose((values * probs).sum(-1), agent.q_values(obs), rtol=1e-4)
        single = agent.distribution(obs[0])[0]
        assert single.shape == (2, atoms)
    values, probs = qzoo.load(runs["c51"]).distribution(obs)
    assert np.allclose(values[0, 0], np.linspace(-100, 100, SMALL_HEADS["num_atoms"]))
    with pytest.raises(ValueError, match="dqn learns Q-values, not a distribution"):
        qzoo.load(runs["dqn"]).distribution(obs)


def test_a_recurrent_agent_carries_its_state(runs):
    agent = qzoo.load(runs["r2d1"])
    env = agent.make_env(seed=0)
    obs, _ = env.reset()
    before = agent.q_values(obs)
    agent.act(obs, first=True)
    obs2, *_ = env.step(0)
    assert not np.allclose(agent.q_values(obs2), qzoo.load(runs["r2d1"]).q_values(obs2))
    agent.reset()
    np.testing.assert_allclose(agent.q_values(obs), before, rtol=1e-6)
    result = qzoo.evaluate(agent, episodes=2)
    assert result["episodes"] == 2


def test_make_env_follows_gymnasiums_api(runs):
    agent = qzoo.load(runs["dqn"])
    env = agent.make_env(seed=3)
    assert isinstance(env, gymnasium.Env) and env.action_space.n == 2
    obs, info = env.reset()
    assert obs.shape == agent.observation_shape and obs.dtype == np.float32 and info == {}
    total, steps, done = 0.0, 0, False
    while not done:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs))
        total, steps, done = total + reward, steps + 1, terminated or truncated
    assert total == steps and info == {"life_loss": False}  # CartPole: +1 per step
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(0)
    assert env.reset(seed=3)[0].tolist() == agent.make_env(seed=3).reset()[0].tolist()
    with pytest.raises(ValueError, match="protocols are Atari's"):
        agent.make_env(protocol="noop30")


def test_evaluate_returns_what_qzoo_eval_json_prints(runs, capsys):
    agent = qzoo.load(runs["dqn"])
    result = qzoo.evaluate(agent, episodes=4, seed=2)
    assert main(["eval", runs["dqn"], "--episodes", "4", "--seed", "2", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    for key in ("returns", "return", "episodes", "frames", "epsilon", "seed", "checkpoint"):
        assert result[key] == printed[key], key
    assert qzoo.evaluate(agent, episodes=4, seed=2)["returns"] == result["returns"]
    with pytest.raises(ValueError, match="expected one of the two"):
        qzoo.evaluate(agent, episodes=2, frames=100)


def test_load_a_model_folder_and_a_hub_repo(runs, tmp_path, monkeypatch):
    assert main(["export", runs["dqn"], str(tmp_path / "model")]) == 0
    model = qzoo.load(str(tmp_path / "model"))
    obs = np.zeros((2, 4), np.float32)
    np.testing.assert_allclose(model.q_values(obs), qzoo.load(runs["dqn"]).q_values(obs))

    class FakeHub:  # huggingface_hub's snapshot_download, from a local "Hub"
        calls: ClassVar[list] = []

        def snapshot_download(self, repo_id, repo_type, allow_patterns):
            self.calls.append((repo_id, repo_type, sorted(allow_patterns)))
            target = tmp_path / "cache" / repo_id.replace("/", "--")
            shutil.copytree(tmp_path / "model", target, dirs_exist_ok=True)
            return str(target)

    from qzoo.tools import push

    monkeypatch.setattr(push, "huggingface_hub", lambda: FakeHub())
    hub = qzoo.load("someone/dqn-cartpole")
    assert FakeHub.calls == [("someone/dqn-cartpole", "model",
                              ["config.json", "model.json", "model.safetensors", "results.csv"])]  # fmt: skip
    np.testing.assert_allclose(hub.q_values(obs), model.q_values(obs))
    with pytest.raises(qzoo.UserError, match="does not exist"):
        qzoo.load(str(tmp_path / "nothing" / "here"))


def test_evaluate_checks_its_arguments_as_qzoo_eval_does(runs):
    agent = qzoo.load(runs["dqn"])
    for kwargs, message in (
        ({"episodes": 0}, r"episodes: bad value 0; expected an integer in \[1, 1_000_000\]"),
        ({"episodes": -1}, "episodes: bad value -1"),
        ({"frames": 0}, "frames: bad value 0"),
        ({"epsilon": 2.0}, r"epsilon: bad value 2.0; expected a number in \[0, 1\]"),
        ({"num_envs": 0}, "num_envs: bad value 0"),
    ):
        with pytest.raises(ValueError, match=message):
            qzoo.evaluate(agent, **kwargs)
    with pytest.raises(TypeError, match="agent: int; expected an Agent"):
        qzoo.evaluate(3)
    by_path = qzoo.evaluate(runs["dqn"], episodes=2)  # a run folder's path serves too
    assert by_path["run"] == runs["dqn"] and by_path["latest"] is True
    assert by_path["returns"] == qzoo.evaluate(agent, episodes=2)["returns"]


def test_load_says_what_is_wrong_with_a_local_path(runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    with pytest.raises(qzoo.UserError, match="run folder 'runs/nope' does not exist"):
        qzoo.load("runs/nope")  # a typo of a local folder: never the Hub
    with pytest.raises(qzoo.UserError, match=r"^iteration: 7; .* keeps the networks of"):
        qzoo.load(runs["dqn"], iteration=7)


def test_a_callback_answer_that_is_false_stops_the_run(tmp_path):
    import numpy as np

    result = qzoo.train("dqn", env="CartPole-v1", run_dir=str(tmp_path / "r"),
                        callbacks=[lambda row: np.bool_(row["iteration"] < 1)], **OPTIONS)  # fmt: skip
    assert [r["iteration"] for r in result.rows] == [0, 1] and "returned False" in result.stopped
