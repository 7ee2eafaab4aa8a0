"""Replay speed and memory as JSON lines: `python benchmarks/replay.py [--capacity N ...]`.

Same as `qzoo bench replay`; options as documented in qzoo/run/bench.py.
"""

import sys

from qzoo.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["bench", "replay", *sys.argv[1:]]))
