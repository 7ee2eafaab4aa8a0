"""A replay shard's process (qzoo/distributed/shards.py, dataset_shards.py) stores and
draws numpy arrays only, so it never loads PyTorch: Ray starts each one on about 1 CPU s
and 190 MiB less (benchmarks/shard_start.py). R2D1's sequence shards still load it
(their actors' recurrent state is torch's). No Ray needed: a fresh interpreter does
what a shard's Ray actor does."""

import os
import subprocess
import sys

from helpers import REPO

SHARD_PROCESS = """
import sys
import numpy as np
from qzoo import envs
from qzoo.configuration import build_config
from qzoo.distributed.dataset_shards import DatasetShard
from qzoo.distributed.shards import ReplayShard
from qzoo.replay.batch import Row

config = build_config("dqn", {"env": "CartPole-v1", "ray": "true", "actors": "1",
                              "replay_capacity": "40", "min_replay_capacity_fraction": "1",
                              "batch_size": "4", "prioritized": "true"})
info = envs.describe(config)
shard = ReplayShard(config, info, 0)
flags = np.zeros((6, 1), bool)
flags[0] = True
row = Row(np.ones((6, 1, 4), np.float32), np.zeros((6, 1), np.int64),
          np.ones((6, 1), np.float32), flags, np.zeros_like(flags), np.zeros_like(flags))
shard.add(0, (row, np.ones((5, 1), np.float32)))
batch = shard.sample(8, 0.5)
shard.update_priorities(batch.indices, np.full(8, 2.0, np.float32))
again = ReplayShard(config, info, 0)
again.load_state_dict(shard.state_dict())
DatasetShard(config, info, 0)
print(batch.s_tm1.shape[0], again.sample(8, 0.5).s_tm1.shape[0], "torch" in sys.modules)
"""


def test_a_replay_shard_process_never_loads_pytorch():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", SHARD_PROCESS], capture_output=True, text=True,
                          env=env, cwd=REPO, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["8", "8", "False"], done.stdout
