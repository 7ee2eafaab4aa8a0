"""The replay ratio: one rule for when the learner updates, synchronous or not.

rlpyt's replay ratio R is training data consumed per unit of data collected:
transitions sampled (updates x batch size) per transition stored (one per
environment per agent step). DQN Zoo's learn period is the same rule counted in
frames: one update every `learn_period` frames. Both become one number here,
`updates_per_frame` (an exact fraction):

    learn period L:   updates_per_frame = 1 / L
    replay ratio R:   updates_per_frame = R / (batch_size x action_repeats)

so DQN Zoo's 32 every 16 frames at 4 frames per step is R = 32 x 4 / 16 = 8, rlpyt's
default. `UpdateSchedule` applies it synchronously (the updates due between two
frame counts, as DQN Zoo's loop); `RatioGate` applies it to an actor and a learner
running concurrently (qzoo/acting/asynchronous.py; reusable by any pair of a
producer and a consumer, e.g. distributed actors).
"""

import fractions
import threading
import time
from collections.abc import Callable
from typing import Any


def updates_per_frame(config):
    """The exact updates per environment frame of `config` (module docstring)."""
    if config.replay_ratio > 0:
        ratio = fractions.Fraction(config.replay_ratio).limit_denominator(10**6)
        return ratio / (config.batch_size * config.action_repeats)
    return fractions.Fraction(1, config.learn_period)


class UpdateSchedule:
    """When the learner updates and the target network updates, counted in frames.

    `updates_due(old, new)` = floor(new x u) - floor(old x u) for u updates per frame:
    with u = 1 / learn_period, DQN Zoo's one SGD step every learn_period frames (with N
    environments several may fall due in one step; all of them happen). The target
    updates every `target_period` frames (DQN Zoo), or, where updates are not tied to
    frames (asynchronous acting), every target_period x u updates (rlpyt counts its
    target interval in updates).
    """

    def __init__(self, updates_per_frame, target_period):
        self.updates_per_frame = fractions.Fraction(updates_per_frame)
        self.target_period = target_period
        self.target_period_updates = max(1, round(target_period * self.updates_per_frame))
        # Called every agent step: integer arithmetic on the fraction's terms, not
        # Fraction objects (the same floors, a tenth of the time).
        self._numerator = self.updates_per_frame.numerator
        self._denominator = self.updates_per_frame.denominator

    def updates_due(self, old_frame, new_frame):
        p, q = self._numerator, self._denominator
        return (new_frame * p) // q - (old_frame * p) // q

    def target_due(self, old_frame, new_frame):
        return new_frame // self.target_period > old_frame // self.target_period

    def target_due_after(self, old_updates, new_updates):
        period = self.target_period_updates
        return new_updates // period > old_updates // period


class RatioGate:
    """Holds a producer (actor) and a consumer (learner) to a replay ratio, both ways.

    The target is `units x per_unit` updates for `units` collected (frames here, with
    `per_unit` = updates per frame). With n updates done and target T:
      - the learner may start update n + 1 while n + 1 <= T (1 + tolerance);
      - the actor may collect more while n >= T (1 - tolerance) - 1.
    One of the two may always go (so they never deadlock), and once the actor has
    `finish()`ed the learner may catch up to floor(T). The realised ratio n / T
    therefore stays within `tolerance`: above, exactly (n <= T (1 + tolerance)); below,
    up to one update and one actor step of slack (the actor checks before a step).
    A finished phase holds between floor(T) and T (1 + tolerance) updates. Unlike
    rlpyt's throttle (rlpyt issue #138: its learner waits, its sampler never does) the
    actor waits too.

    Counting starts when the replay can be sampled (rlpyt's throttle starts at
    min_steps_learn), so `collected` and `consumed` are counted from there by the
    caller. Thread-safe (one condition variable); `wait_*` return the seconds waited.
    `deviation` is the largest |n / T - 1| seen with T >= `settle` updates (a short
    start, where one update is a large fraction, is not held against the gate); None
    while T has not reached `settle`.
    """

    def __init__(self, per_unit, tolerance, settle=20):
        # Exact arithmetic: a bound of 110 updates is 110, not 110.00000000000001.
        self.per_unit = fractions.Fraction(per_unit)
        self.tolerance = fractions.Fraction(str(tolerance))
        self.settle = settle
        self.collected = self.consumed = 0
        self.finished = False
        self.deviation = None
        self._cv = threading.Condition()
        # The rules below in integers (cross-multiplied): asked several times per agent
        # step, where Fraction objects cost microseconds each.
        self._p, self._q = self.per_unit.numerator, self.per_unit.denominator
        self._a, self._b = self.tolerance.numerator, self.tolerance.denominator

    def target(self):
        return self.collected * self.per_unit

    def learner_may_go(self):
        """consumed + 1 <= T (1 + tolerance), or <= T once finished."""
        p, q, a, b = self._p, self._q, self._a, self._b
        if self.finished:
            return (self.consumed + 1) * q <= self.collected * p
        return (self.consumed + 1) * q * b <= self.collected * p * (b + a)

    def actor_may_go(self):
        """consumed >= T (1 - tolerance) - 1."""
        p, q, a, b = self._p, self._q, self._a, self._b
        return (self.consumed + 1) * q * b >= self.collected * p * (b - a)

    def wait_learner(self, stop=None):
        """Blocks until the learner may update (True), or until the actor has finished
        and nothing is due (False), or `stop()`."""
        started = time.perf_counter()
        with self._cv:
            while not self.learner_may_go():
                if self.finished or (stop is not None and stop()):
                    return False, time.perf_counter() - started
                self._cv.wait(0.05)
        return True, time.perf_counter() - started

    def wait_actor(self, stop=None):
        """Blocks until the actor may collect; returns the seconds waited."""
        started = time.perf_counter()
        with self._cv:
            while not self.actor_may_go() and not (stop is not None and stop()):
                self._cv.wait(0.05)
        return time.perf_counter() - started

    def add_collected(self, units):
        with self._cv:
            self.collected += units
            self._note()
            self._cv.notify_all()

    def add_consumed(self, updates=1):
        with self._cv:
            self.consumed += updates
            self._note()
            self._cv.notify_all()

    def finish(self):
        with self._cv:
            self.finished = True
            self._cv.notify_all()

    def _note(self):
        reached = self.collected * self._p  # T x q
        if reached >= self.settle * self._q:
            distance = abs(self.consumed * self._q / reached - 1.0)  # correctly rounded
            self.deviation = max(self.deviation or 0.0, distance)


def gated_update(updates: Any, gate: RatioGate, update_target: Callable[[float], None],
                 tau: float, publish: Callable[[], None], publish_period: int,
                 lock: Any = None, batch: Any = None) -> None:  # fmt: skip
    """One learner update paced by `gate` (async acting, and its lockstep form): learn
    on `batch` (or one sampled under `lock`), count it, `update_target(tau)` when the
    target period counted in updates is due, and `publish()` the weights every
    `publish_period` updates (0: every update)."""
    before = updates.transitions_sampled // updates.batch_size
    updates.learn_once(lock, batch)
    gate.add_consumed(1)
    if updates.schedule.target_due_after(before, before + 1):
        update_target(tau)
    if gate.consumed % (publish_period or 1) == 0:
        publish()
