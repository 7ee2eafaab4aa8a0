"""The update bookkeeping a local driver is given: rows into replay, and the updates
they make due (DQN Zoo's run loop: one SGD step per learn_period frames, a target copy
per target_network_update_period frames; rlpyt's replay ratio in the same units).

  updates.store(row, frames)           the actor's row into replay (and the replay log)
  updates.learn_due(old, new)          every update due between two frame counts:
      batch = replay.sample(32)        at prioritized replay's current beta
      priorities = learner.learn(batch)
      replay.update_priorities(...)
      learner.update_target(tau)       when a target copy falls due

`frame_t` (training frames so far) and rlpyt's CumReplayRatio counters live here and
are checkpointed with the replay.
"""

import contextlib
from typing import Any

from qzoo.acting.ratio import UpdateSchedule, updates_per_frame
from qzoo.acting.schedule import importance_sampling_schedule


class Updates:
    """See the module docstring. `captured`: --capture's whole-update graph
    (learning/captured.py); `ahead`: a sampler of the next batch during an update
    (replay/ahead.py); `replay_log`: --log-replay's writer."""

    def __init__(self, config, learner, replay, replay_log=None, captured=None, ahead=None):
        self.config, self.learner, self.replay = config, learner, replay
        self.replay_log, self.captured, self._ahead = replay_log, captured, ahead
        self.schedule = UpdateSchedule(updates_per_frame(config),
                                       config.target_network_update_period)  # fmt: skip
        self.importance_sampling_exponent = importance_sampling_schedule(config)
        self.frame_t = 0  # training frames so far (DQN Zoo's persistent frame_t)
        # rlpyt's CumReplayRatio: transitions sampled / transitions collected.
        self.transitions_sampled = self.transitions_collected = 0

    def store(self, row: Any, new_frames: int) -> None:
        """Adds an actor's row to replay (and the replay log)."""
        self.replay.add(row)
        if self.replay_log is not None:
            self.replay_log.add(row)
        self.transitions_collected += new_frames // self.config.action_repeats

    def can_learn(self) -> bool:
        config, replay = self.config, self.replay
        if not config.offline and replay.size < config.min_replay_size:
            return False  # a dataset is complete from the start
        return replay.can_sample()

    def learn_due(self, old_frame: int, new_frame: int) -> None:
        """SGD steps and target updates due between two frame counts."""
        if not self.can_learn():
            return
        due = self.schedule.updates_due(old_frame, new_frame)
        many = self.captured.updates if self.captured is not None else 1
        if many > 1:  # --capture-updates: K at a time, then the rest one by one
            for n in [many] * (due // many) + [1] * (due % many):
                self.learn_once(updates=n)
        elif due > 1 and self._ahead is not None:  # the next batch drawn during an update
            for batch in self._ahead.batches(due, self.sample_batch):
                self.learn_once(batch=batch)
                self._target_after_update()
        else:
            for _ in range(due):
                self.learn_once()
                self._target_after_update()
        by_frames = not self.config.target_count_updates
        if by_frames and self.schedule.target_due(old_frame, new_frame):
            self.learner.update_target(self.config.target_update_tau)

    def _target_after_update(self):
        """--target-count-updates: a target copy after every target_period x
        updates-per-frame updates, counted from the first (rlpyt's update_counter)."""
        if self.config.target_count_updates:
            made = self.transitions_sampled // self.config.batch_size
            if self.schedule.target_due_after(made - 1, made):
                self.learner.update_target(self.config.target_update_tau)

    def sample_batch(self, lock: Any = None) -> Any:
        """A batch from replay at the current importance-sampling exponent; `lock`
        guards the replay when an actor writes to it concurrently."""
        config, replay = self.config, self.replay
        with lock or contextlib.nullcontext():
            if config.prioritized:
                beta = self.importance_sampling_exponent(replay.num_adds)
                replay.sampler.importance_sampling_exponent = beta
            return replay.sample(config.batch_size)

    def learn_once(self, lock: Any = None, batch: Any = None, updates: int = 1) -> None:
        """One SGD step on `batch`, or on one sampled now; `lock` guards the replay
        when an actor writes to it concurrently (the SGD step itself runs outside it).
        `updates`: --capture-updates' steps in one captured call."""
        config, replay = self.config, self.replay
        lock = lock or contextlib.nullcontext()
        if self.captured is not None:  # draw, update and priorities in one graph
            if config.prioritized:
                self.captured.set_beta(self.importance_sampling_exponent(replay.num_adds))
            with lock:
                self.captured.update(updates)
            self.transitions_sampled += config.batch_size * updates
            return
        if batch is None:
            batch = self.sample_batch(lock)
        priorities = self.learner.learn(batch)
        if priorities is not None:
            with lock:
                replay.update_priorities(batch.indices, priorities)
        self.transitions_sampled += config.batch_size

    def use_replay(self, replay):
        """Another replay from now on (offline: the checkpoints an iteration reloads)."""
        self.replay = replay

    def check(self):
        """A device replay's failed draws since the last call (replay/device_samplers.py)."""
        sampler = getattr(self.replay, "sampler", None)
        if hasattr(sampler, "check"):
            sampler.check()

    def prioritized_columns(self):
        if not self.config.prioritized:
            return {}
        return {
            "importance_sampling_exponent": self.importance_sampling_exponent(self.replay.num_adds),
            "max_seen_priority": self.replay.sampler.max_seen_priority,
        }

    def state_dict(self):
        """Replay (unless --no-checkpoint-replay), the replay log and the counters."""
        import numpy as np

        config = self.config
        log = None
        if self.replay_log is not None:
            log = self.replay_log.state_dict(rows=config.checkpoint_replay)
        return {
            "replay": self.replay.state_dict() if config.checkpoint_replay else None,
            "replay_log": log,
            "transitions": np.array([self.transitions_sampled, self.transitions_collected]),
        }

    def load_state_dict(self, state):
        self.frame_t = int(state["frame_t"])
        if state["replay"] is not None:
            self.replay.load_state_dict(state["replay"])
        if state.get("transitions") is not None:  # runs saved before replay_ratio: 0, 0
            self.transitions_sampled, self.transitions_collected = map(int, state["transitions"])
        if self.replay_log is not None and state.get("replay_log") is not None:
            self.replay_log.load_state_dict(state["replay_log"])

    def close(self):
        """After the last iteration: the replay log's final partial snapshot."""
        if self.replay_log is not None:
            self.replay_log.writer.close()
        if self._ahead is not None:
            self._ahead.close()
