"""The suite's scheduler: the runs as child processes, --jobs at a time, one line per
run as it starts, ends or fails, a status line per running run now and then, and Ctrl-C
passed on as a clean stop."""

import os
import shlex
import signal
import subprocess
import sys
import time

from qzoo.run.folder_files import os_message
from qzoo.tools.suite_runs import DONE, final_score, is_complete, last_iteration, state

_LAUNCHER = """import ctypes, os, signal, sys
try:
    ctypes.CDLL(None).prctl(1, signal.SIGINT)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(130)
os.execv(sys.argv[2], sys.argv[2:])
"""


def _with_parent_death_signal(command):
    """`command`, started through _LAUNCHER on Linux (as is elsewhere)."""
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *command]


class Scheduler:
    """Starts the runs that are not complete, `jobs` at once, and follows them."""

    def __init__(self, runs, jobs, status_period):
        self.runs, self.jobs, self.status_period = runs, jobs, status_period
        self.running = {}  # Run -> (Popen, start time)
        self.failed, self.finished, self.stopped = [], [], []
        self.signals = []

    def say(self, text):
        print(text, flush=True)

    def run(self):
        total = len(self.runs)
        pending = []
        for run in self.runs:
            kind, detail = state(run)
            if kind == "complete":
                self.say(f"[{run.index}/{total}] skip     {run.name}: {detail}")
            else:
                pending.append(run)
        handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            next_status = time.monotonic() + self.status_period
            while (pending or self.running) and not self.signals:
                while pending and len(self.running) < self.jobs:
                    self.start(pending.pop(0))
                self.poll()
                if self.status_period and time.monotonic() >= next_status and self.running:
                    self.status()
                    next_status = time.monotonic() + self.status_period
                time.sleep(0.2)
            if self.signals:
                self.stop()
        finally:
            for s, handler in handlers.items():
                signal.signal(s, handler)
        return self.conclude(pending)

    def _on_signal(self, signum, frame):
        self.signals.append(signum)
        if len(self.signals) == 2:  # a second Ctrl-C: the children are killed
            for proc, _ in self.running.values():
                _send(proc, signal.SIGKILL)

    def start(self, run):
        kind, detail = state(run)
        shown_env = " ".join(f"{k}={v}" for k, v in run.env.items())
        header = (f"\n=== qzoo suite {time.strftime('%Y-%m-%d %H:%M:%S')}: {shown_env}"
                  f"{' ' if shown_env else ''}{shlex.join(run.command)}\n")  # fmt: skip
        try:
            os.makedirs(os.path.dirname(run.folder) or ".", exist_ok=True)
            with open(run.log, "ab") as log:
                log.write(header.encode())
        except OSError as e:  # a full disk, say: this run fails, those running go on
            self.failed.append(run)
            self.say(f"[{run.index}/{len(self.runs)}] FAILED   {run.name}: "
                     f"{os_message('write', run.log, e)}")  # fmt: skip
            return
        with open(run.log, "ab") as log:
            proc = subprocess.Popen(
                _with_parent_death_signal(run.command), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1", **run.env},
                start_new_session=True,  # a terminal's Ctrl-C reaches the suite alone
            )  # fmt: skip
        self.running[run] = (proc, time.monotonic())
        what = "start   " if kind == "new" else "resume  "
        self.say(f"[{run.index}/{len(self.runs)}] {what} {run.name}: {detail}; log {run.log}")

    def poll(self):
        for run, (proc, started) in list(self.running.items()):
            code = proc.poll()
            if code is None:
                continue
            del self.running[run]
            took = _duration(time.monotonic() - started)
            head = f"[{run.index}/{len(self.runs)}]"
            if code == 0:  # `qzoo train` exits 0 once every iteration is done
                _write_done(run)
                self.finished.append(run)
                self.say(f"{head} done     {run.name} in {took}{final_score(run.folder)}")
            elif self.signals and code in (130, -signal.SIGINT, -signal.SIGKILL):
                self.stopped.append(run)
                self.say(f"{head} stopped  {run.name} after {took}")
            else:
                self.failed.append(run)
                self.say(f"{head} FAILED   {run.name} (exit {code}) after {took}: "
                         f"{_last_line(run.log)}; log {run.log}")  # fmt: skip

    def status(self):
        for run, (_, started) in self.running.items():
            last = last_iteration(run.folder)
            where = "starting" if last is None else f"iteration {last} of {run.config.iterations}"
            took = _duration(time.monotonic() - started)
            self.say(f"  running  {run.name}: {where}, {took}")

    def stop(self):
        """SIGINT to every child (each saves its run), then waits for them all."""
        if self.running:
            self.say(f"qzoo suite: stopping {len(self.running)} run"
                     f"{'s' if len(self.running) > 1 else ''}; each saves its folder "
                     "(Ctrl-C again: kill them now)")  # fmt: skip
        for proc, _ in self.running.values():
            _send(proc, signal.SIGINT)
        while self.running:
            time.sleep(0.1)
            self.poll()

    def conclude(self, pending):
        """The last line; the exit status (130 when stopped by a signal, via
        KeyboardInterrupt; 1 when a run failed; else 0)."""
        complete = sum(is_complete(r.folder, r.config.iterations) for r in self.runs)
        text = f"qzoo suite: {complete} of {len(self.runs)} runs complete"
        if self.failed:
            text += (f", {len(self.failed)} failed ("
                     + ", ".join(r.name for r in self.failed) + "; their logs say why)")  # fmt: skip
        if self.signals:
            left = len(self.runs) - complete
            self.say(f"{text}; interrupted: the same command resumes the {left} other"
                     f"{'s' if left != 1 else ''}")  # fmt: skip
            raise KeyboardInterrupt
        if self.failed:
            self.say(f"{text}; the same command retries them")
            return 1
        out = os.path.dirname(os.path.dirname(self.runs[0].folder)) if self.runs else "."
        self.say(f"{text}; the report: qzoo suite report --out {shlex.quote(out or '.')}")
        return 0


def _write_done(run):
    """The DONE file: the run ended well, with this command."""
    try:
        with open(os.path.join(run.folder, DONE), "w", encoding="utf-8") as f:
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(run.command)}\n")
    except OSError:
        pass  # results.csv says it too


def _send(proc, signum):
    try:
        proc.send_signal(signum)
    except ProcessLookupError:
        pass


def _duration(seconds):
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


def _last_line(path):
    """The last non-empty line of a log (what a failed `qzoo train` said last)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 8192))
            lines = [s for s in f.read().decode("utf-8", "replace").splitlines() if s.strip()]
        return lines[-1].strip() if lines else "(empty log)"
    except OSError as e:
        return f"(cannot read the log: {e.strerror})"
