"""An RL Unplugged Atari run (rlu.py reads its TFRecord files) as a qzoo dataset copy:
the same memory-mappable layout, manifest and per-array checksums as
`dataset.to_qzoo`'s, so `--offline` and `dataset convert --to dopamine` take it."""

import json
import os

import numpy as np

from qzoo import checksums
from qzoo.files import atomic_write
from qzoo.offline import dopamine, rlu
from qzoo.offline.dataset import QZOO_FORMAT


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
    manifest = {"format": QZOO_FORMAT, "checkpoints": converted["checkpoints"], "sources": {},
                "from": "rlu", "rlu": converted["rlu"], "crc32": crcs}  # fmt: skip
    atomic_write(
        os.path.join(dst, "dataset.json"), lambda f: f.write(json.dumps(manifest).encode())
    )
