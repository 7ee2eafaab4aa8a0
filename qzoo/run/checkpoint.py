"""Safe, atomic, streaming checkpoints: loading one can never run code.

`save(path, state)` writes a nested tree of dicts, lists and tuples whose leaves are
numpy arrays, torch tensors, numpy scalars, int, float, str, bool or None as ONE file
in the safetensors format (https://github.com/huggingface/safetensors; the layout:
`save`). Why not torch.save / pickle: unpickling a file runs whatever code it names,
and a checkpoint is a file people send each other; and torch.save serializes into one
in-memory blob several times the replay's size. Here each array's bytes go from its
own memory to the file in chunks, so a save needs only a few MiB on top of the state;
`load` maps large numpy arrays from the file (copy-on-write) instead of reading them
into memory. The file is written next to its final path as `.tmp-*`, fsynced and
renamed over it: a kill at any moment leaves the previous checkpoint or the new one,
never half of one.

Every array carries a CRC-32 of its bytes (qzoo/checksums.py), computed as it is
streamed out and checked as it is read back: a byte flipped inside an array is refused
by name, never trained on. A file from before checksums loads unverified, and says so."""

import contextlib
import json
import math
import os
import struct
import sys

import numpy as np
import torch

from qzoo import checksums
from qzoo.errors import UserError
from qzoo.files import atomic_write
from qzoo.run import state_tree
from qzoo.run.state_tree import DTYPES, ITEMSIZE

FORMAT = "qzoo"
FORMAT_VERSION = 1
MAX_HEADER_BYTES = 64 * 2**20  # the header holds no arrays: a few kB in practice
CHUNK_BYTES = 8 * 2**20  # bytes moved per write or read: the save's extra memory
MMAP_MIN_BYTES = 2**20  # numpy arrays from this size up come back memory-mapped


# ---- save ------------------------------------------------------------------------


