"""Acting drivers: how a training phase interleaves acting, storing and learning
(--acting; rlpyt's samplers and runners). run/factory.py picks one.

  serial       the actor steps the environments, then the learner does the updates
               due (DQN Zoo); the default.
  parallel     the same, with the environments stepped in --actor-workers processes
               (workers.py) and actions chosen batched on the learner's device (rlpyt's
               GpuSampler: an action server). Same seeds, same rows as serial.
  alternating  two halves of the workers (alternating.py; rlpyt's AlternatingSampler).
  async        the actor in a thread (asynchronous.py) or a process (process.py) of its
               own; batches of ready games (batches.py). With --deterministic, async's
               schedule in lockstep in this driver's one thread (lockstep.py).

A driver owns the training actor and the evaluator and reports rlpyt's runner
diagnostics as results columns: train_updates_per_second (UpdatesPerSecond),
replay_ratio (CumReplayRatio: transitions sampled / collected, warm-up included) and
learner_wait_fraction (async: 1 - rlpyt's OptThrottle; NaN otherwise)."""

import math
from collections.abc import Callable
from typing import Any

from qzoo.acting import recurrent_policy
from qzoo.acting.actor import Actor
from qzoo.acting.driver import Driver, Progress, UpdateBook, mean_epsilon
from qzoo.acting.lockstep import Lockstep


def run_episodes(actor, progress, frame_t):
    """Steps `actor` (made with `episodes`) until each of its environments has finished
    one episode (Dopamine's evaluation of N episodes on N environments at once)."""
    actor.start()
    try:
        while not actor.episodes.all_finished():
            _, new_frames = actor.step(frame_t())
            if progress is not None:
                progress(new_frames, actor.episodes)
    finally:
        stats = actor.stop()
    return stats


def evaluate(evaluator, num_frames, progress, frame_t, episodes, finish_episodes):
    """An evaluation phase: `episodes` whole episodes (one per environment) when above
    0, else `num_frames` frames (and, with `finish_episodes`, the episodes under way)."""
    if episodes:
        return run_episodes(evaluator, progress, frame_t)
    return run_phase(evaluator, num_frames, progress, frame_t, finish_episodes=finish_episodes)


def run_phase(actor, num_frames, progress, frame_t, on_step=None, finish_episodes=False):
    """Steps `actor` until it has advanced `num_frames` frames; `on_step(row, frames)`
    after each step; `frame_t()` the training frame counter the epsilon follows. With
    `finish_episodes` the episodes under way then play to their end and count, and no
    other does (Dopamine's run_experiment: episodes run while the phase's step count is
    under its budget, and the one that crosses it ends)."""

    def steps_while(more):
        while more():
            row, new_frames = actor.step(frame_t())
            if on_step is not None:
                on_step(row, new_frames)
            if progress is not None:
                progress(new_frames, actor.episodes)

    actor.start()
    try:
        steps_while(lambda: actor.frames < num_frames)
        if finish_episodes:
            actor.finish_episodes()
            steps_while(lambda: not actor.episodes.all_finished())
    finally:
        stats = actor.stop()
    return stats


class SerialDriver(Driver):
    """Acting and learning take turns in one thread (module docstring: serial,
    parallel and, with `actor_class` AlternatingActor, alternating)."""

    def __init__(self, updates: UpdateBook, actor: Actor, evaluator: Actor,
                 train_epsilon: Callable[[int], Any], eval_episodes: int = 0,
                 eval_finish_episodes: bool = False, lockstep: Lockstep | None = None) -> None:  # fmt: skip
        """`actor` trains, with the epsilon `train_epsilon(frame_t)`; `evaluator`
        evaluates (their policies differ with deep exploration and R2D1's recurrent
        states); `eval_episodes` > 0: an evaluation plays that many episodes, one per
        environment, else its frames, and with `eval_finish_episodes` the episodes
        under way at its end (acting/from_config.py's serial_parts makes these).
        `lockstep`: learn on async acting's schedule (lockstep.py) instead of DQN Zoo's
        updates due every so many frames."""
        self.updates, self.actor, self.evaluator = updates, actor, evaluator
        self.train_epsilon = train_epsilon
        self.eval_episodes, self.eval_finish_episodes = eval_episodes, eval_finish_episodes
        self.lockstep = lockstep

    @property
    def frame_t(self):
        return self.updates.frame_t

    def train_phase(self, num_frames: int, progress: Progress = None) -> dict:
        updates, lockstep = self.updates, self.lockstep
        if lockstep is not None:
            lockstep.start(updates)

        def on_step(row, new_frames):
            updates.store(row, new_frames)
            if lockstep is not None:
                lockstep.learn(updates, new_frames)
                return
            updates.learn_due(updates.frame_t, updates.frame_t + new_frames)
            updates.advance(new_frames)

        stats = run_phase(self.actor, num_frames, progress, lambda: updates.frame_t, on_step)
        if lockstep is not None:
            stats["learner_wait_fraction"] = 0.0  # the learner never waits in one thread
        return stats

    def eval_phase(self, num_frames: int, progress: Progress = None) -> dict:
        """Acts for `num_frames` frames (with --eval-episodes, until that many episodes
        end, one per environment; with --eval-finish-episodes, until the episodes under
        way at `num_frames` end) with the evaluation epsilon; learns nothing."""
        return evaluate(self.evaluator, num_frames, progress, lambda: self.updates.frame_t,
                        self.eval_episodes, self.eval_finish_episodes)  # fmt: skip

    def epsilon(self, frame_t: int) -> float:
        return mean_epsilon(self.train_epsilon, frame_t)

    def prioritized_columns(self) -> dict:
        return self.updates.prioritized_columns()

    def columns(self, train: dict, stats: dict) -> dict:
        """rlpyt's runner diagnostics for the results row (module docstring)."""
        updates, duration = self.updates, train.get("duration", math.nan)
        collected = updates.transitions_collected
        return {
            "train_updates_per_second": stats["num_updates"] / duration if duration else math.nan,
            "replay_ratio": updates.transitions_sampled / collected if collected else math.nan,
            "learner_wait_fraction": train.get("learner_wait_fraction", math.nan),
        }

    def state_dict(self, common: dict) -> dict:
        """R2D1's recurrent states first (as always), the trainer's part, then replay,
        the replay log and the counters."""
        return {**recurrent_policy.states(self), **common, **self.updates.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        self.updates.load_state_dict(state)
        recurrent_policy.load_states(self, state)

    def check(self) -> None:
        self.updates.check()

    def close(self) -> None:
        self.updates.close()
