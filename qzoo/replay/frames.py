"""Storage that keeps every frame once and assembles stacks and n-step returns.

Layout (after simple_dqn's ReplayMemory and rlpyt's frame buffers): arrays of
`[T, B]` rows, one column per environment, written in lockstep by the vector env.
Row t of column b describes one observation o_t of that environment:

  frame     the newest frame of o_t (uint8 84x84 for Atari)
  action    the action taken at o_t (ignored when o_t is LAST)
  reward    the clipped reward received on arriving at o_t
  flags     FIRST (o_t starts an episode), LAST (o_t ends one: terminated or
            truncated), ZERO_DISCOUNT (arriving at o_t terminated the episode or
            lost a life, so nothing is bootstrapped through it)

Storing each frame once, not both stacks of a transition, keeps an Atari transition
near the size of one frame. The flags are the top 3 bits of a byte whose low 5 bits
hold the action when there are at most 32 actions (`self.flags is self.actions`);
wider action spaces get a byte of flags of their own."""

import math
from typing import Any

import numpy as np

from qzoo.replay.batch import Batch, Row

# The flags' bits: the top 3 of the byte, below them the action where it fits.
FLAG_SHIFT = 5
FIRST, LAST, ZERO_DISCOUNT = 1 << FLAG_SHIFT, 2 << FLAG_SHIFT, 4 << FLAG_SHIFT
PACKED_ACTIONS = 1 << FLAG_SHIFT  # action spaces of up to 32 actions share the byte


def observation_shape(frame_shape, stack):
    """Shape of a stacked observation: [stack, H, W] for 2-D frames; channel-first
    frames [C, H, W] and vectors [D] fold the stack into the first axis."""
    if len(frame_shape) == 2:
        return (stack,) + tuple(frame_shape)
    return (stack * frame_shape[0],) + tuple(frame_shape[1:])


def bytes_per_transition(frame_shape, frame_dtype, num_actions):
    frame = int(np.prod(frame_shape)) * np.dtype(frame_dtype).itemsize
    if num_actions <= PACKED_ACTIONS:
        return frame + 1 + 4  # frame, action and flags, reward (float32)
    action = 1 if num_actions <= 256 else 2
    return frame + action + 4 + 1  # frame, action, reward (float32), flags


def action_dtype(num_actions):
    """The dtype of the [T, B] action array (which holds the flags too up to 32)."""
    return np.uint8 if num_actions <= 256 else np.int16


def flag_bits(first, last, zero_discount):
    """One row's flags (uint8, bits FIRST | LAST | ZERO_DISCOUNT) from its booleans."""
    if len(first) == 1:  # one environment: Python's arithmetic, cheaper than NumPy's calls
        bits = (
            FIRST * bool(first[0]) | LAST * bool(last[0]) | ZERO_DISCOUNT * bool(zero_discount[0])
        )
        return np.array([bits], np.uint8)
    return (np.where(first, FIRST, 0) | np.where(last, LAST, 0)
            | np.where(zero_discount, ZERO_DISCOUNT, 0)).astype(np.uint8)  # fmt: skip


def saved_actions(actions, flags, packed):
    """(actions, flags) of rows as checkpoints hold them: action values, and flags
    1, 2, 4 in an array of their own (so a checkpoint loads in either layout). `flags`
    is the same array as `actions` when `packed`. NumPy arrays or torch tensors; new
    arrays, one byte a row each."""
    if packed:
        actions = actions & (PACKED_ACTIONS - 1)
    return actions, flags >> FLAG_SHIFT


def loaded_actions(actions, flags, packed):
    """saved_actions' inverse, as NumPy arrays in this storage's layout: the action
    array, and the flags array (None when `packed`: they are in the action array)."""
    actions, flags = np.asarray(actions), np.asarray(flags).astype(np.uint8) << FLAG_SHIFT
    if not packed:
        return actions, flags
    if actions.size and (actions.min() < 0 or actions.max() >= PACKED_ACTIONS):
        raise ValueError(f"replay actions {actions.min()}..{actions.max()} do not fit "
                         f"this run's {PACKED_ACTIONS} action values")  # fmt: skip
    return actions.astype(np.uint8) | flags, None


