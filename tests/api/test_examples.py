"""The scripts under examples/ run as a user runs them (`python examples/NAME.py`, in a
folder of their own), on the small budget QZOO_QUICK=1 gives them, and print what
they say they print."""

import os
import subprocess
import sys

import pytest
from helpers import REPO

EXAMPLES = REPO / "examples"


@pytest.mark.parametrize(
    "script, printed",
    [("train_and_act.py", ["stopped: ", "finished 4 iterations", "one greedy episode: return",
                           "evaluation over 5 episodes"]),
     ("custom_env.py", ["corridor:Corridor-v0: final return", "corridor:Corridor: Q-values"]),
     ("custom_torso.py", ["Conv2d(4, 16", "return distribution per action: (6, 51) atoms"])],
)  # fmt: skip
def test_example_runs(script, printed, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "QZOO_QUICK": "1"}
    done = subprocess.run([sys.executable, str(EXAMPLES / script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for text in printed:
        assert text in done.stdout, (text, done.stdout)
    assert (tmp_path / "runs").is_dir()


def test_every_example_is_tested_and_listed():
    tested = {"train_and_act.py", "custom_env.py", "custom_torso.py", "corridor.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested
    listed = (EXAMPLES / "README.md").read_text()
    assert all(f"`{name}`" in listed for name in tested)
