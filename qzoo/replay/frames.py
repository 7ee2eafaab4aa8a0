"""Replay that stores every frame once and assembles stacks and n-step returns.

Layout (after simple_dqn's ReplayMemory and rlpyt's frame buffers): arrays of
`[T, B]` rows, one column per environment, written in lockstep by the vector env.
Row t of column b describes one observation o_t of that environment:

  frame     the newest frame of o_t (uint8 84x84 for Atari: 7,056 bytes)
  action    the action taken at o_t (ignored when o_t is LAST)
  reward    the clipped reward received on arriving at o_t
  flags     FIRST (o_t starts an episode), LAST (o_t ends one: terminated or
            truncated), ZERO_DISCOUNT (arriving at o_t terminated the episode or
            lost a life, so nothing is bootstrapped through it)

That is 7,062 bytes per Atari transition. A transition from row t exists when t
is not LAST and row t+1 is not FIRST (a FIRST right after a non-LAST row is an
episode abandoned at a phase boundary). Its n-step return walks rows t+1..t+n and
stops at the first LAST; truncation (LAST without ZERO_DISCOUNT) bootstraps.

Stacks are `frame_stack` consecutive rows ending at the sampled row; frames older
than the episode's FIRST row are zeros (leading-zero padding, as in the actor).
"""

import math

import numpy as np

FIRST, LAST, ZERO_DISCOUNT = 1, 2, 4


def observation_shape(frame_shape, stack):
    """Shape of a stacked observation: [stack, H, W] for 2-D frames; channel-first
    frames [C, H, W] and vectors [D] fold the stack into the first axis."""
    if len(frame_shape) == 2:
        return (stack,) + tuple(frame_shape)
    return (stack * frame_shape[0],) + tuple(frame_shape[1:])


def bytes_per_transition(frame_shape, frame_dtype, num_actions):
    frame = int(np.prod(frame_shape)) * np.dtype(frame_dtype).itemsize
    action = 1 if num_actions <= 256 else 2
    return frame + action + 4 + 1  # frame, action, reward (float32), flags


