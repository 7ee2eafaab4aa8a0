"""Files written whole or not at all: a temporary file next to the target, flushed to
disk, then renamed over it (and the rename itself made durable), so that a kill or a
power cut leaves the old file or the new one, never half of one; the temporary file is
flock()ed by its writer while it lives, so that the next write of the same name removes
one a kill left (SIGKILL runs no cleanup) and never one being written. And disk space
reserved before a file is written through a memory map, where a full disk is not an
error but SIGBUS, which kills the process without a word."""

import contextlib
import errno
import fcntl
import os
import shutil
import tempfile

from qzoo.errors import UserError


def atomic_write(path, write):
    """Calls write(file) on a temporary file next to `path`, then renames it over `path`.

    The temporary file is named `.tmp-*` so that a run killed mid-write leaves a name
    the next start recognizes and removes."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    suffix = "-" + os.path.basename(path)
    remove_stale(folder, ".tmp-", suffix)
    tmp, held = held_temporary(folder, ".tmp-", suffix)
    try:
        with os.fdopen(os.dup(held), "wb") as f:  # `held` keeps the lock until the rename
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600 files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    finally:
        os.close(held)
    _fsync_folder(folder)


def held_temporary(folder, prefix, suffix="", directory=False):
    """(path, fd) of a new temporary file in `folder` (a folder, with `directory`) named
    prefix...suffix, flock()ed through `fd` until that is closed: `remove_stale` leaves it
    while this process lives, and removes it once a kill has ended the process."""
    while True:
        if directory:
            path = tempfile.mkdtemp(dir=folder, prefix=prefix, suffix=suffix)
            fd = os.open(path, os.O_RDONLY)
        else:
            fd, path = tempfile.mkstemp(dir=folder, prefix=prefix, suffix=suffix)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # waits while a remove_stale holds it, removing it
        except OSError as e:  # a file system without flock: unheld, and never removed
            if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                os.close(fd)
                raise
            return path, fd
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return path, fd
        os.close(fd)  # removed between its creation and the lock: another name


def unheld(folder, prefix, suffix=""):
    """The paths in `folder` named prefix...suffix that no living process holds (see
    held_temporary): what a killed writer left. Each is locked while the caller has it."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(suffix)):
            continue
        path = os.path.join(folder, name)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its writer lives (or the file system has no flock)
            os.close(fd)
            continue
        try:
            yield path
        finally:
            os.close(fd)


def remove_stale(folder, prefix, suffix=""):
    """Removes the temporary files and folders that killed writers left in `folder`
    (named prefix...suffix, held by no living process)."""
    for path in unheld(folder, prefix, suffix):
        if os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)


def _fsync_folder(folder):
    # Makes the rename itself durable: without it a power cut can bring back the old file.
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as e:  # some file systems cannot fsync a folder; the rename is done
        if e.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def size_text(num_bytes):
    """1536 -> '1.5 KiB': a size for messages."""
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if num_bytes < 1024 or unit == "GiB":
            return f"{num_bytes} bytes" if unit == "bytes" else f"{num_bytes:,.1f} {unit}"
        num_bytes /= 1024
    return ""


def no_space(path, need, what="write"):
    """The one line for a disk without `need` bytes free for `path`."""
    try:
        free = size_text(shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free)
    except OSError:
        free = "unknown"
    return UserError(
        f"cannot {what} {path}: not enough disk space ({size_text(need)} needed, {free} "
        "free there); free some space or choose another folder"
    )


def reserve(fd, size, path, new=True):
    """Allocates the first `size` bytes of the open file `fd` on disk (posix_fallocate),
    so that writing them through a memory map cannot meet a full disk; UserError naming
    `path`, the space needed and the space free when they do not fit (a `new` file is
    emptied first, giving back what was allocated). A file system without fallocate
    gets the free space checked instead."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            if new:
                os.ftruncate(fd, 0)
            raise no_space(path, size) from None
        if e.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            raise
        used = os.fstat(fd).st_blocks * 512
        if shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free + used < size:
            raise no_space(path, size) from None
