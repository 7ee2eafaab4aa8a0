"""The asynchronous actor in a process of its own (--acting async --actor-process;
rlpyt's AsyncRl layout, B8.3, whose sampler runs in other processes than its
optimizer).

With --acting async the actor is a thread of the learner's process, and both threads
run Python under one interpreter lock. A large network's operations release it for
long stretches, so a convolutional actor and learner overlap; a small network's do
not, and its actor and learner take turns at the lock. Here the actor is forked at
each training phase start, with the run's state as it is then (its policy copy, its
random stream, the epsilon schedule), and acts as the thread would, while the
learner's process stores its rows, updates and publishes weights. It keeps the
thread's guarantees with the ring's slack added, and like it is not reproducible."""

import base64
import copy
import gc
import json
import multiprocessing
import os
import signal
import threading
import time
import traceback

import numpy as np
import torch

from qzoo.acting.asynchronous import AsyncDriver, note_unpinned, over_the_whole_phase
from qzoo.acting.pinning import pinned, pinned_cores
from qzoo.acting.policy import Policy
from qzoo.acting.prefetch import Prefetcher
from qzoo.acting.ratio import RatioGate
from qzoo.acting.serial import SerialDriver, run_phase
from qzoo.acting.workers import _shared
from qzoo.errors import UserError, WorkerDied
from qzoo.replay.batch import Row
from qzoo.signals import die_with_parent

SLOTS = 64  # agent steps the ring holds (fewer for large frames: `_slots`)
_FIELDS = (("action", np.int64), ("reward", np.float32), ("first", bool), ("last", bool),
           ("zero_discount", bool), ("ended", np.float64))  # fmt: skip
_NAP = 50e-6  # seconds a side sleeps when it has nothing to do
_NONE = np.zeros(0)  # no episode ended
_FORK = multiprocessing.get_context("fork")


def _locked(value):
    """A multiprocessing Value read under its lock (which orders memory)."""
    with value.get_lock():
        return value.value


