"""R2D1's memory task: CartPole with its velocities masked (qzoo/StatelessCartPole-v1),
where a feed-forward DQN (one observation, --frame-stack 1) cannot tell which way the
pole moves and R2D1's LSTM can. Prints one JSON line per agent and iteration (the
evaluation return after that many training frames) and, with --plot, draws both curves
with `qzoo plot`.

    PYTHONPATH=$PWD python benchmarks/r2d1_memory.py --iterations 10 --train-frames 4000
"""

import json
import os
import sys
import time

import torch
from harness import emit as record
from harness import new_parser

from qzoo.configuration import build_config
from qzoo.envs.memory import STATELESS_CARTPOLE
from qzoo.errors import UserError
from qzoo.run.trainer import Trainer

# The feed-forward baseline: qzoo's DQN with the gym domain's defaults (Adam, Huber),
# made comparable: one observation, the same learning rate.
AGENTS = {"dqn": {}, "r2d1": {}}


def options(iterations, train_frames, eval_frames, seed):
    return {"env": STATELESS_CARTPOLE, "iterations": str(iterations),
            "train_frames": str(train_frames), "eval_frames": str(eval_frames),
            "seed": str(seed), "frame_stack": "1"}  # fmt: skip


def curve(agent, iterations, train_frames, eval_frames, seed, extra=None, on_row=None):
    """The config and results rows of `agent` on the memory task (iteration 0 evaluates
    only)."""
    config = build_config(agent, {**options(iterations, train_frames, eval_frames, seed),
                                  **AGENTS[agent], **(extra or {})})  # fmt: skip
    trainer, rows = Trainer(config), []
    while trainer.iteration <= iterations:
        row = trainer.run_iteration()
        rows.append(row)
        if on_row is not None:
            on_row(row)
    return config, rows


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--train-frames", type=int, default=4000)
    parser.add_argument("--eval-frames", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--agents", nargs="+", default=list(AGENTS))
    parser.add_argument("--plot", default="", help="runs folder for `qzoo plot` (results.csv)")
    parser.add_argument(
        "--from-json",
        nargs="*",
        default=[],
        help="no training: write the run folders of --plot from this script's earlier JSON lines",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.from_json:
        return _runs_from_json(args.from_json, args.plot, args.train_frames, args.eval_frames)
    for seed in args.seeds:
        for agent in args.agents:
            started, cpu = time.perf_counter(), time.process_time()
            lines = []

            def emit(row, agent=agent, seed=seed, started=started, cpu=cpu, lines=lines):
                line = {"agent": agent, "seed": seed, "iteration": row["iteration"],
                        "frame": row["frame"], "eval_episode_return": row["eval_episode_return"],
                        "train_loss": row["train_loss"], "train_mean_q": row["train_mean_q"],
                        "seconds": round(time.perf_counter() - started, 1),
                        "cpu_seconds": round(time.process_time() - cpu, 1)}  # fmt: skip
                record(line)
                lines.append(row)

            config, _ = curve(agent, args.iterations, args.train_frames, args.eval_frames, seed,
                              on_row=emit)  # fmt: skip
            if args.plot:
                _write_run(os.path.join(args.plot, f"{agent}-seed{seed}"), config, lines)


def _write_run(folder, config, rows):
    """config.json and results.csv as `qzoo train` writes them, for `qzoo plot`."""
    import csv

    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        f.write(config.to_json())
    with open(os.path.join(folder, "results.csv"), "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _runs_from_json(paths, folder, train_frames, eval_frames):
    """Run folders for `qzoo plot` from JSON lines this script printed."""
    runs = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.startswith("{"):
                    row = json.loads(line)
                    runs.setdefault((row["agent"], row["seed"]), []).append(row)
    for (agent, seed), rows in runs.items():
        iterations = max(r["iteration"] for r in rows)
        config = build_config(agent, {**options(iterations, train_frames, eval_frames, seed),
                                      **AGENTS[agent]})  # fmt: skip
        keep = ("iteration", "frame", "eval_episode_return", "train_loss", "train_mean_q")
        _write_run(os.path.join(folder, f"{agent}-seed{seed}"), config,
                   [{k: r[k] for k in keep} for r in rows])  # fmt: skip


if __name__ == "__main__":
    try:
        sys.exit(main())
    except UserError as error:  # bad options: one line, as qzoo's own commands answer
        print(f"r2d1_memory.py: error: {error}", file=sys.stderr)
        sys.exit(2)
