"""R2D1's sequence replay (rlpyt's (Prioritized)SequenceReplayFrameBuffer, B3.2 and
B6.4), on qzoo's frame storage: every frame is still stored once.

`SequenceStorage` is a `FrameStorage` that also keeps, every `interval` rows
(--store-state-interval), the recurrent state each environment's actor acted from at
that row: the only bytes a sequence adds (2 x H float32 per environment per
`interval` rows). Rows are rounded up to a multiple of `interval`, so storage points
stay put when the ring wraps. A sequence starts at a storage point s and spans L + n
rows, L = burn-in W + trained T (rlpyt: 40 + 80, n = 5): rows s..s+W-1 only warm the
state up, rows s+W..s+W+T-1 are trained, and their n-step targets reach n rows further.
Sequences overlap and share their frames. Episode boundaries inside a sequence are
masked as rlpyt does (B3.3 steps 4 and 8): an episode start inside the burn-in zeroes
the burned-in states; trained steps count only up to the first row that starts no
transition (`losses.valid_until_episode_end`). With `episodic_lives` (rlpyt's, as the
actor's) a row whose arrival lost a life (ZERO_DISCOUNT without LAST) also starts an
episode for the agent: blank older stacked frames, no previous action or reward, zeroed
burned-in states, and trained steps masked from it on (its own transition, the one that
lost the life, is trained). The samplers (samplers.py) draw
sequence starts through `SequenceSlots`, whose rows are storage points: slot (p, b) is
the sequence starting at row p x interval of column b."""

import math
from typing import Any

import numpy as np
import torch

from qzoo.learning import losses
from qzoo.replay import frames as row_flags
from qzoo.replay.batch import Row, SequenceBatch
from qzoo.replay.frames import FIRST, FrameStorage, bytes_per_transition, observation_shape
from qzoo.replay.replay import Replay
from qzoo.replay.samplers import PrioritizedSampler


def stacked_observations(frames, frame_mask):
    """[S + k - 1, B, *frame] frames and [S, B, k] masks -> observations [S, B,
    *observation_shape] (frames.observation_shape's layout), frame stacks built as views
    on the device (each frame crosses from the host once, not k times as in rlpyt's
    frame-by-frame rebuild)."""
    k = frame_mask.shape[-1]
    shape = observation_shape(tuple(frames.shape[2:]), k)
    windows = frames.unfold(0, k, 1).movedim(-1, 2)  # [S, B, k, *frame]
    mask = frame_mask.reshape(frame_mask.shape + (1,) * (windows.dim() - 3))
    windows = torch.where(
        mask, windows, torch.zeros((), dtype=windows.dtype, device=windows.device)
    )
    return windows.reshape(windows.shape[:2] + shape)


def sequence_bytes_per_transition(frame_shape, frame_dtype, num_actions, interval, state_size):
    """Bytes per stored transition: qzoo's frame storage plus one (h, c) float32 state
    per `interval` rows."""
    state = 2 * state_size * 4 / interval
    return bytes_per_transition(frame_shape, frame_dtype, num_actions) + state


