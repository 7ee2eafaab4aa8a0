"""Extra memory of a checkpoint save and load, old way (torch.save / torch.load of the
state dict, pickle) and new (qzoo.run.checkpoint), as JSON lines:

  python benchmarks/checkpoint_memory.py [--transitions 100000,300000] [--methods old,new]

For each replay size and method a fresh child process builds a Pong DQN Trainer whose
replay holds that many transitions, then measures, from the resident size just
before each step:
  save   writing the run's checkpoint (the state qzoo train saves after an iteration)
  load   reading it back and restoring it into a new Trainer (what a resume does)
Peak RSS is the kernel's high-water mark (VmHWM, reset through /proc/self/clear_refs
before each step); RSS counts file pages mapped from the checkpoint as well, so the
anonymous part (RssAnon, sampled every 2 ms) is reported too: that part is what
cannot be given back to the page cache. Linux only.
"""

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import threading
import time

from harness import emit_value as emit
from harness import new_parser


def status():
    values = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, value = line.split(":", 1)
            if key in ("VmRSS", "VmHWM", "RssAnon"):
                values[key] = int(value.split()[0]) * 1024
    return values


class Peak:
    """Peak RSS growth (VmHWM) and peak anonymous growth (sampled) over a `with` block."""

    def __enter__(self):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM to the current RSS
        self.start = status()
        self.anon, self.done = self.start["RssAnon"], False
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()
        self.began = time.perf_counter()
        return self

    def _sample(self):
        while not self.done:
            self.anon = max(self.anon, status()["RssAnon"])
            time.sleep(0.002)

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.began
        self.done = True
        self.thread.join()
        end = status()
        self.rss_growth = end["VmHWM"] - self.start["VmRSS"]
        self.anon_growth = max(self.anon, end["RssAnon"]) - self.start["RssAnon"]


def child(method, transitions, folder):
    import numpy as np
    import torch

    from qzoo.configuration import build_config
    from qzoo.replay import Row
    from qzoo.run import checkpoint
    from qzoo.run.trainer import Trainer

    torch.set_num_threads(1)
    options = {"env": "pong", "replay_capacity": str(transitions), "tensorboard": "false"}
    config = build_config("dqn", options)
    trainer = Trainer(config)
    replay = trainer.replay
    storage = replay.storage
    frames = np.random.RandomState(0).randint(0, 256, (64, 1, 84, 84), dtype=np.uint8)
    false = np.zeros(1, bool)
    for i in range(transitions):  # touches every page of the replay, as a full one is
        replay.add(Row(frames[i % 64], np.zeros(1, np.int64), np.zeros(1), false, false, false))
    replay_bytes = storage.frames.nbytes + sum(array.nbytes for array in storage.row_arrays)
    rows = [{"iteration": 0, "frame": 0, "eval_episode_return": -21.0}]
    path = os.path.join(folder, "latest.safetensors" if method == "new" else "latest.pt")
    info = {
        "method": method,
        "transitions": transitions,
        "replay_mib": round(replay_bytes / 2**20, 1),
    }

    with Peak() as save:
        state = {"config": dataclasses.asdict(config), "trainer": trainer.state_dict()}
        if method == "new":
            checkpoint.save(path, {**state, "rows": rows})
        else:  # as qzoo did before: torch.save through a temporary file, then a rename
            state["csv_offset"] = 0
            checkpoint.atomic_write(path, lambda f: torch.save(state, f, pickle_protocol=4))
        state = None
    file_mib = os.path.getsize(path) / 2**20
    del trainer, replay, storage
    restored = Trainer(config)
    # A new replay's pages are untouched (np.zeros); touch them first, so that only what
    # the load needs on top of the replay is measured.
    restored.replay.storage.frames.reshape(-1)[::4096] = 0
    with Peak() as load:
        if method == "new":
            state = checkpoint.load(path)
        else:
            state = torch.load(path, map_location="cpu", weights_only=False)
        restored.load_state_dict(state["trainer"])
        state = None
    for step, peak in (("save", save), ("load", load)):
        extra = {**info, "file_mib": round(file_mib, 1), "seconds": round(peak.seconds, 2)}
        emit(
            f"checkpoint_{step}_peak_rss_growth", round(peak.rss_growth / 2**20, 1), "MiB", **extra
        )
        emit(
            f"checkpoint_{step}_peak_anon_growth",
            round(peak.anon_growth / 2**20, 1),
            "MiB",
            **extra,
        )
        emit(
            f"checkpoint_{step}_growth_per_replay",
            round(peak.rss_growth / replay_bytes, 3),
            "ratio",
            **extra,
        )


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--transitions", default="100000,300000")
    parser.add_argument("--methods", default="old,new")
    parser.add_argument("--folder", default=None, help="where to write the checkpoints")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        method, transitions, folder = args.child
        return child(method, int(transitions), folder)
    for transitions in args.transitions.split(","):
        for method in args.methods.split(","):
            with tempfile.TemporaryDirectory(dir=args.folder) as folder:
                out = ["--out", args.out] if args.out else []  # the child emits the lines
                subprocess.run(
                    [sys.executable, __file__, "--child", method, transitions, folder, *out],
                    check=True,
                )


if __name__ == "__main__":
    main()
