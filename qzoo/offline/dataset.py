"""DQN Replay Dataset folders: what they hold, their conversion, and opening one for
training (the `qzoo dataset` command is cli/dataset.py).

  info(DIR)                  checkpoints, transitions, episodes, returns
  to_qzoo(SRC, DST)          gzip files -> memory-mappable .npy files
  to_dopamine(SRC, DST)      and back, byte-identical arrays
  rlu_copy.from_rlu          RL Unplugged's TFRecord files -> the same layout
DIR and SRC are `replay_logs` folders (or the run folder above one). The qzoo layout
is one folder per checkpoint suffix, `ckpt.<N>/`, holding the six arrays as plain
uncompressed NPY files (`np.load(..., mmap_mode="r")` maps them without reading), plus
`dataset.json` naming the format and each array's CRC-32 (computed as the conversion
streams it out, checked when a process first opens the file): more disk than the gzip
files, and almost no memory to train from. The conversion checks the disk first and
reserves each frames file before mapping it (a full disk under a map is SIGBUS)."""

import contextlib
import functools
import glob
import json
import math
import os
import shutil
import sys
import tempfile

import numpy as np

from qzoo import checksums
from qzoo.errors import UserError
from qzoo.files import atomic_write, size_text
from qzoo.offline import dopamine, rlu
from qzoo.offline.dataset_game import dataset_game, replay_logs
from qzoo.offline.maps import create_npy, mapping, release
from qzoo.offline.storage import DatasetStorage

QZOO_FORMAT = "qzoo-dqn-replay-1"


def _small_arrays(folder, suffix, whole=False):
    """Every array of a suffix but the frames, whose shape comes from their header
    (with `whole`, their file is also checked to hold all of them: read_shape)."""
    data = {a: dopamine.read_array(os.path.join(folder, dopamine.file_name(a, suffix)), a)
            for a in ("add_count", "invalid_range", "action", "reward", "terminal")}  # fmt: skip
    path = os.path.join(folder, dopamine.file_name("observation", suffix))
    shape = dopamine.read_shape(path, "observation", whole)
    dopamine.check_shapes(folder, suffix, data, shape)
    # A zero-strided stand-in: the statistics never look at frames.
    data["observation"] = np.broadcast_to(np.zeros((1,) + shape[1:], np.uint8), shape)
    return data


def episode_returns(data):
    """(episodes ended in the file, returns of those seen whole) walking its rows in
    time order (§1.7: slot C-1 first in a full file, then 0 .. cursor-1), padding
    rows included (they carry reward 0). Rewards are the stored, clipped ones."""
    order = dopamine.time_order(len(data["action"]), int(data["add_count"]))
    terminal, reward = data["terminal"][order] != 0, data["reward"][order]
    ends = np.flatnonzero(terminal)
    sums = np.cumsum(reward)
    # An episode seen whole runs from after one terminal row through the next.
    return len(ends), np.diff(sums[ends]).tolist()


