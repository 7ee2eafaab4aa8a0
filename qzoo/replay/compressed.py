"""Compressed replay (`--replay-compression zstd|lz4`): every frame stored once,
compressed, and decompressed when a batch is sampled. Lossless: the same seed samples
exactly the batches of the uncompressed FrameStorage.

DQN Zoo compresses each transition's stacks s_tm1 and s_t with snappy (dqn_zoo.md §5).
qzoo already stores each frame once (frames.py); here the frames of `GROUP_ROWS`
consecutive rows of one environment are compressed together, since consecutive Atari
frames repeat most of their content and the codec's matches reach across them (XOR
against the previous frame gains nothing over that). A batch decodes each group it
reads once, before gathering (`decode_rows`), and only up to the last row it needs;
lz4 decodes straight into the pool of decoded groups. The group being written stays
decoded in `open` until its last row is written. Compressed groups live back to back
in `Arena` chunks, written and freed first in, first out, so that a checkpoint saves
the chunks as they are (views, no copy: run/checkpoint.py streams them) and nothing is
pickled."""

from typing import Any

import numpy as np

from qzoo.replay.arena import Arena
from qzoo.replay.batch import Batch
from qzoo.replay.codecs import Codec
from qzoo.replay.frames import FrameStorage, bytes_per_transition

GROUP_ROWS = 4  # rows of one environment compressed together
CHUNK_BYTES = 2**20  # arena chunk size (a chunk holds whole groups)

# The memory check before a run (run/checks.py) assumes a compressed frame takes this
# fraction of its raw size: well above the most measured on Atari (Space Invaders,
# lz4), a margin for busier games. Frames that do not compress (noise) take more.
ESTIMATED_RATIO = 0.25


