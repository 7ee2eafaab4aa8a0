"""Connecting to Ray: a local instance with this machine's cores, or an existing cluster
(`--address auto|HOST:PORT`), refusing in one line what cannot run there.

Checked before the run folder is written: Ray installed, the address reachable, and
the cluster holding at least one CPU per actor (`--actors`); the learner is this
process, replay shards and the evaluator take no CPU of their own (they mostly wait).

Ctrl-C while a local instance starts: Ray, interrupted inside ray.init, forgets the
processes of the half-started node (its agents, orphaned when the raylet dies, ignore
SIGTERM and linger) and can crash at exit. So the first Ctrl-C waits for ray.init to
return; then the instance is stopped and the run exits 130 with one line. A second
Ctrl-C, or a start that fails, interrupts at once: the processes of this process's
session are then found and ended (sweep.py, Linux only; elsewhere ray.shutdown does
what it can).

At exit (a finished run, Ctrl-C, SIGTERM): the instance is shut down with SIGINT and
SIGTERM ignored, so that a second Ctrl-C cannot cut the shutdown short and leave the
agents behind, and then what is left of the session is ended as above. ray.init's own
SIGTERM handler (an exit without the resume line) is replaced by the one it found.
"""

import atexit
import contextlib
import importlib.util
import logging
import math
import os
import signal
import socket
import sys
import tempfile
import time

from qzoo.distributed.sweep import clock_ticks, stop_session_processes
from qzoo.errors import UserError
from qzoo.signals import shielded

# Seconds to wait for a cluster's address to answer before refusing it: Ray itself
# retries an unreachable address for minutes.
CONNECT_TIMEOUT = 5.0
RAY_NICENESS = "RAY_worker_niceness"  # Ray's variable for its workers' niceness


def machine_cpus():
    """The cores this process may use (its affinity mask, not the machine's total)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def check_installed():
    if importlib.util.find_spec("ray") is None:
        raise UserError("--ray: Ray is not installed; install it with pip install 'qzoo[ray]'")


# A gRPC client's first bytes (HTTP/2's preface and an empty SETTINGS frame): a Ray
# GCS, a gRPC server, answers with a SETTINGS frame of its own at once.
_HTTP2_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
_SETTINGS = 4  # the frame type, a frame header's fourth byte


def check_reachable(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Refuses HOST:PORT unless a gRPC server (a Ray cluster's GCS) answers there within
    `timeout` seconds: nothing listening, or a server of another kind (Ray would retry
    it for minutes, printing a warning every few seconds)."""
    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + timeout
    try:
        connection = socket.create_connection((host, int(port)), timeout=timeout)
    except OSError as e:
        raise UserError(
            f"--address {address}: no Ray cluster answers there ({e.strerror or e}); start "
            "one with `ray start --head` or leave --address out for a local instance"
        ) from None
    answer: bytes | None = b""
    with connection:
        try:
            connection.sendall(_HTTP2_HELLO)
            received = b""
            while len(received) < 9:
                connection.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = connection.recv(9 - len(received))
                if not chunk:
                    break
                received += chunk
            answer = received
        except TimeoutError:
            answer = None
        except OSError:  # reset by the server
            pass
    if answer is None or len(answer) < 9 or answer[3] != _SETTINGS:
        waited = f"within {timeout:g} s" if answer is None else "(it closed the connection)"
        raise UserError(
            f"--address {address}: a server listens there but does not answer as a Ray "
            f"cluster's GCS {waited}; give the head node's GCS port (`ray start --head "
            "--port`, 6379 by default), or leave --address out for a local instance"
        )