def _available_memory():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class FrameReplay:
    """Uniform replay over deduplicated frames (see the module docstring)."""

    def __init__(
        self, capacity, num_envs, frame_shape, frame_dtype, num_actions, stack,
        n_steps, discount, random_state,
    ):  # fmt: skip
        self.num_rows = math.ceil(capacity / num_envs)
        self.num_envs = num_envs
        self.stack = stack
        self.n_steps = n_steps
        self.discount = discount
        self.frame_shape = tuple(frame_shape)
        self.observation_shape = observation_shape(frame_shape, stack)
        self._rng = random_state
        per = bytes_per_transition(frame_shape, frame_dtype, num_actions)
        self.nbytes = per * self.num_rows * num_envs
        available = _available_memory()
        if available is not None and self.nbytes > available:
            from qzoo.errors import UserError

            raise UserError(
                f"--replay-capacity {capacity}: needs {self.nbytes / 2**30:.1f} GiB but "
                f"only {available / 2**30:.1f} GiB is available; lower it"
            )
        shape = (self.num_rows, num_envs)
        self.frames = np.zeros(shape + self.frame_shape, frame_dtype)
        self.actions = np.zeros(shape, np.uint8 if num_actions <= 256 else np.int16)
        self.rewards = np.zeros(shape, np.float32)
        self.flags = np.zeros(shape, np.uint8)
        self.cursor = 0  # next row to write
        self.rows = 0  # rows written, at most num_rows
        self.num_adds = 0  # rows ever written

    @property
    def size(self):
        """Number of stored transitions (rows times environments)."""
        return self.rows * self.num_envs

    def add(self, frame, action, reward, first, last, zero_discount):
        """Writes one row: the newest observation of every environment."""
        t = self.cursor
        self.frames[t] = frame
        self.actions[t] = action
        self.rewards[t] = reward
        self.flags[t] = (
            np.where(first, FIRST, 0) | np.where(last, LAST, 0)
            | np.where(zero_discount, ZERO_DISCOUNT, 0)
        )  # fmt: skip
        self.cursor = (t + 1) % self.num_rows
        self.rows = min(self.rows + 1, self.num_rows)
        self.num_adds += 1

    def _oldest(self):
        return self.cursor if self.rows == self.num_rows else 0

    def can_sample(self):
        return self.rows - self.n_steps - (self.stack - 1) > 0 or (
            self.rows < self.num_rows and self.rows > self.n_steps
        )

    def valid(self, t, b):
        """Whether a transition starts at rows `t` of columns `b` (see docstring)."""
        ok = (self.flags[t, b] & LAST) == 0
        ended = np.zeros_like(ok)
        for i in range(1, self.n_steps + 1):
            flags = self.flags[(t + i) % self.num_rows, b]
            ok &= ended | ((flags & FIRST) == 0)
            ended |= (flags & LAST) != 0
        return ok

    def sample_indices(self, batch_size):
        """Uniform (t, b) over valid transitions, with replacement (rejection)."""
        if not self.can_sample():
            raise RuntimeError("replay holds too few rows to sample")
        # Once the ring has wrapped, the oldest stack-1 rows lack their history. Before
        # that, row 0 is an episode's FIRST row, so its history is zero padding.
        full = self.rows == self.num_rows
        low, high = (self.stack - 1 if full else 0), self.rows - self.n_steps
        t = np.empty(batch_size, np.int64)
        b = np.empty(batch_size, np.int64)
        todo = np.arange(batch_size)
        for _ in range(1000):
            j = self._rng.randint(low, high, size=todo.size)
            t[todo] = (self._oldest() + j) % self.num_rows
            b[todo] = self._rng.randint(self.num_envs, size=todo.size)
            todo = todo[~self.valid(t[todo], b[todo])]
            if todo.size == 0:
                return t, b
        raise RuntimeError("replay found no valid transition in 1000 draws")

    def stacked(self, t, b):
        """Observations ending at rows `t` of columns `b`: [len(t), *observation_shape]."""
        offsets = np.arange(self.stack - 1, -1, -1)
        rows = (t[:, None] - offsets[None, :]) % self.num_rows  # oldest first
        frames = self.frames[rows, b[:, None]]
        if self.stack > 1:
            first = (self.flags[rows, b[:, None]] & FIRST) != 0
            # A frame is blank when a FIRST row comes after it inside the stack.
            later_first = np.cumsum(first[:, ::-1], axis=1)[:, ::-1] - first
            frames[later_first > 0] = 0
        return frames.reshape((len(t),) + self.observation_shape)

    def returns(self, t, b):
        """n-step (reward, discount, end row) for transitions starting at rows `t`."""
        reward = np.zeros(len(t), np.float32)
        discount = np.ones(len(t), np.float32)
        end = t.copy()
        alive = np.ones(len(t), bool)
        for i in range(1, self.n_steps + 1):
            row = (t + i) % self.num_rows
            flags = self.flags[row, b]
            reward += np.where(alive, discount * self.rewards[row, b], 0)
            keep = (flags & ZERO_DISCOUNT) == 0
            discount = np.where(alive, discount * self.discount * keep, discount)
            end = np.where(alive, row, end)
            alive &= (flags & LAST) == 0
        return reward, discount, end

    def sample(self, batch_size):
        """A batch (s_tm1, a_tm1, r_t, discount_t, s_t) of numpy arrays, plus indices.

        `discount_t` already contains gamma^k (DQN Zoo convention): 0 after a
        termination or a lost life, gamma^k after k steps otherwise.
        """
        t, b = self.sample_indices(batch_size)
        r_t, discount_t, end = self.returns(t, b)
        return {
            "s_tm1": self.stacked(t, b),
            "a_tm1": self.actions[t, b].astype(np.int64),
            "r_t": r_t,
            "discount_t": discount_t,
            "s_t": self.stacked(end, b),
            "indices": (t, b),
        }

    def state_dict(self):
        """Everything needed to restore the replay exactly (for checkpoints)."""
        n = self.rows
        return {
            "frames": self.frames[:n],
            "actions": self.actions[:n],
            "rewards": self.rewards[:n],
            "flags": self.flags[:n],
            "cursor": self.cursor,
            "rows": self.rows,
            "num_adds": self.num_adds,
        }

    def load_state_dict(self, state):
        n = state["rows"]
        if state["frames"].shape[1:] != self.frames.shape[1:] or n > self.num_rows:
            raise ValueError("replay state does not match this replay's shape")
        self.frames[:n] = state["frames"]
        self.actions[:n] = state["actions"]
        self.rewards[:n] = state["rewards"]
        self.flags[:n] = state["flags"]
        self.cursor, self.rows, self.num_adds = state["cursor"], n, state["num_adds"]


class FrameStacker:
    """The actor's stacks, built with the same leading-zero convention as replay."""

    def __init__(self, num_envs, frame_shape, frame_dtype, stack):
        self.stack = stack
        self._frames = np.zeros((num_envs, stack) + tuple(frame_shape), frame_dtype)
        self._shape = (num_envs,) + observation_shape(frame_shape, stack)

    def push(self, frame, first):
        """Adds the newest frames; rows where `first` is set start from zeros."""
        if self.stack > 1:
            self._frames[:, :-1] = self._frames[:, 1:]
            self._frames[first, :-1] = 0
        self._frames[:, -1] = frame
        return self._frames.reshape(self._shape)