class FrameStorage:
    """Deduplicated frame storage (layout: the module docstring). Knows which slots hold
    a whole transition and how to assemble one; which slots to sample is a sampler's
    business (replay/samplers.py).

    A transition from row t exists when t is not LAST and row t+1 is not FIRST (a FIRST
    right after a non-LAST row is an episode abandoned at a phase boundary). Its n-step
    return walks rows t+1..t+n and stops at the first LAST; truncation (LAST without
    ZERO_DISCOUNT) bootstraps. Stacks are `frame_stack` consecutive rows ending at the
    sampled row; frames older than the episode's FIRST row are zeros (leading-zero
    padding, as in the actor)."""

    def __init__(
        self, capacity, num_envs, frame_shape, frame_dtype, num_actions, stack, n_steps,
        discount,
    ):  # fmt: skip
        self.num_rows = math.ceil(capacity / num_envs)
        self.num_envs = num_envs
        self.stack = stack
        self.n_steps = n_steps
        self.discount = discount
        self.frame_shape = tuple(frame_shape)
        self.observation_shape = observation_shape(frame_shape, stack)
        self.nbytes = self.bytes_needed(capacity, num_envs, frame_shape, frame_dtype, num_actions)
        shape = (self.num_rows, num_envs)
        self.frames = self._make_frames(shape + self.frame_shape, frame_dtype)
        self.actions = np.zeros(shape, action_dtype(num_actions))
        self.rewards = np.zeros(shape, np.float32)
        # Up to 32 actions: the flags are the top bits of the action byte.
        packed = num_actions <= PACKED_ACTIONS
        self.flags = self.actions if packed else np.zeros(shape, np.uint8)
        self.cursor = 0  # next row to write
        self.rows = 0  # rows written, at most num_rows
        self.num_adds = 0  # rows ever written

    @staticmethod
    def bytes_needed(capacity, num_envs, frame_shape, frame_dtype, num_actions):
        """Bytes the arrays take, known before allocating them."""
        per = bytes_per_transition(frame_shape, frame_dtype, num_actions)
        return per * math.ceil(capacity / num_envs) * num_envs

    def _make_frames(self, shape, dtype):
        """The [T, B, *frame] frames: written `frames[t] = row.frame`, read
        `frames[rows, columns]` (replay/compressed.py keeps them compressed)."""
        return np.zeros(shape, dtype)

    @property
    def size(self) -> int:
        """Number of stored transitions (rows times environments)."""
        return self.rows * self.num_envs

    def add(self, row: Row) -> int:
        """Writes one `Row` (the newest observation of every environment); returns
        the row index written."""
        t = self.cursor
        self.frames[t] = row.frame
        self.put_actions(t, row.action, flag_bits(row.first, row.last, row.zero_discount))
        self.rewards[t] = row.reward
        self.cursor = (t + 1) % self.num_rows
        self.rows = min(self.rows + 1, self.num_rows)
        self.num_adds += 1
        return t

    def oldest(self) -> int:
        """The oldest row still stored."""
        return self.cursor if self.rows == self.num_rows else 0

    def window(self) -> tuple[int, int]:
        """(low, high): rows at ages low..high-1 after `oldest()` have their stack
        history and n-step future stored. Once the ring has wrapped, the oldest
        stack-1 rows lack their history; before that, row 0 is an episode's FIRST row,
        so its history is zero padding."""
        full = self.rows == self.num_rows
        return (self.stack - 1 if full else 0), self.rows - self.n_steps

    def can_sample(self) -> bool:
        low, high = self.window()
        return high > low

    def in_window(self, t: Any) -> Any:
        age = (t - self.oldest()) % self.num_rows
        low, high = self.window()
        return (age >= low) & (age < high)

    def put_actions(self, index, action, flags):
        """Writes actions and their rows' flags (`flag_bits`) at `index` (a row, or
        rows and columns): into the one byte when packed, else into both arrays."""
        if self.flags is self.actions:
            self.actions[index] = flags | np.asarray(action, np.uint8)
        else:
            self.actions[index], self.flags[index] = action, flags

    def action_at(self, t, b):
        """The actions taken at rows `t` of columns `b` (int64), without the flags."""
        actions = self.actions[t, b].astype(np.int64)
        return actions & (PACKED_ACTIONS - 1) if self.flags is self.actions else actions

    @property
    def row_arrays(self):
        """The [T, B] arrays besides the frames (actions and flags once when packed)."""
        separate = () if self.flags is self.actions else (self.flags,)
        return (self.actions, self.rewards) + separate

    def can_start(self, t: Any, b: Any) -> Any:
        """Whether row t of column b may start a transition at all (not LAST)."""
        return (self.flags[t, b] & LAST) == 0

    def valid(self, t: Any, b: Any) -> Any:
        """Whether a transition starts at rows `t` of columns `b` (see docstring)."""
        ok = self.can_start(t, b)
        ended = np.zeros_like(ok)
        for i in range(1, self.n_steps + 1):
            flags = self.flags[(t + i) % self.num_rows, b]
            ok &= ended | ((flags & FIRST) == 0)
            ended |= (flags & LAST) != 0
        return ok

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

    def gather(self, t: Any, b: Any) -> Batch:
        """The `Batch` of transitions starting at rows `t` of columns `b`."""
        r_t, discount_t, end = self.returns(t, b)
        return Batch(
            s_tm1=self.stacked(t, b), a_tm1=self.action_at(t, b), r_t=r_t,
            discount_t=discount_t, s_t=self.stacked(end, b), indices=(t, b),
        )  # fmt: skip

    def state_dict(self) -> dict:
        """Everything needed to restore the storage exactly (the frames and rewards
        are views, not copies: a checkpoint streams them to disk; actions and flags
        are unpacked, one byte a row each)."""
        n = self.rows
        actions, flags = saved_actions(self.actions[:n], self.flags[:n], self.flags is self.actions)
        return {
            "frames": self._frames_state(n),
            "actions": actions,
            "rewards": self.rewards[:n],
            "flags": flags,
            "cursor": self.cursor,
            "rows": self.rows,
            "num_adds": self.num_adds,
        }

    def load_state_dict(self, state: dict) -> None:
        n = state["rows"]
        self._load_frames(state["frames"], n)
        actions, flags = loaded_actions(
            state["actions"], state["flags"], self.flags is self.actions
        )
        self.actions[:n] = actions
        if flags is not None:
            self.flags[:n] = flags
        self.rewards[:n] = state["rewards"]
        self.cursor, self.rows, self.num_adds = state["cursor"], n, state["num_adds"]

    def _frames_state(self, n):
        """The frames of the first `n` rows, for state_dict (compressed.py: its groups)."""
        return self.frames[:n]

    def _load_frames(self, frames, n):
        if tuple(frames.shape[1:]) != self.frames.shape[1:] or n > self.num_rows:
            raise ValueError(
                f"replay of {n} rows of {tuple(frames.shape[1:])} does not fit "
                f"this run's {self.num_rows} rows of {self.frames.shape[1:]}"
            )
        # Row by block, so that a memory-mapped source is read without a full copy.
        for begin in range(0, n, 4096):
            end = min(n, begin + 4096)
            self.frames[begin:end] = frames[begin:end]


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