@contextlib.contextmanager
def _quiet_stderr():
    """Ray's C++ core writes its warnings (one every few seconds while it retries an
    address) to file descriptor 2, past Python's logging: within, they go to a
    temporary file and are dropped, so that a refusal stays one line."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with tempfile.TemporaryFile() as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def worker_niceness():
    """The local instance's system config: its workers (actors, shards, evaluator) at the
    learner's own priority, not Ray's default of 15 niceness above it, which beside
    other jobs left them a few percent of a core (docs/ray.md, "Sharing a machine").
    RAY_worker_niceness, where set, is Ray's to apply and left to it."""
    return {} if RAY_NICENESS in os.environ else {"worker_niceness": 0}


def connect(config):
    """Joins (or starts) the Ray instance `config` names, unless this process already
    has one (a script or test that called ray.init itself); returns the cluster's CPUs.

    Raises UserError, leaving no Ray instance started by this call, for a missing Ray,
    an unreachable address or more actors than CPUs; a local instance whose start is
    interrupted (KeyboardInterrupt, after one line) or fails is stopped likewise."""
    check_installed()
    import ray

    started = False
    if not ray.is_initialized():
        # Ray's own INFO and WARNING lines would bury qzoo's (and a refusal's one line).
        # Actors and shards run one PyTorch thread each: N processes of all-cores
        # thread pools would slow each other down by an order of magnitude.
        runtime_env = {"env_vars": {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}}
        if config.address == "":
            if config.actors > machine_cpus():
                raise _too_many(config.actors, machine_cpus(), "this machine's")
            since = clock_ticks()
            try:
                with _HeldInterrupt() as held, _own_sigterm():
                    ray.init(num_cpus=machine_cpus(), include_dashboard=False,
                             log_to_driver=False, runtime_env=runtime_env,
                             logging_level=logging.ERROR, _system_config=worker_niceness())  # fmt: skip
                if held.pending:
                    raise KeyboardInterrupt
            except BaseException as e:
                _stop_local(ray, since, interrupted=isinstance(e, KeyboardInterrupt))
                raise
            _stop_at_exit(ray, since)
        else:
            if config.address != "auto":
                check_reachable(config.address)
            try:
                with _own_sigterm(), _quiet_stderr():
                    ray.init(address=config.address, log_to_driver=False,
                             runtime_env=runtime_env, logging_level=logging.ERROR)  # fmt: skip
                _stop_at_exit(ray, None)
            except (ConnectionError, TimeoutError) as e:
                raise UserError(
                    f"--address {config.address}: {str(e).splitlines()[0]} (start one with "
                    "`ray start --head`, or leave --address out for a local instance)"
                ) from None
        started = True
    cpus = int(ray.cluster_resources().get("CPU", 0))
    if config.actors > cpus:
        if started:
            ray.shutdown()
        raise _too_many(config.actors, cpus, "the Ray cluster's")
    return cpus


class _HeldInterrupt:
    """Within, in the main thread: the first Ctrl-C is held (`pending`) until the block
    ends, a second raises KeyboardInterrupt at once. Elsewhere, or where SIGINT has a
    handler other than Python's default, nothing changes."""

    def __enter__(self):
        self.pending, self.previous = False, None
        try:
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                self.previous = signal.signal(signal.SIGINT, self._interrupted)
        except ValueError:  # not the main thread
            pass
        return self

    def _interrupted(self, signum, frame):
        if self.pending:
            raise KeyboardInterrupt
        self.pending = True

    def __exit__(self, *exc):
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
        return False


@contextlib.contextmanager
def _own_sigterm():
    """Within: whatever ray.init does to SIGTERM's handler (it installs one that exits
    at once, without the run's resume line) is undone on the way out."""
    previous = signal.getsignal(signal.SIGTERM)
    try:
        yield
    finally:
        if previous is not None and signal.getsignal(signal.SIGTERM) is not previous:
            with contextlib.suppress(ValueError):  # not the main thread: Ray set nothing
                signal.signal(signal.SIGTERM, previous)


_AT_EXIT = []  # [since] of the instance this process started, once registered


