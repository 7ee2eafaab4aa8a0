"""Replay resident on the learner's device (`--replay-device cpu|cuda`).

The same storage as frames.py's `FrameStorage` (each frame once, `[T, B]` rows, one
column per environment, FIRST/LAST/ZERO_DISCOUNT flags), but every array is a torch
tensor on `device`, and stacks, n-step returns, validity and draws are tensor ops
there, over the whole batch at once. Per step only the step's row goes host -> device;
a batch is born on the device, so the learner's `batch.to(device)` is a no-op when
replay and learner share a device. Semantics are exactly FrameStorage's, so for the
same rows and indices `gather` returns the same batch (tests/replay/test_device_replay.py);
draws come from the replay stream's torch generator on the device, not its NumPy
generator, so a run samples other (equally uniform) indices than with host replay.
Sampling (device_samplers.py) draws on the device, uniform or prioritized (a cumulative
sum and `searchsorted` standing in for the sum tree: O(N) per batch), and takes the
learner's new priorities as device tensors, so nothing waits for the device."""

from typing import Any

import numpy as np
import torch

from qzoo.replay.batch import Batch, Row
from qzoo.replay.frames import (
    FIRST,
    LAST,
    PACKED_ACTIONS,
    ZERO_DISCOUNT,
    FrameStorage,
    action_dtype,
    flag_bits,
    loaded_actions,
    observation_shape,
    saved_actions,
)


def torch_dtype(dtype):
    """The torch dtype of a NumPy dtype (uint8 frames, float32 CartPole vectors)."""
    return torch.from_numpy(np.zeros(0, dtype)).dtype


