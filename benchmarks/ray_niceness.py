"""A Ray run beside other jobs, its workers (actors, replay shards, evaluator) at a given
niceness: the same short `qzoo train dqn --ray` on CartPole started with each
RAY_worker_niceness, with --load busy processes at niceness 0 (other jobs) beside it.
One JSON line per run: its wall time, its training frames per second, and the cores
the busy processes got meanwhile.

    python benchmarks/ray_niceness.py --niceness 15 0 --rounds 2 --load 2
"""

import csv
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time

from harness import emit, new_parser


def busy():
    while True:
        pass


def cpu_seconds(pids):
    """User and system CPU seconds of the processes `pids` (Linux /proc)."""
    total = 0.0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def one_run(niceness, args, load):
    """Wall seconds, the results row of iteration 1, the cores the busy processes got."""
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        argv = [sys.executable, "-m", "qzoo", "train", "dqn", "--env", "CartPole-v1", "--ray",
                "--actors", str(args.actors), "--iterations", "1",
                "--train-frames", str(args.train_frames), "--eval-frames", "500",
                "--no-progress", "--no-tensorboard", "--run-dir", run_dir]  # fmt: skip
        env = {**os.environ, "RAY_worker_niceness": str(niceness)}
        pids = [p.pid for p in load]
        before, start = cpu_seconds(pids), time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - start
        cores = (cpu_seconds(pids) - before) / wall if pids else 0.0
        with open(os.path.join(run_dir, "results.csv"), newline="") as f:
            row = list(csv.DictReader(f))[-1]
    return wall, row, cores


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--niceness", type=int, nargs="+", default=[15, 0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--load", type=int, default=2, help="busy processes beside the run")
    parser.add_argument("--actors", type=int, default=2)
    parser.add_argument("--train-frames", type=int, default=10_000)
    args = parser.parse_args()
    load = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for process in load:
        process.start()
    try:
        for _ in range(args.rounds):
            for niceness in args.niceness:  # alternated: a drifting machine hits both
                wall, row, cores = one_run(niceness, args, load)
                emit({"name": "ray_niceness", "worker_niceness": niceness, "load": args.load,
                      "actors": args.actors, "train_frames": args.train_frames,
                      "wall_s": round(wall, 1),
                      "train_frame_rate": round(float(row["train_frame_rate"]), 1),
                      "load_cores": round(cores, 2), "load_avg": round(os.getloadavg()[0], 1)})  # fmt: skip
    finally:
        for process in load:
            process.terminate()


if __name__ == "__main__":
    main()
