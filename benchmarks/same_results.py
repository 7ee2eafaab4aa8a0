"""Every results.csv of a matrix of small runs, to check that a change keeps results.

    python benchmarks/same_results.py --out before.jsonl [--only NAME,...] [--work DIR]
    python benchmarks/same_results.py --out after.jsonl
    python benchmarks/same_results.py --compare before.jsonl after.jsonl
    python benchmarks/same_results.py --extend before.jsonl --work DIR --out resumed.jsonl

Each run is `python -m qzoo train ...` in a fresh run folder (the command line is the
interface a change must keep), one per agent and per way of acting or training (serial,
parallel workers, alternating, async in lockstep, ale-py batches, compressed replay,
replay on a torch device, the captured update, bfloat16, R2D1, offline from a logged
dataset). A JSON line per run holds its results.csv rows without the wall-clock
columns; `--compare` prints the runs whose rows differ and exits 1 if any do;
`--extend` resumes a copy of each run folder for one more iteration (checkpoints written
by one version, read by another). The same
seed on the same machine and PyTorch gives the same rows (tests/ check this per part).
"""

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

from harness import new_parser

WALL_CLOCK = {
    "eval_frame_rate",
    "train_frame_rate",
    "train_steps_per_second",
    "train_updates_per_second",
    "learner_wait_fraction",
    "wall_time",
}
CARTPOLE = [
    "--env",
    "CartPole-v1",
    "--iterations",
    "2",
    "--train-frames",
    "1500",
    "--eval-frames",
    "300",
    "--replay-capacity",
    "4000",
    "--threads",
    "1",
]
MINATAR = [
    "--env",
    "minatar/breakout",
    "--iterations",
    "2",
    "--train-frames",
    "1500",
    "--eval-frames",
    "300",
    "--replay-capacity",
    "4000",
    "--threads",
    "1",
    "--min-replay-capacity-fraction",
    "0.1",
]
PONG = [
    "--env",
    "pong",
    "--iterations",
    "1",
    "--train-frames",
    "2400",
    "--eval-frames",
    "800",
    "--replay-capacity",
    "4000",
    "--min-replay-capacity-fraction",
    "0.1",
    "--threads",
    "1",
    "--num-envs",
    "4",
]

def _without(argv, option):
    """`argv` without `option` and its value."""
    at = argv.index(option)
    return [*argv[:at], *argv[at + 2 :]]


RUNS = {
    **{
        f"{agent}_cartpole": [agent, *CARTPOLE]
        for agent in (
            "dqn",
            "double_q",
            "prioritized",
            "c51",
            "qrdqn",
            "iqn",
            "rainbow",
            "ensemble",
            "rem",
            "der",
            "drq_eps",
            "r2d1",
        )
    },
    # --eval-frames has no effect beside --eval-episodes, and is refused there (since
    # issue 34): the same run without it.
    "drq_eps_minatar_shift": [
        "drq_eps",
        *_without(MINATAR, "--eval-frames"),
        "--augmentation",
        "shift_intensity",
        "--eval-episodes",
        "3",
    ],
    "der_minatar": ["der", *MINATAR],
    "dqn_minatar": ["dqn", *MINATAR],
    "dqn_parallel": [
        "dqn",
        *CARTPOLE,
        "--acting",
        "parallel",
        "--actor-workers",
        "2",
        "--num-envs",
        "4",
    ],
    "dqn_alternating": [
        "dqn",
        *CARTPOLE,
        "--acting",
        "alternating",
        "--actor-workers",
        "2",
        "--num-envs",
        "4",
    ],
    "dqn_async_deterministic": ["dqn", *CARTPOLE, "--acting", "async", "--deterministic"],
    "rainbow_async_deterministic": ["rainbow", *CARTPOLE, "--acting", "async", "--deterministic"],
    "dqn_lz4": ["prioritized", *CARTPOLE, "--replay-compression", "lz4"],
    "dqn_lz4_envs": [
        "dqn",
        *CARTPOLE,
        "--replay-compression",
        "lz4",
        "--num-envs",
        "4",
        "--learn-period",
        "2",
    ],
    "dqn_device_replay": ["prioritized", *CARTPOLE, "--replay-device", "cpu"],
    "dqn_capture": ["prioritized", *CARTPOLE, "--replay-device", "cpu", "--capture"],
    "dqn_compile": ["rainbow", *CARTPOLE, "--compile"],
    "dqn_bfloat16": ["dqn", *MINATAR, "--precision", "bfloat16"],
    "dqn_replay_ratio": [
        "dqn",
        *CARTPOLE,
        "--num-envs",
        "4",
        "--replay-ratio",
        "8",
        "--eps-final-min",
        "0.01",
    ],
    # ale-py's asynchronous mode with B = N: the synchronous rows (with B < N which games
    # share a batch depends on thread timing, so two runs differ by design).
    "dqn_pong_batches": ["dqn", *PONG, "--env-batch-size", "4"],
    "dqn_pong": ["dqn", *PONG],
}
# Logged by the first run, learned from by the second.
OFFLINE = ("dqn", *MINATAR, "--num-envs", "1", "--log-replay-capacity", "500")


