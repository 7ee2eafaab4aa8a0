"""The run-folder tests' fixtures (test_rundir.py, test_rundir_failures.py)."""

import shutil

import pytest
from rundir_common import train


@pytest.fixture(scope="module")
def base_run(tmp_path_factory):
    """A finished run (iterations 0 and 1); tests work on copies of it."""
    run_dir = tmp_path_factory.mktemp("base") / "run"
    assert train(run_dir) == 0
    return run_dir


@pytest.fixture
def run_dir(base_run, tmp_path):
    shutil.copytree(base_run, tmp_path / "run")
    assert train(tmp_path / "run") == 0  # a finished run: rewrites config.json's run_dir
    return tmp_path / "run"
