"""The asynchronous actor-learner (--acting async; rlpyt's AsyncRl, B8.3).

The actor runs in its own thread with its own copy of the online network, stepping
the environments (in --actor-workers processes when above 1) and writing rows into
the shared replay under a lock (rlpyt's async buffers, B6.5: one writer, readers
under the same lock). The learner, in the trainer's thread, samples, updates and
writes priorities back under that lock (the SGD step itself runs outside it), and
publishes its weights to the actor every --publish-period updates. A `RatioGate`
(ratio.py) holds the replay ratio both ways: the learner waits when it is ahead, the
actor when it is ahead (rlpyt's sampler never waits: rlpyt issue #138). Target
updates are counted in updates (rlpyt): every target-network-update-period x
updates-per-frame of them. --deterministic runs the same schedule in lockstep in one
thread (lockstep.py, an option of the serial driver), so that a run is reproducible
and resumes bit-identically."""

import contextlib
import copy
import sys
import threading
import time
from typing import Any

import torch

from qzoo.acting.driver import Progress
from qzoo.acting.from_config import serial_parts
from qzoo.acting.pinning import pinned, pinned_cores
from qzoo.acting.policy import Policy
from qzoo.acting.prefetch import Prefetcher
from qzoo.acting.ratio import RatioGate, gated_update
from qzoo.acting.serial import SerialDriver, run_phase


class _LockedPolicy(Policy):
    """The actor's policy: a network copy that takes the newest published weights at
    its next call. The learner never waits for an action to be chosen (publishing
    never writes the actor's network under the lock of its forward pass).

    The weights get there one of two ways. Pulled (`source`: the learner's online
    network and the lock its optimizer steps under): publishing only flags them, and
    the actor copies the learner's weights itself, under that lock, so never half a
    step. The copy then leaves the learner's thread, which sets the pace on two cores;
    the actor takes the newest update's weights, which may be later than the published
    one's. Staged (no `source`): the learner
    copies them into a staging copy, under a lock the actor holds only while it
    copies them out; for a compiled update (its optimizer steps inside the graph) and
    on a GPU."""

    def __init__(self, network, settings, source=None):
        """`settings`: how it acts (Policy.settings of the policy it stands in for)."""
        super().__init__(network, **settings)
        self._source = source
        self.lock = threading.Lock()
        self._staged, self._fresh = None, False
        # On a GPU the actor acts on a CUDA stream of its own: the copies are ordered
        # by events (staged after the learner's step, read back before the next
        # staging), so neither thread waits for the other's queued work.
        self._events = None
        if self.device.type == "cuda":
            self._events = {"staged": torch.cuda.Event(), "loaded": torch.cuda.Event(),
                            "recorded": set()}  # fmt: skip

    def _wait(self, name):
        if name in self._events["recorded"]:
            torch.cuda.current_stream(self.device).wait_event(self._events[name])

    def _record(self, name):
        self._events[name].record(torch.cuda.current_stream(self.device))
        self._events["recorded"].add(name)

    def publish(self, online):
        """Called in the learner's thread with its online network."""
        if self._source is not None:
            self._fresh = True
            return
        with self.lock:
            if self._events:
                self._wait("loaded")  # the actor's last read of the staged copy
            if self._staged is None:
                self._staged = {k: v.detach().clone() for k, v in online.state_dict().items()}
            else:
                for name, value in online.state_dict().items():
                    self._staged[name].copy_(value)
            if self._events:
                self._record("staged")
            self._fresh = True

    def __call__(self, *args, **kwargs):
        if self._fresh:  # read without the lock: at worst, taken at the next call
            if self._source is not None:
                online, lock = self._source
                with lock:  # cleared before the copy: a later publish is not lost
                    self._fresh = False
                    super().load_weights(online.state_dict())
            else:
                with self.lock:
                    if self._events:
                        self._wait("staged")
                    super().load_weights(self._staged)
                    if self._events:
                        self._record("loaded")
                    self._fresh = False
        return super().__call__(*args, **kwargs)


def over_the_whole_phase(stats, seconds):
    """The actor's rates over the `seconds` the phase took with the learner's
    catch-up after the actor's last step (up to --replay-ratio-tolerance of its updates),
    which the actor's own clock leaves out."""
    for rate in ("frame_rate", "steps_per_second"):
        stats[rate] *= stats["duration"] / seconds
    stats["duration"] = seconds
    return stats


def note_unpinned(config):
    if config.pin_threads and pinned_cores() is None:
        print("qzoo: note: --pin-threads: this process may run on one core only (or "
              "threads cannot be pinned here), so its threads are not pinned",
              file=sys.stderr)  # fmt: skip


