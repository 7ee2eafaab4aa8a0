"""Makes tests/data/minatar_breakout_dqn/: a DQN Replay Dataset logged by qzoo (DQN online
on MinAtar Breakout, seed 1, 3 iterations of 25,000 frames, every transition logged in
checkpoints of 30,000), and logger.json, the logging run's evaluation returns.

The offline learning test (tests/offline/test_offline_learning.py) learns from it. It was
made in the test until 2026-11-28 (95 CPU seconds of the test's 227); the files are
the format batch_rl publishes, so the reader must keep reading them unchanged.

  python tests/data/make_minatar_breakout_dqn.py      # about 95 CPU seconds
"""

import json
import os
import shutil
import sys
import tempfile

import torch

from qzoo.configuration import build_config
from qzoo.run.trainer import Trainer, run

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "minatar_breakout_dqn")
LOGGER = {"env": "minatar/breakout", "iterations": "3", "train_frames": "25000",
          "eval_frames": "5000", "learn_period": "4", "replay_capacity": "100000",
          "seed": "1", "log_replay_capacity": "30000"}  # fmt: skip


def main(out=HERE):
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as scratch:
        config = build_config("dqn", {**LOGGER, "log_replay": scratch})
        returns = [row["eval_episode_return"] for row in run(Trainer(config))]
        shutil.rmtree(out, ignore_errors=True)
        shutil.copytree(os.path.join(scratch, "replay_logs"), os.path.join(out, "replay_logs"))
    with open(os.path.join(out, "logger.json"), "w") as f:
        json.dump({"agent": "dqn", "options": LOGGER, "eval_episode_returns": returns}, f,
                  indent=1)  # fmt: skip
        f.write("\n")
    print(f"{out}: logger's evaluation returns {returns}")


if __name__ == "__main__":
    main(*sys.argv[1:])
