"""The DQN Replay Dataset's files, read and written exactly (batch_rl_dopamine.md §1).

One checkpoint suffix N of a `replay_logs/` folder is six gzip files, each a standard
NPY v1.0 stream written with `allow_pickle=False`:

  $store$_observation_ckpt.N.gz  uint8 [C, H, W]  one frame per row, no stacking
  $store$_action_ckpt.N.gz       int32 [C]        the action chosen at that frame
  $store$_reward_ckpt.N.gz       float32 [C]      the reward after it, clipped to [-1, 1]
  $store$_terminal_ckpt.N.gz     uint8 [C]        1 if the episode ended after it
  add_count_ckpt.N.gz            int64 []         rows ever added (padding included)
  invalid_range_ckpt.N.gz        int64 [n + K]    rows around the write cursor

A seventh file may exist: Dopamine >= 2021's pickled `episode_end_indices` (a set of
ints, read here with an unpickler that can build nothing else) or the prioritized
logger's pickled `sum_tree` (never read). Nothing else is ever unpickled: a file that
holds a pickle where an array belongs is refused. Compatibility means equal
decompressed NPY bytes (gzip headers carry a time stamp), so qzoo may pick its own
compression level.
"""

import gzip
import io
import os
import pickle
import re
import zlib

import numpy as np

from qzoo.errors import UserError
from qzoo.files import atomic_write

STORE = ("observation", "action", "reward", "terminal")
DTYPES = {"observation": np.uint8, "action": np.int32, "reward": np.float32,
          "terminal": np.uint8, "add_count": np.int64, "invalid_range": np.int64}  # fmt: skip
_NAME = re.compile(r"^(.+)_ckpt\.(\d+)\.gz$")
_CHUNK = 8 << 20


def file_name(attribute, suffix):
    """`$store$_observation_ckpt.3.gz`, `add_count_ckpt.3.gz`, ... (Dopamine's names)."""
    prefix = "$store$_" if attribute in STORE else ""
    return f"{prefix}{attribute}_ckpt.{suffix}.gz"


def suffixes(folder):
    """The checkpoint suffixes in `folder`, in order, each with all six files.

    batch_rl's FixedReplayBuffer skips a suffix without them in silence; qzoo refuses
    it, naming the first missing file (a dataset with a hole would otherwise train on
    less than it says)."""
    try:
        names = os.listdir(folder)
    except OSError as e:
        raise UserError(f"dataset folder {folder}: {e.strerror}") from None
    found = {}
    for name in names:
        match = _NAME.match(name)
        if match:
            found.setdefault(int(match.group(2)), set()).add(match.group(1))
    required = {("$store$_" + a if a in STORE else a) for a in DTYPES}
    for suffix, attributes in sorted(found.items()):
        missing = sorted(required - attributes)
        if missing and attributes & required:
            name = f"{missing[0]}_ckpt.{suffix}.gz"
            raise UserError(f"{os.path.join(folder, name)}: missing; a checkpoint suffix "
                            "needs all six files")  # fmt: skip
    return sorted(s for s, attributes in found.items() if required <= attributes)


def _corrupt(path, problem):
    return UserError(f"{path}: {problem}; expected a DQN Replay Dataset file (gzip of NPY)")


def read_header(stream, path):
    """(shape, dtype) of the NPY stream `stream`, positioned at its start. Parses the
    header's length rather than assuming an offset (old NumPy padded to 16 bytes)."""
    start = stream.read(6)
    if start[:1] == b"\x80":
        raise _corrupt(path, "holds a pickle where an array belongs (never unpickled)")
    if start != b"\x93NUMPY":
        raise _corrupt(path, "is not an NPY array")
    version = stream.read(2)
    if len(version) < 2 or version[0] not in (1, 2, 3):
        raise _corrupt(path, "has an unknown NPY version")
    size_bytes = 2 if version[0] == 1 else 4
    length = stream.read(size_bytes)
    header = stream.read(int.from_bytes(length, "little"))
    read = np.lib.format.read_array_header_1_0 if version[0] == 1 else (
        np.lib.format.read_array_header_2_0)  # fmt: skip
    try:  # NumPy parses the header dict with ast.literal_eval: no code runs
        shape, fortran_order, dtype = read(io.BytesIO(length + header))
    except (ValueError, SyntaxError) as e:
        raise _corrupt(path, f"has a bad NPY header ({e})") from None
    if dtype.hasobject:
        raise _corrupt(path, "holds Python objects (a pickle) where numbers belong")
    if fortran_order:
        raise _corrupt(path, "is in Fortran order, which Dopamine never writes")
    return tuple(shape), dtype


def _typed_header(stream, path, attribute):
    """read_header, refusing a dtype other than `attribute`'s."""
    shape, dtype = read_header(stream, path)
    if dtype != np.dtype(DTYPES[attribute]):
        raise _corrupt(path, f"has dtype {dtype}, not {np.dtype(DTYPES[attribute])}")
    return shape, dtype


