"""The update bookkeeping a local driver is given: rows into replay, and the updates
they make due (DQN Zoo's run loop: one SGD step per learn_period frames, a target copy
per target_network_update_period frames; rlpyt's replay ratio in the same units).

  updates.store(row, frames)           the actor's row into replay (and the replay log)
  updates.learn_due(old, new)          every update due between two frame counts:
      batch = replay.sample(32)        at prioritized replay's current beta
      priorities = learner.learn(batch)
      replay.update_priorities(...)
      learner.update_target(tau)       when a target copy falls due

`frame_t` (training frames so far, moved on by `advance`) and rlpyt's CumReplayRatio
counters live here and are checkpointed with the replay.
"""

import contextlib
from collections.abc import Callable
from typing import Any

from qzoo.acting.ratio import UpdateSchedule


class Updates:
    """See the module docstring. Built by run/factory.py from a config; its fast paths
    are subclasses beside it (run/fast_updates.py: the captured update, the next batch
    drawn ahead), which change only how due updates are made."""

    def __init__(self, learner: Any, replay: Any, schedule: UpdateSchedule, batch_size: int,
                 min_replay_size: int, action_repeats: int, target_update_tau: float = 1.0,
                 target_count_updates: bool = False,
                 importance_sampling: Callable[[int], float] | None = None,
                 checkpoint_replay: bool = True, replay_log: Any = None) -> None:  # fmt: skip
        """`schedule`: when updates and target copies fall due (acting/ratio.py);
        `min_replay_size`: transitions before learning starts (0 for a dataset);
        `importance_sampling`: prioritized replay's beta at a number of replay additions
        (None: uniform replay); `target_count_updates`: the target period counted in
        updates (rlpyt) instead of frames; `replay_log`: --log-replay's writer."""
        self.learner, self.replay, self.schedule = learner, replay, schedule
        self.batch_size, self.min_replay_size = batch_size, min_replay_size
        self.action_repeats, self.target_update_tau = action_repeats, target_update_tau
        self.target_count_updates = target_count_updates
        self.importance_sampling = importance_sampling
        self.checkpoint_replay, self.replay_log = checkpoint_replay, replay_log
        self._frame_t = 0  # training frames so far (DQN Zoo's persistent frame_t)
        # rlpyt's CumReplayRatio: transitions sampled / transitions collected.
        self.transitions_sampled = self.transitions_collected = 0

    @property
    def frame_t(self) -> int:
        """Training frames so far; drivers move it on with `advance`."""
        return self._frame_t

    def advance(self, new_frames: int) -> None:
        """Counts `new_frames` more training frames."""
        self._frame_t += new_frames

    def store(self, row: Any, new_frames: int) -> None:
        """Adds an actor's row to replay (and the replay log), and counts its frames
        as collected."""
        self.replay.add(row)
        if self.replay_log is not None:
            self.replay_log.add(row)
        self.collected(new_frames)

    def collected(self, new_frames: int) -> None:
        """Counts a step's frames as collected transitions (a step whose row replay
        receives later, or not at all: ale-py's batches)."""
        self.transitions_collected += new_frames // self.action_repeats

    def can_learn(self) -> bool:
        replay = self.replay
        return replay.size >= self.min_replay_size and replay.can_sample()

    def learn_due(self, old_frame: int, new_frame: int) -> None:
        """SGD steps and target updates due between two frame counts."""
        if not self.can_learn():
            return
        self.learn_many(self.schedule.updates_due(old_frame, new_frame))
        by_frames = not self.target_count_updates
        if by_frames and self.schedule.target_due(old_frame, new_frame):
            self.learner.update_target(self.target_update_tau)

    def learn_many(self, due: int) -> None:
        """`due` updates, each followed by the target copy it may make due (the fast
        paths make them their own way)."""
        for _ in range(due):
            self.learn_once()
            self.target_after_update()

    def target_after_update(self) -> None:
        """--target-count-updates: a target copy after every target_period x
        updates-per-frame updates, counted from the first (rlpyt's update_counter)."""
        if self.target_count_updates:
            made = self.transitions_sampled // self.batch_size
            if self.schedule.target_due_after(made - 1, made):
                self.learner.update_target(self.target_update_tau)

    def sample_batch(self, lock: Any = None) -> Any:
        """A batch from replay at the current importance-sampling exponent; `lock`
        guards the replay when an actor writes to it concurrently."""
        replay = self.replay
        with lock or contextlib.nullcontext():
            if self.importance_sampling is not None:
                replay.sampler.importance_sampling_exponent = self.beta()
            return replay.sample(self.batch_size)

    def beta(self) -> float:
        """Prioritized replay's importance-sampling exponent now."""
        return self.importance_sampling(self.replay.num_adds)  # type: ignore[misc]

    def learn_once(self, lock: Any = None, batch: Any = None, updates: int = 1) -> None:
        """One SGD step on `batch`, or on one sampled now; `lock` guards the replay
        when an actor writes to it concurrently (the SGD step itself runs outside it).
        `updates`: the captured update's steps in one call (fast_updates.py)."""
        if batch is None:
            batch = self.sample_batch(lock)
        priorities = self.learner.learn(batch)
        if priorities is not None:
            with lock or contextlib.nullcontext():
                self.replay.update_priorities(batch.indices, priorities)
        self.transitions_sampled += self.batch_size

    def use_replay(self, replay: Any) -> None:
        """Another replay from now on (offline: the checkpoints an iteration reloads)."""
        self.replay = replay

    def check(self) -> None:
        """A device replay's failed draws since the last call (replay/device_samplers.py)."""
        check = getattr(getattr(self.replay, "sampler", None), "check", None)
        if check is not None:
            check()

    def prioritized_columns(self) -> dict:
        if self.importance_sampling is None:
            return {}
        return {
            "importance_sampling_exponent": self.beta(),
            "max_seen_priority": self.replay.sampler.max_seen_priority,
        }

    def state_dict(self) -> dict:
        """Replay (unless --no-checkpoint-replay), the replay log and the counters."""
        import numpy as np

        log = None
        if self.replay_log is not None:
            log = self.replay_log.state_dict(rows=self.checkpoint_replay)
        return {
            "replay": self.replay.state_dict() if self.checkpoint_replay else None,
            "replay_log": log,
            "transitions": np.array([self.transitions_sampled, self.transitions_collected]),
        }

    def load_state_dict(self, state: dict) -> None:
        self._frame_t = int(state["frame_t"])
        if state["replay"] is not None:
            self.replay.load_state_dict(state["replay"])
        if state.get("transitions") is not None:  # runs saved before replay_ratio: 0, 0
            self.transitions_sampled, self.transitions_collected = map(int, state["transitions"])
        if self.replay_log is not None and state.get("replay_log") is not None:
            self.replay_log.load_state_dict(state["replay_log"])

    def close(self) -> None:
        """After the last iteration: the replay log's final partial snapshot."""
        if self.replay_log is not None:
            self.replay_log.writer.close()