def info(folder, stack=None):
    """One dict per checkpoint suffix of `folder` (Dopamine's files, or `convert`'s qzoo
    layout), and the totals (transitions counted as valid for a frame stack of `stack`;
    by default the one the files were logged with, dopamine.logged_stack, or Dopamine's
    4 when they cannot tell)."""
    qzoo = os.path.exists(os.path.join(folder, "dataset.json"))  # convert's own layout
    folder = folder if qzoo else replay_logs(folder)
    mapped = load_qzoo(folder, verify=dopamine.DTYPES.keys() - {"observation"}) if qzoo else None
    found = sorted(mapped) if qzoo else dopamine.suffixes(folder)
    if not found:
        raise UserError(f"{folder} holds no DQN Replay Dataset checkpoint (six *_ckpt.N.gz "
                        f"files){rlu.conversion_hint(folder)}")  # fmt: skip
    load = mapped.__getitem__ if qzoo else functools.partial(_small_arrays, folder, whole=True)
    logged = None if stack else dopamine.logged_stack(load(s) for s in found)  # a first pass
    stack, stack_from = ((stack, "option") if stack else (logged, "files") if logged
                         else (4, "default"))  # fmt: skip
    rows, total_valid, total_bytes = [], 0, 0
    for suffix in found:
        data = load(suffix)
        valid = DatasetStorage([data], stack=stack).valid_count()
        ended, returns = episode_returns(data)
        names = ([os.path.join(f"ckpt.{suffix}", f"{a}.npy") for a in dopamine.DTYPES] if qzoo
                 else [dopamine.file_name(a, suffix) for a in dopamine.DTYPES])  # fmt: skip
        size = sum(os.path.getsize(os.path.join(folder, name)) for name in names)
        rows.append({"checkpoint": suffix, "add_count": int(data["add_count"]),
                     "frame_shape": list(data["observation"].shape[1:]),
                     "transitions": valid, "episodes_ended": ended,
                     "mean_clipped_return": float(np.mean(returns)) if returns else None,
                     "bytes": size})  # fmt: skip
        total_valid, total_bytes = total_valid + valid, total_bytes + size
    game = dataset_game(folder)[0]
    return {"folder": folder, "game": game, "checkpoints": rows, "transitions": total_valid,
            "stack": stack, "stack_from": stack_from, "bytes": total_bytes}  # fmt: skip