class AsyncDriver(SerialDriver):
    """--acting async: the actor in a thread of its own, the learner in the trainer's.

    Guarantees. Every stored transition is valid (whole rows under the lock); the
    realised ratio stays within --replay-ratio-tolerance of the target up to one update
    and one actor step (RatioGate); at the end of a phase the learner catches up to the
    updates due, so each results row has at least the synchronous schedule's number of
    updates and at most --replay-ratio-tolerance more (counted from the phase's first
    learnable frame; a fraction of an update per phase is dropped). As in rlpyt, a
    prioritized batch's new priorities are written after its SGD step: a slot the actor
    overwrote meanwhile gets its predecessor's priority (a slot's priority, not a
    transition, is wrong; rare at replay sizes far above the rows written during one
    update). With --prefetch-targets a thread of its own samples each batch and computes
    its targets one update ahead (prefetch.py); with --pin-threads the learner's thread
    runs on a core of its own (pinning.py). Not guaranteed: which weights acted on which
    step, hence the results of two runs with one seed, and what a resumed run does (a
    checkpoint is written between phases, when both sides are idle; resuming continues
    from it, but the run differs from an uninterrupted one as any two async runs do).
    The same schedule without threads, reproducible: lockstep.py (--deterministic)."""

    def __init__(self, parts, policy, evaluation):
        learner, config = parts.learner, parts.config
        network = copy.deepcopy(learner.online).requires_grad_(False)
        # On a GPU the weights are always staged: a lock cannot order queued kernels.
        pulled = learner.step_lock is not None and learner.device.type != "cuda"
        source = (learner.online, learner.step_lock) if pulled else None
        # The factory's policy, acting on the actor's copy of the network.
        self.actor_policy = _LockedPolicy(network, policy.settings(), source)
        super().__init__(**serial_parts(parts, self.actor_policy, evaluation))
        self.parts, self.config = parts, config
        self.gate = None
        note_unpinned(config)
        # A GPU actor's forward passes go on a stream of their own, so that reading its
        # actions waits for them alone, not for the learner's queued updates.
        cuda = learner.device.type == "cuda"
        self._actor_stream = torch.cuda.Stream(learner.device) if cuda else None

    def publish(self):
        # The actor's copy lives in this process on the learner's device: copied
        # tensor to tensor, without weights()'s intermediate host copy.
        self.actor_policy.publish(self.parts.learner.online)

    def _update(self, lock, prefetcher=None):
        """One learner update (on the prefetcher's batch when there is one), the
        target update when due, and publishing."""
        config = self.config
        update = prefetcher.update_target if prefetcher else self.parts.learner.update_target
        gated_update(self.updates, self.gate, update, config.target_update_tau, self.publish,
                     config.publish_period, lock, prefetcher.get() if prefetcher else None)  # fmt: skip

    def train_phase(self, num_frames: int, progress: Progress = None) -> dict:
        updates, config = self.updates, self.config
        self.publish()  # each phase starts from the learner's weights
        self.gate = RatioGate(updates.schedule.updates_per_frame,
                              config.replay_ratio_tolerance)  # fmt: skip
        lock, result = threading.Lock(), {}
        errors: list[Any] = []  # the actor's error, or None: the learner's stops the actor
        # --pin-threads: the learner on a core of its own, the others on the rest.
        learner_cores, other_cores = (config.pin_threads and pinned_cores()) or (None, None)
        prefetcher = None
        if config.prefetch_targets:
            prefetcher = Prefetcher(self.parts, lock, other_cores)

        def on_step(row, new_frames):
            if errors:
                raise _Stopped
            learnable = self.store(row, new_frames, lock)
            if learnable:
                self.gate.add_collected(learnable)
                self.gate.wait_actor(stop=lambda: errors)  # the actor waits when ahead

        def act():
            try:
                with pinned(other_cores), _on_stream(self._actor_stream):
                    result["stats"] = run_phase(self.actor, num_frames, progress,
                                                lambda: updates.frame_t, on_step)  # fmt: skip
            except _Stopped:
                pass
            except BaseException as error:  # noqa: BLE001 (raised again in the learner's thread)
                errors.append(error)
            finally:
                self.gate.finish()

        started, waited = time.perf_counter(), 0.0
        thread = threading.Thread(target=act, name="qzoo-actor", daemon=True)
        thread.start()
        try:
            with pinned(learner_cores):
                while True:
                    go, seconds = self.gate.wait_learner(stop=lambda: errors)
                    waited += seconds
                    if not go:
                        break
                    self._update(lock, prefetcher)
        except BaseException:
            errors.append(None)  # stops the actor at its next step
            raise
        finally:
            if prefetcher:
                prefetcher.stop()
            thread.join()
        if errors:
            raise errors[0]
        if prefetcher and prefetcher.error is not None:  # on a batch nobody took
            raise prefetcher.error
        seconds = time.perf_counter() - started
        stats = over_the_whole_phase(result["stats"], seconds)
        stats["learner_wait_fraction"] = waited / seconds
        return stats

    def store(self, row, new_frames, lock):
        """Stores an actor's row (under `lock`, which sampling takes too) and counts
        its frames; returns them where the learner can learn (the gate counts from
        there), else 0."""
        updates = self.updates
        # Rows go to a device replay on the learner's stream: its draws then always
        # come after the copies of the rows they may read.
        learner_stream = None
        if self._actor_stream is not None:
            learner_stream = torch.cuda.default_stream(self.parts.learner.device)
        with lock, _on_stream(learner_stream):
            updates.store(row, new_frames)
            learning = updates.can_learn()
        updates.advance(new_frames)
        return new_frames if learning else 0


def _on_stream(stream):
    """torch.cuda.stream(stream), or nothing for None."""
    return torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext()


class _Stopped(Exception):
    """Raised in the actor's thread when the learner's has failed."""
