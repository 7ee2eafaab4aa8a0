"""qzoo's memory-mappable layout of a DQN Replay Dataset: one folder per checkpoint
suffix, `ckpt.<N>/`, holding the six arrays as plain uncompressed NPY files
(`np.load(..., mmap_mode="r")` maps them without reading), and `dataset.json`, the
manifest naming the format, the checkpoints and each array's CRC-32 (computed as a
conversion streams it out, offline/conversion.py; checked when a process first opens
the file). More disk than Dopamine's gzip files, and almost no memory to train from."""

import contextlib
import glob
import json
import math
import os
import sys

import numpy as np

from qzoo import checksums
from qzoo.errors import UserError
from qzoo.files import atomic_write
from qzoo.offline import dopamine
from qzoo.offline.dataset_game import replay_logs
from qzoo.offline.maps import mapping, release

QZOO_FORMAT = "qzoo-dqn-replay-1"


def write_manifest(dst, **fields):
    """Writes `dst`/dataset.json (atomically: a conversion writes it last, so an
    interrupted one has none and is redone whole): the format, then `fields` in the
    order given (checkpoints, sources, crc32 as {suffix: {array: CRC-32 hex}}, ...)."""
    manifest = {"format": QZOO_FORMAT, **fields}
    atomic_write(
        os.path.join(dst, "dataset.json"), lambda f: f.write(json.dumps(manifest).encode())
    )


def load_qzoo(folder, only=None, verify=tuple(dopamine.DTYPES)):
    """{suffix: arrays} of a qzoo-layout dataset (of the suffixes `only`, default all),
    frames memory-mapped read-only. The arrays named in `verify` are checked against
    the manifest's checksums (once per process and file: _verify); a dataset converted
    before checksums loads unverified, with a note."""
    try:
        with open(os.path.join(folder, "dataset.json"), "rb") as f:
            manifest = json.loads(f.read())
    except (OSError, ValueError):
        raise UserError(f"{folder} is not a qzoo dataset (no readable dataset.json)") from None
    if not isinstance(manifest, dict) or manifest.get("format") != QZOO_FORMAT:
        raise UserError(f"{folder}/dataset.json: not format {QZOO_FORMAT}")
    crcs = manifest.get("crc32")
    if crcs is None and verify and os.path.abspath(folder) not in _UNVERIFIED:
        _UNVERIFIED.add(os.path.abspath(folder))
        note = "has no checksums (converted by an older qzoo): its arrays are loaded unverified"
        print(f"qzoo: note: {folder} {note}", file=sys.stderr)
    out = {}
    for suffix in manifest["checkpoints"]:
        if only is not None and int(suffix) not in only:
            continue
        arrays = {}
        for attribute, dtype in dopamine.DTYPES.items():
            path = os.path.join(folder, f"ckpt.{int(suffix)}", f"{attribute}.npy")
            arrays[attribute] = _map_npy(path, folder)
            if arrays[attribute].dtype != dtype:
                raise UserError(f"{path}: dtype {arrays[attribute].dtype}, not {np.dtype(dtype)}")
            if crcs is not None and attribute in verify:
                expected = crcs.get(str(suffix), {}) if isinstance(crcs, dict) else None
                expected = expected.get(attribute) if isinstance(expected, dict) else None
                if not checksums.is_checksum(expected):
                    missing = f"{folder}/dataset.json: no checksum for {path}"
                    raise UserError(f"{missing}; {_redo(folder)}")
                _verify(path, attribute, arrays[attribute], expected, folder)
        out[int(suffix)] = arrays
    return out


_UNVERIFIED = set()  # folders said to have no checksums, once per process
_VERIFIED = {}  # (path, inode, size, mtime) -> checksum: each file is read through once


def _verify(path, attribute, array, expected, folder):
    """Refuses in one line a file whose array does not match its checksum."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_ino, st.st_size, st.st_mtime_ns)
    if _VERIFIED.get(key) != expected:
        found = checksums.of_array(array)
        mapped = mapping(array)
        if mapped is not None:
            release([mapped])  # read through once: not this process's memory
        if found != expected:
            mismatch = checksums.mismatch(path, attribute, expected, found)
            raise UserError(f"{mismatch}; {_redo(folder)}")
        _VERIFIED[key] = expected


def _map_npy(path, folder):
    """np.load(path, mmap_mode="r"), refusing in one line a file cut short or garbled
    (NumPy says "mmap length is greater than file size"), with the way to redo it."""
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        problem = f"is missing or corrupt ({getattr(e, 'strerror', None) or e})"
    with contextlib.suppress(OSError, ValueError, EOFError), open(path, "rb") as f:
        have = os.fstat(f.fileno()).st_size
        problem = problem if have else "is empty (truncated)"
        version = np.lib.format.read_magic(f)  # how much is missing, from the header
        shape, _, dtype = getattr(np.lib.format, f"read_array_header_{min(version[0], 2)}_0")(f)
        need = f.tell() + math.prod(shape) * dtype.itemsize
        problem = f"is truncated ({have:,} of its {need:,} bytes)" if have < need else problem
    raise UserError(f"{path}: {problem}; {_redo(folder)}")


def _redo(folder):
    """How to remake the qzoo-layout dataset `folder`, for messages."""
    parent = os.path.dirname(os.path.normpath(folder)) or "."
    gzips = glob.glob(os.path.join(glob.escape(replay_logs(parent)), "*_ckpt.*.gz"))
    if os.path.basename(os.path.normpath(folder)) == "qzoo" and gzips:  # qzoo_layout's copy
        return (
            f"delete {folder}, the memory-mappable copy `--offline {parent}` made, and "
            "the next such run converts the gzip files again"
        )
    return "convert the dataset again, into a new folder (qzoo dataset convert ... --to qzoo)"
