"""The asynchronous actor in a process of its own (--acting async --actor-process;
rlpyt's AsyncRl layout, B8.3, whose sampler runs in other processes than its
optimizer).

With --acting async the actor is a thread of the learner's process, and both threads
run Python under one interpreter lock. A large network's operations release it for
long stretches, so a convolutional actor and learner overlap; a small network's do
not, and its actor and learner take turns at the lock. Here the actor is a process
started at each training phase start (forked beside a CPU learner, from the
forkserver beside a GPU one), with the run's state as it is then (its policy copy,
its random stream, the epsilon schedule), and acts as the thread would, while the
learner's process stores its rows, updates and publishes weights. It keeps the
thread's guarantees with the ring's slack added, and like it is not reproducible."""

import base64
import copy
import dataclasses
import gc
import json
import multiprocessing
import os
import signal
import threading
import time
import traceback

import torch

from qzoo.acting.actor import Actor
from qzoo.acting.asynchronous import AsyncDriver, note_unpinned, over_the_whole_phase
from qzoo.acting.batches import BatchActor
from qzoo.acting.driver import Progress
from qzoo.acting.from_config import acting_of, env_maker, serial_parts
from qzoo.acting.pinning import pinned, pinned_cores
from qzoo.acting.prefetch import Prefetcher
from qzoo.acting.process_channels import NAP, ProcessPolicy, Ring, SharedWeights
from qzoo.acting.ratio import RatioGate
from qzoo.acting.serial import SerialDriver, run_phase
from qzoo.errors import UserError, WorkerDied
from qzoo.networks.network import make_network
from qzoo.replay.frames import observation_shape
from qzoo.signals import die_with, die_with_parent, term_as_interrupt
from qzoo.streams import Stream

_FORK = multiprocessing.get_context("fork")


class _Completed:
    """The progress bar's view of the actor's episodes: their returns, in order."""

    def __init__(self):
        self.completed = []


def _act(build, ring, frame_t, num_frames, conn):
    """The actor process: one phase of the actor `build()` makes (with its random
    stream) from training frame `frame_t`, rows into `ring`, then its result (or any
    error, its making's included) on `conn`."""
    frame_t = [frame_t]
    try:
        actor, stream = build()

        def on_step(row, new_frames):
            seen = on_step.episodes
            on_step.episodes = len(actor.episodes.completed)
            ended = actor.episodes.completed[seen:]
            # A BatchActor's step completes a list of rows, maybe none: the step's
            # frames and episodes go with its first (or with no row).
            for i, one in enumerate((row or [None]) if isinstance(row, list) else [row]):
                ring.put(one, new_frames if i == 0 else 0, ended if i == 0 else ())
            frame_t[0] += new_frames

        on_step.episodes = 0
        stats = run_phase(actor, num_frames, None, lambda: frame_t[0], on_step)
        state = stream.state_dict()
        message = {"stats": {k: v if isinstance(v, int) else float(v) for k, v in stats.items()},
                   "stream": {"numpy": state["numpy"],
                              "torch": base64.b64encode(state["torch"].numpy().tobytes()).decode()}}  # fmt: skip
    except BaseException as error:  # noqa: BLE001 (reported to the learner, which raises it)
        message = {"error": type(error).__name__, "message": str(error),
                   "traceback": traceback.format_exc()}  # fmt: skip
    try:  # JSON, not pickle: the learner builds nothing but numbers and text from it
        conn.send_bytes(json.dumps(message).encode())
    finally:
        conn.close()
        os._exit(0)


def _act_forked(driver, num_frames, conn):
    """A forked actor: the learner's own actor object, as it was at the fork."""
    # Gone with the learner however it dies, even SIGKILLed holding one of the ring's
    # locks, which the actor would otherwise wait for forever.
    die_with_parent(driver.ring.parent)
    _act(lambda: (driver.actor, driver.parts.streams.actor), driver.ring,
         driver.updates.frame_t, num_frames, conn)  # fmt: skip