def _slots(num_envs, frame_bytes):
    """SLOTS, or fewer so that the ring's frames stay within 64 MiB."""
    return max(2, min(SLOTS, (64 << 20) // max(1, num_envs * frame_bytes)))


class _Ring:
    """Rows from the actor's process to the learner's (`ProcessDriver`)."""

    def __init__(self, ctx, num_envs, frame_shape, frame_dtype):
        frame_bytes = int(np.prod(frame_shape)) * np.dtype(frame_dtype).itemsize
        self.slots = _slots(num_envs, frame_bytes)
        shape = (self.slots, num_envs)
        self.arrays = {"frame": _shared(ctx, shape + tuple(frame_shape), frame_dtype),
                       **{name: _shared(ctx, shape, dtype) for name, dtype in _FIELDS}}  # fmt: skip
        self.new_frames = _shared(ctx, (self.slots,), np.int64)
        self.written, self.read = ctx.Value("q", 0), ctx.Value("q", 0)
        self.may_go, self.stop = ctx.RawValue("b", 1), ctx.RawValue("b", 0)

    def reset(self):
        self.written.value, self.read.value = 0, 0
        self.parent = os.getpid()  # the learner's, which forks the actor next
        self.may_go.value, self.stop.value = 1, 0

    # -- the actor's side --
    def put(self, row, new_frames, ended):
        """Writes one step's row, once the ring has room and the learner lets the actor
        go; `ended` the returns of episodes completed at this step."""
        written = self.written.value
        while (self.stop.value or written - _locked(self.read) >= self.slots
               or not self.may_go.value):  # fmt: skip
            if self.stop.value or os.getppid() != self.parent:  # the learner failed or is gone
                raise SystemExit(1)
            time.sleep(_NAP)
        slot, arrays = written % self.slots, self.arrays
        arrays["frame"][slot] = row.frame
        for name in ("action", "reward", "first", "last", "zero_discount"):
            arrays[name][slot] = getattr(row, name)
        arrays["ended"][slot] = np.nan
        arrays["ended"][slot, : len(ended)] = ended
        self.new_frames[slot] = new_frames
        with self.written.get_lock():
            self.written.value = written + 1

    # -- the learner's side --
    def take(self):
        """[(Row, new_frames, returns ended)] of the steps written since the last call
        (copies: the actor reuses the slots)."""
        read, written = self.read.value, _locked(self.written)
        if read == written:
            return []
        slots = np.arange(read, written) % self.slots
        # One copy of each field for all the steps (the rows are views of it).
        block = {name: array[slots] for name, array in self.arrays.items()}
        new_frames = self.new_frames[slots].tolist()
        ended = block.pop("ended")
        any_ended = (~np.isnan(ended)).any(axis=1).tolist()
        with self.read.get_lock():
            self.read.value = written
        names = ("frame", "action", "reward", "first", "last", "zero_discount")
        return [(Row(*(block[name][i] for name in names)), new_frames[i],
                 ended[i][~np.isnan(ended[i])] if any_ended[i] else _NONE)
                for i in range(len(slots))]  # fmt: skip


class _SharedWeights:
    """The learner's weights in shared memory, behind a sequence counter."""

    def __init__(self, ctx, network):
        self.tensors = {k: v.detach().clone().share_memory_()
                        for k, v in network.state_dict().items()}  # fmt: skip
        # The network's tensors are updated in place (optimizer steps, loading a
        # checkpoint): pairs made once, without a state_dict() walk per update.
        self._pairs = [(self.tensors[k], v) for k, v in network.state_dict().items()]
        self.sequence = ctx.Value("q", 0)
        self._staged = None  # the actor's copy-out (made in the actor's process)

    def write(self):
        with self.sequence.get_lock():
            self.sequence.value += 1  # odd: being written
        for shared, value in self._pairs:
            shared.copy_(value)
        with self.sequence.get_lock():
            self.sequence.value += 1

    def read_into(self, policy, seen):
        """Copies newer weights than sequence `seen` into `policy`; returns the
        sequence they are from (`seen` when none or a write got in the way). They are
        copied out first and loaded only once the counter shows no write overlapped
        the copy: the policy never acts on half an update."""
        sequence = _locked(self.sequence)
        if sequence == seen or sequence % 2:
            return seen
        if self._staged is None:  # [(shared, staged, the policy's own tensor)], once
            own = policy.network.state_dict()
            self._staged = [(v, v.clone(), own[k]) for k, v in self.tensors.items()]
        for shared, staged, _ in self._staged:
            staged.copy_(shared)
        if _locked(self.sequence) != sequence:
            return seen
        for _, staged, own in self._staged:  # in place, as load_state_dict would, cheaper
            own.copy_(staged)
        return sequence


class _ProcessPolicy(Policy):
    """The actor's policy: its own network copy, refreshed from `_SharedWeights` at
    each call."""

    def __init__(self, network, tau_samples, deep_exploration, weights):
        super().__init__(network, tau_samples, deep_exploration)
        self.weights, self.seen = weights, -1

    def __call__(self, *args, **kwargs):
        self.seen = self.weights.read_into(self, self.seen)
        return super().__call__(*args, **kwargs)


class _Completed:
    """The progress bar's view of the actor's episodes: their returns, in order."""

    def __init__(self):
        self.completed = []


def _act(driver, num_frames, conn):
    """The actor process: one phase, rows into the driver's ring, then its result on
    `conn`."""
    actor, ring, streams = driver.actor, driver.ring, driver.parts.streams
    # Gone with the learner however it dies, even SIGKILLed holding one of the ring's
    # locks, which the actor would otherwise wait for forever.
    die_with_parent(ring.parent)
    frame_t = [driver.updates.frame_t]
    try:

        def on_step(row, new_frames):
            seen = on_step.episodes
            on_step.episodes = len(actor.episodes.completed)
            ring.put(row, new_frames, actor.episodes.completed[seen:])
            frame_t[0] += new_frames

        on_step.episodes = 0
        stats = run_phase(actor, num_frames, None, lambda: frame_t[0], on_step)
        stream = streams.actor.state_dict()
        message = {"stats": {k: v if isinstance(v, int) else float(v) for k, v in stats.items()},
                   "stream": {"numpy": stream["numpy"],
                              "torch": base64.b64encode(stream["torch"].numpy().tobytes()).decode()}}  # fmt: skip
    except BaseException as error:  # noqa: BLE001 (reported to the learner, which raises it)
        message = {"error": type(error).__name__, "message": str(error),
                   "traceback": traceback.format_exc()}  # fmt: skip
    try:  # JSON, not pickle: the learner builds nothing but numbers and text from it
        conn.send_bytes(json.dumps(message).encode())
    finally:
        conn.close()
        os._exit(0)


class ProcessDriver(AsyncDriver):
    """--acting async --actor-process: the actor forked at each training phase start.

      rows     `_Ring`: a single-producer, single-consumer queue of rows in shared
               memory (NumPy views of RawArrays, as workers.py). The actor writes a
               slot, then advances `written` under its lock; the learner reads the
               slots below it, then advances `read` (the locks order the memory on any
               CPU). The learner stores every row in the order acted, as the thread does.
      ratio    The learner holds the RatioGate (ratio.py) and publishes whether the
               actor may go; the actor checks it as it writes each step's row (the
               thread, as it stores it). The steps in the ring (at most `SLOTS` of
               --num-envs rows; fewer for large frames) are the extra slack over the
               thread's one step.
      weights  `_SharedWeights`: the learner's state_dict in shared memory, a sequence
               counter around each copy (odd while writing); the actor copies them out
               at its next action and loads them when the counter was even and
               unchanged across its copy (else it keeps its weights and tries at the
               next action).
      end      The actor sends its phase statistics and its random stream's state
               through a pipe (JSON: nothing is unpickled), after its last row, and
               exits (os._exit: nothing of the learner's state, such as the run's lock
               or its files, is closed twice). Its episode returns come with the rows,
               for the progress bar.

    Checkpoints are taken between phases, when no actor process exists. Needs the CPU
    (a forked child cannot use CUDA) and one PyTorch thread (OpenMP's pool does not
    survive a fork; the driver sets it). A fork shares the learner's memory until either
    side writes a page: the pages the learner writes during the phase (replay rows,
    priorities) are copied then, up to the replay's size on Atari."""

    def __init__(self, parts, policy, evaluation):
        learner, config = parts.learner, parts.config
        if learner.device.type != "cpu":
            raise UserError(
                f"--actor-process: the learner is on {learner.device.type}; "
                "expected the CPU (a forked actor cannot use CUDA): pass --device cpu, "
                "or drop --actor-process"
            )
        torch.set_num_threads(1)  # as --threads 1 (options refuse more): for the fork
        info = parts.info
        self.ring = _Ring(_FORK, config.num_envs, info.frame_shape, info.frame_dtype)
        self.weights = _SharedWeights(_FORK, learner.online)
        network = copy.deepcopy(learner.online).requires_grad_(False)
        actor_policy = _ProcessPolicy(network, config.tau_samples_policy,
                                      policy.deep_exploration, self.weights)  # fmt: skip
        SerialDriver.__init__(self, parts, actor_policy, evaluation)
        self.gate = None
        self._actor_stream = None  # the CPU: rows are stored as they come
        note_unpinned(config)

    def publish(self):
        self.weights.write()

    def train_phase(self, num_frames, progress):
        config, ring = self.config, self.ring
        self.publish()  # each phase starts from the learner's weights
        self.gate = gate = RatioGate(self.updates.schedule.updates_per_frame,
                                     config.replay_ratio_tolerance)  # fmt: skip
        ring.reset()
        learner_cores, other_cores = (config.pin_threads and pinned_cores()) or (None, None)
        lock = threading.Lock()  # the prefetcher's thread samples while rows are stored
        episodes, result, prefetcher = _Completed(), None, None
        started, waited = time.perf_counter(), 0.0
        process, receive = _fork(self, num_frames, other_cores)
        try:
            if config.prefetch_targets:
                prefetcher = Prefetcher(self.parts, lock, other_cores)
            with pinned(learner_cores):
                while True:
                    stored = self._store(lock, progress, episodes)
                    if result is None and receive.poll():
                        result = _receive(receive)
                        if result is None or "error" in result:
                            break
                        self._store(lock, progress, episodes)  # rows sent before it
                        gate.finish()
                    if gate.learner_may_go():
                        self._update(lock, prefetcher)
                    elif result is not None or not (process.is_alive() or receive.poll()):
                        break  # done, or the actor died without a word (raised below)
                    elif not stored:
                        napped = time.perf_counter()
                        time.sleep(_NAP)
                        waited += time.perf_counter() - napped
                    ring.may_go.value = int(gate.actor_may_go())
        finally:
            ring.stop.value = 1
            if prefetcher:
                prefetcher.stop()
            _end(process, receive)
        stats, stream = _outcome(result, process.exitcode)
        self.parts.streams.actor.load_state_dict(stream)
        if prefetcher and prefetcher.error is not None:
            raise prefetcher.error
        seconds = time.perf_counter() - started
        stats = over_the_whole_phase(stats, seconds)
        stats["learner_wait_fraction"] = waited / seconds
        return stats

    def _store(self, lock, progress, episodes):
        """Stores the rows the actor has written; returns how many steps."""
        learnable, steps = 0, self.ring.take()
        for row, new_frames, ended in steps:
            learnable += self.store(row, new_frames, lock)
            if len(ended):
                episodes.completed.extend(ended.tolist())
            if progress is not None:
                progress(new_frames, episodes)
        if learnable:  # once for the steps taken (the gate's arithmetic is exact, slow)
            self.gate.add_collected(learnable)
        return len(steps)


def _fork(driver, num_frames, cores):
    """Starts the phase's actor process on `cores` (None: anywhere); returns it and
    the learner's end of its pipe. No other thread of this process runs then (the
    previous phase's prefetcher has been joined), so no lock is copied held."""
    receive, send = _FORK.Pipe(duplex=False)
    # The learner's objects go to the permanent generation: its collector, running in
    # the actor, would otherwise touch (and so copy) every page that holds one.
    gc.freeze()
    try:
        with pinned(cores):  # a forked child keeps the forking thread's cores
            process = _FORK.Process(target=_act, args=(driver, num_frames, send),
                                  name="qzoo-actor", daemon=True)  # fmt: skip
            process.start()
    finally:
        gc.unfreeze()
        send.close()
    return process, receive


def _receive(receive):
    """The actor's result (a dict: its stats and stream state, or its error), or None
    when it died without a whole message."""
    try:
        return json.loads(receive.recv_bytes())
    except (EOFError, ValueError):
        return None  # died without a word: _outcome says with which exit code


def _end(process, receive):
    """Stops the actor process if it still runs (the learner failed)."""
    process.join(1 if process.exitcode is None else None)
    if process.is_alive():
        process.kill()
        process.join()
    receive.close()


def _outcome(result, exitcode):
    """The actor's (stats, stream state), or its error raised here."""
    if result is None:
        how = f"exit code {exitcode}"
        if exitcode is not None and exitcode < 0:
            how = f"signal {signal.Signals(-exitcode).name}: killed, e.g. for memory"
        raise WorkerDied(f"the actor process (--actor-process) ended with {how}, sending nothing")
    if "error" in result:
        if result["error"] == "UserError":
            raise UserError(result["message"])
        if result["error"] == "KeyboardInterrupt":
            raise KeyboardInterrupt
        raise RuntimeError(f"the actor process failed:\n{result['traceback']}")
    stream = result["stream"]
    torch_state = torch.frombuffer(bytearray(base64.b64decode(stream["torch"])), dtype=torch.uint8)
    return result["stats"], {"numpy": stream["numpy"], "torch": torch_state}