class DeviceFrameStorage(FrameStorage):
    """FrameStorage with its arrays as tensors on `device` (see the module docstring).

    The ring bookkeeping (cursor, rows, `oldest`, `window`, `can_sample`, `size`) is
    FrameStorage's, in Python integers; everything indexed by rows is a tensor op."""

    def __init__(
        self, capacity, num_envs, frame_shape, frame_dtype, num_actions, stack, n_steps,
        discount, device,
    ):  # fmt: skip
        # FrameStorage.__init__ would allocate host arrays: only its scalars are set here.
        self.num_rows = -(-capacity // num_envs)
        self.num_envs, self.stack, self.n_steps, self.discount = num_envs, stack, n_steps, discount
        self.frame_shape = tuple(frame_shape)
        self.observation_shape = observation_shape(frame_shape, stack)
        self.nbytes = self.bytes_needed(capacity, num_envs, frame_shape, frame_dtype, num_actions)
        self.device = torch.device(device)
        shape = (self.num_rows, num_envs)
        # One frame more than the [T, B] slots, never written: a stack's blank frames
        # (before an episode's FIRST) are read from it, so a stack is one index_select.
        self._zero_frame = self.num_rows * num_envs
        flat = self._zeros((self._zero_frame + 1,) + self.frame_shape, torch_dtype(frame_dtype))
        self._flat_frames, self.frames = flat, flat[:-1].view(shape + self.frame_shape)
        self.actions = self._zeros(shape, torch_dtype(action_dtype(num_actions)))
        self.rewards = self._zeros(shape, torch.float32)
        # As FrameStorage: up to 32 actions, the flags are the top bits of the action byte.
        packed = num_actions <= PACKED_ACTIONS
        self.flags = self.actions if packed else self._zeros(shape, torch.uint8)
        self._offsets = torch.arange(stack - 1, -1, -1, device=self.device)  # oldest first
        self.cursor, self.rows, self.num_adds = 0, 0, 0

    def _zeros(self, shape, dtype):
        return torch.zeros(shape, dtype=dtype, device=self.device)

    @staticmethod
    def _put(target, value):
        """target <- a host array, cast as NumPy's assignment casts (one step's row:
        the only host -> device copy). To a GPU through page-locked memory, queued
        without waiting: a copy from pageable memory would first wait for every
        update already queued (PyTorch's pinned-memory cache keeps the staging block
        until the copy is done)."""
        source = torch.from_numpy(np.ascontiguousarray(value))
        if target.device.type == "cuda":
            source = source.to(target.dtype).pin_memory()
            target.copy_(source, non_blocking=True)
        else:
            target.copy_(source)

    def add(self, row: Row) -> int:
        """Writes one `Row` (host arrays of the newest observation of every
        environment); returns the row index written."""
        t = self.cursor
        flags = flag_bits(row.first, row.last, row.zero_discount)
        self._put(self.frames[t], row.frame)
        if self.flags is self.actions:
            self._put(self.actions[t], flags | np.asarray(row.action, np.uint8))
        else:
            self._put(self.actions[t], row.action)
            self._put(self.flags[t], flags)
        self._put(self.rewards[t], row.reward)
        self.cursor = (t + 1) % self.num_rows
        self.rows = min(self.rows + 1, self.num_rows)
        self.num_adds += 1
        return t

    def _take(self, array, t, b):
        """array[t, b] of a [T, B] tensor. torch.take on flat indices: on a CPU, far
        faster than advanced indexing for a batch (benchmarks/device_replay.py)."""
        return torch.take(array, t * self.num_envs + b)

    def action_at(self, t, b):
        """The actions taken at rows `t` of columns `b` (int64 tensors), without the flags."""
        actions = self._take(self.actions, t, b).to(torch.int64)
        return actions & (PACKED_ACTIONS - 1) if self.flags is self.actions else actions

    def can_start(self, t: Any, b: Any) -> Any:
        """Whether rows `t` of columns `b` (tensors) may start a transition (not LAST)."""
        return (self._take(self.flags, t, b) & LAST) == 0

    def valid(self, t: Any, b: Any) -> Any:
        """Whether transitions start at rows `t` of columns `b`: not LAST, and no FIRST
        among the next n rows before the episode's LAST (an abandoned episode)."""
        ok = self.can_start(t, b)
        ended = torch.zeros_like(ok)
        for i in range(1, self.n_steps + 1):
            flags = self._take(self.flags, (t + i) % self.num_rows, b)
            ok &= ended | ((flags & FIRST) == 0)
            ended |= (flags & LAST) != 0
        return ok

    def stacked(self, t, b):
        """Observations ending at rows `t` of columns `b`: [len(t), *observation_shape]."""
        rows = (t[:, None] - self._offsets[None, :]) % self.num_rows
        slots = rows * self.num_envs + b[:, None]  # [N, stack], oldest first
        if self.stack > 1:
            first = ((torch.take(self.flags, slots) & FIRST) != 0).to(torch.int32)
            # A frame is blank when a FIRST row comes after it inside the stack.
            later_first = first.flip(1).cumsum(1).flip(1) - first
            slots = torch.where(later_first > 0, self._zero_frame, slots)
        frames = self._flat_frames.index_select(0, slots.view(-1))
        return frames.view((len(t),) + self.observation_shape)

    def returns(self, t, b):
        """n-step (reward, discount, end row) for transitions starting at rows `t`:
        rewards discounted up to the first LAST row, discount gamma^k or 0 after a
        termination or life loss (DQN Zoo's n-step transitions, dqn_zoo.md)."""
        reward = torch.zeros(len(t), dtype=torch.float32, device=self.device)
        discount = torch.ones(len(t), dtype=torch.float32, device=self.device)
        end = t.clone()
        alive = torch.ones(len(t), dtype=torch.bool, device=self.device)
        for i in range(1, self.n_steps + 1):
            row = (t + i) % self.num_rows
            flags = self._take(self.flags, row, b)
            reward += torch.where(alive, discount * self._take(self.rewards, row, b), 0.0)
            keep = (flags & ZERO_DISCOUNT) == 0
            discount = torch.where(alive, discount * self.discount * keep, discount)
            end = torch.where(alive, row, end)
            alive &= (flags & LAST) == 0
        return reward, discount, end

    def gather(self, t: Any, b: Any) -> Batch:
        """The `Batch` of transitions starting at rows `t` of columns `b` (int64
        tensors on the device, or anything torch.as_tensor takes), as device tensors."""
        t = torch.as_tensor(t, dtype=torch.int64, device=self.device)
        b = torch.as_tensor(b, dtype=torch.int64, device=self.device)
        r_t, discount_t, end = self.returns(t, b)
        # Both stacks in one pass: half the tensor ops (each costs microseconds to
        # dispatch on a CPU, a kernel launch on a GPU).
        s_tm1, s_t = self.stacked(torch.cat([t, end]), torch.cat([b, b])).split(len(t))
        return Batch(
            s_tm1=s_tm1, a_tm1=self.action_at(t, b), r_t=r_t,
            discount_t=discount_t, s_t=s_t, indices=(t, b),
        )  # fmt: skip

    def state_dict(self) -> dict:
        """FrameStorage's keys and dtypes, so that a checkpoint of either storage
        restores into the other. On the CPU the frames and rewards are NumPy views (no
        copy); on a GPU they stay tensors, which run/checkpoint.py streams to the file in
        8 MiB pieces instead of copying the whole replay to the host first. Actions
        and flags are unpacked (frames.py's `saved_actions`), one byte a row each."""
        n = self.rows
        actions, flags = saved_actions(self.actions[:n], self.flags[:n], self.flags is self.actions)
        return {
            "frames": _host(self.frames[:n]),
            "actions": _host(actions),
            "rewards": _host(self.rewards[:n]),
            "flags": _host(flags),
            "cursor": self.cursor,
            "rows": self.rows,
            "num_adds": self.num_adds,
        }

    def load_state_dict(self, state: dict) -> None:
        n, frames = state["rows"], state["frames"]
        if tuple(frames.shape[1:]) != tuple(self.frames.shape[1:]) or n > self.num_rows:
            raise ValueError(
                f"replay of {n} rows of {tuple(frames.shape[1:])} does not fit "
                f"this run's {self.num_rows} rows of {tuple(self.frames.shape[1:])}"
            )
        actions, flags = (
            array.cpu().numpy() if isinstance(array, torch.Tensor) else array
            for array in (state["actions"], state["flags"])
        )
        actions, flags = loaded_actions(actions, flags, self.flags is self.actions)
        sources = {"frames": state["frames"], "actions": actions, "rewards": state["rewards"]}
        if flags is not None:
            sources["flags"] = flags
        for name, source in sources.items():
            target = getattr(self, name)
            # In blocks of rows, so that a memory-mapped source is read piece by piece.
            for begin in range(0, n, 4096):
                end = min(n, begin + 4096)
                block = source[begin:end]  # a tensor (a live state), or an array
                if not isinstance(block, torch.Tensor):
                    block = torch.as_tensor(np.ascontiguousarray(block))
                target[begin:end].copy_(block)
        self.cursor, self.rows, self.num_adds = int(state["cursor"]), n, int(state["num_adds"])


def _host(tensor):
    """A CPU tensor as a NumPy view (what FrameStorage's state holds); a GPU tensor as
    it is (run/checkpoint.py copies it to the file piece by piece)."""
    return tensor.numpy() if tensor.device.type == "cpu" else tensor