def run(name, argv, work, fresh=True):
    folder = os.path.join(work, name)
    if fresh:
        shutil.rmtree(folder, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "qzoo",
        "train",
        *argv,
        "--run-dir",
        folder,
        "--progress",
        "false",
        "--tensorboard",
        "false",
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        return {"name": name, "error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
    with open(os.path.join(folder, "results.csv")) as f:
        rows = [{k: v for k, v in row.items() if k not in WALL_CLOCK} for row in csv.DictReader(f)]
    return {"name": name, "argv": argv, "rows": rows}


def measure(args):
    work = args.work or tempfile.mkdtemp(prefix="same-results-")
    chosen = set(args.only.split(",")) if args.only else None
    with open(args.out, "w") as out:
        runs = dict(RUNS)
        runs["offline_log"] = [*OFFLINE, "--log-replay", os.path.join(work, "logged")]
        # One iteration (each option given once: qzoo refuses a repeated one).
        one = [*MINATAR[:MINATAR.index("--iterations")], "--iterations", "1",
               *MINATAR[MINATAR.index("--iterations") + 2:]]  # fmt: skip
        runs["offline_dqn"] = ["dqn", *one, "--offline", os.path.join(work, "logged")]
        for name, argv in runs.items():
            if chosen and name not in chosen:
                continue
            if name == "offline_log":
                shutil.rmtree(os.path.join(work, "logged"), ignore_errors=True)
            record = run(name, argv, work)
            print(name, "error: " + str(record["error"]) if "error" in record else "ok", flush=True)
            out.write(json.dumps(record) + "\n")
            out.flush()


def extend(args):
    """Each run of `--extend FILE` (made by `--out` in `--work DIR`) resumed from a copy
    of its folder for one iteration more: old checkpoints, read by the code of now."""
    work = tempfile.mkdtemp(prefix="same-results-extended-")
    shutil.copytree(args.work, work, dirs_exist_ok=True)
    with open(args.extend) as f, open(args.out, "w") as out:
        for record in map(json.loads, f):
            if "error" in record or record["name"] == "offline_log":
                continue
            argv = list(record["argv"])
            i = argv.index("--iterations")
            argv[i + 1] = str(int(argv[i + 1]) + 1)
            argv += ["--accept-changes", "iterations"]
            result = run(record["name"], argv, work, fresh=False)
            status = "error: " + str(result["error"]) if "error" in result else "ok"
            print(record["name"], status, flush=True)
            out.write(json.dumps(result) + "\n")
            out.flush()


def compare(before, after):
    def load(path):
        with open(path) as f:
            return {r["name"]: r for r in map(json.loads, f)}

    a, b = load(before), load(after)
    differ = 0
    for name in sorted(set(a) | set(b)):
        if name not in a or name not in b:
            print(f"{name}: only in {'after' if name in b else 'before'}")
            differ += 1
        elif a[name].get("rows") != b[name].get("rows") or "error" in a[name] or "error" in b[name]:
            print(f"{name}: differs ({a[name].get('error') or ''} {b[name].get('error') or ''})")
            differ += 1
        else:
            print(f"{name}: same {len(a[name]['rows'])} rows")
    return 1 if differ else 0


def main():
    # --out FILE: here the records themselves, rows and all (rewritten, not appended).
    records = "the records themselves, rows and all (rewritten, not appended)"
    parser = new_parser(__doc__, default_out="same_results.jsonl", out_help=records)
    parser.add_argument("--work", default="")
    parser.add_argument("--only", default="")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument(
        "--extend",
        default="",
        help="a FILE of --out: resume its runs (in --work) for one more iteration",
    )
    args = parser.parse_args()
    if args.compare:
        sys.exit(compare(*args.compare))
    if args.extend:
        extend(args)
        return
    measure(args)


if __name__ == "__main__":
    main()
