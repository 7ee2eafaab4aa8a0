"""The learner's next batch and its targets, made while it updates (--prefetch-targets).

On a CPU the target network's pass at s_t is a large part of a convolutional update,
and it depends on nothing the update changes. With --acting async and this option, a
thread of its own samples the learner's next batch (under the replay's lock) and runs
the target network at its s_t, so that the learner's thread does only the online
network's passes, the backward pass and the optimizer's step: the sampling and target
evaluation that Ape-X (Horgan et al. 2018) and rlpyt's asynchronous runner move off the
learner's critical path, kept to one batch of lookahead. The targets are the learner's
own (a batch made before a target copy gets them recomputed, `Prefetcher.get`); a batch
is sampled one update earlier, so prioritized sampling sees all but the latest update's
priorities. Only for target networks that draw nothing at s_t (no noisy layers, not
IQN's taus): the learner's random stream is not shared between threads
(configuration/rules/acting.py refuses the rest). On a GPU both threads queue on the default
stream, so the target pass does not overlap the update there."""

import queue
import threading

import torch

from qzoo.acting.pinning import pinned
from qzoo.learning.precision import autocast


class Prefetcher:
    """Samples batches from `parts.updates` under `lock` and computes the target
    network's outputs at their s_t, one batch ahead of `get()`, which hands those to the
    learner's objective (learning/prefetched.py's PrefetchedTargets, which
    --prefetch-targets puts around it); its thread runs on `cores` (None: anywhere)."""

    def __init__(self, parts, lock, cores=None):
        self.parts, self.lock, self.cores = parts, lock, cores
        # Held while the target network is read here or written by a target copy;
        # `version` counts the copies, so a batch made before one is recognised.
        self.target_lock = threading.Lock()
        self.version = 0
        # One batch ahead exactly: the next is sampled only once the last is taken.
        self._ready, self._taken = queue.Queue(), threading.Semaphore(1)
        self._stop = threading.Event()
        self._thread = None
        self.error = None  # what the thread raised, if anything

    def update_target(self, tau):
        """The learner's target update, ordered against the prefetcher's reads."""
        with self.target_lock:
            self.parts.learner.update_target(tau)
            self.version += 1

    def get(self):
        """The next batch, with its targets when they are the current target
        network's. Starts the thread on the first call (when replay can be sampled)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="qzoo-prefetch", daemon=True)
            self._thread.start()
        while True:
            try:
                batch, target_t, version = self._ready.get(timeout=0.1)
                break
            except queue.Empty:
                if self.error is not None:
                    raise self.error
        self._taken.release()
        if version == self.version:  # else a target copy happened since: recomputed
            self.parts.learner.objective.remember(batch.s_t, target_t)
        return batch

    def stop(self):
        """Stops and joins the thread; a batch made and not taken is dropped (and an
        error raised on it stays in `error`)."""
        self._stop.set()
        self._taken.release()  # wakes a thread waiting for the last batch to be taken
        if self._thread is not None:
            self._thread.join()
        self._thread = None

    def _run(self):
        parts, learner = self.parts, self.parts.learner
        try:
            with pinned(self.cores):
                while True:
                    self._taken.acquire()
                    if self._stop.is_set():
                        return
                    batch = parts.updates.sample_batch(self.lock).to(learner.device)
                    with self.target_lock, torch.no_grad():
                        version = self.version
                        with autocast(parts.config.precision, learner.device):
                            target_t = learner.target(batch.s_t)
                    self._ready.put((batch, target_t, version))
        except BaseException as error:  # noqa: BLE001 (raised again in the learner's thread)
            self.error = error
