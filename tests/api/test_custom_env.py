"""Environments of one's own: `module:EnvId` and `--gym-packages` on the command line
(train, resume, eval, export, the parallel and async acting modes), a callable from
Python, and one line, exit 2, for an environment that cannot be imported or breaks
Gymnasium's API."""

import json
import os
import subprocess
import sys

import gymnasium
import numpy as np
import pytest
from helpers import REPO, TINY

import qzoo

EXAMPLES = REPO / "examples"
TINY_CLI = ["--iterations", "2", "--train-frames", "400", "--eval-frames", "200",
            "--replay-capacity", "1000", "--min-replay-capacity-fraction", "0.1",
            "--no-tensorboard", "--no-progress"]  # fmt: skip


def qzoo_cli(*argv, cwd=EXAMPLES):
    """`python -m qzoo ARGV` in `cwd` (examples/ holds corridor.py): (status, out, err)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "qzoo", *map(str, argv)], cwd=cwd, env=env,
                          capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_module_env_through_train_resume_eval_and_export(tmp_path, monkeypatch):
    run = tmp_path / "corridor"
    status, _, err = qzoo_cli("train", "dqn", "--env", "corridor:Corridor-v0", "--run-dir",
                              run, *TINY_CLI)  # fmt: skip
    assert status == 0, err
    saved = json.loads((run / "config.json").read_text())
    assert saved["env"] == "corridor:Corridor-v0"
    status, _, err = qzoo_cli("resume", run, "--iterations", "3")
    assert status == 0, err
    assert (run / "results.csv").read_text().count("\n") == 5  # header and iterations 0-3
    status, out, err = qzoo_cli("eval", run, "--episodes", "3", "--json")
    assert status == 0, err
    result = json.loads(out)
    assert result["episodes"] == 3 and result["checkpoint"] == 3
    status, _, err = qzoo_cli("export", run, tmp_path / "model")
    assert status == 0, err
    monkeypatch.syspath_prepend(str(EXAMPLES))  # where this process finds corridor.py
    agent = qzoo.load(str(tmp_path / "model"))
    assert agent.config.env == "corridor:Corridor-v0" and agent.observation_shape == (8,)


def test_the_module_must_be_found_where_the_run_is_used(tmp_path):
    run = tmp_path / "run"
    assert qzoo_cli("train", "dqn", "--env", "corridor:Corridor-v0", "--run-dir", run,
                    *TINY_CLI)[0] == 0  # fmt: skip
    status, out, err = qzoo_cli("eval", run, cwd=tmp_path)
    assert status == 2 and out == ""
    assert err == ("qzoo: error: env 'corridor:Corridor-v0': cannot import 'corridor': no "
                   "module named 'corridor' (expected in the current folder, installed, or "
                   "on PYTHONPATH)\n")  # fmt: skip
    # A folder of the module's name (here the run's own) is not taken for the module.
    run.rename(tmp_path / "corridor")
    status, out, err = qzoo_cli("eval", "corridor", cwd=tmp_path)
    assert status == 2 and err == (
        f"qzoo: error: env 'corridor:Corridor-v0': cannot import 'corridor': "
        f"{tmp_path / 'corridor'} is a folder, not a module (no corridor.py there)\n"
    )


@pytest.mark.parametrize(
    "mode",
    [["--acting", "parallel", "--actor-workers", "2", "--num-envs", "2"],
     ["--acting", "async"],
     ["--acting", "async", "--actor-process"]],
)  # fmt: skip
def test_gym_packages_with_other_acting_modes(mode, tmp_path):
    run = tmp_path / "run"
    status, _, err = qzoo_cli("train", "dqn", "--gym-packages", "corridor", "--env",
                              "Corridor-v0", "--run-dir", run, *TINY_CLI, *mode)  # fmt: skip
    assert status == 0, err
    saved = json.loads((run / "config.json").read_text())
    assert saved["gym_packages"] == "corridor" and saved["env"] == "Corridor-v0"


BROKEN = """
import gymnasium, numpy as np

