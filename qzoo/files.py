"""Files written whole or not at all: a temporary file next to the target, flushed to
disk, then renamed over it (and the rename itself made durable), so that a kill or a
power cut leaves the old file or the new one, never half of one."""

import errno
import os
import tempfile


def atomic_write(path, write):
    """Calls write(file) on a temporary file next to `path`, then renames it over `path`.

    The temporary file is named `.tmp-*` so that a run killed mid-write leaves a name
    the next start recognizes and removes."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix="-" + os.path.basename(path))
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp creates 0600 files
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    _fsync_folder(folder)


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