@dataclasses.dataclass
class _Spec:
    """What an actor started from a clean process is built from (pickled to it)."""

    config: object
    info: object
    observation_shape: tuple  # the network is built from the config, its weights shared
    device: str
    policy_settings: dict  # Policy.settings of the factory's policy
    train_epsilon: object
    stream: dict
    frame_t: int
    weights: SharedWeights
    ring: Ring


def _act_started(spec, num_frames, cores, conn):
    """An actor started from the forkserver (a GPU learner's): built from `spec`, on
    its own CUDA context. Its parent is the forkserver, which ends after the learner
    does only once every child of it has ended: the actor watches the learner itself,
    and takes SIGTERM as Ctrl-C, as a forked actor does (the learner's handler)."""
    die_with(spec.ring.parent)  # the learner's pid, set when it reset the ring
    spec.ring.parent = os.getppid()
    die_with_parent(spec.ring.parent)
    if cores:  # --pin-threads: the cores the learner's thread does not run on
        os.sched_setaffinity(0, cores)
    torch.set_num_threads(1)

    def build():
        # Built as the learner builds its own (no tensors sent), then loaded with
        # the weights published at the phase start, whole, before the first action.
        network = make_network(spec.config, spec.info, spec.observation_shape)
        network = network.to(spec.device).requires_grad_(False)
        policy = ProcessPolicy(network, spec.policy_settings, spec.weights)
        while (seen := spec.weights.read_into(policy, -1)) == -1:
            time.sleep(NAP)  # a copy in progress: not a busy spin beside the learner
        policy.seen = seen
        stream = Stream.restored(spec.stream, spec.device)
        make, config = _actor_class(spec.config), spec.config
        make_env = env_maker(config, spec.info, batches=bool(config.env_batch_size))
        return make(acting_of(config), spec.info, policy, stream, spec.train_epsilon,
                    make_env), stream  # fmt: skip

    with term_as_interrupt():
        _act(build, spec.ring, spec.frame_t, num_frames, conn)