class Base(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(0, 1, (3,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)
    def reset(self, *, seed=None, options=None):
        return np.zeros(3, np.float32), {}
    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, False, {}

class OldGym(Base):
    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, {}

class ObservationOnly(Base):
    def reset(self, *, seed=None, options=None):
        return np.zeros(3, np.float32)

class WrongShape(Base):
    def step(self, action):
        return np.zeros(4, np.float32), 0.0, False, False, {}

class Continuous(Base):
    action_space = gymnasium.spaces.Box(-1, 1, (1,), np.float32)

class Raises(Base):
    def step(self, action):
        raise RuntimeError("the simulator crashed")

class NoSeed(Base):
    def reset(self):
        return np.zeros(3, np.float32), {}

gymnasium.register("OldGym-v0", entry_point=OldGym)
gymnasium.register("OldGymLimited-v0", entry_point=OldGym, max_episode_steps=50)
"""


@pytest.mark.parametrize(
    "env, message",
    [("broken_envs:OldGym-v0", ("expected Gymnasium's step returning (observation, reward, "
      "terminated, truncated, info), not a tuple of 4 (the old Gym API's done)")),
     ("broken_envs:OldGymLimited-v0", "not a tuple of 4 (the old Gym API's done)"),
     ("broken_envs:ObservationOnly", ("expected Gymnasium's reset(seed=...) returning "
      "(observation, info), not ndarray")),
     ("broken_envs:WrongShape", ("expected observations of the observation space's shape "
      "(3,): step gave one of shape (4,)")),
     ("broken_envs:Continuous", "expected discrete actions, not Box(-1.0, 1.0, (1,), float32)"),
     ("broken_envs:Raises", ("expected Gymnasium's step(action): step failed (RuntimeError: "
      "the simulator crashed)")),
     ("broken_envs:NoSeed", ("expected Gymnasium's reset(seed=...): reset(seed=0) failed "
      "(TypeError: ")),
     ("broken_envs:Missing", ("expected a Gymnasium id that broken_envs registers, or a "
      "function or class of it (it registers OldGym-v0, OldGymLimited-v0)")),
     ("no_such_module:Env-v0", ("env 'no_such_module:Env-v0': cannot import "
      "'no_such_module': no module named 'no_such_module'"))],
)  # fmt: skip
def test_a_broken_environment_is_one_line(env, message, tmp_path):
    (tmp_path / "broken_envs.py").write_text(BROKEN)
    status, out, err = qzoo_cli("train", "dqn", "--env", env, *TINY_CLI, cwd=tmp_path)
    assert status == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("qzoo: error: ") and message in err
    assert sorted(os.listdir(tmp_path)) == ["__pycache__", "broken_envs.py"] or sorted(
        os.listdir(tmp_path)) == ["broken_envs.py"]  # fmt: skip


def test_gym_packages_that_cannot_be_imported(tmp_path):
    (tmp_path / "fails.py").write_text("raise ValueError('no licence key')\n")
    status, _, err = qzoo_cli("train", "dqn", "--gym-packages", "fails", "--env",
                              "CartPole-v1", *TINY_CLI, cwd=tmp_path)  # fmt: skip
    assert status == 2
    assert err == ("qzoo: error: --gym-packages: importing 'fails' failed: ValueError: no "
                   "licence key\n")  # fmt: skip
    status, _, err = qzoo_cli("train", "dqn", "--gym-packages", "no-such", *TINY_CLI,
                              cwd=tmp_path)  # fmt: skip
    assert status == 2 and "--gym-packages: bad value 'no-such'; expected Python module" in err


class Corridor(gymnasium.Env):
    """A corridor of 5 cells defined in a test (no other process can import it)."""

    observation_space = gymnasium.spaces.Box(0, 1, (5,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.position, self.steps = 0, 0
        return np.eye(5, dtype=np.float32)[0], {}

    def step(self, action):
        self.position, self.steps = (
            max(0, self.position + (1 if action == 1 else -1)),
            self.steps + 1,
        )
        done = self.position == 4
        return np.eye(5, dtype=np.float32)[self.position], float(done), done, self.steps == 20, {}


def test_a_callable_of_this_process(tmp_path):
    make = lambda: Corridor()  # a lambda: no other process can import it
    config = qzoo.config("dqn", env=make, **{**TINY, "tensorboard": False})
    assert config.env.startswith("test_custom_env:test_a_callable_of_this_process.<locals>")
    result = qzoo.train(config, run_dir=str(tmp_path / "a"), progress=False, acting="parallel",
                        actor_workers=2, num_envs=2)  # fmt: skip
    assert len(result.rows) == 3
    agent = result.load()
    assert agent.observation_shape == (5,)
    assert qzoo.evaluate(agent, episodes=2)["episodes"] == 2
    with pytest.raises(qzoo.ConfigError) as refused:
        qzoo.config("dqn", env=make, acting="async", actor_process=True)
    assert str(refused.value).startswith("--actor-process: bad value true; expected false: env ")
    assert "is a Python callable of this process" in str(refused.value)
    # A class a test module defines is importable by name: every mode may make it.
    assert qzoo.config("dqn", env=Corridor).env == "test_custom_env:Corridor"


def test_names_of_callables_no_other_process_can_make(tmp_path):
    """A functools.partial (as a lambda) is this process's ('#' in its name): the run
    works here, and elsewhere is one line saying why (not a traceback)."""
    import functools

    partial = functools.partial(Corridor)
    config = qzoo.config("dqn", env=partial, **{**TINY, "tensorboard": False})
    assert config.env == "functools:partial#1"
    assert qzoo.config("dqn", env=partial).env == config.env  # the same object, one name
    result = qzoo.train(config, run_dir=str(tmp_path / "run"), progress=False)
    assert len(result.rows) == 3
    status, _, err = qzoo_cli("eval", tmp_path / "run", cwd=tmp_path)
    assert status == 2 and err.startswith(
        "qzoo: error: --env: bad value functools:partial#1; "
        "expected an environment this process can make"
    )


def test_what_config_refuses_and_accepts_from_python():
    import numpy as np

    from qzoo.configuration import default_run_dir

    with pytest.raises(qzoo.ConfigError, match="env: a Gymnasium environment made already"):
        qzoo.config("dqn", env=gymnasium.make("CartPole-v1"))
    with pytest.raises(qzoo.ConfigError, match="option 'learning-rate': expected its Python "
                       "name, learning_rate="):  # fmt: skip
        qzoo.config("dqn", env="CartPole-v1", **{"learning-rate": 1e-3})
    config = qzoo.config("dqn", env="CartPole-v1", iterations=np.int64(5), batch_size=32.0,
                         mlp_layers=[120, 84], learning_rate=np.float32(0.5))  # fmt: skip
    assert (config.iterations, config.batch_size, config.mlp_layers) == (5, 32, "120,84")
    assert type(config.iterations) is int and config.learning_rate == 0.5
    with pytest.raises(qzoo.ConfigError, match="--batch-size: bad value 32.5"):
        qzoo.config("dqn", env="CartPole-v1", batch_size=32.5)
    assert default_run_dir(qzoo.config("dqn", env=Corridor)) == os.path.join(
        "runs", "dqn-test_custom_env_Corridor-1"
    )
