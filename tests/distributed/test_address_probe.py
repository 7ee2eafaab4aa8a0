"""`--ray --address HOST:PORT` is probed before Ray is asked (Ray retries an address
for minutes, a warning every few seconds): a closed port, or a server that does not
answer as a Ray cluster's GCS (a gRPC server) within the timeout, is one line and exit
code 2, before PyTorch loads. The probe is a TCP connect and HTTP/2's opening: a GCS
answers with a SETTINGS frame at once. What is checked holds on a loaded machine: no
wait of the probe is longer than its timeout, and the command refuses before torch is
imported (wall-clock bounds on the whole were not certain there)."""

import os
import socket
import subprocess
import sys
import threading

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


class Waits:
    """socket.create_connection for the probe, recording every timeout it waits with
    (the connect's, then each of its reads')."""

    def __init__(self, monkeypatch):
        self.waits, connect = [], socket.create_connection

        def create_connection(address, timeout):
            self.waits.append(timeout)
            return _Recorded(connect(address, timeout=timeout), self.waits)

        monkeypatch.setattr(cluster.socket, "create_connection", create_connection)


class _Recorded:
    def __init__(self, connection, waits):
        self.connection, self.waits = connection, waits

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.connection.close()

    def settimeout(self, seconds):
        self.waits.append(seconds)
        self.connection.settimeout(seconds)

    def sendall(self, data):
        self.connection.sendall(data)

    def recv(self, size):
        return self.connection.recv(size)


def test_a_grpc_server_passes_the_probe():
    server = Server(_gcs)
    try:
        cluster.check_reachable(server.address, timeout=60.0)  # no error (it answers at once)
    finally:
        server.close()


# A silent server is waited for to the end of the timeout (1 s, the point of the case);
# a server that closes the connection is told at once, and 60 s only bounds a machine
# too loaded to serve the test's thread in time.
@pytest.mark.parametrize(
    "answer, timeout, fragment",
    [(_silent, 1.0, "does not answer as a Ray cluster's GCS within 1 s;"),
     (_closes, 60.0, "does not answer as a Ray cluster's GCS (it closed the connection);")],
)  # fmt: skip
def test_a_server_of_another_kind_is_refused_within_the_timeout(answer, timeout, fragment,
                                                                 monkeypatch):  # fmt: skip
    server, spy = Server(answer), Waits(monkeypatch)
    try:
        with pytest.raises(UserError) as error:
            cluster.check_reachable(server.address, timeout=timeout)
    finally:
        server.close()
    # The timeout held: the connect and each read waited at most what was left of it.
    assert spy.waits[0] == timeout and all(0 < wait <= timeout for wait in spy.waits), spy.waits
    message = str(error.value)
    assert message.startswith(f"--address {server.address}: a server listens there but ")
    assert fragment in message and "\n" not in message


# The command line as `python -m qzoo` runs it, then whether PyTorch was ever imported.
COMMAND_THEN_TORCH = """
import sys
from qzoo.cli.main import main
status = main(sys.argv[1:])
print("torch" in sys.modules)
sys.exit(status)
"""


def test_a_closed_port_is_one_line_before_pytorch_loads_in_a_real_process(tmp_path):
    """The whole command in a process of its own: refused before PyTorch is imported
    (the seconds that takes; was a bound of 6 s on the whole command, Python's start
    included, which a loaded machine can exceed)."""
    pytest.importorskip("ray")  # without it, the refusal is that Ray is missing
    address = f"127.0.0.1:{_closed_port()}"
    argv = ["train", "dqn", "--env", "CartPole-v1", "--ray", "--address", address]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", COMMAND_THEN_TORCH, *argv],
                            capture_output=True, text=True, cwd=tmp_path, env=env,
                            check=False)  # fmt: skip
    assert result.returncode == 2 and result.stdout == "False\n"
    assert result.stderr.startswith(f"qzoo: error: --address {address}: no Ray cluster answers "
                                    "there (Connection refused)")  # fmt: skip
    assert result.stderr.count("\n") == 1, result.stderr
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