def save(path, state):
    """Writes `state` (see the module docstring) to `path` atomically:

      8 bytes   little-endian length N of the header
      N bytes   JSON header: {name: {"dtype", "shape", "data_offsets"}, ...,
                "__metadata__": {"format": "qzoo", "format_version": "1", "tree": JSON,
                                 "crc32": JSON {name: 8 hex digits, ...}}}
      the rest  every array's bytes, row-major, back to back

    "tree" is the JSON of everything but the arrays (run/state_tree.py), with a
    placeholder per array that also says whether it was a numpy array or a torch tensor,
    so `load` returns the same types.

    Extra memory is bounded by CHUNK_BYTES (plus the JSON of the non-array part), not
    by the size of the arrays. Raises TypeError for a leaf of another type and
    OSError when the file cannot be written (the previous file at `path` is kept)."""
    tree, arrays = state_tree.encode(state)  # arrays: (name, array or tensor, dtype name)
    # Largest items first keeps every array aligned to its item size in the file (the
    # header is padded to 8 bytes), so memory-mapped arrays are aligned.
    arrays.sort(key=lambda a: -ITEMSIZE[a[2]])
    header, offset = {}, 0
    for name, array, dtype in arrays:
        size = math.prod(array.shape) * ITEMSIZE[dtype]
        shape = list(array.shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    header["__metadata__"] = {
        "format": FORMAT,
        "format_version": str(FORMAT_VERSION),
        "tree": json.dumps(tree, separators=(",", ":"), allow_nan=False),
    }

    def encoded(crcs):
        header["__metadata__"]["crc32"] = json.dumps(crcs, separators=(",", ":"))
        data = json.dumps(header, separators=(",", ":"), allow_nan=False).encode()
        data += b" " * (-len(data) % 8)  # padding with spaces, as safetensors does
        return struct.pack("<Q", len(data)) + data

    def write(f):
        f.flush()
        fd = f.fileno()  # os.write: unbuffered, no copy of the chunks
        first = encoded({name: checksums.PLACEHOLDER for name, _, _ in arrays})
        _write_all(fd, first)
        crcs = {}
        for name, array, _ in arrays:
            crc = checksums.Crc32()
            for chunk in _chunks(array):
                crc.update(chunk)
                _write_all(fd, chunk)
            crcs[name] = crc.hex()
        final = encoded(crcs)  # the same length: hex digits for hex digits
        assert len(final) == len(first)
        _write_all(fd, final, at=0)

    atomic_write(path, write)


def _chunks(array):
    """The bytes of `array` in row-major order, as byte views of at most ~CHUNK_BYTES."""
    if isinstance(array, torch.Tensor):
        array = array.detach()
        if array.device.type == "cpu" and array.is_contiguous():
            array = array.reshape(-1).view(torch.uint8).numpy()  # a view, no copy
        else:  # e.g. a GPU tensor: to the host one chunk at a time
            flat = array.reshape(-1)
            step = max(1, CHUNK_BYTES // array.element_size())
            for i in range(0, flat.numel(), step):
                yield flat[i : i + step].cpu().view(torch.uint8).numpy()
            return
    if not array.dtype.isnative:
        array = array.astype(array.dtype.newbyteorder("="))
    if array.flags.c_contiguous:
        flat = array.reshape(-1).view(np.uint8)
        for i in range(0, flat.size, CHUNK_BYTES):
            yield flat[i : i + CHUNK_BYTES]
    elif array.ndim:  # a strided view: contiguous copies of a few rows at a time
        rows = max(1, CHUNK_BYTES // max(1, array.itemsize * math.prod(array.shape[1:])))
        for i in range(0, len(array), rows):
            yield np.ascontiguousarray(array[i : i + rows]).reshape(-1).view(np.uint8)


def _write_all(fd, data, at=None):
    """Writes all of `data` at the file's position, or at offset `at` (os.pwrite)."""
    view, done = memoryview(data).cast("B"), 0
    while done < len(view):
        rest = view[done:]
        done += os.write(fd, rest) if at is None else os.pwrite(fd, rest, at + done)


# ---- load ------------------------------------------------------------------------


def load(path):
    """Reads a checkpoint written by `save`; returns the same tree.

    numpy arrays of MMAP_MIN_BYTES or more come back as copy-on-write np.memmap views
    of the file (writable; writes stay in memory), so that loading a replay does not
    need a second copy of it in memory: copy them where they belong and drop the tree
    (a live map keeps a replaced file's disk space in use until it is freed). Smaller
    arrays and every torch tensor (on the CPU, wherever it was saved from) are read into
    fresh memory. Nothing is unpickled.

    Every array is checked against its checksum as it is read (a memory-mapped one is
    read through once); a file without checksums (an older qzoo's) loads unverified,
    with a note on stderr. A missing, truncated, corrupt or foreign file, an array that
    fails its checksum, or another format version, raises UserError with a message
    naming the file (and the array) and what to do."""
    with _opened(path) as (f, start, size):
        header, data_start = _read_header(f, path, start, size)
        meta = header.pop("__metadata__")
        tree, crcs = meta["tree"], _checksums(meta, header, path)
        used = set()

        def read(name, kind):
            if name in used or name not in header or kind not in ("numpy", "torch"):
                raise ValueError(f"array {name!r} missing, used twice or of unknown kind")
            used.add(name)
            array, crc = _read_array(f, path, data_start, header[name], kind, crcs is not None)
            if crcs is not None and crc != crcs[name]:
                where = checksums.mismatch(f"checkpoint {path}", name, crcs[name], crc)
                raise UserError(f"{where}; {LEFT_AS_IS}")
            return array

        try:
            state = state_tree.decode(json.loads(tree), read)
        except (ValueError, KeyError, TypeError, IndexError, RecursionError) as e:
            raise _corrupt(path, f"bad tree: {type(e).__name__}: {e}") from None
        if used != set(header):
            raise _corrupt(path, f"arrays outside the tree: {sorted(set(header) - used)[:3]}")
        return state


def peek(path):
    """The tree of the checkpoint at `path` with None in place of every array (its
    config and rows, say), from its header alone: nothing else is read or checked.
    UserError as `load` for a file that is not a qzoo checkpoint."""
    with _opened(path) as (f, start, size):
        header, _ = _read_header(f, path, start, size)
    try:
        tree = json.loads(header["__metadata__"]["tree"])
        return state_tree.decode(tree, lambda name, kind: None)
    except (ValueError, KeyError, TypeError, IndexError, RecursionError) as e:
        raise _corrupt(path, f"bad tree: {type(e).__name__}: {e}") from None


@contextlib.contextmanager
def _opened(path):
    """(the open file, its first 8 bytes, its size); UserError for a missing file or a
    pickle."""
    if not os.path.exists(path):
        raise UserError(f"checkpoint {path!r} does not exist")
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        start = f.read(8)
        if _is_pickle(start):
            raise UserError(
                f"checkpoint {path!r} is a pickle file (an old qzoo checkpoint or a torch.save "
                "file); qzoo never unpickles files, since unpickling can run code: delete it "
                "or use another --run-dir"
            )
        yield f, start, size


def _is_pickle(start):
    # torch.save writes a zip file; pickle protocols 2-5 start with b"\x80" + version.
    return start.startswith(b"PK\x03\x04") or (start[:1] == b"\x80" and start[1:2] in b"\2\3\4\5")


LEFT_AS_IS = (
    "qzoo leaves it as it is and trains on none of it: restore it from a copy, "
    "or move it away to start the run over, or use another --run-dir"
)


def _corrupt(path, reason):
    return UserError(
        f"checkpoint {path!r} is corrupt or not a qzoo checkpoint ({reason}); qzoo leaves it "
        "as it is: move it away to start the run over, or use another --run-dir"
    )


def _read_header(f, path, start, size):
    """Parses and checks the header strictly; returns it and where the data starts."""
    if len(start) < 8:
        raise _corrupt(path, f"{size} bytes, shorter than a header")
    (n,) = struct.unpack("<Q", start)
    if n > MAX_HEADER_BYTES or 8 + n > size:
        raise _corrupt(path, f"header length {n} does not fit a file of {size} bytes")

    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        if len(set(keys)) != len(keys):
            raise ValueError("duplicate keys")
        return dict(pairs)

    try:
        header = json.loads(f.read(n).decode("utf-8"), object_pairs_hook=no_duplicates)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise _corrupt(path, f"header is not JSON: {type(e).__name__}") from None
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise _corrupt(path, "no qzoo metadata in its header")
    if meta.get("format_version") != str(FORMAT_VERSION):
        raise UserError(
            f"checkpoint {path!r} has qzoo format version {meta.get('format_version')!r}; this "
            f"qzoo reads version {FORMAT_VERSION}: resume it with the qzoo that wrote it, or "
            "use another --run-dir"
        )
    if not isinstance(meta.get("tree"), str):
        raise _corrupt(path, "no tree in its metadata")
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not _is_entry(entry):
            raise _corrupt(path, f"bad header entry for {name!r}")
        spans.append(tuple(entry["data_offsets"]))
    # The arrays must tile the data exactly: no gaps, no overlaps, nothing past the end.
    position = 0
    for begin, end in sorted(spans):
        if begin != position:
            raise _corrupt(path, f"array data not contiguous at byte {begin}")
        position = end
    if 8 + n + position != size:
        raise _corrupt(path, f"{size} bytes, but its header describes {8 + n + position}")
    return header, 8 + n


def _is_entry(entry):
    """Whether a header entry is {"dtype", "shape", "data_offsets"} of known types, its
    span as long as its shape and dtype say."""
    if not isinstance(entry, dict) or set(entry) != {"dtype", "shape", "data_offsets"}:
        return False
    dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
    if dtype not in DTYPES or not isinstance(shape, list) or not isinstance(offsets, list):
        return False
    if not all(type(d) is int and d >= 0 for d in shape) or len(offsets) != 2:
        return False
    if not all(type(o) is int for o in offsets):
        return False
    return offsets[1] - offsets[0] == math.prod(shape) * ITEMSIZE[dtype]


def _checksums(meta, header, path):
    """{array name: crc32 hex}, or None (with a note) for a file without checksums."""
    if "crc32" not in meta:
        note = "has no checksums (written by an older qzoo): its arrays are loaded unverified"
        print(f"qzoo: note: checkpoint {path} {note}", file=sys.stderr)
        return None
    crcs = checksums.parse(meta["crc32"], set(header))
    if crcs is None:
        raise _corrupt(path, "bad checksum list")
    return crcs


def _read_array(f, path, data_start, entry, kind, verify):
    """(the array, the CRC-32 of its bytes as hex, or None without `verify`)."""
    np_dtype, torch_dtype = DTYPES[entry["dtype"]]
    shape, (begin, end) = tuple(entry["shape"]), entry["data_offsets"]
    if kind == "numpy" and np_dtype is None:
        raise ValueError(f"numpy has no {entry['dtype']}")
    if kind == "numpy" and end - begin >= MMAP_MIN_BYTES:
        array = np.memmap(f, np_dtype, "c", data_start + begin, shape)
        return array, checksums.of_array(array, CHUNK_BYTES) if verify else None
    # Read in chunks into a torch tensor (any dtype, bfloat16 too); numpy arrays view it.
    tensor = torch.empty(shape, dtype=torch_dtype)
    buffer = memoryview(tensor.reshape(-1).view(torch.uint8).numpy())
    f.seek(data_start + begin)
    crc = checksums.Crc32()
    for i in range(0, end - begin, CHUNK_BYTES):
        chunk = buffer[i : i + CHUNK_BYTES]
        if f.readinto(chunk) != len(chunk):
            raise _corrupt(path, "truncated")
        if verify:
            crc.update(chunk)
    return (tensor if kind == "torch" else tensor.numpy()), crc.hex() if verify else None
