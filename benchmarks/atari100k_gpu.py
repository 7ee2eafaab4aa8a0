"""Atari-100k runs on the lent GPU machine: `qzoo suite` for a budget, what finished
brought back.

    benchmarks/atari100k_gpu.sh --out "$OUT" --budget 540 [--games G,...] [--jobs 8] [-- TRAIN OPTION ...]
    python benchmarks/atari100k_gpu.py --out DIR --tiny     # the same on a CPU, tiny

The CPU development machine runs one Atari-100k run in 2-3 hours on a core; a GPU with
the captured update (`--capture --replay-device cuda`) and 16 cores runs several at
once, each in minutes. The suite trains --agent (default drq_eps, seed 1) on --games
(default: the six pre-registered games of docs/atari100k.md first, then the other 20
in name order) with --jobs runs at once, in float32 (Dopamine's precision). At the
budget's end the suite gets Ctrl-C (its runs save and stop). A run folder's checkpoint
holds its replay (hundreds of MB) and cannot come back, so only finished runs count:
their results.csv, config.json and DONE are copied to DIR/atari100k/<agent>/<game>-<seed>/
(`qzoo suite report --out DIR/atari100k` reads them there), with one JSON line per run
in DIR/atari100k_gpu.jsonl and the suite's output in DIR/atari100k_gpu.log."""

import argparse
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# docs/atari100k.md: drawn with numpy.random.default_rng(26) before any result.
REGISTERED = ["amidar", "battle_zone", "crazy_climber", "demon_attack", "frostbite",
              "kung_fu_master"]  # fmt: skip
GPU = ["--device", "cuda", "--capture", "--replay-device", "cuda", "--eval-period", "10",
       "--progress", "false", "--tensorboard", "false", "--threads", "1"]  # fmt: skip
# --tiny: the same path on a CPU in minutes (one short iteration, learning included).
TINY = ["--device", "cpu", "--capture", "--replay-device", "cpu", "--iterations", "1",
        "--train-frames", "7200", "--eval-frames", "400", "--eval-episodes", "0",
        "--progress", "false", "--tensorboard", "false", "--threads", "1"]  # fmt: skip


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
    grace = min(30.0, args.budget / 5)
    try:
        suite.wait(timeout=max(1.0, args.budget - grace))
    except subprocess.TimeoutExpired:
        suite.send_signal(signal.SIGINT)
        try:
            suite.wait(timeout=max(1.0, grace - 5))
        except subprocess.TimeoutExpired:
            suite.kill()
            suite.wait()
    return suite.returncode


def collect(args, games):
    """Copies each run's small files to DIR/atari100k and writes its JSON line."""
    lines = []
    for game in games:
        for seed in args.seeds.split(","):
            name = f"{game}-{seed}"
            folder = os.path.join(args.work, args.agent, name)
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
            last = rows[-1] if rows else {}
            rates = [float(r["train_frame_rate"]) for r in rows if r.get("train_frame_rate")
                     not in (None, "", "nan")]  # fmt: skip
            lines.append({"name": "run", "agent": args.agent, "game": game, "seed": int(seed),
                          "done": done, "iterations": int(last.get("iteration", -1)),
                          "final_eval_return": float(last.get("eval_episode_return", "nan")),
                          "mean_train_frame_rate": sum(rates) / len(rates) if rates else None,
                          "wall_seconds": float(last.get("wall_time", "nan"))})  # fmt: skip
    with open(os.path.join(args.out, "atari100k_gpu.jsonl"), "a") as f:
        f.writelines(json.dumps(line) + "\n" for line in lines)
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=os.environ.get("OUT", "atari100k_gpu_out"))
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
    lines = collect(args, games)
    finished = [line for line in lines if line["done"]]
    print(f"suite exit {code} after {time.time() - started:.0f} s: {len(finished)} runs "
          f"finished, {len(lines) - len(finished)} started and not finished")  # fmt: skip
    for line in finished:
        print(f"  {line['game']}-{line['seed']}: {line['final_eval_return']:g} "
              f"({line['wall_seconds']:.0f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
