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

FORMAT = "qzoo"
FORMAT_VERSION = 1
MAX_HEADER_BYTES = 64 * 2**20  # the header holds no arrays: a few kB in practice
CHUNK_BYTES = 8 * 2**20  # bytes moved per write or read: the save's extra memory
MMAP_MIN_BYTES = 2**20  # numpy arrays from this size up come back memory-mapped

# safetensors dtype name -> (numpy dtype or None, torch dtype). Only these are written,
# and a header naming any other is refused.
DTYPES = {
    "BOOL": (np.bool_, torch.bool), "U8": (np.uint8, torch.uint8),
    "I8": (np.int8, torch.int8), "I16": (np.int16, torch.int16),
    "U16": (np.uint16, torch.uint16), "I32": (np.int32, torch.int32),
    "U32": (np.uint32, torch.uint32), "I64": (np.int64, torch.int64),
    "U64": (np.uint64, torch.uint64), "F16": (np.float16, torch.float16),
    "BF16": (None, torch.bfloat16), "F32": (np.float32, torch.float32),
    "F64": (np.float64, torch.float64),
}  # fmt: skip
_BY_NUMPY = {np.dtype(n): name for name, (n, _) in DTYPES.items() if n is not None}
_BY_TORCH = {t: name for name, (_, t) in DTYPES.items()}
_ITEMSIZE = {name: torch.empty((), dtype=t).element_size() for name, (_, t) in DTYPES.items()}


# ---- save ------------------------------------------------------------------------


def save(path, state):
    """Writes `state` (see the module docstring) to `path` atomically:

      8 bytes   little-endian length N of the header
      N bytes   JSON header: {name: {"dtype", "shape", "data_offsets"}, ...,
                "__metadata__": {"format": "qzoo", "format_version": "1", "tree": JSON,
                                 "crc32": JSON {name: 8 hex digits, ...}}}
      the rest  every array's bytes, row-major, back to back

    "tree" is the JSON of everything but the arrays, with a placeholder per array that
    also says whether it was a numpy array or a torch tensor, so `load` returns the same
    types. Tags ({"$": ...}) keep what JSON cannot: tuples, dicts with non-string keys
    (torch optimizers key their state by int), NaN and infinities, numpy scalars.

    Extra memory is bounded by CHUNK_BYTES (plus the JSON of the non-array part), not
    by the size of the arrays. Raises TypeError for a leaf of another type and
    OSError when the file cannot be written (the previous file at `path` is kept)."""
    arrays = []  # (name, array or tensor, dtype name)
    tree = _encode(state, "", arrays, set())
    # Largest items first keeps every array aligned to its item size in the file (the
    # header is padded to 8 bytes), so memory-mapped arrays are aligned.
    arrays.sort(key=lambda a: -_ITEMSIZE[a[2]])
    header, offset = {}, 0
    for name, array, dtype in arrays:
        size = math.prod(array.shape) * _ITEMSIZE[dtype]
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + size]}  # fmt: skip
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


def _encode(value, path, arrays, names):
    """The JSON form of `value`; arrays are appended to `arrays` and left as placeholders
    named by their path in the tree (unique: a clash gets primes appended)."""
    if isinstance(value, (np.ndarray, torch.Tensor)):
        kind = "torch" if isinstance(value, torch.Tensor) else "numpy"
        dtype = (_BY_TORCH if kind == "torch" else _BY_NUMPY).get(value.dtype)
        if dtype is None:
            raise TypeError(f"checkpoint: {path or 'root'} has unsupported dtype {value.dtype}")
        name = path or "root"
        while name in names or name == "__metadata__":
            name += "'"
        names.add(name)
        arrays.append((name, value, dtype))
        return {"$": "array", "name": name, "kind": kind}
    if isinstance(value, np.generic):  # numpy scalars keep their dtype
        if value.dtype not in _BY_NUMPY:
            raise TypeError(f"checkpoint: {path} has unsupported dtype {value.dtype}")
        return {"$": "scalar", "dtype": str(value.dtype), "value": _encode_key(value.item())}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$": "float", "value": repr(value)}
    if isinstance(value, dict):
        items = [(k, _encode(v, f"{path}/{k}".lstrip("/"), arrays, names))
                 for k, v in value.items()]  # fmt: skip
        if all(isinstance(k, str) for k in value) and "$" not in value:
            return dict(items)
        return {"$": "dict", "items": [[_encode_key(k), v] for k, v in items]}
    if isinstance(value, (list, tuple)):
        items = [_encode(v, f"{path}/{i}".lstrip("/"), arrays, names) for i, v in enumerate(value)]
        return items if isinstance(value, list) else {"$": "tuple", "items": items}
    raise TypeError(f"checkpoint: cannot store {type(value).__name__} at {path or 'root'}")


