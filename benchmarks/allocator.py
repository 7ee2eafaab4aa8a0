"""Replay sampling with glibc's default allocator settings against qzoo's
(qzoo/run/allocator.py), interleaved in fresh processes. Prints JSON lines.

python benchmarks/allocator.py [--env pong] [--capacity 20000] [--seconds 3] [--rounds 2]
"""

import json
import subprocess
import sys

from harness import emit, new_parser

# The child runs `qzoo bench replay`; "default" marks the allocator as already set up
# so that qzoo leaves glibc's settings alone (the baseline: glibc's defaults).
CHILD = """
import sys
from qzoo.run import allocator
from qzoo.cli import parser as cli
if sys.argv[1] == "default":
    allocator._done = True
sys.exit(cli.main(["bench", "replay"] + sys.argv[2:]))
"""


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--env", default="pong")
    parser.add_argument("--capacity", default="20000")
    parser.add_argument("--seconds", default="3")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    bench = ["--env", args.env, "--capacity", args.capacity, "--seconds", args.seconds]
    rates = {"default": [], "qzoo": []}
    for _ in range(args.rounds):
        for mode, found in rates.items():
            out = subprocess.run([sys.executable, "-c", CHILD, mode, *bench], check=True,
                                 capture_output=True, text=True).stdout  # fmt: skip
            for line in out.splitlines():
                record = json.loads(line)
                if record["name"] == "replay_batches_per_second":
                    found.append(record["value"])
                    emit({**record, "allocator": mode})
    ratio = sorted(q / d for q, d in zip(rates["qzoo"], rates["default"]))
    emit(
        {
            "name": "allocator_speedup",
            "value": ratio[len(ratio) // 2],
            "unit": "x",
            "env": args.env,
            "rounds": args.rounds,
        }
    )


if __name__ == "__main__":
    main()
