"""Files written whole: a temporary file that a killed writer left (SIGKILL runs no
cleanup) is removed by the next write of the same name; one that a living writer holds
is never touched; and a signal that comes during a write that must not be cut waits
for it to end."""

import os
import signal
import subprocess
import sys

import pytest

from qzoo.files import atomic_write, held_temporary
from qzoo.signals import deferred

KILLED = """
import os, signal, sys
from qzoo.files import held_temporary
path, fd = held_temporary(sys.argv[1], ".tmp-", "-figure.png")
os.write(fd, b"half a figure")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_killed_writers_temporary_file_goes_and_a_living_ones_stays(tmp_path):
    done = subprocess.run([sys.executable, "-c", KILLED, str(tmp_path)], check=False)
    assert done.returncode == -signal.SIGKILL
    [left] = os.listdir(tmp_path)  # what the kill left
    live, held = held_temporary(str(tmp_path), ".tmp-", "-figure.png")  # a writer at work
    try:
        atomic_write(str(tmp_path / "figure.png"), lambda f: f.write(b"png"))
        assert sorted(os.listdir(tmp_path)) == sorted(["figure.png", os.path.basename(live)])
        assert left not in os.listdir(tmp_path)
        assert (tmp_path / "figure.png").read_bytes() == b"png"
    finally:
        os.close(held)


def test_a_signal_during_a_deferred_block_waits_for_its_end():
    done = []
    with pytest.raises(KeyboardInterrupt), deferred():
        os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C in the middle of a write
        done.append("the rest of the block")
    assert done == ["the rest of the block"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # as it was
