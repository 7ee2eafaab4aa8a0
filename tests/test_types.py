"""The interfaces a contributor implements or calls are typed, and mypy checks them
here: the driver, the update bookkeeping, storage and sampler, objective, learner,
policy, actor and the results row, and that every implementation in qzoo fits its
interface (tests/typing/conformance.py; the drivers' overrides in their own files)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INTERFACES = ["qzoo/acting/driver.py", "qzoo/replay/interfaces.py", "qzoo/learning/learner.py",
              "qzoo/learning/objectives.py", "qzoo/acting/policy.py", "qzoo/acting/actor.py",
              "qzoo/run/trainer.py", "qzoo/run/updates.py", "qzoo/api.py", "qzoo/tools/agent.py",
              "qzoo/run/callbacks.py", "qzoo/tools/agent_env.py"]  # fmt: skip
# The drivers subclass Driver (an abstract base, not a protocol): mypy checks an
# override's signature against the base only in the file that defines it, so these are
# checked too, not only followed (--follow-imports=silent hides their errors).
IMPLEMENTATIONS = ["qzoo/acting/serial.py", "qzoo/acting/asynchronous.py", "qzoo/acting/process.py",
                   "qzoo/acting/batches.py", "qzoo/acting/pqn.py", "qzoo/offline/driver.py",
                   "qzoo/distributed/driver.py", "qzoo/distributed/offline.py",
                   "qzoo/learning/prefetched.py"]  # fmt: skip

pytest.importorskip("mypy", reason="mypy is in the dev extra: pip install -e '.[dev]'")


def mypy(*paths):
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--follow-imports=silent",
        "--ignore-missing-imports",
        "--no-error-summary",
        "--cache-dir",
        os.path.join(ROOT, ".mypy_cache"),
        *paths,
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr


def test_the_interfaces_and_their_implementations_type_check():
    code, output = mypy("tests/typing/conformance.py", *INTERFACES, *IMPLEMENTATIONS)
    assert code == 0, output


def test_a_storage_without_gather_is_refused(tmp_path):
    """The check can fail: a storage class that lacks `gather` does not fit."""
    bad = tmp_path / "bad_storage.py"
    bad.write_text(
        "from qzoo.replay.frames import FrameStorage\n"
        "from qzoo.replay.interfaces import Storage\n\n\n"
        "class NoGather:\n"
        "    num_rows = num_envs = num_adds = 0\n"
        "    size = 0\n"
        "    def can_sample(self) -> bool: return False\n"
        "    def oldest(self) -> int: return 0\n"
        "    def window(self) -> tuple[int, int]: return 0, 0\n"
        "    def in_window(self, t): return t\n"
        "    def can_start(self, t, b): return t\n"
        "    def valid(self, t, b): return t\n"
        "    def state_dict(self) -> dict: return {}\n"
        "    def load_state_dict(self, state: dict) -> None: pass\n\n\n"
        "def f(a: FrameStorage, b: NoGather) -> list[Storage]:\n"
        "    return [a, b]\n"
    )
    code, output = mypy(str(bad))
    assert code == 1 and 'missing following "Storage" protocol member' in output, output
    assert "gather" in output and "List item 1" in output
