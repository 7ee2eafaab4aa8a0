"""Converting DQN Replay Dataset checkpoints from one layout to another:

  to_qzoo(SRC, DST)       Dopamine's gzip files -> qzoo's memory-mappable layout
  to_dopamine(SRC, DST)   and back, byte-identical arrays
  from_rlu(SRC, DST)      RL Unplugged's TFRecord files (rlu.py) -> qzoo's layout
  qzoo_layout(DIR)        an --offline folder in qzoo's layout, converted on first use

SRC and DIR are `replay_logs` folders (or the run folder above one); the layout is
offline/layout.py's. A conversion checks the disk first and reserves each frames file
before mapping it (a full disk under a map is SIGBUS), and writes the manifest last."""

import contextlib
import functools
import json
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
from qzoo.offline.layout import load_qzoo, write_manifest
from qzoo.offline.maps import create_npy


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
    need = sum(_npy_bytes(dopamine.small_arrays(src, suffix, whole=True)) for suffix in found)
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
        small = dopamine.small_arrays(src, suffix)
        frames_path = os.path.join(out, "observation.npy")
        tmp = frames_path + ".tmp"
        crc = checksums.Crc32()
        try:  # a failure, or Ctrl-C, leaves no partial frames file filling the disk
            frames = create_npy(tmp, np.uint8, small["observation"].shape)
            gzip_path = os.path.join(src, dopamine.file_name("observation", suffix))
            dopamine.read_array(gzip_path, "observation", frames, crc.update)
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
            npy_path = os.path.join(out, f"{attribute}.npy")
            atomic_write(npy_path, functools.partial(_write_npy, array))
        if bar is not None:
            bar.update(1)
        elif not quiet:
            print(f"checkpoint {suffix} -> {out}", file=sys.stderr)
    if bar is not None:
        bar.close()
    fields = {"checkpoints": found, "sources": sources(src, found), "crc32": crcs}
    game = dataset_game(src)[0]
    if game is not None:  # the copy knows it too, wherever it goes
        fields["game"] = game
    write_manifest(dst, **fields)


def _npy_bytes(arrays):
    """The bytes of the NPY files of `arrays` (a header of at most 128 bytes each)."""
    return sum(128 + a.size * a.dtype.itemsize for a in arrays.values())


def _write_npy(array, f):
    np.lib.format.write_array(f, array, allow_pickle=False)


def to_dopamine(src, dst):
    """Writes a qzoo-layout dataset back as Dopamine's gzip files in `dst`."""
    for suffix, arrays in load_qzoo(src).items():
        dopamine.write_checkpoint(dst, suffix, arrays)
        print(f"checkpoint {suffix} -> {dst}", file=sys.stderr)


def from_rlu(src, dst, workers=None):
    """Converts an RL Unplugged Atari run (rlu.py) into the qzoo layout in `dst`, the
    manifest written last (so an interrupted conversion is redone whole)."""
    converted = rlu.convert(src, dst, workers=workers)
    crcs = {  # read back once from the page cache: the converter writes in episode order
        str(suffix): {
            attribute: checksums.of_array(
                np.load(os.path.join(dst, f"ckpt.{suffix}", f"{attribute}.npy"), mmap_mode="r")
            )
            for attribute in dopamine.DTYPES
        }
        for suffix in converted["checkpoints"]
    }
    fields = {"checkpoints": converted["checkpoints"], "sources": {}, "from": "rlu",
              "rlu": converted["rlu"], "crc32": crcs}  # fmt: skip
    write_manifest(dst, **fields)


def sources(folder, suffixes):
    """Each checkpoint's six files' (size, modification time in ns), as a conversion's
    manifest records them: its cached copy is reused only while they are unchanged (a
    resumed --log-replay run rewrites its last, partial checkpoint under the same
    suffix)."""

    def stat(path):
        st = os.stat(path)
        return [st.st_size, st.st_mtime_ns]

    def files(s):
        return [stat(os.path.join(folder, dopamine.file_name(a, s))) for a in dopamine.DTYPES]

    return {str(s): files(s) for s in suffixes}


def _manifest_sources(cache):
    try:
        with open(os.path.join(cache, "dataset.json"), "rb") as f:
            return json.loads(f.read()).get("sources")
    except (OSError, ValueError, AttributeError):
        return None


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
    announce = (
        f"offline: converting {folder} to a memory-mappable copy in {cache} "
        "(once; `qzoo dataset convert` does the same)"
    )
    try:
        to_qzoo(folder, cache, quiet=True, announce=announce)
    except OSError as e:  # e.g. a dataset on a read-only share
        raise UserError(
            f"--offline {folder}: cannot write its memory-mappable copy in {cache} "
            f"({e.strerror}); make one elsewhere with `qzoo dataset convert {folder} DST "
            "--to qzoo` and pass --offline DST"
        ) from None
    return cache
