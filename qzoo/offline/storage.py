"""DQN Replay Dataset checkpoints as a replay storage, sampled by Dopamine's rules.

Each loaded checkpoint suffix is one column b of qzoo's (row, column) slots, so the
uniform sampler of replay/samplers.py draws over all of them at once, each valid
transition equally likely (batch_rl instead picks one of its loaded files per batch
uniformly, over-sampling a small final file; docs: Offline RL). Within a column, the
rules are Dopamine's `OutOfGraphReplayBuffer` (batch_rl_dopamine.md §1.4; `DatasetStorage`).

Memory: frames are memory-mapped, and a long run over many checkpoints would otherwise
show the whole dataset "resident" (maps.py). The storage releases its maps whenever
the frames read since the last release could fill `resident_frame_bytes`, so the
resident set stays bounded whatever the dataset's size, where batch_rl holds its
loaded checkpoints in RAM."""

import mmap
from typing import Any

import numpy as np

from qzoo.offline.maps import mapping, release
from qzoo.replay.batch import Batch
from qzoo.replay.frames import observation_shape
from qzoo.replay.samplers import UniformSampler


class DatasetStorage:
    """Read-only storage over checkpoints given as dicts of arrays (observation,
    action, reward, terminal, add_count, invalid_range), e.g. from
    dopamine.read_checkpoint or memory-mapped files.

    Dopamine's rules within a column, with C rows, stack K, horizon n, cursor = add_count
    mod C:

    - index i is drawn from [K - 1, cursor - n) when add_count < C, else from the ages
      K - 1 .. C - n - 1 after the cursor (rows cursor - C + K - 1 .. cursor - n - 1);
    - i is rejected if it is in invalid_range, or if any of rows i - K + 1 .. i - 1 is
      terminal (a terminal on row i itself is allowed);
    - the state is rows i - K + 1 .. i (mod C), oldest first, with no zeroing: episode
      starts are the three all-zero padding rows the writer put there;
    - the n-step trajectory stops after the first terminal among rows i .. i + n - 1
      (length l), reward sum_{j<l} gamma^j r_{i+j}, next state the stack at i + l, and
      discount gamma^n (1 - terminal).

    The state is [K, H, W] (qzoo's channel-first layout); Dopamine's is [H, W, K] with
    the same frames in the same order."""

    def __init__(self, checkpoints, stack=4, n_steps=1, discount=0.99,
                 resident_frame_bytes=2 << 30):  # fmt: skip
        if not checkpoints:
            raise ValueError("a dataset storage needs at least one checkpoint")
        self.columns = list(checkpoints)
        capacities = {len(c["action"]) for c in self.columns}
        if len(capacities) != 1:
            raise ValueError(f"checkpoints of different capacities {sorted(capacities)}")
        self.num_rows = capacities.pop()
        self.num_envs = len(self.columns)
        self.stack, self.n_steps, self.discount = stack, n_steps, discount
        self.frame_shape = tuple(self.columns[0]["observation"].shape[1:])
        self.add_counts = np.array([int(c["add_count"]) for c in self.columns], np.int64)
        self.cursors = self.add_counts % self.num_rows
        self.full = self.add_counts >= self.num_rows
        # invalid_range of every column, padded with -1 (no row) to one width.
        width = max(len(c["invalid_range"]) for c in self.columns)
        self._invalid = np.full((self.num_envs, width), -1, np.int64)
        for b, c in enumerate(self.columns):
            self._invalid[b, : len(c["invalid_range"])] = c["invalid_range"]
        self.num_adds = 0  # nothing is ever added
        self._valid_count = None
        # Per-column tables, small next to the frames: terminal flags and rewards.
        self._terminal = np.stack([np.asarray(c["terminal"]) != 0 for c in self.columns], 1)
        self._reward = np.stack([np.asarray(c["reward"], np.float32) for c in self.columns], 1)
        self._action = np.stack([np.asarray(c["action"]) for c in self.columns], 1)
        # Frame maps to release (see the module docstring), and the budget in frames:
        # a frame read touches at most ceil(bytes / page) + 1 pages.
        self._maps = [m for m in (mapping(c["observation"]) for c in self.columns) if m]
        frame_bytes = int(np.prod(self.frame_shape))
        pages = -(-frame_bytes // mmap.PAGESIZE) + 1
        self._frames_per_release = max(1, resident_frame_bytes // (pages * mmap.PAGESIZE))
        self._frames_read = 0
        # Where each checkpoint's row 0 starts in its map, for the readahead.
        self._frame_bytes, self._frame_bases = frame_bytes, []
        for c in self.columns:
            m = mapping(c["observation"])
            first = (
                None
                if m is None
                else (c["observation"].ctypes.data - np.frombuffer(m, np.uint8).ctypes.data)
            )
            self._frame_bases.append((m, first))
        self.readahead = True

    @property
    def size(self) -> int:
        """Rows that hold data, over all columns (what a sampler normalizes by)."""
        return int(np.minimum(self.add_counts, self.num_rows).sum())

    # -- what the samplers use -------------------------------------------------------
    def oldest(self) -> int:
        return 0

    def window(self) -> tuple[int, int]:
        """Every row may be drawn; `valid` applies each column's own range."""
        return 0, self.num_rows

    def can_sample(self) -> bool:
        # Asked before every update: the count (a pass over every row) is made once.
        return self.valid_count() > 0

    def in_window(self, t: Any) -> Any:
        return np.ones(np.shape(t), bool)

    def can_start(self, t: Any, b: Any) -> Any:
        return self.valid(t, b)

    def valid(self, t: Any, b: Any) -> Any:
        """Dopamine's `is_valid_transition` for rows `t` of checkpoints `b`."""
        t, b = np.asarray(t), np.asarray(b)
        C, K, n = self.num_rows, self.stack, self.n_steps
        cursor = self.cursors[b]
        age = (t - cursor) % C
        ok = np.where(self.full[b], (age >= K - 1) & (age < C - n), (t >= K - 1) & (t < cursor - n))
        ok &= ~(t[:, None] == self._invalid[b]).any(axis=1)
        for k in range(1, K):  # no terminal among the first K - 1 frames of the stack
            ok &= ~self._terminal[(t - k) % C, b]
        return ok

    def valid_count(self):
        """Valid transitions in the whole dataset (read-only, so counted once)."""
        if self._valid_count is None:
            rows = np.arange(self.num_rows)
            self._valid_count = sum(int(self.valid(rows, np.full(self.num_rows, b)).sum())
                                    for b in range(self.num_envs))  # fmt: skip
        return self._valid_count

    # -- assembling transitions ------------------------------------------------------
    def stacked(self, t, b):
        """States ending at rows `t` of checkpoints `b`: [len(t), K, H, W] (or
        [len(t), K * C, H, W] for channel-first frames)."""
        rows = (np.asarray(t)[:, None] - np.arange(self.stack - 1, -1, -1)) % self.num_rows
        if self.readahead:
            self._read_ahead(rows, b)
        out = np.empty((len(t), self.stack) + self.frame_shape, np.uint8)
        self._frames_read += rows.size
        if self._frames_read > self._frames_per_release:
            self.release()
        for j in np.unique(b):  # one fancy index per checkpoint (file) in the batch
            mine = np.flatnonzero(b == j)
            out[mine] = self.columns[j]["observation"][rows[mine]]
        # Channel-first frames [C, H, W] fold the stack into channels, as in the actor.
        return out.reshape((len(t),) + observation_shape(self.frame_shape, self.stack))

    def returns(self, t, b):
        """(reward, terminal, length) of the n-step trajectories from rows `t`."""
        reward = np.zeros(len(t), np.float32)
        terminal = np.zeros(len(t), bool)
        length = np.full(len(t), self.n_steps)
        for j in range(self.n_steps):
            row = (t + j) % self.num_rows
            alive = ~terminal
            reward += np.where(alive, np.float32(self.discount**j) * self._reward[row, b], 0)
            ends = alive & self._terminal[row, b]
            length = np.where(ends, j + 1, length)
            terminal |= ends
        return reward, terminal, length

    def gather(self, t: Any, b: Any) -> Batch:
        """The `Batch` of transitions starting at rows `t` of checkpoints `b`."""
        t, b = np.asarray(t), np.asarray(b)
        r_t, terminal, length = self.returns(t, b)
        discount_t = np.where(terminal, 0.0, self.discount**self.n_steps).astype(np.float32)
        return Batch(
            s_tm1=self.stacked(t, b), a_tm1=self._action[t, b].astype(np.int64), r_t=r_t,
            discount_t=discount_t, s_t=self.stacked((t + length) % self.num_rows, b),
            indices=(t, b),
        )  # fmt: skip

    def _read_ahead(self, rows, b):
        """Asks the kernel for every frame page the gather below will read, all at once
        (madvise WILLNEED: asynchronous readahead), so that frames not in the page cache
        are read from disk in parallel rather than one page fault at a time."""
        for j in np.unique(b):
            m, first = self._frame_bases[j]
            if m is None:
                continue
            starts = first + np.unique(rows[b == j]) * self._frame_bytes
            for start in (starts - starts % mmap.PAGESIZE).tolist():
                m.madvise(mmap.MADV_WILLNEED, start, self._frame_bytes + mmap.PAGESIZE)

    def release(self):
        """Drops the frame pages read so far from the resident set (they stay cached)."""
        release(self._maps)
        self._frames_read = 0

    def state_dict(self) -> dict:
        """A dataset is read-only: a checkpoint needs nothing of it."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class CheckpointPerBatchSampler(UniformSampler):
    """batch_rl's sampling: each batch comes whole from one loaded checkpoint, picked
    uniformly (not weighted by size, so a small final file is over-sampled), with
    Dopamine's uniform rule inside it (batch_rl_dopamine.md §1.6)."""

    def _begin_batch(self):
        self._column = int(self._rng.integers(self.storage.num_envs))

    def _columns(self, n):
        return np.full(n, self._column)
