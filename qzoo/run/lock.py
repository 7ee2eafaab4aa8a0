"""One run per folder: an exclusive lock that names its holder.

Its own module because it is the one POSIX-only piece (fcntl) and because other
commands that write into a run folder (recording videos, say) take the same lock.
"""

import contextlib
import fcntl
import os
import socket

from qzoo.errors import UserError


class RunLock:
    """An exclusive, non-blocking flock() on a file (`<run>/.lock`) while in `with`.

    The kernel drops the lock when its process dies, however it dies, so a lock file
    left by a killed run blocks nothing. The file holds the holder's pid and host for
    the message a second run prints. The holder removes the file when it is done; a
    process that opened it just before then holds a lock on a deleted file, so it
    checks that it locked the file that is at the path, and tries again if not."""

    def __init__(self, path):
        self.path, self.fd = path, None

    def __enter__(self):
        while self.fd is None:
            try:
                self.fd = self._lock()
            except OSError as e:
                reason = e.strerror or str(e)
                raise UserError(f"cannot create lock file {self.path}: {reason}") from None
        return self

    def _lock(self):
        """The locked file's descriptor, or None when the file was removed meanwhile."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 256).decode(errors="replace").strip()
            os.close(fd)
            raise UserError(
                f"run folder {os.path.dirname(self.path)} is in use by "
                f"{holder or 'another process'}; wait for it to end or stop it, or pass "
                "another --run-dir"
            ) from None
        if not (os.path.exists(self.path) and os.stat(self.path).st_ino == os.fstat(fd).st_ino):
            os.close(fd)
            return None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"pid {os.getpid()} on host {socket.gethostname()}\n".encode())
        except OSError:  # a full disk: the file goes (it is ours, locked), so does the lock
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            os.close(fd)
            raise
        return fd

    def __exit__(self, *exc):
        with contextlib.suppress(OSError):
            os.unlink(self.path)  # while still holding it: see the class docstring
        os.close(self.fd)
        self.fd = None
