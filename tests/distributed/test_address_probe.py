"""`--ray --address HOST:PORT` is probed before Ray is asked (Ray retries an address
for minutes, a warning every few seconds): a closed port, or a server that does not
answer as a Ray cluster's GCS (a gRPC server) within the timeout, is one line and exit
code 2, within the 5 s the docs promise. The probe is a TCP connect and HTTP/2's
opening: a GCS answers with a SETTINGS frame at once."""

import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from helpers import REPO

from qzoo.distributed import cluster
from qzoo.errors import UserError

SETTINGS = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # an empty SETTINGS frame, as a GCS sends


def _closed_port():
    """A local port where nothing listens (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A local TCP server that, for each connection, calls `answer(connection)`."""

    def __init__(self, answer):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self.socket.getsockname()[1]}"
        self.answer, self.open = answer, []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:  # closed
                return
            self.open.append(connection)
            self.answer(connection)

    def close(self):
        self.socket.close()
        for connection in self.open:
            connection.close()


def _gcs(connection):
    connection.recv(64)  # the client's preface and SETTINGS
    connection.sendall(SETTINGS)


def _silent(connection):
    pass  # listens, accepts, says nothing (a server of another kind)


def _closes(connection):
    connection.close()


def test_a_grpc_server_passes_the_probe():
    server = Server(_gcs)
    try:
        cluster.check_reachable(server.address, timeout=5.0)  # no error
    finally:
        server.close()


@pytest.mark.parametrize(
    "answer, fragment",
    [(_silent, "does not answer as a Ray cluster's GCS within 1 s;"),
     (_closes, "does not answer as a Ray cluster's GCS (it closed the connection);")],
)  # fmt: skip
def test_a_server_of_another_kind_is_refused_within_the_timeout(answer, fragment):
    server = Server(answer)
    start = time.monotonic()
    try:
        with pytest.raises(UserError) as error:
            cluster.check_reachable(server.address, timeout=1.0)
    finally:
        server.close()
    assert time.monotonic() - start < 5.0  # the 1-s timeout held (room for a loaded machine)
    message = str(error.value)
    assert message.startswith(f"--address {server.address}: a server listens there but ")
    assert fragment in message and "\n" not in message


def test_a_closed_port_is_one_line_within_6_seconds_in_a_real_process(tmp_path):
    """The whole command, Python's start included: the probe runs before PyTorch loads."""
    pytest.importorskip("ray")  # without it, the refusal is that Ray is missing
    address = f"127.0.0.1:{_closed_port()}"
    argv = ["train", "dqn", "--env", "CartPole-v1", "--ray", "--address", address]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "qzoo", *argv], capture_output=True,
                            text=True, cwd=tmp_path, env=env, check=False)  # fmt: skip
    seconds = time.monotonic() - start
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(f"qzoo: error: --address {address}: no Ray cluster answers "
                                    "there (Connection refused)")  # fmt: skip
    assert result.stderr.count("\n") == 1, result.stderr
    assert seconds < 6.0, seconds
    assert os.listdir(tmp_path) == []


def test_rays_own_lines_are_kept_off_the_terminal_while_it_connects():
    """Ray's C++ core writes to file descriptor 2 itself: within, those bytes are dropped,
    and the descriptor is the terminal's again after."""
    code = ("import os, sys; from qzoo.distributed import cluster\n"
            "with cluster._quiet_stderr():\n"
            "    os.write(2, b'[W rpc_client.h:153] Failed to connect to GCS\\n')\n"
            "    print('a Python line', file=sys.stderr)\n"
            "os.write(2, b'after\\n')\n")  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, check=True)  # fmt: skip
    assert result.stderr == "after\n"
