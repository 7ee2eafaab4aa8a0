"""How qzoo's processes stop: SIGTERM (what `kill` and a cluster scheduler send) taken as
Ctrl-C, so that a run stops cleanly and says how to resume; shutdowns that a second
signal must not cut short; and child processes that die with their parent, however the
parent dies (Linux's PR_SET_PDEATHSIG), instead of living on as orphans."""

import contextlib
import ctypes
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator

_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def term_as_interrupt() -> Iterator[None]:
    """Within, in the main thread, SIGTERM raises KeyboardInterrupt as Ctrl-C does, so
    that both stop a run the same way. A SIGTERM that the process was started ignoring
    (or that has a handler of its own) is left as it is."""
    previous = None
    if _main_thread() and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Within, in the main thread, SIGINT and SIGTERM are ignored: for a shutdown that a
    second Ctrl-C would otherwise cut short, leaving processes behind. (Elsewhere a
    handler cannot be set, and nothing changes.)"""
    previous = {}
    if _main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within, in the main thread, Ctrl-C and SIGTERM (where it is taken as Ctrl-C) wait
    for the block to end, then raise KeyboardInterrupt: for a write that must not be cut
    in the middle (a video frame half sent to ffmpeg, which then reports a corrupt
    packet). Signals left to their default or ignored are left as they are."""
    caught, previous = [], {}

    def hold(signum, frame):
        caught.append(signum)

    if _main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            handler = signal.getsignal(signum)
            if callable(handler) and handler is not hold:  # Python's, or term_as_interrupt's
                previous[signum] = signal.signal(signum, hold)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if caught:
        raise KeyboardInterrupt


def die_with_parent(parent: int, signum: int = signal.SIGKILL) -> None:
    """Called first thing in a child process of `parent` (its pid, read in the parent
    before the fork): the kernel sends the child `signum` when the parent dies, by any
    signal, SIGKILL included, so that a child blocked on a lock or a pipe the parent
    held is not left behind. A parent already gone (it died between the fork and this
    call, when the kernel had nobody to tell) ends the child at once. Linux only; the
    signal comes when the thread that forked exits, so fork from the main thread, or
    from a thread that outlives the child. Elsewhere the getppid check alone is made."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


def die_with(pid: int) -> None:
    """Called first thing in a process that `pid` started but is not the parent of (an
    actor started from the forkserver: the forkserver lives on as long as any of its
    children does, so the death signal of `die_with_parent` would never come): a
    thread ends this process when `pid` ends, waiting on its pidfd (Linux 5.3 and
    later), else asking every half second whether it is still there. A `pid` already
    gone ends it at once."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # no pidfds here (an old kernel, a sandbox)
        fd = None

    def watch():
        if fd is not None:
            select.select([fd], [], [])  # readable once the process has ended
            os._exit(1)
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:  # there, another user's: cannot be the learner's pid
                os._exit(1)
            time.sleep(0.5)

    threading.Thread(target=watch, name="qzoo-watch", daemon=True).start()
