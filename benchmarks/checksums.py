"""What the arrays' checksums (CRC-32, qzoo/checksums.py) cost, as JSON lines:

  python benchmarks/checksums.py [--transitions 100000] [--repeats 3] [--folder /tmp]

checkpoint  a Pong DQN trainer whose replay holds N transitions saves the state `qzoo
            train` saves, then loads it into a new trainer (what a resume does), with
            checksums and without (the CRC's update a no-op on save, no verification
            on load: what qzoo did before)
dataset     a Pong-shaped DQN Replay Dataset checkpoint of N rows is converted to the
            memory-mappable layout (`qzoo dataset convert --to qzoo`), then opened
            (load_qzoo, which reads each file through once to verify it), both with and
            without checksums
crc32       zlib.crc32's rate over 256 MiB in memory, for reference

Each timing is the fastest of --repeats, alternating with and without, the files in
the page cache (written just before): it is the CPU's cost, not the disk's.
"""

import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
import time
import zlib

import numpy as np
from harness import emit_value as emit
from harness import new_parser

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


@contextlib.contextmanager
def checksums_off():
    """Saves compute no CRC, loads verify none: qzoo before checksums."""
    from qzoo import checksums
    from qzoo.offline import layout
    from qzoo.run import checkpoint

    saved = (checksums.Crc32.update, checkpoint._checksums, layout.load_qzoo.__defaults__)
    checksums.Crc32.update = lambda self, chunk: None
    checkpoint._checksums = lambda meta, header, path: None
    layout.load_qzoo.__defaults__ = (None, ())
    try:
        yield
    finally:
        checksums.Crc32.update, checkpoint._checksums = saved[:2]
        layout.load_qzoo.__defaults__ = saved[2]


def timed(function):
    began = time.perf_counter()
    function()
    return time.perf_counter() - began


def bench_checkpoint(transitions, repeats, folder):
    import torch

    from qzoo.configuration import build_config
    from qzoo.replay import Row
    from qzoo.run import checkpoint
    from qzoo.run.trainer import Trainer

    torch.set_num_threads(1)
    config = build_config("dqn", {"env": "pong", "replay_capacity": str(transitions),
                                  "tensorboard": "false"})  # fmt: skip
    trainer = Trainer(config)
    frames = np.random.RandomState(0).randint(0, 256, (64, 1, 84, 84), dtype=np.uint8)
    false = np.zeros(1, bool)
    for i in range(transitions):
        trainer.replay.add(Row(frames[i % 64], np.zeros(1, np.int64), np.zeros(1), false, false,
                               false))  # fmt: skip
    path = os.path.join(folder, "latest.safetensors")
    restored = Trainer(config)
    restored.replay.storage.frames.reshape(-1)[::4096] = 0  # its pages touched, as in use

    def save():
        state = {"config": dataclasses.asdict(config), "trainer": trainer.state_dict(),
                 "rows": [{"iteration": 0}]}  # fmt: skip
        checkpoint.save(path, state)

    def load():
        restored.load_state_dict(checkpoint.load(path)["trainer"])

    best = {}
    for _ in range(repeats):
        for mode in ("on", "off"):
            with checksums_off() if mode == "off" else contextlib.nullcontext():
                for step, function in (("save", save), ("load", load)):
                    seconds = timed(function)
                    best[step, mode] = min(best.get((step, mode), seconds), seconds)
    info = {"transitions": transitions, "file_mib": round(os.path.getsize(path) / 2**20, 1)}
    for (step, mode), seconds in sorted(best.items()):
        emit(f"checkpoint_{step}_seconds", round(seconds, 3), "s", checksums=mode, **info)


def bench_dataset(rows, repeats, folder):
    from qzoo.offline import conversion, layout
    from qzoo.offline.writer import LoggedReplayWriter

    source = os.path.join(folder, "src")
    writer = LoggedReplayWriter(os.path.join(source, "replay_logs"), rows + 2, (84, 84))
    pool = np.random.RandomState(0).randint(0, 256, (64, 84, 84), dtype=np.uint8)
    for i in range(rows - 3):  # one long episode: its 3 padding rows first
        writer.add(pool[i % 64], i % 6, 0.0, int(i == rows - 4))
    writer.close()
    best = {}
    for _ in range(repeats):
        for mode in ("on", "off"):
            dst = os.path.join(folder, "q")
            with checksums_off() if mode == "off" else contextlib.nullcontext():
                seconds = timed(lambda d=dst: conversion.to_qzoo(source, d, quiet=True))
                best["convert", mode] = min(best.get(("convert", mode), seconds), seconds)
                layout._VERIFIED.clear()
                seconds = timed(lambda d=dst: layout.load_qzoo(d))
                best["open", mode] = min(best.get(("open", mode), seconds), seconds)
            shutil.rmtree(dst)
    info = {"rows": rows, "frames_mib": round(rows * 84 * 84 / 2**20, 1)}
    for (step, mode), seconds in sorted(best.items()):
        emit(f"dataset_{step}_seconds", round(seconds, 3), "s", checksums=mode, **info)


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--transitions", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--folder", default=None, help="where to write the files")
    args = parser.parse_args()
    data = np.random.RandomState(1).randint(0, 256, 256 * 2**20, dtype=np.uint8)
    seconds = min(timed(lambda: zlib.crc32(data)) for _ in range(args.repeats))  # noqa: F821
    emit("crc32_rate", round(256 / 1024 / seconds, 2), "GiB/s")
    del data
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        bench_checkpoint(args.transitions, args.repeats, folder)
    with tempfile.TemporaryDirectory(dir=args.folder) as folder:
        bench_dataset(args.transitions, args.repeats, folder)


if __name__ == "__main__":
    main()
