"""Finding and ending the processes of a Ray session that its start left behind
(cluster.py: a local instance whose start was interrupted or failed), from /proc:
Linux only; elsewhere nothing is found."""

import os
import re
import signal
import time


def clock_ticks():
    """Now, in the clock ticks since boot that /proc/PID/stat counts a process's start in
    (None where there is no /proc)."""
    if not os.path.isdir("/proc/self") or not hasattr(time, "CLOCK_BOOTTIME"):
        return None
    return int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))


def session_processes(since, pid=None):
    """{pid: start} of the live processes of the Ray session that process `pid` (default
    this one) started at or after `since` (clock_ticks()); Linux (/proc) only.

    A process counts when it is this user's, started at or after `since`, and either
    descends from `pid` through processes that all started at or after `since` (the GCS,
    the raylet and what it starts; never a child `pid` had before), or has a file open
    in a session folder that `pid` named (Ray names it session_<date>_<its pid>), as the
    orphans of a dead raylet do: their stdout and stderr are its log files. Another
    user's or another run's Ray processes fail one test or the other."""
    if since is None:
        return {}
    pid = os.getpid() if pid is None else pid
    uid, table = os.getuid(), {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return {}
    for name in names:
        if not name.isdigit() or int(name) == pid:
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            start, ppid, state = _stat(int(name))
        except (OSError, ValueError, IndexError):
            continue
        if start >= since and state not in "ZX":  # a zombie is dead, only not reaped
            table[int(name)] = (ppid, start)
    session = re.compile(rf"/session_\d{{4}}-[\d_-]+_{pid}/")
    found = {}
    for p, (ppid, start) in table.items():
        up, seen = ppid, {p}
        while up in table and up not in seen:
            seen.add(up)
            up = table[up][0]
        if up == pid or _opens(p, session):
            found[p] = start
    return found


def _stat(pid):
    """(start ticks, ppid, state) of process `pid`."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        data = f.read()
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[19]), int(fields[1]), fields[0].decode()


def _opens(pid, pattern):
    """Whether process `pid` has a file open whose path matches `pattern`."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if pattern.search(os.readlink(f"/proc/{pid}/fd/{fd}")):
                return True
        except OSError:
            continue
    return False


def stop_session_processes(since, pid=None, grace=1.0, timeout=5.0):
    """Ends session_processes(since, pid): SIGTERM, then SIGKILL to what is left after
    `grace` seconds (Ray's agents, while they start, ignore SIGTERM), including any the
    session starts meanwhile; returns the pids still alive after `timeout` seconds."""
    began, sent = time.monotonic(), set()
    while True:
        found = session_processes(since, pid)
        waited = time.monotonic() - began
        if not found or waited >= timeout:
            return sorted(found)
        how = signal.SIGTERM if waited < grace else signal.SIGKILL
        for p, start in found.items():
            if (p, start, how) not in sent:  # each signal once to each process
                sent.add((p, start, how))
                _signal(p, start, how)
        time.sleep(0.05)


def _signal(pid, start, how):
    """Sends `how` to process `pid` if it is still the one that started at `start`."""
    try:
        if _stat(pid)[0] == start:
            os.kill(pid, how)
    except (OSError, ValueError, IndexError):
        pass