def to_qzoo(src, dst, quiet=False, announce=None):
    """Converts every checkpoint of `src` into the memory-mappable layout in `dst`,
    one array at a time (the frames streamed into their map: bounded memory). The
    manifest is written last, so an interrupted conversion is redone whole. Every file
    is checked first (whole: read_shape) and `dst` found writable, so that a bad dataset
    is refused before anything is written or the line `announce` printed."""
    from qzoo.terminal import progress_bar

    src = replay_logs(src)
    found = dopamine.suffixes(src)
    if not found:
        raise UserError(f"{src} holds no DQN Replay Dataset checkpoint")
    need = sum(_npy_bytes(_small_arrays(src, suffix, whole=True)) for suffix in found)
    os.makedirs(dst, exist_ok=True)
    tempfile.TemporaryFile(dir=dst).close()  # an OSError on a read-only folder
    free = shutil.disk_usage(dst).free
    if need > free:
        raise UserError(
            f"convert: {dst} has {size_text(free)} free, and the memory-mappable copy of "
            f"{src} needs {size_text(need)}; free some space or convert into another folder"
        )
    if announce:
        print(announce, file=sys.stderr)
    bar = progress_bar(len(found), "converting", "checkpoint")
    crcs = {}
    for suffix in found:
        out = os.path.join(dst, f"ckpt.{suffix}")
        os.makedirs(out, exist_ok=True)
        small = _small_arrays(src, suffix)
        frames_path = os.path.join(out, "observation.npy")
        tmp = frames_path + ".tmp"
        crc = checksums.Crc32()
        try:  # a failure, or Ctrl-C, leaves no partial frames file filling the disk
            frames = create_npy(tmp, np.uint8, small["observation"].shape)
            dopamine.read_array(os.path.join(src, dopamine.file_name("observation", suffix)),
                                "observation", frames, crc.update)  # fmt: skip
            frames.flush()
            del frames
            os.replace(tmp, frames_path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise
        crcs[str(suffix)] = {"observation": crc.hex()}
        for attribute in ("action", "reward", "terminal", "add_count", "invalid_range"):
            array = small[attribute]
            crcs[str(suffix)][attribute] = checksums.of_array(array)
            atomic_write(os.path.join(out, f"{attribute}.npy"),
                         lambda f, a=array: np.lib.format.write_array(f, a, allow_pickle=False))  # fmt: skip
        if bar is not None:
            bar.update(1)
        elif not quiet:
            print(f"checkpoint {suffix} -> {out}", file=sys.stderr)
    if bar is not None:
        bar.close()
    manifest = {"format": QZOO_FORMAT, "checkpoints": found, "sources": sources(src, found),
                "crc32": crcs}  # fmt: skip
    game = dataset_game(src)[0]
    if game is not None:  # the copy knows it too, wherever it goes
        manifest["game"] = game
    atomic_write(
        os.path.join(dst, "dataset.json"), lambda f: f.write(json.dumps(manifest).encode())
    )


def _npy_bytes(arrays):
    """The bytes of the NPY files of `arrays` (a header of at most 128 bytes each)."""
    return sum(128 + a.size * a.dtype.itemsize for a in arrays.values())


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
        print(f"qzoo: note: {folder} has no checksums (converted by an older qzoo): its "
              "arrays are loaded unverified", file=sys.stderr)  # fmt: skip
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
                    raise UserError(f"{folder}/dataset.json: no checksum for {path}; "
                                    + _redo(folder))  # fmt: skip
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
            raise UserError(checksums.mismatch(path, attribute, expected, found) + "; "
                            + _redo(folder))  # fmt: skip
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
        return (f"delete {folder}, the memory-mappable copy `--offline {parent}` made, and "
                "the next such run converts the gzip files again")  # fmt: skip
    return "convert the dataset again, into a new folder (qzoo dataset convert ... --to qzoo)"


def to_dopamine(src, dst):
    """Writes a qzoo-layout dataset back as Dopamine's gzip files in `dst`."""
    for suffix, arrays in load_qzoo(src).items():
        dopamine.write_checkpoint(dst, suffix, arrays)
        print(f"checkpoint {suffix} -> {dst}", file=sys.stderr)


def first_suffixes(config):
    """The checkpoints an --offline run opens first: every chosen one, or with
    --offline-reload R the first R (iteration 0 only evaluates; each training phase
    draws its own: offline/driver.py's OfflineDriver.train_phase)."""
    suffixes = dataset_suffixes(config.offline, config.offline_checkpoints, config.offline_reload)
    return suffixes[: config.offline_reload] if config.offline_reload else suffixes


def parse_slice(text):
    """'40:' -> slice(40, None); '' -> every checkpoint; UserError if not START:END."""
    if not text:
        return slice(None)
    start, colon, end = text.partition(":")
    try:
        if not colon:
            raise ValueError
        return slice(int(start) if start else None, int(end) if end else None)
    except ValueError:
        raise UserError(
            f"--offline-checkpoints: bad value {text!r}; expected START:END, a slice of the "
            "sorted checkpoint suffixes (e.g. 40: or :5 or 10:20)"
        ) from None


def dataset_suffixes(folder, checkpoints="", reload=0):
    """The suffixes `--offline folder --offline-checkpoints ...` trains on; UserError
    when there are none, or fewer than `reload` to draw from each iteration."""
    if os.path.exists(os.path.join(folder, "dataset.json")):
        found = sorted(load_qzoo(folder, verify=()))  # listed only: checked when opened
    else:
        found = dopamine.suffixes(replay_logs(folder))
    chosen = found[parse_slice(checkpoints)]
    if not chosen:
        raise UserError(
            f"--offline {folder}: no checkpoint to train on (found {len(found)}"
            + (f", --offline-checkpoints {checkpoints} keeps none" if checkpoints else "")
            + ")"
        )
    if reload > len(chosen):
        raise UserError(
            f"--offline-reload: bad value {reload}; expected at most the {len(chosen)} "
            f"checkpoints of {folder} it may draw from"
        )
    return chosen


def sources(folder, suffixes):
    """Each checkpoint's six files' (size, modification time in ns), as a conversion's
    manifest records them: its cached copy is reused only while they are unchanged (a
    resumed --log-replay run rewrites its last, partial checkpoint under the same
    suffix)."""

    def stat(path):
        st = os.stat(path)
        return [st.st_size, st.st_mtime_ns]

    return {str(s): [stat(os.path.join(folder, dopamine.file_name(a, s))) for a in dopamine.DTYPES]
            for s in suffixes}  # fmt: skip


def _manifest_sources(cache):
    try:
        with open(os.path.join(cache, "dataset.json"), "rb") as f:
            return json.loads(f.read()).get("sources")
    except (OSError, ValueError, AttributeError):
        return None


def first_rows(checkpoint, rows):
    """batch_rl's smaller-dataset mode: the checkpoint as Dopamine's buffer of capacity
    `rows` sees it after slicing its arrays (rows past `rows` are never indexed, since
    every index is taken mod the capacity); add_count and invalid_range stay the file's,
    so a file written full is still full, with its cursor at add_count mod `rows`."""
    if not rows or rows >= len(checkpoint["action"]):
        return checkpoint
    return {k: v[:rows] if k in dopamine.STORE else v for k, v in checkpoint.items()}


def qzoo_layout(folder):
    """`folder` if it is in qzoo's layout; else its conversion in `folder/qzoo/`, made
    on first use (Dopamine's gzip files cannot be memory-mapped) and reused after."""
    if os.path.exists(os.path.join(folder, "dataset.json")):
        return folder
    cache = os.path.join(folder, "qzoo")
    found = dopamine.suffixes(replay_logs(folder))
    if _manifest_sources(cache) == sources(replay_logs(folder), found):
        load_qzoo(cache, verify=())  # every file mappable: refused now, not at its iteration
        return cache
    announce = (f"offline: converting {folder} to a memory-mappable copy in {cache} "
                "(once; `qzoo dataset convert` does the same)")  # fmt: skip
    try:
        to_qzoo(folder, cache, quiet=True, announce=announce)
    except OSError as e:  # e.g. a dataset on a read-only share
        raise UserError(
            f"--offline {folder}: cannot write its memory-mappable copy in {cache} "
            f"({e.strerror}); make one elsewhere with `qzoo dataset convert {folder} DST "
            "--to qzoo` and pass --offline DST"
        ) from None
    return cache


def dataset_checkpoints(folder, info, suffixes=None, rows=0):
    """{suffix: arrays} of the checkpoints `suffixes` (default all) of `folder`,
    memory-mapped (Dopamine's gzip files are converted on first use, see qzoo_layout)
    and cut to their first `rows` (first_rows). Checks that their frames and actions
    fit the environment `info` describes."""
    checkpoints = load_qzoo(qzoo_layout(folder), None if suffixes is None else set(suffixes))
    checkpoints = {s: first_rows(c, rows) for s, c in checkpoints.items()}
    first = next(iter(checkpoints.values()))
    if tuple(first["observation"].shape[1:]) != tuple(info.frame_shape):
        raise UserError(
            f"--offline {folder}: frames of shape {tuple(first['observation'].shape[1:])}, "
            f"but {info.name} gives {tuple(info.frame_shape)}"
        )
    most = max(int(np.max(c["action"])) for c in checkpoints.values())
    if most >= info.num_actions:
        raise UserError(
            f"--offline {folder}: action {most} in the data, but {info.name} has "
            f"{info.num_actions} actions; the dataset is of another game"
        )
    return checkpoints


def open_dataset(folder, info, stack, n_steps, discount, suffixes=None, rows=0):
    """A DatasetStorage over the checkpoints `suffixes` (default all) of `folder`
    (dataset_checkpoints: memory-mapped, checked against the environment)."""
    checkpoints = dataset_checkpoints(folder, info, suffixes, rows)
    storage = DatasetStorage(
        [checkpoints[s] for s in sorted(checkpoints)], stack, n_steps, discount
    )
    storage.suffixes = sorted(checkpoints)
    if not storage.can_sample():
        raise UserError(f"--offline {folder}: no valid transition in the chosen rows")
    return storage
