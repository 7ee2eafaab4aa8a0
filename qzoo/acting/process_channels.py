"""What the learner's process and its actor process share (acting/process.py): the ring
of rows from the actor, and the learner's weights behind a sequence counter.

Both live in multiprocessing's shared memory (RawArrays) and are picklable, so that an
actor started from a clean process (a GPU learner's: a fork cannot use CUDA) gets the
same memory as a forked one: the NumPy and torch views are rebuilt on its side."""

import os
import time

import numpy as np
import torch

from qzoo.acting.policy import Policy
from qzoo.replay.batch import Row

SLOTS = 64  # agent steps the ring holds (fewer for large frames: `slots_for`)
_FIELDS = (("action", np.int64), ("reward", np.float32), ("first", bool), ("last", bool),
           ("zero_discount", bool), ("ended", np.float64))  # fmt: skip
_NAMES = ("frame", "action", "reward", "first", "last", "zero_discount")
NAP = 50e-6  # seconds a side sleeps when it has nothing to do
_NONE = np.zeros(0)  # no episode ended
_ALIGN = 64  # bytes: each weight tensor starts on a cache line


def _locked(value):
    """A multiprocessing Value read under its lock (which orders memory)."""
    with value.get_lock():
        return value.value


def slots_for(num_envs, frame_bytes):
    """SLOTS, or fewer so that the ring's frames stay within 64 MiB."""
    return max(2, min(SLOTS, (64 << 20) // max(1, num_envs * frame_bytes)))


class Ring:
    """Rows from the actor's process to the learner's: a single-producer,
    single-consumer queue of agent steps (acting/process.py, ProcessDriver)."""

    def __init__(self, ctx, num_envs, frame_shape, frame_dtype):
        frame_bytes = int(np.prod(frame_shape)) * np.dtype(frame_dtype).itemsize
        self.slots = slots_for(num_envs, frame_bytes)
        shape = (self.slots, num_envs)
        layout = {"frame": (shape + tuple(frame_shape), np.dtype(frame_dtype)),
                  **{name: (shape, np.dtype(dtype)) for name, dtype in _FIELDS},
                  "new_frames": ((self.slots,), np.dtype(np.int64)),
                  "has_row": ((self.slots,), np.dtype(bool))}  # fmt: skip
        self._raw = {name: (ctx.RawArray("b", max(1, int(np.prod(s)) * d.itemsize)), s, d)
                     for name, (s, d) in layout.items()}  # fmt: skip
        self._views()
        self.written, self.read = ctx.Value("q", 0), ctx.Value("q", 0)
        self.may_go, self.stop = ctx.RawValue("b", 1), ctx.RawValue("b", 0)
        self.parent = os.getpid()

    def _views(self):
        self.arrays = {name: np.frombuffer(raw, d, int(np.prod(s))).reshape(s)
                       for name, (raw, s, d) in self._raw.items()}  # fmt: skip
        self.new_frames = self.arrays.pop("new_frames")
        self.has_row = self.arrays.pop("has_row")

    def __getstate__(self):  # the shared memory itself, not copies of its views
        views = ("arrays", "new_frames", "has_row")
        return {k: v for k, v in self.__dict__.items() if k not in views}

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._views()

    def reset(self):
        self.written.value, self.read.value = 0, 0
        self.parent = os.getpid()  # the learner's, which starts the actor next
        self.may_go.value, self.stop.value = 1, 0

    # -- the actor's side --
    def put(self, row, new_frames, ended):
        """Writes one step's row, once the ring has room and the learner lets the actor
        go; `ended` the returns of episodes completed at this step. `row` None: a step
        that completed no row (acting on ready environments: rows wait for the slowest,
        acting/batches.py), its frames alone."""
        written = self.written.value
        while (self.stop.value or written - _locked(self.read) >= self.slots
               or not self.may_go.value):  # fmt: skip
            if self.stop.value or os.getppid() != self.parent:  # the learner failed or is gone
                raise SystemExit(1)
            time.sleep(NAP)
        slot, arrays = written % self.slots, self.arrays
        self.has_row[slot] = row is not None
        if row is not None:
            for name in _NAMES:
                arrays[name][slot] = getattr(row, name)
        arrays["ended"][slot] = np.nan
        arrays["ended"][slot, : len(ended)] = ended
        self.new_frames[slot] = new_frames
        with self.written.get_lock():
            self.written.value = written + 1

    # -- the learner's side --
    def take(self):
        """[(Row or None, new_frames, returns ended)] of the steps written since the
        last call (copies: the actor reuses the slots)."""
        read, written = self.read.value, _locked(self.written)
        if read == written:
            return []
        slots = np.arange(read, written) % self.slots
        # One copy of each field for all the steps (the rows are views of it).
        block = {name: array[slots] for name, array in self.arrays.items()}
        new_frames = self.new_frames[slots].tolist()
        has_row = self.has_row[slots].tolist()
        ended = block.pop("ended")
        any_ended = (~np.isnan(ended)).any(axis=1).tolist()
        with self.read.get_lock():
            self.read.value = written
        return [(Row(*(block[name][i] for name in _NAMES)) if has_row[i] else None,
                 new_frames[i], ended[i][~np.isnan(ended[i])] if any_ended[i] else _NONE)
                for i in range(len(slots))]  # fmt: skip


class SharedWeights:
    """The learner's weights in shared memory (one block, a tensor view per entry),
    behind a sequence counter that is odd while they are written.

    A CPU learner copies them in at each `write`. A GPU learner does not wait for its
    queued updates: a `write` snapshots the weights on the device (queued behind the
    updates) and a later one, once the snapshot is done, copies it to the host; a new
    snapshot is taken once the actor has loaded the last one (`taken`), so the host
    copies keep the actor's pace, not the learner's."""

    def __init__(self, ctx, network):
        state = network.state_dict()
        offsets, end = [], 0
        for value in state.values():
            offsets.append(end)
            end += -(-value.numel() * value.element_size() // _ALIGN) * _ALIGN
        self._layout = [(k, tuple(v.shape), v.dtype, o)
                        for (k, v), o in zip(state.items(), offsets, strict=True)]  # fmt: skip
        self._raw = ctx.RawArray("b", max(1, end))
        self._views()
        # The network's tensors are updated in place (optimizer steps, loading a
        # checkpoint): pairs made once, without a state_dict() walk per update.
        self._pairs = [(self.tensors[k], v) for k, v in state.items()]
        for shared, value in self._pairs:
            shared.copy_(value)
        self.sequence = ctx.Value("q", 0)
        self.taken = ctx.RawValue("q", 0)  # the sequence the actor last loaded
        self._staged = None  # the actor's copy-out (made in the actor's process)
        self._gpu = None
        if next(iter(state.values())).device.type == "cuda":
            self._gpu = _GpuStaging([v for _, v in self._pairs])

    def _views(self):
        self.tensors = {}
        for name, shape, dtype, offset in self._layout:
            count = int(np.prod(shape))
            flat = (torch.frombuffer(self._raw, dtype=dtype, count=count, offset=offset)
                    if count else torch.empty(0, dtype=dtype))  # fmt: skip
            self.tensors[name] = flat.view(shape)

    def __getstate__(self):  # the actor's side: the block, the counters and the layout
        return {k: self.__dict__[k] for k in ("_layout", "_raw", "sequence", "taken")}

    def __setstate__(self, state):
        self.__dict__.update(state, _pairs=None, _staged=None, _gpu=None)
        self._views()

    def write(self, wait=False):
        """Publishes the learner's weights (`wait`: whole in shared memory on return)."""
        gpu = self._gpu
        if gpu is None:  # every publish on a CPU: no list made per call
            self._copy_in()
            return
        values = [value for _, value in self._pairs]
        if wait and gpu.snapshot is not None:
            self._copy_in(gpu.finished(), gpu.stream)
        self.advance()
        if gpu.snapshot is None and (wait or self.taken.value == _locked(self.sequence)):
            gpu.take(values)
            if wait:
                self._copy_in(gpu.finished(), gpu.stream)

    def advance(self):
        """A GPU learner's finished snapshot, copied to the host: called between
        publishes too, so that the actor need not wait for the next one (cheap when
        there is nothing to copy; nothing on a CPU)."""
        gpu = self._gpu
        if gpu is not None and gpu.snapshot is not None and gpu.snapshot.query():
            self._copy_in(gpu.finished(), gpu.stream)

    def _copy_in(self, values=None, stream=None):
        """Copies `values` (None: the network's own tensors) into shared memory."""
        with self.sequence.get_lock():
            self.sequence.value += 1  # odd: being written
        if values is None:
            for shared, value in self._pairs:
                shared.copy_(value)
        else:
            with torch.cuda.stream(stream):
                for (shared, _), value in zip(self._pairs, values, strict=True):
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
        self.taken.value = sequence
        return sequence


class _GpuStaging:
    """A GPU learner's snapshot of its weights on the device (`snapshot`: the CUDA event
    after its copy, None when there is none under way), and the stream that copies it
    to the host: that copy waits for the snapshot alone, not for the updates queued on
    the learner's stream after it. The host memory is pageable, so the copy is
    synchronous (a network's bytes once per weights the actor takes)."""

    def __init__(self, values):
        self.device = values[0].device
        self.stream = torch.cuda.Stream(self.device)
        self.values = [v.detach().clone() for v in values]
        self.snapshot = None

    def take(self, values):
        """Snapshots `values` on the current (the learner's) stream."""
        for mine, value in zip(self.values, values, strict=True):
            mine.copy_(value)
        self.snapshot = torch.cuda.Event()
        self.snapshot.record(torch.cuda.current_stream(self.device))

    def finished(self):
        """The snapshot's tensors, once its copy is done."""
        self.snapshot.synchronize()
        self.snapshot = None
        return self.values


class ProcessPolicy(Policy):
    """The actor's policy: its own network copy, refreshed from `SharedWeights` at
    each call."""

    def __init__(self, network, settings, weights):
        """`settings`: how it acts (Policy.settings of the policy it stands in for)."""
        super().__init__(network, **settings)
        self.weights, self.seen = weights, -1

    def __call__(self, *args, **kwargs):
        self.seen = self.weights.read_into(self, self.seen)
        return super().__call__(*args, **kwargs)