def read_array(path, attribute, out=None, on_chunk=None):
    """Reads `attribute`'s array from the gzip file `path`, checking its dtype (and its
    shape against `out`'s, when given). With `out` (e.g. a memory map) the data are
    streamed into it in chunks, so no second copy of a 7 GB array is made; each chunk
    read is also given to `on_chunk` (a checksum's update, say)."""
    try:
        with gzip.open(path, "rb") as stream:
            shape, dtype = _typed_header(stream, path, attribute)
            if out is None:
                out = np.empty(shape, dtype)
            elif tuple(out.shape) != shape:
                raise _corrupt(path, f"has shape {shape}, not {tuple(out.shape)}")
            view = memoryview(out.reshape(-1).view(np.uint8))
            done = 0
            while done < len(view):
                n = stream.readinto(view[done : done + _CHUNK])
                if n == 0:
                    raise _corrupt(path, f"is truncated ({done} of {len(view)} data bytes)")
                if on_chunk is not None:
                    on_chunk(view[done : done + n])
                done += n
            if stream.read(1):
                _more_than_its_array(stream, path)
    except (OSError, EOFError, zlib.error) as e:
        raise _unreadable(path, e) from None
    return out


def _more_than_its_array(stream, path):
    """Raises for a gzip stream that holds more than its NPY header says. Damaged
    compressed bytes most often decode to too many: reading on to the end lets gzip's
    checksum tell a corrupt file (OSError, EOFError or zlib.error, raised through) from
    a sound one that holds extra bytes."""
    while stream.read(_CHUNK):
        pass
    raise _corrupt(path, "has bytes after its array (a sound gzip file; its NPY header "
                   "says fewer)")  # fmt: skip


def _unreadable(path, error):
    if isinstance(error, FileNotFoundError):
        return UserError(f"{path}: missing; a checkpoint suffix needs all six files")
    if isinstance(error, EOFError):  # "Compressed file ended before the end-of-stream..."
        return _corrupt(
            path, "is truncated (its gzip stream ends early: a copy or write cut short)"
        )
    if isinstance(error, zlib.error) or "CRC check failed" in str(error) or (
            "Incorrect length" in str(error)):  # fmt: skip
        return _corrupt(path, f"is a corrupt or truncated gzip file ({error}: its bytes "
                        "changed after it was written, a bad copy or disk)")  # fmt: skip
    return _corrupt(path, f"is not readable gzip ({error})")  # BadGzipFile is an OSError


def read_shape(path, attribute, whole=False):
    """The shape of `attribute`'s array in the gzip file `path`, from its header (dtype
    checked) without reading its data; with `whole`, also refuses a file cut short (an
    interrupted copy). A single gzip member, as Dopamine and qzoo write, ends with its
    data's length mod 2**32, so 4 bytes tell; any other file is decompressed to count."""
    try:
        with gzip.open(path, "rb") as stream:
            shape, dtype = _typed_header(stream, path, attribute)
            total = stream.tell() + int(np.prod(shape)) * dtype.itemsize
            if whole and _gzip_size(path) != total % 2**32:
                done = stream.tell()
                while chunk := stream.read(_CHUNK):
                    done += len(chunk)
                if done < total:
                    raise _corrupt(path, f"is truncated ({done} of {total} bytes)")
                if done > total:  # the whole stream was read: its checksum held
                    _more_than_its_array(stream, path)
    except (OSError, EOFError, zlib.error) as e:
        raise _unreadable(path, e) from None
    return shape


def _gzip_size(path):
    """The uncompressed size mod 2**32 that a gzip file's last 4 bytes give (None if
    the file is too short to have them)."""
    with open(path, "rb") as f:
        if f.seek(0, os.SEEK_END) < 18:  # a gzip member's header and trailer
            return None
        f.seek(-4, os.SEEK_END)
        return int.from_bytes(f.read(4), "little")


def write_array(path, array, compresslevel=1):
    """gzip(NPY v1.0) of `array`, atomically (temporary file, then rename). Dopamine
    writes level 9; the decompressed bytes are what compatibility needs, and level 1 is
    far faster on a checkpoint's frames."""

    def write(f):
        with gzip.GzipFile(fileobj=f, mode="wb", compresslevel=compresslevel, mtime=0) as gz:
            # Not np.ascontiguousarray: it makes add_count's 0-d array 1-d.
            contiguous = array if array.flags.c_contiguous else array.copy(order="C")
            np.lib.format.write_array(gz, contiguous, version=(1, 0), allow_pickle=False)

    atomic_write(path, write)


class _SetOfInts(pickle.Unpickler):
    """Unpickles a set (or list) of ints and nothing else: Dopamine's pickled
    `episode_end_indices`. Any other class in the stream is refused."""

    def find_class(self, module, name):
        if (module, name) == ("builtins", "set"):
            return set
        raise pickle.UnpicklingError(f"refused to build {module}.{name}")


