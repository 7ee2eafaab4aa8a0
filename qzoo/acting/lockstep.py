"""Lockstep: asynchronous acting's schedule run in one thread (--acting async
--deterministic), an option of the serial driver.

The actor acts on a copy of the online network that the learner republishes every
--publish-period updates (and at each phase start), updates are paced by the replay
ratio's gate rather than by frames, and the target network is updated every
target period x updates-per-frame updates: what --acting async does (rlpyt's AsyncRl
schedule), with the learner doing every update the gate allows after each actor step.
Nothing runs concurrently, so a run is reproducible and resumes bit-identically: the
way to test a schedule that the threaded and process actors only approximate."""

import contextlib
from typing import Any

from qzoo.acting.policy import Policy
from qzoo.acting.ratio import RatioGate, gated_update


class Lockstep:
    """After each stored row, the updates the gate allows (the floor of the target)."""

    def __init__(self, learner: Any, actor_policy: Policy, publish_period: int,
                 ratio_tolerance: float, target_update_tau: float) -> None:  # fmt: skip
        """`learner`: its online network is published to `actor_policy` (which acts on
        a copy of it); `publish_period` updates between publications (0: every
        update); `ratio_tolerance` and `target_update_tau` as --replay-ratio-tolerance
        and --target-update-tau."""
        self.learner, self.actor_policy = learner, actor_policy
        self.publish_period, self.ratio_tolerance = publish_period, ratio_tolerance
        self.target_update_tau = target_update_tau
        self.gate: RatioGate | None = None

    def publish(self) -> None:
        self.actor_policy.load_weights(self.learner.online.state_dict())

    def start(self, updates: Any) -> None:
        """A training phase starts from the learner's weights and a fresh gate."""
        self.publish()
        self.gate = RatioGate(updates.schedule.updates_per_frame, self.ratio_tolerance)

    def learn(self, updates: Any, new_frames: int) -> None:
        """After a row of `new_frames` frames was stored: count them, then update."""
        gate = self.gate
        updates.advance(new_frames)
        if updates.can_learn():
            gate.add_collected(new_frames)
            while gate.consumed + 1 <= gate.target():
                gated_update(updates, gate, self.learner.update_target, self.target_update_tau,
                             self.publish, self.publish_period, contextlib.nullcontext())  # fmt: skip
