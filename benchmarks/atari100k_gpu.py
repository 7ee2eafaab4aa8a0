"""Atari-100k runs on the lent GPU machine: `qzoo suite` for a budget, what finished
brought back.

    benchmarks/atari100k_gpu.sh --out "$OUT" --budget 540 [--games G,...] [--jobs 8] [-- TRAIN OPTION ...]
    python benchmarks/atari100k_gpu.py --out DIR --tiny     # the same on a CPU, tiny

The CPU development machine runs one Atari-100k run in 2-3 hours on a core; a GPU with
the captured update (`--capture --replay-device cuda`) and 16 cores runs several at
once, each in minutes. The suite trains --agent (default drq_eps, seed 1) on --games
(default: the six pre-registered games of docs/atari100k.md first, then the other 20
in name order) with --jobs runs at once, in float32 (Dopamine's precision). Nothing of
an unfinished run can continue elsewhere (its replay stays on the machine), so only
finished runs count:
their results.csv, config.json and DONE are copied to DIR/atari100k/<agent>/<game>-<seed>/
(`qzoo suite report --out DIR/atari100k` reads them there), with one JSON line per run
in DIR/atari100k_gpu.jsonl, each run's log tail in DIR/logs and the suite's output in
DIR/atari100k_gpu.log. Runs keep no replay in their checkpoints (--checkpoint-replay
false: nothing of a checkpoint comes back), and at the budget's end the suite gets
Ctrl-C twice, which stops its runs at once. Exit status 1 when a run failed or none
finished."""

import csv
import math
import os
import shutil
import signal
import subprocess
import sys
import time

from harness import emit, new_parser

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# docs/atari100k.md: drawn with numpy.random.default_rng(26) before any result.
REGISTERED = ["amidar", "battle_zone", "crazy_climber", "demon_attack", "frostbite",
              "kung_fu_master"]  # fmt: skip
GPU = ["--device", "cuda", "--capture", "--replay-device", "cuda", "--eval-period", "10",
       "--progress", "false", "--tensorboard", "false", "--threads", "1",
       "--checkpoint-replay", "false"]  # fmt: skip
# --tiny: the same path on a CPU in minutes (one short iteration, learning included).
TINY = ["--device", "cpu", "--capture", "--replay-device", "cpu", "--iterations", "1",
        "--train-frames", "7200", "--eval-frames", "400", "--eval-episodes", "0",
        "--progress", "false", "--tensorboard", "false", "--threads", "1",
        "--checkpoint-replay", "false"]  # fmt: skip


def default_games():
    from qzoo import data

    return REGISTERED + sorted(set(data.atari100k_games()) - set(REGISTERED))


def run_suite(args, games, log):
    """The suite, stopped with Ctrl-C at the budget's end (killed a little later)."""
    command = [sys.executable, "-m", "qzoo", "suite", "--agents", args.agent,
               "--games", ",".join(games), "--seeds", args.seeds, "--out", args.work,
               "--jobs", str(args.jobs), "--status-period", "30", "--",
               *(TINY if args.tiny else GPU), *args.train]  # fmt: skip
    log.write("$ " + " ".join(command) + "\n")
    log.flush()
    suite = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    grace = min(10.0, args.budget / 5)
    try:
        suite.wait(timeout=max(1.0, args.budget - grace))
    except subprocess.TimeoutExpired:
        # Twice: the suite's second Ctrl-C kills its runs at once (saving them would
        # be wasted: their checkpoints cannot come back).
        for _ in range(2):
            suite.send_signal(signal.SIGINT)
            time.sleep(1.0)
        try:
            suite.wait(timeout=max(1.0, grace - 2))
        except subprocess.TimeoutExpired:
            suite.kill()
            suite.wait()
    return suite.returncode


def _number(text):
    """A results.csv field as a number, None for nan or missing (strict JSON)."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


def collect(args):
    """Copies each finished run's small files to DIR/atari100k, every started run's log
    tail to DIR/logs, and writes a JSON line per run."""
    lines, runs = [], os.path.join(args.work, args.agent)
    for name in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
        folder = os.path.join(runs, name)
        results = os.path.join(folder, "results.csv")
        if not os.path.exists(results):
            continue
        with open(results, newline="") as f:
            rows = list(csv.DictReader(f))
        done = os.path.exists(os.path.join(folder, "DONE"))
        if done:
            target = os.path.join(args.out, "atari100k", args.agent, name)
            os.makedirs(target, exist_ok=True)
            for kept in ("results.csv", "config.json", "DONE"):
                if os.path.exists(os.path.join(folder, kept)):
                    shutil.copy(os.path.join(folder, kept), target)
        if os.path.exists(folder + ".log"):
            os.makedirs(os.path.join(args.out, "logs"), exist_ok=True)
            with open(folder + ".log", errors="replace") as f:
                tail = f.readlines()[-200:]
            with open(os.path.join(args.out, "logs", name + ".log"), "w") as f:
                f.writelines(tail)
        last = rows[-1] if rows else {}
        rates = [r for r in (_number(row.get("train_frame_rate")) for row in rows) if r]
        game, _, seed = name.rpartition("-")
        lines.append({"name": "run", "agent": args.agent, "game": game, "seed": int(seed),
                      "done": done, "iterations": int(last.get("iteration", -1)),
                      "final_eval_return": _number(last.get("eval_episode_return")),
                      "mean_train_frame_rate": sum(rates) / len(rates) if rates else None,
                      "wall_seconds": _number(last.get("wall_time"))})  # fmt: skip
    for line in lines:
        emit(line)  # also to DIR/atari100k_gpu.jsonl
    return lines


def main():
    default_out = os.environ.get("OUT", "atari100k_gpu_out")
    parser = new_parser(__doc__, "atari100k_gpu.jsonl", default_out)
    parser.add_argument("--work", default="/tmp/atari100k_gpu")
    parser.add_argument("--budget", type=float, default=540, help="seconds for everything")
    parser.add_argument("--agent", default="drq_eps")
    parser.add_argument("--games", default=None, help="comma-separated (default: all 26)")
    parser.add_argument("--seeds", default="1")
    parser.add_argument("--jobs", type=int, default=8, help="runs at once on the one GPU")
    parser.add_argument("--tiny", action="store_true", help="tiny runs on the CPU")
    parser.add_argument("train", nargs="*", help="after --: more qzoo train options, "
                        "e.g. -- --shift-offsets batch")  # fmt: skip
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    games = args.games.split(",") if args.games else default_games()
    started = time.time()
    with open(os.path.join(args.out, "atari100k_gpu.log"), "a") as log:
        code = run_suite(args, games, log)
    lines = collect(args)
    finished = [line for line in lines if line["done"]]
    print(f"suite exit {code} after {time.time() - started:.0f} s: {len(finished)} runs "
          f"finished, {len(lines) - len(finished)} started and not finished")  # fmt: skip
    for line in finished:
        print(f"  {line['game']}-{line['seed']}: {line['final_eval_return']} "
              f"({line['wall_seconds'] or 0:.0f} s)")  # fmt: skip
    # Not 0 when a run failed (the suite's 1) or none finished: the device's reply says so.
    return 1 if code == 1 or not finished else 0


if __name__ == "__main__":
    sys.exit(main())
