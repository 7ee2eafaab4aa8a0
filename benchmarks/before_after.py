"""Training throughput of two checkouts of qzoo in one invocation, interleaved, so that
a change's cost is measured on the same machine under the same load.

    python benchmarks/before_after.py --before ../qzoo-old --after . \
        --runs dqn:pong dqn:CartPole-v1 --frames 20000 --repeat 3

Each measurement is `python -m qzoo bench train --agent A --env E --frames F --threads 1`
run from one checkout (its own code on PYTHONPATH), alternating before / after, and
prints a JSON line: the bench's frames per second (wall clock) and the frames per CPU
second of the child (user + system: less sensitive to other work on the machine).
Then one summary line per run: the median of each, and after / before.
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys

from harness import emit, new_parser


def measure(tree, agent, env, frames, extra):
    """(frames per second, frames per CPU second) of one bench in checkout `tree`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    command = [sys.executable, "-m", "qzoo", "bench", "train", "--agent", agent, "--env", env,
               "--frames", str(frames), "--threads", "1", *extra]  # fmt: skip
    done = subprocess.run(command, cwd=tree, env={**os.environ, "PYTHONPATH": tree},
                          capture_output=True, text=True, check=True)  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    fps = next(line["value"] for line in lines if line["name"] == "train_frames_per_second")
    return fps, frames / cpu


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--before", required=True, help="the checkout before the change")
    parser.add_argument("--after", required=True, help="the checkout after it")
    parser.add_argument("--runs", nargs="+", default=["dqn:pong", "dqn:CartPole-v1"],
                        help="AGENT:ENV pairs")  # fmt: skip
    parser.add_argument("--frames", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[],
                        help="more options for qzoo bench train")  # fmt: skip
    args = parser.parse_args()
    trees = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    for run in args.runs:
        agent, env = run.split(":", 1)
        found = {"before": [], "after": []}
        for k in range(args.repeat):
            order = ("before", "after") if k % 2 == 0 else ("after", "before")
            for which in order:
                fps, cpu_fps = measure(trees[which], agent, env, args.frames, args.extra)
                found[which].append((fps, cpu_fps))
                emit(
                    {
                        "name": "frames_per_second",
                        "which": which,
                        "agent": agent,
                        "env": env,
                        "repeat": k,
                        "value": fps,
                        "unit": "frames/s",
                        "frames_per_cpu_second": cpu_fps,
                    }
                )
        medians = {which: [statistics.median(x[i] for x in found[which]) for i in (0, 1)]
                   for which in found}  # fmt: skip
        emit(
            {
                "name": "after_over_before",
                "agent": agent,
                "env": env,
                "frames": args.frames,
                "repeat": args.repeat,
                "before_frames_per_second": medians["before"][0],
                "after_frames_per_second": medians["after"][0],
                "ratio": medians["after"][0] / medians["before"][0],
                "cpu_ratio": medians["after"][1] / medians["before"][1],
            }
        )


if __name__ == "__main__":
    main()