def bytes_estimate(capacity, num_envs, frame_shape, frame_dtype, num_actions):
    """An estimate of a compressed replay's memory (see ESTIMATED_RATIO): frames at the
    estimated ratio, the uncompressed rest of each row, the group index and the buffers."""
    frame = int(np.prod(frame_shape)) * np.dtype(frame_dtype).itemsize
    rest = bytes_per_transition(frame_shape, frame_dtype, num_actions) - frame
    index = 20 / GROUP_ROWS  # chunk, offset, length and pool slot of each group
    rows = -(-capacity // num_envs) * num_envs
    buffers = (4 * 32 * 2 + num_envs) * GROUP_ROWS * frame + 2 * CHUNK_BYTES
    return int(rows * (frame * ESTIMATED_RATIO + rest + index)) + buffers


class CompressedFrames:
    """The [T, B, *frame] frame array of FrameStorage, kept compressed: written a row
    at a time in ring order (`frames[t] = frame`), read by fancy index
    (`frames[rows, columns]`), as frames.py does."""

    def __init__(self, shape, dtype, codec, group_rows=GROUP_ROWS, chunk_bytes=CHUNK_BYTES):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.num_rows, self.num_envs = self.shape[:2]
        self.frame_shape = self.shape[2:]
        self.frame_bytes = int(np.prod(self.frame_shape)) * self.dtype.itemsize
        self.group_rows = group_rows
        self.codec = Codec(codec)
        num_groups = -(-self.num_rows // group_rows)
        # Where each group of each column lives in the arena (chunk -1: never written).
        self.chunk = np.full((num_groups, self.num_envs), -1, np.int64)
        self.offset = np.zeros((num_groups, self.num_envs), np.int32)
        self.length = np.zeros((num_groups, self.num_envs), np.int32)
        self.arena = Arena(max(chunk_bytes, 2 * group_rows * self.frame_bytes + 1024))
        # The group being written, decoded: [B, G, *frame].
        self.open = np.zeros((self.num_envs, group_rows) + self.frame_shape, self.dtype)
        self.open_group = 0
        # Groups decoded by recent reads: their bytes, and the pool row of each group
        # (-1: none), so that finding them costs one lookup.
        self._pool = np.empty((0, group_rows * self.frame_bytes), np.uint8)  # grows
        self._slot = np.full(num_groups * self.num_envs, -1, np.int32)
        self._pool_keys = []  # the key of each pool row in use, to empty it cheaply
        # Rows decoded in each pool row (a prefix), and a last 0 for slot -1 (no row).
        self._pool_rows = np.zeros(1, np.int64)

    @property
    def nbytes(self):
        return (self.arena.nbytes + self.chunk.nbytes + self.offset.nbytes
                + self.length.nbytes + self.open.nbytes + self._pool.nbytes
                + self._slot.nbytes)  # fmt: skip

    def _rows_in(self, group):
        return min(self.group_rows, self.num_rows - group * self.group_rows)

    def __setitem__(self, t, frame):
        group, position = divmod(int(t), self.group_rows)
        keys = np.arange(group * self.num_envs, (group + 1) * self.num_envs)
        self._slot[keys] = -1  # decoded copies of this group are stale now
        if position == 0:  # a new group: start from what it held one lap ago
            self._decode_into(self.open.reshape(self.num_envs, -1).view(np.uint8), keys)
            self.open_group = group
        self.open[:, position] = frame
        if position == self._rows_in(group) - 1:
            self._close(group)

    def _close(self, group):
        """Compresses the open group, column by column, over the one of the last lap."""
        n = self._rows_in(group)
        for column in range(self.num_envs):
            if self.chunk[group, column] >= 0:
                self.arena.release(int(self.chunk[group, column]))
            data = self.codec.compress(np.ascontiguousarray(self.open[column, :n]))
            chunk, offset = self.arena.put(data)
            self.chunk[group, column], self.offset[group, column] = chunk, offset
            self.length[group, column] = len(data)
        self.open_group = -1  # the group is read from the arena now

    def __getitem__(self, index):
        rows, columns = index
        group, position = np.divmod(rows, self.group_rows)
        keys = group * self.num_envs + columns
        slots = self._slot[keys]
        missing = (slots < 0) | (position >= self._pool_rows[slots])
        if missing.any():
            self._decode_missing(keys, missing)
            slots = self._slot[keys]
        decoded = self._pool.view(self.dtype).reshape((-1, self.group_rows) + self.frame_shape)
        return decoded[slots, position]

    def decode_rows(self, rows, columns):
        """Decodes, once, every group holding one of `rows` of `columns` (same shapes),
        each only up to the latest row asked of it, into an emptied pool, so that the
        reads of a batch's stacks that follow decode nothing."""
        group, position = np.divmod(rows.ravel(), self.group_rows)
        # Sorted (group key, row) pairs: the last pair of each key has its latest row.
        pairs = np.sort((group * self.num_envs + columns.ravel()) * self.group_rows + position)
        keys, position = np.divmod(pairs, self.group_rows)
        last = np.ones(len(keys), bool)
        last[:-1] = keys[1:] != keys[:-1]
        self._forget()
        self._decode_to_pool(keys[last], position[last] + 1)

    def _forget(self):
        """Empties the pool of decoded groups."""
        self._slot[np.asarray(self._pool_keys, np.int64)] = -1
        self._pool_keys = []

    def _decode_missing(self, keys, missing):
        """Decodes the groups `keys[missing]` whole into free rows of the pool (or all
        of `keys` into an emptied pool when it is full)."""
        todo = np.unique(keys[missing])
        if len(self._pool_keys) + len(todo) > len(self._pool):
            self._forget()
            todo = np.unique(keys)
        self._decode_to_pool(todo, np.full(len(todo), self.group_rows))

    def _decode_to_pool(self, keys, rows):
        """Decodes the first `rows` rows of the groups `keys` into free pool rows
        (the pool has room for them: grown when it has not)."""
        used = len(self._pool_keys)
        if used + len(keys) > len(self._pool):
            pool = np.empty((2 * (used + len(keys)), self._pool.shape[1]), np.uint8)
            pool_rows = np.zeros(len(pool) + 1, np.int64)
            pool[:used], pool_rows[:used] = self._pool[:used], self._pool_rows[:used]
            self._pool, self._pool_rows = pool, pool_rows
        self._decode_into(self._pool[used : used + len(keys)], keys, rows)
        self._slot[keys] = np.arange(used, used + len(keys), dtype=self._slot.dtype)
        self._pool_rows[used : used + len(keys)] = rows
        self._pool_keys += keys.tolist()

    def _decode_into(self, out, keys, rows=None):
        """Writes the bytes of the first `rows` rows (default: all) of the groups
        `keys` (group * B + column) into the rows of `out` ([len(keys), G * frame
        bytes], C-contiguous). Everything the loops need is looked up before them,
        as Python ints: they run once per group of a batch."""
        group = keys // self.num_envs
        chunk = self.chunk.take(keys)  # keys are the flat indices of the [groups, B] index
        whole = np.minimum(self.group_rows, self.num_rows - group * self.group_rows)
        size = np.minimum(whole, whole if rows is None else rows) * self.frame_bytes
        # The open group is read from `open`; a group never written is zeros, as in
        # FrameStorage.
        for i in np.flatnonzero((group == self.open_group) | (chunk < 0)).tolist():
            n = int(size[i])
            if group[i] == self.open_group:
                out[i, :n] = self.open[keys[i] % self.num_envs].reshape(-1).view(np.uint8)[:n]
            else:
                out[i, :n] = 0
        stored = np.flatnonzero((group != self.open_group) & (chunk >= 0))
        chunk, offset = chunk[stored].tolist(), self.offset.take(keys[stored]).astype(np.int64)
        length, size = self.length.take(keys[stored]), size[stored]
        if self.codec.decode_into is not None:
            address = self.arena.address
            sources = [address[k] for k in chunk] + offset  # numpy: sums elementwise
            destinations = out.ctypes.data + stored * out.strides[0]
            self.codec.decode_into(sources.tolist(), length.tolist(), destinations.tolist(),
                                   size.tolist())  # fmt: skip
            return
        chunks, decompress = self.arena.chunks, self.codec.decompress
        whole = (whole[stored] * self.frame_bytes).tolist()
        for i, k, o, e, n, w in zip(stored.tolist(), chunk, offset.tolist(),
                                    (offset + length).tolist(), size.tolist(), whole):  # fmt: skip
            out[i, :n] = np.frombuffer(decompress(chunks[k][o:e], w), np.uint8)[:n]

    def state_dict(self) -> dict:
        return {"arena": self.arena.state_dict(), "chunk": self.chunk, "offset": self.offset,
                "length": self.length, "open": self.open, "open_group": self.open_group}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        if (
            tuple(state["open"].shape) != self.open.shape
            or state["chunk"].shape != self.chunk.shape
        ):
            raise ValueError(
                f"compressed replay of {tuple(state['chunk'].shape)} groups of "
                f"{tuple(state['open'].shape)} does not fit this run's {self.chunk.shape} groups "
                f"of {self.open.shape}"
            )
        self.chunk[:], self.offset[:], self.length[:] = (
            state["chunk"],
            state["offset"],
            state["length"],
        )
        self.open[:] = state["open"]
        self.open_group = int(state["open_group"])
        self.arena.load_state_dict(state["arena"], self.chunk)
        self._forget()


class CompressedFrameStorage(FrameStorage):
    """FrameStorage whose frames are compressed with `codec` (see the module docstring);
    rows, flags, n-step returns and stacks work exactly as there."""

    def __init__(self, capacity, num_envs, frame_shape, frame_dtype, num_actions, stack,
                 n_steps, discount, codec):  # fmt: skip
        self.codec = codec
        super().__init__(capacity, num_envs, frame_shape, frame_dtype, num_actions, stack,
                         n_steps, discount)  # fmt: skip

    def _make_frames(self, shape, dtype):
        return CompressedFrames(shape, dtype, self.codec)

    def gather(self, t: Any, b: Any) -> Batch:
        """FrameStorage's gather, after decoding once the rows t-stack+1..t+n of
        columns `b`: both stacks of every transition lie among them (s_t ends at
        row t+n or at an earlier LAST)."""
        rows = (t[:, None] + np.arange(1 - self.stack, self.n_steps + 1)) % self.num_rows
        self.frames.decode_rows(rows, np.broadcast_to(b[:, None], rows.shape))
        return super().gather(t, b)

    @property
    def nbytes(self):
        """Bytes held now: the arena grows and shrinks with what the frames compress to."""
        return self.frames.nbytes + sum(array.nbytes for array in self.row_arrays)

    @nbytes.setter
    def nbytes(self, uncompressed):
        """FrameStorage.__init__ sets its up-front figure, which does not apply here."""

    def _frames_state(self, n):
        return {"compression": self.codec, **self.frames.state_dict()}

    def _load_frames(self, frames, n):
        codec = frames.get("compression") if isinstance(frames, dict) else "none"
        if codec != self.codec or n > self.num_rows:
            raise ValueError(
                f"replay of {n} rows compressed with {codec} does not fit this run's "
                f"{self.num_rows} rows compressed with {self.codec}"
            )
        self.frames.load_state_dict(frames)