def read_episode_ends(path):
    """The optional `episode_end_indices` file: a set of ints, or None if absent."""
    if not os.path.exists(path):
        return None
    try:
        with gzip.open(path, "rb") as stream:
            value = _SetOfInts(stream).load()
    except (pickle.UnpicklingError, OSError, EOFError, zlib.error, ValueError) as e:
        raise _corrupt(path, f"is not a pickled set of ints ({e})") from None
    if not isinstance(value, (set, list)) or not all(type(v) is int for v in value):
        raise _corrupt(path, "is not a set of ints")
    return set(value)


def read_checkpoint(folder, suffix, frames_out=None):
    """One checkpoint suffix of a `replay_logs` folder: a dict of the six arrays
    (observation possibly streamed into `frames_out`) plus `episode_end_indices`."""
    data = {}
    for attribute in ("add_count", "invalid_range", "action", "reward", "terminal"):
        data[attribute] = read_array(os.path.join(folder, file_name(attribute, suffix)), attribute)
    path = os.path.join(folder, file_name("observation", suffix))
    check_shapes(folder, suffix, data, read_shape(path, "observation"))
    data["observation"] = read_array(path, "observation", frames_out)
    data["episode_end_indices"] = read_episode_ends(
        os.path.join(folder, f"episode_end_indices_ckpt.{suffix}.gz")
    )
    return data


def check_shapes(folder, suffix, data, frame_shape):
    """Refuses, naming the file, a checkpoint whose arrays (the five small ones in
    `data`, frames of shape `frame_shape`) do not fit together."""

    def bad(attribute, problem):
        return _corrupt(os.path.join(folder, file_name(attribute, suffix)), problem)

    if data["action"].ndim != 1 or not len(data["action"]):
        raise bad("action", f"has shape {data['action'].shape}, not (rows,) with rows > 0")
    capacity = len(data["action"])
    for attribute in ("reward", "terminal"):
        if data[attribute].shape != (capacity,):
            raise bad(attribute, f"has shape {data[attribute].shape}, not ({capacity},)")
    if data["add_count"].shape != () or data["add_count"] < 0:
        raise bad("add_count", "is not a non-negative int64 scalar")
    invalid = data["invalid_range"]
    if invalid.ndim != 1 or ((invalid < 0) | (invalid >= capacity)).any():
        raise bad("invalid_range", f"is not a list of row indices in [0, {capacity})")
    if len(frame_shape) < 2 or frame_shape[0] != capacity:
        raise bad("observation", f"has shape {frame_shape}, not ({capacity}, ...) frames")


def small_arrays(folder, suffix, whole=False):
    """Every array of a suffix but the frames, whose shape comes from their header
    (with `whole`, their file is also checked to hold all of them: read_shape)."""
    names = ("add_count", "invalid_range", "action", "reward", "terminal")
    data = {a: read_array(os.path.join(folder, file_name(a, suffix)), a) for a in names}
    path = os.path.join(folder, file_name("observation", suffix))
    shape = read_shape(path, "observation", whole)
    check_shapes(folder, suffix, data, shape)
    # A zero-strided stand-in: the statistics never look at frames.
    data["observation"] = np.broadcast_to(np.zeros((1,) + shape[1:], np.uint8), shape)
    return data


def time_order(capacity, add_count):
    """A checkpoint's rows in the order they were written (§1.7): from the cursor on in
    a full file, else rows 0 .. cursor - 1."""
    cursor = add_count % capacity
    return (np.arange(capacity) + cursor) % capacity if add_count >= capacity else (
        np.arange(cursor))  # fmt: skip


def logged_stack(checkpoints):
    """The frame stack K that `checkpoints` (dicts of arrays) were logged with, or None
    when they cannot tell. Each file's invalid_range holds n + K rows (§1.3), and qzoo's
    writer and batch_rl's logger (the DQN Replay Dataset's) write n = 1: K is its length
    less 1, kept only if every episode end in the files is followed by the K - 1
    padding rows (action 0, reward 0, not terminal) that the writer puts before each
    episode, which a dataset logged with n > 1 would lack."""
    stack = None
    for c in checkpoints:
        if stack is None:
            stack = len(c["invalid_range"]) - 1
            if not 1 <= stack <= 64:
                return None
        elif len(c["invalid_range"]) - 1 != stack:
            return None
        order = time_order(len(c["action"]), int(c["add_count"]))
        ends = np.flatnonzero(np.asarray(c["terminal"])[order[: len(order) - stack + 1]])
        for k in range(1, stack):
            rows = order[ends + k]
            if any(np.asarray(c[a])[rows].any() for a in ("action", "reward", "terminal")):
                return None
    return stack


def write_checkpoint(folder, suffix, arrays, compresslevel=1):
    """Writes the six files of one suffix from `arrays` (the four store arrays,
    add_count and invalid_range), each atomically."""
    os.makedirs(folder, exist_ok=True)
    for attribute, dtype in DTYPES.items():
        array = np.asarray(arrays[attribute])
        if array.dtype != dtype:
            raise ValueError(f"{attribute} must be {np.dtype(dtype)}, not {array.dtype}")
        write_array(os.path.join(folder, file_name(attribute, suffix)), array, compresslevel)
