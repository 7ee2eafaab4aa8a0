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

from qzoo.checkpoint import atomic_write
from qzoo.errors import UserError

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


def read_array(path, attribute, out=None):
    """Reads `attribute`'s array from the gzip file `path`, checking its dtype (and its
    shape against `out`'s, when given). With `out` (e.g. a memory map) the data are
    streamed into it in chunks, so no second copy of a 7 GB array is made."""
    expected = np.dtype(DTYPES[attribute])
    try:
        with gzip.open(path, "rb") as stream:
            shape, dtype = read_header(stream, path)
            if dtype != expected:
                raise _corrupt(path, f"has dtype {dtype}, not {expected}")
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
                done += n
            if stream.read(1):
                raise _corrupt(path, "has bytes after its array")
    except FileNotFoundError:
        raise UserError(f"{path}: missing; a checkpoint suffix needs all six files") from None
    except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
        raise _corrupt(path, f"is not readable gzip ({e})") from None
    return out


def write_array(path, array, compresslevel=1):
    """gzip(NPY v1.0) of `array`, atomically (temporary file, then rename). Dopamine
    writes level 9; the decompressed bytes are what compatibility needs, and level 1 is
    several times faster on 7 GB of frames."""

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
    capacity = len(data["action"])
    for attribute in ("reward", "terminal"):
        if data[attribute].shape != (capacity,):
            raise _corrupt(os.path.join(folder, file_name(attribute, suffix)),
                           f"has shape {data[attribute].shape}, not ({capacity},)")  # fmt: skip
    if data["add_count"].shape != () or data["add_count"] < 0:
        raise _corrupt(os.path.join(folder, file_name("add_count", suffix)),
                       "is not a non-negative int64 scalar")  # fmt: skip
    invalid = data["invalid_range"]
    if invalid.ndim != 1 or ((invalid < 0) | (invalid >= capacity)).any():
        raise _corrupt(os.path.join(folder, file_name("invalid_range", suffix)),
                       f"is not a list of row indices in [0, {capacity})")  # fmt: skip
    path = os.path.join(folder, file_name("observation", suffix))
    data["observation"] = read_array(path, "observation", frames_out)
    if len(data["observation"]) != capacity:
        raise _corrupt(path, f"has {len(data['observation'])} rows, not {capacity}")
    data["episode_end_indices"] = read_episode_ends(
        os.path.join(folder, f"episode_end_indices_ckpt.{suffix}.gz")
    )
    return data


def write_checkpoint(folder, suffix, arrays, compresslevel=1):
    """Writes the six files of one suffix from `arrays` (the four store arrays,
    add_count and invalid_range), each atomically."""
    os.makedirs(folder, exist_ok=True)
    for attribute, dtype in DTYPES.items():
        array = np.asarray(arrays[attribute])
        if array.dtype != dtype:
            raise ValueError(f"{attribute} must be {np.dtype(dtype)}, not {array.dtype}")
        write_array(os.path.join(folder, file_name(attribute, suffix)), array, compresslevel)
