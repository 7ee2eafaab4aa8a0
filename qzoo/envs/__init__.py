"""Environments stepped as a batch, with one step record for every kind.

Every vector environment here has the same contract, which the replay relies on:
- `reset(seed)` returns an `EnvStep` whose `first` is all True.
- `step(actions)` returns the next `EnvStep`. An environment whose previous step was
  `last` ignores its action and returns the first observation of a new episode
  (`first=True`, reward 0): "next-step" autoreset, as in ale-py's vector env. The
  transition into that observation is never stored (see replay/frames.py).
- `frame` is the newest preprocessed frame only; stacking happens in the actor and
  in replay, with leading zeros at an episode start (ale-py's convention, not DQN
  Zoo's trailing zeros; docs: Protocols).
- `terminated` ends bootstrapping; truncation (`last` without `terminated`) does not.
- `life_loss` (DQN Zoo protocol only) zeros the discount without ending the episode.
"""

from qzoo.configuration.environments import MINATAR_GAMES, interpret, resolve
from qzoo.envs.make import describe, make
from qzoo.envs.step import EnvInfo, EnvStep, first_step

__all__ = ["MINATAR_GAMES", "EnvInfo", "EnvStep", "describe", "first_step", "interpret", "make",
           "resolve"]  # fmt: skip
