"""qzoo's own local Ray instance (cluster.connect with no --address): its worker
processes (actors, shards, the evaluator) run at the learner's priority, not Ray's
default of 15 niceness above it, which beside other jobs starved them
(benchmarks/ray_niceness.py); a RAY_worker_niceness the user set is left to Ray."""

import os
import subprocess
import sys

import pytest
from helpers import REPO

from qzoo.distributed import cluster

# Started under `nice -n 3`: a worker at 3 is at the learner's niceness (Ray's default
# would put it at 18), whatever the niceness the test itself runs at.
CHILD = """
import os, ray
from qzoo.configuration import build_config
from qzoo.distributed import cluster

cluster.connect(build_config("dqn", {"env": "CartPole-v1", "ray": "true", "actors": "1"}))
niceness = ray.get(ray.remote(num_cpus=0)(lambda: os.nice(0)).remote())
print(os.nice(0), niceness)
"""


def test_a_niceness_the_user_set_is_left_to_ray(monkeypatch):
    monkeypatch.delenv(cluster.RAY_NICENESS, raising=False)
    assert cluster.worker_niceness() == {"worker_niceness": 0}
    monkeypatch.setenv(cluster.RAY_NICENESS, "15")
    assert cluster.worker_niceness() == {}


@pytest.mark.slow
def test_workers_of_a_local_instance_run_at_the_learners_niceness():
    pytest.importorskip("ray")
    env = {k: v for k, v in os.environ.items() if k != cluster.RAY_NICENESS}
    own = os.nice(0)
    done = subprocess.run(["nice", "-n", "3", sys.executable, "-c", CHILD], cwd=str(REPO),
                          env=env, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    learner, worker = map(int, done.stdout.split()[-2:])
    assert learner == min(own + 3, 19) and worker == learner, done.stdout
