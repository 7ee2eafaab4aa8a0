"""Compressed groups of frames back to back in chunks, written and freed first in,
first out, so that a checkpoint saves the chunks as they are."""

import numpy as np


class Arena:
    """Compressed groups back to back in chunks of `chunk_bytes`, allocated as needed.

    Groups are written and overwritten in first-in first-out order (a ring of rows),
    so a chunk is freed once the last group it holds has been overwritten; at most the
    oldest chunk (partly freed) and the newest (partly written) carry unused bytes."""

    def __init__(self, chunk_bytes):
        self.chunk_bytes = chunk_bytes
        self.chunks = {}  # chunk id -> uint8 array
        self.address = {}  # chunk id -> the address of its first byte (Codec.decode_into)
        self.live = {}  # chunk id -> groups it holds that are still stored
        self.current, self.fill = -1, chunk_bytes  # chunk being written and its fill

    @property
    def nbytes(self):
        return sum(chunk.nbytes for chunk in self.chunks.values())

    def put(self, data):
        """Stores `data` (bytes); returns (chunk id, offset)."""
        n = len(data)
        if n > self.chunk_bytes:
            raise ValueError(f"a compressed group of {n} bytes exceeds the arena's chunks")
        if self.fill + n > self.chunk_bytes:
            if self.current in self.live and self.live[self.current] == 0:
                self._free(self.current)
            self.current, self.fill = self.current + 1, 0
            self._allocate(self.current)
            self.live[self.current] = 0
        offset = self.fill
        self.chunks[self.current][offset : offset + n] = np.frombuffer(data, np.uint8)
        self.fill += n
        self.live[self.current] += 1
        return self.current, offset

    def release(self, chunk):
        """One group of `chunk` was overwritten."""
        self.live[chunk] -= 1
        if self.live[chunk] == 0 and chunk != self.current:
            self._free(chunk)

    def _allocate(self, chunk):
        self.chunks[chunk] = np.empty(self.chunk_bytes, np.uint8)
        self.address[chunk] = self.chunks[chunk].ctypes.data

    def _free(self, chunk):
        del self.chunks[chunk], self.live[chunk], self.address[chunk]

    def view(self, chunk, offset, length):
        return self.chunks[chunk][offset : offset + length]

    def state_dict(self):
        ids = sorted(self.chunks)
        # The chunk being written is saved up to its fill only.
        chunks = [self.chunks[i][: self.fill] if i == self.current else self.chunks[i] for i in ids]
        return {"ids": np.array(ids, np.int64), "chunks": chunks, "current": self.current,
                "fill": self.fill}  # fmt: skip

    def load_state_dict(self, state, chunk_of_group):
        self.chunks, self.address, self.live = {}, {}, {}
        for i, data in zip(state["ids"].tolist(), state["chunks"]):
            self._allocate(i)
            self.chunks[i][: len(data)] = data  # from the file's memory map
        self.current, self.fill = int(state["current"]), int(state["fill"])
        ids, counts = np.unique(chunk_of_group[chunk_of_group >= 0], return_counts=True)
        self.live = dict.fromkeys(self.chunks, 0) | dict(zip(ids.tolist(), counts.tolist()))
