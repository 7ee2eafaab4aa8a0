"""What every way of acting or training is, to the trainer: a driver.

A driver runs a training phase and an evaluation phase, adds its own columns to a
results row, and carries its part of the checkpoint. Serial, parallel, alternating,
async (thread or process) and ale-py batches act here (qzoo/acting/); offline training
and Ray have drivers of their own (qzoo/offline/, qzoo/distributed/). A local driver is
given the run's `Parts` and reaches nothing else: the update bookkeeping (store a row,
learn what is due: qzoo/run/updates.py) is one of them.
"""

import abc
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

Progress = Callable[[int, Any], None] | None  # progress(new_frames, episodes)


class UpdateBook(Protocol):
    """The update bookkeeping a local driver is given (run/updates.py's `Updates`, or
    one of its fast paths): everything a driver may call or read of it."""

    @property
    def frame_t(self) -> int: ...

    transitions_sampled: int
    transitions_collected: int
    schedule: Any  # acting/ratio.py's UpdateSchedule
    replay: Any
    batch_size: int

    def advance(self, new_frames: int) -> None: ...
    def store(self, row: Any, new_frames: int) -> None: ...
    def collected(self, new_frames: int) -> None: ...
    def can_learn(self) -> bool: ...
    def learn_due(self, old_frame: int, new_frame: int) -> None: ...
    def learn_once(self, lock: Any = None, batch: Any = None, updates: int = 1) -> None: ...
    def sample_batch(self, lock: Any = None) -> Any: ...
    def use_replay(self, replay: Any) -> None: ...
    def check(self) -> None: ...
    def prioritized_columns(self) -> dict: ...
    def state_dict(self) -> dict: ...
    def load_state_dict(self, state: dict) -> None: ...
    def close(self) -> None: ...


@dataclass
class Parts:
    """What a local driver is given: the run's config and environment description, its
    random streams, the learner, the update bookkeeping, and the training epsilon
    (`train_epsilon(frame_t)`: [N] or a scalar)."""

    config: Any
    info: Any
    streams: Any
    learner: Any
    updates: UpdateBook | None  # None: PQN, which keeps no replay (acting/pqn.py)
    train_epsilon: Callable[[int], Any]


class Driver(abc.ABC):
    """The interface (and its defaults): `train_phase`, `eval_phase`, `columns`,
    `extra_columns`, `state_dict`, `load_state_dict`, `close`, and the counters a results
    row reads (`frame_t`, the epsilon, prioritized replay's columns). Every driver
    implements the two phases; an abstract base, so one that does not cannot be built."""

    frame_t: int = 0

    @abc.abstractmethod
    def train_phase(self, num_frames: int, progress: Progress = None) -> dict:
        """Acts (and learns) for `num_frames` frames; the phase's statistics."""

    @abc.abstractmethod
    def eval_phase(self, num_frames: int, progress: Progress = None) -> dict:
        """Evaluates for `num_frames` frames (or episodes, as configured); its statistics."""

    def epsilon(self, frame_t: int) -> float:
        """The training epsilon results.csv reports at `frame_t` (their mean)."""
        return math.nan

    def prioritized_columns(self) -> dict:
        """importance_sampling_exponent and max_seen_priority, with --prioritized."""
        return {}

    def columns(self, train: dict, stats: dict) -> dict:
        """rlpyt's runner diagnostics, in their place in the row."""
        duration = train.get("duration", math.nan)
        return {
            "train_updates_per_second": stats["num_updates"] / duration if duration else math.nan,
            "replay_ratio": math.nan,
            "learner_wait_fraction": train.get("learner_wait_fraction", math.nan),
        }

    def extra_columns(self) -> dict:
        """Columns after wall_time (a Ray run's rates and restarts)."""
        return {}

    def state_dict(self, common: dict) -> dict:
        """The checkpoint: the trainer's `common` part with this driver's added."""
        return common

    def load_state_dict(self, state: dict) -> None:
        pass

    def check(self) -> None:
        """Raises what the phase found wrong on the device (a device replay's misses)."""

    def close(self) -> None:
        """After the last iteration."""


def mean_epsilon(train_epsilon, frame_t):
    return float(np.mean(train_epsilon(frame_t)))