def _encode_key(value):
    """Dict keys and scalar values: the tree's plain types, never arrays."""
    arrays = []
    encoded = _encode(value, "key", arrays, set())
    if arrays:
        raise TypeError("checkpoint: arrays cannot be dict keys")
    return encoded


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
                raise UserError(checksums.mismatch(f"checkpoint {path}", name, crcs[name], crc)
                                + "; " + LEFT_AS_IS)  # fmt: skip
            return array

        try:
            state = _decode(json.loads(tree), read)
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
        return _decode(json.loads(header["__metadata__"]["tree"]), lambda name, kind: None)
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


LEFT_AS_IS = ("qzoo leaves it as it is and trains on none of it: restore it from a copy, "
              "or move it away to start the run over, or use another --run-dir")  # fmt: skip


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
        ok = (
            isinstance(entry, dict) and set(entry) == {"dtype", "shape", "data_offsets"}
            and entry["dtype"] in DTYPES and isinstance(entry["shape"], list)
            and all(type(d) is int and d >= 0 for d in entry["shape"])
            and isinstance(entry["data_offsets"], list) and len(entry["data_offsets"]) == 2
            and all(type(o) is int for o in entry["data_offsets"])
        )  # fmt: skip
        begin, end = entry["data_offsets"] if ok else (0, -1)
        if not ok or end - begin != math.prod(entry["shape"]) * _ITEMSIZE[entry["dtype"]]:
            raise _corrupt(path, f"bad header entry for {name!r}")
        spans.append((begin, end))
    # The arrays must tile the data exactly: no gaps, no overlaps, nothing past the end.
    position = 0
    for begin, end in sorted(spans):
        if begin != position:
            raise _corrupt(path, f"array data not contiguous at byte {begin}")
        position = end
    if 8 + n + position != size:
        raise _corrupt(path, f"{size} bytes, but its header describes {8 + n + position}")
    return header, 8 + n


def _checksums(meta, header, path):
    """{array name: crc32 hex}, or None (with a note) for a file without checksums."""
    if "crc32" not in meta:
        print(f"qzoo: note: checkpoint {path} has no checksums (written by an older qzoo): "
              "its arrays are loaded unverified", file=sys.stderr)  # fmt: skip
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


def _decode(node, read):
    """Inverse of `_encode`; `read(name, kind)` returns the array behind a placeholder."""
    if isinstance(node, list):
        return [_decode(v, read) for v in node]
    if not isinstance(node, dict):
        return node
    tag = node.get("$")
    if tag is None:
        return {k: _decode(v, read) for k, v in node.items()}
    if tag == "array":
        return read(node["name"], node["kind"])
    if tag == "scalar":
        dtype = np.dtype(node["dtype"])  # a name from the file: only the table's dtypes
        if dtype not in _BY_NUMPY:
            raise ValueError(f"scalar of dtype {dtype}")
        return dtype.type(_decode(node["value"], read))
    if tag == "float":
        if node["value"] not in ("nan", "inf", "-inf"):
            raise ValueError(f"bad float {node['value']!r}")
        return float(node["value"])
    if tag == "tuple":
        return tuple(_decode(v, read) for v in node["items"])
    if tag == "dict":
        keys = [_decode(k, read) for k, _ in node["items"]]
        if any(isinstance(k, (list, dict, np.ndarray, torch.Tensor)) for k in keys):
            raise TypeError("unhashable dict key")
        return {k: _decode(v, read) for k, (_, v) in zip(keys, node["items"])}
    raise ValueError(f"unknown tag {tag!r}")
