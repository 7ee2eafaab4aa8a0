"""Fixtures shared by every test folder (pytest puts this folder on the path, so test
modules import tests/helpers.py's builders as `helpers`)."""

import pytest
from helpers import TINY_ARGS

from qzoo.cli.main import main


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """A finished tiny CartPole run folder (DQN, 2 iterations, trained by the command
    line), shared by a module's tests: they read it and never change it."""
    folder = tmp_path_factory.mktemp("runs") / "cartpole"
    assert main(["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(folder), *TINY_ARGS]) == 0
    return folder
