"""One step of a vector of environments, and what an environment is: the record every
vector environment returns (qzoo/envs/__init__.py's contract)."""

import collections

import numpy as np

EnvStep = collections.namedtuple(
    "EnvStep", "frame reward first last terminated life_loss real_steps"
)
EnvInfo = collections.namedtuple("EnvInfo", "name domain num_actions frame_shape frame_dtype game")


def first_step(frame):
    """The EnvStep of a reset: every environment starts an episode."""
    n = len(frame)
    no = np.zeros(n, bool)
    return EnvStep(frame, np.zeros(n, np.float32), np.ones(n, bool), no, no, no, 0)