class ProcessDriver(AsyncDriver):
    """--acting async --actor-process: the actor in a process of its own, started at
    each training phase start (process_channels.py holds what the two share).

      start    A CPU learner forks it: the child acts with the learner's actor as it
               was at the fork (its network copy, random stream, epsilon schedule). A
               GPU learner's process cannot fork a child that uses CUDA, so its actor
               is started from the forkserver (a clean process that imported qzoo
               once) and built from a `_Spec`: its network on the same GPU in a CUDA
               context of its own, its random stream's state, the schedule and the
               shared memory below.
      rows     `Ring`: a single-producer, single-consumer queue of rows in shared
               memory. The actor writes a slot, then advances `written` under its
               lock; the learner reads the slots below it, then advances `read` (the
               locks order the memory on any CPU). The learner stores every row in the
               order acted, as the thread does (into a device replay on its stream).
      ratio    The learner holds the RatioGate (ratio.py) and publishes whether the
               actor may go; the actor checks it as it writes each step's row (the
               thread, as it stores it). The steps in the ring (at most `SLOTS` of
               --num-envs rows; fewer for large frames) are the extra slack over the
               thread's one step.
      weights  `SharedWeights`: the learner's state_dict in shared memory, a sequence
               counter around each copy (odd while writing); the actor copies them out
               at its next action and loads them when the counter was even and
               unchanged across its copy (else it keeps its weights and tries at the
               next action). A GPU learner snapshots them on the device and copies a
               finished snapshot to the host, never waiting for its queued updates.
      end      The actor sends its phase statistics and its random stream's state
               through a pipe (JSON: nothing is unpickled), after its last row, and
               exits (os._exit: nothing of the learner's state, such as the run's lock
               or its files, is closed twice). Its episode returns come with the rows,
               for the progress bar.

    Checkpoints are taken between phases, when no actor process exists. One PyTorch
    thread (OpenMP's pool does not survive a fork; the driver sets it). A fork shares
    the learner's memory until either side writes a page: the pages the learner writes
    during the phase (replay rows, priorities) are copied then, up to the replay's
    size on Atari."""

    def __init__(self, parts, policy, evaluation):
        learner, config = parts.learner, parts.config
        torch.set_num_threads(1)  # as --threads 1 (options refuse more): for the fork
        info = parts.info
        self._ctx = start_context(learner.device)
        self.ring = Ring(self._ctx, config.num_envs, info.frame_shape, info.frame_dtype)
        self.weights = SharedWeights(self._ctx, learner.online)
        network = copy.deepcopy(learner.online).requires_grad_(False)
        # The factory's policy, acting on the actor's copy of the network.
        actor_policy = ProcessPolicy(network, policy.settings(), self.weights)
        SerialDriver.__init__(self, **serial_parts(parts, actor_policy, evaluation,
                                                   _actor_class(config),
                                                   batches=bool(config.env_batch_size)))  # fmt: skip
        self.parts, self.config = parts, config
        self.gate = None
        self._actor_stream = None  # rows are stored on the learner's stream as they come
        note_unpinned(config)

    def publish(self, wait=False):
        self.weights.write(wait)

    def train_phase(self, num_frames: int, progress: Progress = None) -> dict:
        config, ring = self.config, self.ring
        self.publish(wait=True)  # each phase starts from the learner's weights
        self.gate = gate = RatioGate(self.updates.schedule.updates_per_frame,
                                     config.replay_ratio_tolerance)  # fmt: skip
        ring.reset()
        learner_cores, other_cores = (config.pin_threads and pinned_cores()) or (None, None)
        lock = threading.Lock()  # the prefetcher's thread samples while rows are stored
        episodes, result, prefetcher = _Completed(), None, None
        started, waited = time.perf_counter(), 0.0
        if self._ctx is _FORK:
            process, receive = _fork(self, num_frames, other_cores)
        else:
            process, receive = _start(self, num_frames, other_cores)
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
                        time.sleep(NAP)
                        waited += time.perf_counter() - napped
                    ring.may_go.value = int(gate.actor_may_go())
                    self.weights.advance()
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
            if row is None:  # acting on ready environments: a step that completed no row
                learnable += self._count(new_frames, lock)
            else:
                learnable += self.store(row, new_frames, lock)
            if len(ended):
                episodes.completed.extend(ended.tolist())
            if progress is not None:
                progress(new_frames, episodes)
        if learnable:  # once for the steps taken (the gate's arithmetic is exact, slow)
            self.gate.add_collected(learnable)
        return len(steps)

    def _count(self, new_frames, lock):
        """`store`'s counting of a step's frames, for a step without a row: as
        BatchDriver counts agent steps as they happen, not as rows are released."""
        updates = self.updates
        with lock:
            updates.collected(new_frames)
            learning = updates.can_learn()
        updates.advance(new_frames)
        return new_frames if learning else 0


def _actor_class(config):
    """Acting on all environments, or on those ready (--env-batch-size, batches.py)."""
    return BatchActor if config.env_batch_size else Actor


def start_context(device):
    """How an actor process is started beside a learner on `device`: forked beside a
    CPU learner; from the forkserver beside a GPU learner (a forked child cannot use
    CUDA), which imports this module once, so that each phase's actor starts without
    importing PyTorch again."""
    if device.type != "cuda":
        return _FORK
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__])
    return ctx


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
            process = _FORK.Process(target=_act_forked, args=(driver, num_frames, send),
                                    name="qzoo-actor", daemon=True)  # fmt: skip
            process.start()
    finally:
        gc.unfreeze()
        send.close()
    return process, receive


def _start(driver, num_frames, cores):
    """Starts the phase's actor process from the forkserver, built from a `_Spec`."""
    parts, policy = driver.parts, driver.actor.policy
    shape = observation_shape(parts.info.frame_shape, parts.config.frame_stack)
    spec = _Spec(parts.config, parts.info, shape,
                 str(parts.learner.device), policy.settings(), parts.train_epsilon,
                 parts.streams.actor.state_dict(), driver.updates.frame_t, driver.weights,
                 driver.ring)  # fmt: skip
    ctx = driver._ctx
    receive, send = ctx.Pipe(duplex=False)
    try:
        process = ctx.Process(target=_act_started, args=(spec, num_frames, cores, send),
                              name="qzoo-actor", daemon=True)  # fmt: skip
        process.start()
    except BaseException:
        receive.close()
        raise
    finally:
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
