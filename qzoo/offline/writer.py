"""Logging experience in the DQN Replay Dataset's format, as batch_rl's
`OutOfGraphLoggedReplayBuffer` does (batch_rl_dopamine.md §1.3, §1.5, §1.7).

Rows are Dopamine's: (frame seen, action chosen, clipped reward after it, terminal
after it); an episode's last row is terminal (time-limit truncations included, as
Dopamine stores them) and its final frame is never stored. Before an episode's first
row come K - 1 = 3 all-zero padding rows (when the buffer is empty or the previous
row is terminal). After every row, invalid_range = rows cursor - n .. cursor + K - 1.

A full snapshot is written whenever add_count mod C reaches C - 1, with a running
suffix. batch_rl checks that only after each `add()` call, and an episode start adds
4 rows at once, so it skips the snapshot of a pass in which an episode starts at
add_count mod C in {C-4, C-3, C-2}; qzoo checks after every row, so no pass is lost.
`close()` writes the final partial snapshot with add_count = cursor (the rows of the
last, unfinished pass), as batch_rl's `log_final_buffer` does.
"""

import numpy as np

from qzoo.offline.dopamine import write_checkpoint


class LoggedReplayWriter:
    """A circular buffer of `capacity` rows, snapshotted to `folder` (a
    `replay_logs` folder) in Dopamine's files."""

    def __init__(self, folder, capacity, frame_shape, stack=4, update_horizon=1,
                 compresslevel=1):  # fmt: skip
        self.folder, self.capacity = folder, capacity
        self.stack, self.update_horizon, self.compresslevel = stack, update_horizon, compresslevel
        self.observation = np.zeros((capacity,) + tuple(frame_shape), np.uint8)
        self.action = np.zeros(capacity, np.int32)
        self.reward = np.zeros(capacity, np.float32)
        self.terminal = np.zeros(capacity, np.uint8)
        self.add_count = 0
        self.log_count = 0  # the next snapshot's suffix
        self._zero_frame = np.zeros(frame_shape, np.uint8)

    @property
    def cursor(self):
        return self.add_count % self.capacity

    def invalid_range(self):
        """The n + K rows around the cursor that may not be sampled."""
        n, k, c = self.update_horizon, self.stack, self.cursor
        return np.array([(c - n + j) % self.capacity for j in range(n + k)], np.int64)

    def add(self, frame, action, reward, terminal):
        """Adds one transition row (and the episode's padding before its first row)."""
        if self.add_count == 0 or self.terminal[(self.cursor - 1) % self.capacity]:
            for _ in range(self.stack - 1):
                self._add_row(self._zero_frame, 0, 0.0, 0)
        self._add_row(frame, action, reward, terminal)

    def _add_row(self, frame, action, reward, terminal):
        c = self.cursor
        self.observation[c], self.action[c] = frame, action
        self.reward[c], self.terminal[c] = reward, terminal
        self.add_count += 1
        if self.add_count % self.capacity == self.capacity - 1:  # after every row
            self._snapshot(self.add_count)

    def _snapshot(self, add_count):
        arrays = {"observation": self.observation, "action": self.action,
                  "reward": self.reward, "terminal": self.terminal,
                  "add_count": np.array(add_count, np.int64),
                  "invalid_range": self.invalid_range()}  # fmt: skip
        write_checkpoint(self.folder, self.log_count, arrays, self.compresslevel)
        self.log_count += 1

    def close(self):
        """Writes the final partial snapshot: add_count = cursor, so a reader treats it
        as a buffer that is not full and uses rows [0, cursor) only."""
        if self.add_count:
            self._snapshot(self.cursor)
