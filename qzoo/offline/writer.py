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

import contextlib
import json
import os

import numpy as np

from qzoo.errors import UserError
from qzoo.files import atomic_write, reserve
from qzoo.offline.dataset_game import LOGGED
from qzoo.offline.dopamine import DTYPES, STORE, write_checkpoint
from qzoo.offline.maps import create_npy, mapping, release


class LoggedReplayWriter:
    """A circular buffer of `capacity` rows, snapshotted to `folder` (a
    `replay_logs` folder) in Dopamine's files.

    With `staging`, a folder, the buffer's arrays are memory-mapped NPY files there
    instead of memory (7 GB for 1M Atari rows would double a run's footprint), and a
    resumed run reopens them; with `state_dict()` in the run's checkpoint (rows
    included), the files continue exactly."""

    def __init__(self, folder, capacity, frame_shape, stack=4, update_horizon=1,
                 compresslevel=1, staging=None):  # fmt: skip
        self.folder, self.capacity = folder, capacity
        self.stack, self.update_horizon, self.compresslevel = stack, update_horizon, compresslevel
        shapes = {"observation": (capacity,) + tuple(frame_shape), "action": (capacity,),
                  "reward": (capacity,), "terminal": (capacity,)}  # fmt: skip
        made = []  # staging files and folders made here: a full disk removes them
        try:
            for name, shape in shapes.items():
                setattr(self, name, _array(staging, name, shape, made))
        except BaseException:
            for path in reversed(made):
                with contextlib.suppress(OSError):
                    os.rmdir(path) if os.path.isdir(path) else os.remove(path)
            raise
        self.add_count = 0
        self.log_count = 0  # the next snapshot's suffix
        self.logged = None  # {env, agent, seed} of the run logging, for dataset_game.LOGGED
        # Staging maps leave the resident set every 256 MiB of rows and after each
        # snapshot (maps.py): 1M Atari rows would otherwise add 7 GB of "resident".
        self._maps = [m for m in (mapping(getattr(self, n)) for n in STORE) if m]
        self._release_rows = max(1, (256 << 20) // max(1, int(np.prod(frame_shape))))
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
        elif self._maps and self.add_count % self._release_rows == 0:
            release(self._maps)

    def _snapshot(self, add_count):
        arrays = {"observation": self.observation, "action": self.action,
                  "reward": self.reward, "terminal": self.terminal,
                  "add_count": np.array(add_count, np.int64),
                  "invalid_range": self.invalid_range()}  # fmt: skip
        write_checkpoint(self.folder, self.log_count, arrays, self.compresslevel)
        if self.logged is not None:  # beside the snapshots: the run that logged them
            text = json.dumps(self.logged).encode()
            atomic_write(os.path.join(self.folder, LOGGED), lambda f: f.write(text))
        self.log_count += 1
        release(self._maps)

    def mark_terminal(self):
        """Marks the last row written terminal (an episode cut short)."""
        if self.add_count:
            self.terminal[(self.cursor - 1) % self.capacity] = 1

    def state_dict(self, rows=True):
        """Counters, and with `rows` the buffer's written rows (views: a checkpoint
        streams them to disk). Without them a resume is not exact: rows that a killed
        run wrote after its checkpoint may have wrapped over ones the next snapshot
        still needs."""
        state = {"add_count": self.add_count, "log_count": self.log_count}
        if rows:
            n = min(self.add_count, self.capacity)
            state.update({name: getattr(self, name)[:n] for name in STORE})
        return state

    def load_state_dict(self, state):
        self.add_count, self.log_count = int(state["add_count"]), int(state["log_count"])
        for name in STORE:
            if name in state:
                source, target = state[name], getattr(self, name)
                for begin in range(0, len(source), 4096):  # from a memory map, in blocks
                    target[begin : begin + 4096] = source[begin : begin + 4096]

    def close(self):
        """Writes the final partial snapshot: add_count = cursor, so a reader treats it
        as a buffer that is not full and uses rows [0, cursor) only. None when the
        last row just completed a full one (batch_rl's log_final_buffer writes it
        again, and an offline run would then count every row of it twice)."""
        if self.add_count and self.add_count % self.capacity != self.capacity - 1:
            self._snapshot(self.cursor)


class RowLogger:
    """Turns qzoo's replay rows (one environment) into Dopamine's rows for a
    `LoggedReplayWriter`.

    qzoo's row t holds o_t, a_t and the reward r_t on arriving at o_t; Dopamine's holds
    (o_t, a_t, r_{t+1}, terminal_{t+1}). So a row is written once the next one arrives:
    terminal when the episode ended there (terminated or truncated: Dopamine stores a
    time-limit truncation as terminal too), and a lost life is not terminal. An episode
    abandoned at a phase boundary (a FIRST row after one that is not LAST) drops its
    pending row and marks its last written row terminal, a truncation.
    """

    def __init__(self, writer):
        self.writer = writer
        self.pending = None  # (frame, action) of the last row, waiting for its outcome
        self.episode_rows = 0  # rows written of the current episode

    def add(self, row):
        first, last = bool(row.first[0]), bool(row.last[0])
        if self.pending is not None:
            if first:  # abandoned: the pending row has no outcome
                if self.episode_rows:
                    self.writer.mark_terminal()
            else:
                frame, action = self.pending
                self.writer.add(frame, action, float(row.reward[0]), int(last))
                self.episode_rows += 1
        if first:
            self.episode_rows = 0
        # A LAST row's frame is the episode's final one: Dopamine never stores it.
        self.pending = None if last else (np.array(row.frame[0]), int(row.action[0]))

    def state_dict(self, rows=True):
        return {"writer": self.writer.state_dict(rows), "episode_rows": self.episode_rows,
                "pending": None if self.pending is None else
                {"frame": self.pending[0], "action": self.pending[1]}}  # fmt: skip

    def load_state_dict(self, state):
        self.writer.load_state_dict(state["writer"])
        self.episode_rows = int(state["episode_rows"])
        pending = state["pending"]
        self.pending = None if pending is None else (np.array(pending["frame"]),
                                                     int(pending["action"]))  # fmt: skip


def _array(staging, name, shape, made):
    """The buffer's array `name`: in memory, or (with `staging`) its staging file,
    reopened when it fits, else made with its disk space reserved (create_npy); what
    is made is appended to `made`."""
    dtype = DTYPES[name]
    if staging is None:
        return np.zeros(shape, dtype)
    missing = []
    folder = os.path.abspath(staging)
    while not os.path.exists(folder):
        missing.append(folder)
        folder = os.path.dirname(folder)
    os.makedirs(staging, exist_ok=True)
    made.extend(reversed(missing))
    path = os.path.join(staging, f"{name}.npy")
    if os.path.exists(path):
        existing = _open_staged(path, staging)
        if existing.shape == shape and existing.dtype == dtype:
            with open(path, "r+b") as f:  # an older qzoo's may be sparse: its holes too
                reserve(f.fileno(), os.fstat(f.fileno()).st_size, path, new=False)
            return existing
    array = create_npy(path, dtype, shape)
    made.append(path)
    return array


def _open_staged(path, staging):
    """A staging file mapped for writing, or one line saying it is damaged (cut short by
    a full disk, say) and how to rebuild it."""
    try:
        # Read-only first: mapped "r+", NumPy would extend a short file with zeros.
        np.load(path, mmap_mode="r", allow_pickle=False)
        return np.load(path, mmap_mode="r+", allow_pickle=False)
    except (OSError, ValueError, EOFError) as e:
        raise UserError(
            f"{path}: is truncated or corrupt ({getattr(e, 'strerror', None) or e}); it is "
            f"the logged buffer's staging copy: delete {staging} and resume, and it is "
            "rebuilt from the run's checkpoint (with --no-checkpoint-replay, the rows "
            "since the last snapshot are lost)"
        ) from None


def check_new_folder(log_replay):
    """A new run logs its experience into a folder without another run's dataset:
    its snapshots would replace some of those checkpoints and sit beside the others."""
    logs = os.path.join(log_replay, "replay_logs")
    for path in (log_replay, logs, os.path.join(log_replay, ".staging")):  # writer.py's
        if os.path.exists(path) and not os.path.isdir(path):
            what = "it" if path == log_replay else path
            raise UserError(f"--log-replay {log_replay}: {what} is a file; expected a folder "
                            "(a new one, or one without a dataset)")  # fmt: skip
    try:
        found = [n for n in os.listdir(logs) if "_ckpt." in n and n.endswith(".gz")]
    except OSError:  # none yet (or not readable: writing it will say so)
        return
    if found:
        raise UserError(
            f"--log-replay {log_replay}: {logs} already holds a DQN Replay Dataset "
            f"({len(found)} checkpoint files) that this new run would partly overwrite; "
            f"expected a new or empty folder (delete {logs} to log again there)"
        )


def open_replay_log(config, info):
    """--log-replay DIR's logger: rows into DIR/replay_logs (staged in DIR/.staging),
    beside the run that logs them (dataset_game.LOGGED), so that the dataset knows its game."""
    writer = LoggedReplayWriter(
        os.path.join(config.log_replay, "replay_logs"), config.log_replay_capacity,
        info.frame_shape, stack=config.frame_stack,
        staging=os.path.join(config.log_replay, ".staging"),
    )  # fmt: skip
    writer.logged = {"env": config.env, "agent": config.agent, "seed": config.seed}
    return RowLogger(writer)
