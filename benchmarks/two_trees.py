"""Training throughput of two checkouts of qzoo, in interleaved rounds of one invocation,
as JSON lines: did a change make training slower?

    python benchmarks/two_trees.py --before DIR --after DIR [--rounds 5]
        [--case pong|cartpole ...] [-- BENCH TRAIN OPTIONS]

Each round runs `python -m qzoo bench train` for every case, once from each checkout
(alternating which goes first), in a fresh process whose working directory is that
checkout, so `import qzoo` takes its code. Prints each run's agent steps/s, then per
case the median of each checkout and the median of the per-round ratios after/before.
"""

import json
import statistics
import subprocess
import sys

from harness import emit, new_parser

CASES = {
    "pong": ["--agent", "dqn", "--env", "pong", "--frames", "4000",
             "--warmup-transitions", "2000", "--threads", "1"],
    "cartpole": ["--agent", "dqn", "--env", "CartPole-v1", "--frames", "20000",
                 "--warmup-transitions", "2000", "--threads", "1"],
}  # fmt: skip


def steps_per_second(tree, case, extra):
    command = [sys.executable, "-m", "qzoo", "bench", "train", *CASES[case], *extra]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=True)
    for line in done.stdout.splitlines():
        record = json.loads(line)
        if record["name"] == "train_agent_steps_per_second":
            return record["value"]
    raise RuntimeError(f"no rate from {tree}: {done.stdout[-300:]}")


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--before", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--case", action="append", choices=tuple(CASES))
    args, extra = parser.parse_known_args()
    extra = [a for a in extra if a != "--"]
    cases = args.case or list(CASES)
    rates = {(case, tree): [] for case in cases for tree in ("before", "after")}
    for r in range(args.rounds):
        for case in cases:
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for tree in order:
                rate = steps_per_second(getattr(args, tree), case, extra)
                rates[case, tree].append(rate)
                emit(
                    {
                        "name": "agent_steps_per_second",
                        "case": case,
                        "tree": tree,
                        "round": r,
                        "value": rate,
                    }
                )
    for case in cases:
        before, after = rates[case, "before"], rates[case, "after"]
        ratios = [a / b for a, b in zip(after, before, strict=True)]
        emit(
            {
                "name": "after_over_before",
                "case": case,
                "value": statistics.median(ratios),
                "ratios": ratios,
                "before_median": statistics.median(before),
                "after_median": statistics.median(after),
            }
        )


if __name__ == "__main__":
    main()
