"""Training throughput as JSON lines: `python benchmarks/train.py --agent dqn --env pong
--frames 20000 [--num-envs N] [--device cuda]`. Same as `qzoo bench train`."""

import sys

from qzoo.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["bench", "train", *sys.argv[1:]]))
