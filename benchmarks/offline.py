"""Offline training throughput and memory on a generated DQN Replay Dataset, next to
online training's updates per second, in one run. Prints JSON lines.

python benchmarks/offline.py --folder /tmp/qzoo-offline --transitions 200000 \
    [--checkpoint-rows 100000] [--frames 16000] [--agent dqn] [--source noise|pong]

Writes Pong-shaped frames (episodes of 400 to 2,000 rows) with the logged buffer into
FOLDER/Pong/1/replay_logs (checkpoints of CHECKPOINT_ROWS), converts them to qzoo's
memory-mapped layout, then trains FRAMES frames offline from it (one update per 16
frames) and FRAMES frames online on Pong after a 5,000-transition warm-up. The frames
are 256 random images (--source noise: gzip cannot compress them, so the Dopamine
files are as large as the frames) or 20,000 real Pong frames played by a random policy
(--source pong: compressible, as the real dataset's are), repeated. Memory is reported
as the whole resident set and its two parts: anonymous (what the process allocated)
and file pages (the memory-mapped frames, released by the storage every 2 GiB read).
"""

import os
import resource
import shutil
import time

import numpy as np
from harness import emit_value as emit
from harness import new_parser


def rss(field="VmRSS"):
    """This process's resident memory (VmRSS), or its RssAnon / RssFile part, bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def frame_pool(source, rng):
    """The frames the dataset repeats: random noise, or real Pong frames."""
    if source == "noise":
        return rng.integers(0, 256, (256, 84, 84), dtype=np.uint8)
    from qzoo import envs
    from qzoo.configuration import build_config

    config = build_config("dqn", {"env": "pong", "num_envs": "8"})
    env = envs.make(config, 8, 0)
    step, frames = env.reset(seed=0), []
    while len(frames) < 20_000:
        frames.extend(step.frame)
        step = env.step(rng.integers(0, 6, 8))
    env.close()
    return np.stack(frames[:20_000])


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--folder", required=True)
    parser.add_argument("--transitions", type=int, default=200_000)
    parser.add_argument("--checkpoint-rows", type=int, default=100_000)
    parser.add_argument("--frames", type=int, default=16_000)
    parser.add_argument("--agent", default="dqn")
    parser.add_argument("--source", choices=("noise", "pong"), default="noise")
    parser.add_argument("--reuse", action="store_true", help="keep FOLDER's dataset")
    parser.add_argument(
        "--no-readahead",
        action="store_true",
        help="read frames one page fault at a time (qzoo before readahead)",
    )
    parser.add_argument("--no-online", action="store_true", help="skip the online comparison")
    args = parser.parse_args()
    described = {"transitions": args.transitions, "checkpoint_rows": args.checkpoint_rows,
                 "agent": args.agent, "frames": args.frames, "source": args.source,
                 "readahead": not args.no_readahead}  # fmt: skip
    if not args.reuse:
        shutil.rmtree(args.folder, ignore_errors=True)
        write_dataset(args, described)
    main_train(args, described)


def write_dataset(args, described):
    from qzoo.offline.conversion import to_qzoo
    from qzoo.offline.writer import LoggedReplayWriter

    logs = os.path.join(args.folder, "Pong", "1", "replay_logs")
    rng = np.random.default_rng(0)
    pool = frame_pool(args.source, rng)
    started = time.perf_counter()
    writer = LoggedReplayWriter(logs, args.checkpoint_rows, (84, 84))
    left = 0
    for k in range(args.transitions):
        if left == 0:
            left = int(rng.integers(400, 2000))
        left -= 1
        writer.add(pool[k % len(pool)], int(rng.integers(6)), float(rng.integers(-1, 2)), left == 0)
    writer.close()
    emit("offline_write_seconds", time.perf_counter() - started, "s", **described)
    started = time.perf_counter()
    to_qzoo(os.path.join(args.folder, "Pong", "1"), os.path.join(args.folder, "q"))
    emit("offline_convert_seconds", time.perf_counter() - started, "s", **described)
    emit("dataset_bytes_on_disk", _du(logs), "bytes", format="dopamine", **described)
    emit(
        "dataset_bytes_on_disk",
        _du(os.path.join(args.folder, "q")),
        "bytes",
        format="qzoo",
        **described,
    )


def _du(folder):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)


def main_train(args, described):
    from qzoo.configuration import build_config
    from qzoo.run.bench import measure_train
    from qzoo.run.trainer import Trainer

    options = {"env": "pong", "offline": os.path.join(args.folder, "q"), "progress": "false",
               "tensorboard": "false", "protocol": "machado"}  # fmt: skip
    from qzoo.run import threads

    config = build_config(args.agent, options)
    threads.apply(config)  # as `qzoo train` does
    before, anon_before = rss(), rss("RssAnon")
    trainer = Trainer(config)
    trainer.replay.storage.readahead = not args.no_readahead
    emit("offline_rss_after_open", rss() - before, "bytes", **described)
    emit("offline_anon_after_open", rss("RssAnon") - anon_before, "bytes", **described)
    trainer.train_phase(1600)  # warm-up: first touches of the maps, allocator
    trainer.learner.pop_statistics()
    stats = trainer.train_phase(args.frames)
    updates = trainer.learner.pop_statistics()["num_updates"]
    emit("offline_updates_per_second", updates / stats["duration"], "updates/s", **described)
    emit("offline_rss_growth", rss() - before, "bytes", **described)
    emit("offline_rss_total", rss(), "bytes", **described)
    emit("offline_rss_anon", rss("RssAnon"), "bytes", **described)
    emit("offline_rss_file", rss("RssFile"), "bytes", **described)
    emit(
        "peak_rss", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "bytes", **described
    )
    del trainer
    if args.no_online:
        return
    online = build_config(args.agent, {"env": "pong", "progress": "false", "tensorboard": "false"})
    result = measure_train(online, args.frames, 5_000)
    emit("online_updates_per_second", result["updates_per_second"], "updates/s", **described)


if __name__ == "__main__":
    main()