class SequenceStorage(FrameStorage):
    """Frame storage plus recurrent states at storage points (see the module docstring)."""

    def __init__(self, capacity, num_envs, frame_shape, frame_dtype, num_actions, stack, n_steps,
                 discount, burn_in, trained, interval, state_size, episodic_lives=False):  # fmt: skip
        rows = math.ceil(math.ceil(capacity / num_envs) / interval) * interval
        super().__init__(rows * num_envs, num_envs, frame_shape, frame_dtype, num_actions, stack,
                         n_steps, discount)  # fmt: skip
        self.burn_in, self.trained, self.interval = burn_in, trained, interval
        self.episodic_lives = episodic_lives
        self.length = burn_in + trained + n_steps  # replayed steps S
        self.states = np.zeros((rows // interval, num_envs, 2, state_size), np.float32)
        # Actor Q-values of the newest S rows, for input priorities (rlpyt B3.4).
        self.q_taken = np.zeros((self.length, num_envs), np.float32)
        self.q_max = np.zeros((self.length, num_envs), np.float32)
        self.nbytes += self.states.nbytes
        self.bytes_per_transition = sequence_bytes_per_transition(
            frame_shape, frame_dtype, num_actions, interval, state_size
        )

    def add(self, row: Row) -> int:
        """Writes a `Row` whose agent_info is a RecurrentInfo; returns the row index."""
        info = row.agent_info
        slot = self.num_adds % self.length
        t = super().add(row)
        self.q_taken[slot], self.q_max[slot] = info.q_taken, info.q_max
        if t % self.interval == 0:
            self.states[t // self.interval] = np.asarray(info.state.detach().cpu(), np.float32)
        return t

    def completed(self):
        """The storage point whose sequence the last add completed, or None."""
        if self.num_adds < self.length:
            return None
        start = (self.cursor - self.length) % self.num_rows
        return start // self.interval if start % self.interval == 0 else None

    def first_trained_transition(self, start, b):
        return self.valid((start + self.burn_in) % self.num_rows, b)

    def _starts(self, rows, b):
        """Whether each row starts the agent's episode: FIRST, and with episodic lives a
        row that lost a life (ZERO_DISCOUNT, not LAST)."""
        flags = self.flags[rows, b]
        starts = (flags & FIRST) != 0
        if self.episodic_lives:
            starts |= ((flags & row_flags.ZERO_DISCOUNT) != 0) & ((flags & row_flags.LAST) == 0)
        return starts

    def _trained(self, start, b):
        """Rows [T, B] of the trained steps, their columns, n-step returns and ends."""
        rows = start[None] + np.arange(self.burn_in, self.burn_in + self.trained)[:, None]
        rows %= self.num_rows
        cols = np.broadcast_to(b[None], rows.shape)
        r_t, discount_t, end = self.returns(rows.ravel(), cols.ravel())
        exists = self.valid(rows.ravel(), cols.ravel()).reshape(rows.shape)
        if self.episodic_lives:  # masked from a life's start on (not at the first step)
            exists[1:] &= ~self._starts(rows[1:], cols[1:])
        shape = rows.shape
        end_step = ((end.reshape(shape) - start[None]) % self.num_rows).astype(np.int64)
        return rows, cols, r_t.reshape(shape), discount_t.reshape(shape), end_step, exists

    def gather(self, start: Any, b: Any) -> SequenceBatch:
        """The `SequenceBatch` of sequences starting at rows `start` of columns `b`."""
        k, steps = self.stack, self.length
        rows = (start[None] + np.arange(-(k - 1), steps)[:, None]) % self.num_rows
        frames = self.frames[rows, b[None]]
        first = self._starts(rows, b[None])  # [S + k - 1, B]
        windows = np.lib.stride_tricks.sliding_window_view(first, k, axis=0)  # [S, B, k]
        # A stacked frame is blank when an episode starts after it inside the stack.
        later_first = np.cumsum(windows[..., ::-1], axis=-1)[..., ::-1] - windows
        first = first[k - 1 :]  # [S, B]: row s + j starts an episode
        seq_rows = rows[k - 1 :]
        prev_rows = (seq_rows - 1) % self.num_rows
        prev_action = np.where(first, -1, self.action_at(prev_rows, b[None]))
        trained_rows, cols, r_t, discount_t, end_step, exists = self._trained(start, b)
        state = self.states[start // self.interval, b]  # [B, 2, H]
        return SequenceBatch(
            frames=frames, frame_mask=later_first == 0, prev_action=prev_action,
            prev_reward=np.where(first, 0.0, self.rewards[seq_rows, b[None]]).astype(np.float32),
            action=self.action_at(trained_rows, cols)
            .astype(np.int64), r_t=r_t, discount_t=discount_t,
            bootstrap=end_step - self.burn_in, transition=exists,
            zero_state=first[1 : self.burn_in + 1].any(0), state=state[None],
        )  # fmt: skip

    def input_priorities(self, point, eta, eps):
        """Priorities [B] of the sequences at storage `point`, just completed, from the
        actor's recorded Q-values (rlpyt B3.4): delta = q(a_t) - h(R + discount h^-1(max_a
        q at the bootstrap row)) over the valid trained steps, eta max + (1 - eta) mean.
        Deviation on purpose: rlpyt scores 40-step sampler batches with the Q n - 1 rows
        ahead and no gamma^n; here the whole trained part is scored with qzoo's n-step
        returns (R2D2 scored the full sequence)."""
        b = np.arange(self.num_envs)
        start = np.full(self.num_envs, point * self.interval)
        _, _, r_t, discount_t, end_step, exists = self._trained(start, b)
        # Step j of this sequence is at ring slot (num_adds - S + j) % S.
        base = self.num_adds - self.length
        slots = (base + np.arange(self.burn_in, self.burn_in + self.trained)) % self.length
        q_taken = torch.as_tensor(self.q_taken[slots])  # [T, B]
        q_end = torch.as_tensor(self.q_max[(base + end_step) % self.length, b[None]])
        td = losses.transformed_n_step_q_learning(
            q_taken[..., None], torch.zeros_like(q_taken, dtype=torch.int64), torch.as_tensor(r_t),
            torch.as_tensor(discount_t), q_end[..., None], eps=eps,
        )  # fmt: skip
        valid = losses.valid_until_episode_end(torch.as_tensor(exists), dim=0)
        return losses.sequence_priorities(td.abs(), valid, eta, dim=0).numpy()

    def state_dict(self) -> dict:
        state = super().state_dict()
        state.update(states=self.states, q_taken=self.q_taken, q_max=self.q_max)
        return state

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.states[:], self.q_taken[:], self.q_max[:] = (state["states"], state["q_taken"],
                                                          state["q_max"])  # fmt: skip


class SequenceSlots:
    """The storage interface samplers use (samplers.py), over sequence starts: row p is
    storage point p (row p x interval), column b an environment. A slot is in the window
    when its whole sequence, the stack history of its first row and the n-step future of
    its last trained row are stored; valid when its first trained row starts a
    transition (else every trained step would be masked)."""

    def __init__(self, storage):
        self.storage = storage
        self.num_rows = storage.num_rows // storage.interval
        self.num_envs = storage.num_envs

    def _bounds(self):
        """(oldest point, lowest and highest+1 point age in the window)."""
        s, k = self.storage, self.storage.interval
        oldest_row = s.oldest()
        oldest = -(-oldest_row // k) % self.num_rows
        offset = (oldest * k - oldest_row) % s.num_rows  # row age of the oldest point
        low, high = s.window()  # row ages with history and n-step future
        last = high - (s.burn_in + s.trained)  # largest row age of a start
        return oldest, max(0, -(-(low - offset) // k)), max(0, (last - offset) // k + 1)

    @property
    def size(self) -> int:
        """Sequences in the window (for prioritized replay's 1 / N)."""
        _, low, high = self._bounds()
        return max(high - low, 0) * self.num_envs

    def oldest(self) -> int:
        return self._bounds()[0]

    def window(self) -> tuple[int, int]:
        return self._bounds()[1:]

    def can_sample(self) -> bool:
        low, high = self.window()
        return high > low

    def in_window(self, p: Any) -> Any:
        oldest, low, high = self._bounds()
        age = (np.asarray(p) - oldest) % self.num_rows
        return (age >= low) & (age < high)

    def can_start(self, p: Any, b: Any) -> Any:
        return self.storage.first_trained_transition(np.asarray(p) * self.storage.interval, b)

    valid = can_start


class SequencePrioritizedSampler(PrioritizedSampler):
    """Prioritized sequences: a completed sequence enters with its input priority (or,
    without, the largest seen); a storage point's entry is switched off as soon as the
    ring overwrites its first row (rlpyt's `advance`)."""

    def added(self, p, priorities=None):
        if priorities is None:
            return super().added(p)
        columns = np.arange(self.storage.num_envs)
        rows = np.full(columns.size, p)
        can_start = self.storage.can_start(rows, columns)
        self.tree.set(self._leaves(rows, columns), np.where(can_start, self._power(priorities), 0))

    def removed(self, p):
        columns = np.arange(self.storage.num_envs)
        self.tree.set(self._leaves(np.full(columns.size, p), columns), np.zeros(columns.size))


class SequenceReplay(Replay):
    """Sequence storage and a sampler over its `SequenceSlots`."""

    def __init__(self, storage, sampler, input_priorities=False, eta=0.9, eps=1e-3):
        super().__init__(storage, sampler)
        self.input_priorities, self.eta, self.eps = input_priorities, eta, eps
        self.prioritized = isinstance(sampler, SequencePrioritizedSampler)

    def can_sample(self) -> bool:
        return self.sampler.storage.can_sample()

    def add(self, row):
        storage = self.storage
        t = storage.add(row)
        if self.prioritized and t % storage.interval == 0:
            self.sampler.removed(t // storage.interval)
        point = storage.completed()
        if point is not None and self.prioritized:
            priorities = None
            if self.input_priorities:
                priorities = storage.input_priorities(point, self.eta, self.eps)
            self.sampler.added(point, priorities)

    def sample(self, batch_size):
        p, b, weights = self.sampler.sample(batch_size)
        batch = self.storage.gather(p * self.storage.interval, b)
        return batch._replace(weights=weights, indices=(p, b))