def _stop_at_exit(ray, since):
    """Registers `_shut_down` for the exit of this process, once (it runs before Ray's
    own exit hook, registered when Ray was imported, which then has nothing to do).
    `since`: when this process started a local instance, None for a cluster's."""
    if not _AT_EXIT:
        atexit.register(_shut_down, ray, _AT_EXIT)
    _AT_EXIT[:] = [since]


def _shut_down(ray, started):
    """ray.shutdown with a second Ctrl-C (or a SIGTERM) ignored, then the processes of
    the local instance that are left ended; nothing else is left to interrupt."""
    with shielded():
        try:
            ray.shutdown()
        except Exception as error:  # noqa: BLE001 (what it left is stopped below)
            print(f"qzoo: ray.shutdown: {error}", file=sys.stderr)
        if started and started[0] is not None:
            stop_session_processes(started[0])


def _stop_local(ray, since, interrupted):
    """Stops the local instance this process started at `since` (clock_ticks()) and
    whose start was interrupted or failed, a second Ctrl-C ignored meanwhile (a second
    or two); an interrupt is told in one line."""
    with shielded():
        try:
            ray.shutdown()  # what Ray knows of: a node that had finished starting
        except Exception as error:  # noqa: BLE001 (what it left is stopped below)
            print(f"qzoo: ray.shutdown: {error}", file=sys.stderr)
        left = stop_session_processes(since)
    if interrupted:
        what = "stopped its processes" if not left else (
            "could not stop its processes " + " ".join(map(str, left)))  # fmt: skip
        print(f"qzoo: interrupted while starting Ray; {what}", file=sys.stderr, flush=True)


def _too_many(actors, cpus, whose):
    return UserError(
        f"--actors {actors}: more than {whose} {cpus} CPUs (one per actor); use at most "
        f"--actors {cpus}, or more environments per actor with --envs-per-actor"
    )


def lost_errors():
    """The errors of a call to a Ray actor that died (Ray restarts it)."""
    import ray.exceptions as e

    return tuple(getattr(e, name) for name in ("RayActorError", "ActorUnavailableError")
                 if hasattr(e, name))  # fmt: skip


class Faults:
    """What the learner knows of its Ray actors' deaths.

    A lost call is logged once per outage (every call in flight fails with one death,
    and calls made while Ray restarts the actor fail as "unavailable"); an answer from
    a new process is a restart, counted for results.csv whether or not a call of ours
    was lost. An actor that dies MAX_LOSSES times (deaths at least a second apart, so
    that one death's burst of failed calls counts once) without answering in between
    (its constructor fails, say: Ray then reports it dead at every call) stops the run.
    """

    MAX_LOSSES = 5

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.restarts = {"actor": 0, "replay shard": 0}
        self.pids, self.losses, self.last_death, self.down = {}, {}, {}, set()

    def lost(self, kind, index, error):
        key = (kind, index)
        if key not in self.down:
            self.down.add(key)
            print(f"qzoo: ray: {kind} {index} lost ({type(error).__name__}); Ray restarts "
                  "it and the run continues", file=sys.stderr, flush=True)  # fmt: skip
        if type(error).__name__ == "ActorUnavailableError":
            return  # restarting: it will answer again
        now = self.clock()
        if now - self.last_death.get(key, -math.inf) < 1.0:
            return  # the same death
        self.last_death[key] = now
        lost = self.losses[key] = self.losses.get(key, 0) + 1
        if lost >= self.MAX_LOSSES:
            raise RuntimeError(f"{kind} {index} died {lost} times in a row; last: {error}")

    def answered(self, kind, index, pid):
        """A successful answer from process `pid` (None: not known)."""
        key = (kind, index)
        self.down.discard(key)
        self.losses.pop(key, None)
        self.last_death.pop(key, None)
        old = self.pids.setdefault(key, pid)
        if pid is not None and old != pid:
            self.pids[key] = pid
            self.restarts[kind] += 1
            print(f"qzoo: ray: {kind} {index} restarted by Ray (process {old} -> {pid}); "
                  "the run continues", file=sys.stderr, flush=True)  # fmt: skip
