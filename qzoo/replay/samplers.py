"""Samplers: which stored transitions a batch holds. They work on any storage that
offers `num_rows`, `num_envs`, `size`, `oldest()`, `window()`, `in_window(t)`,
`can_start(t, b)` and `valid(t, b)` (replay/frames.py is one).

Proportional prioritized sampling (Schaul et al. 2016, arXiv:1511.05952) follows DQN
Zoo's semantics (dqn_zoo.md §5):
- stored leaf value p^alpha, with 0^alpha = 0 (so a zero priority is never sampled);
- each draw is uniform with probability `uniform_sample_probability` (1e-3),
  otherwise proportional: P = (1 - u) p^alpha / sum + u / N;
- importance weights (1/N / P)^beta, divided by the batch maximum;
- new transitions enter at the largest priority seen so far (which starts at 1);
- beta is annealed over replay additions by the caller (run/updates.py).

Slots are the storage's [T, B] rows (leaf = t * B + b). Rows that cannot start a
transition (an episode's LAST row) get priority 0; rows that are not valid yet or
any more (the newest n rows, the oldest history after a wrap) are rejected and
redrawn, exactly as uniform sampling does.
"""

from typing import Any

import numpy as np

from qzoo.replay.sumtree import SumTree

MAX_DRAWS = 1000


class UniformSampler:
    """Uniform over valid transitions, with replacement (rejection sampling)."""

    def __init__(self, storage, rng):
        self.storage, self._rng = storage, rng

    def added(self, t: int) -> None:
        """Called after the storage wrote row `t`."""

    def sample(self, batch_size: int) -> tuple[Any, Any, Any]:
        """Rows `t` and columns `b` of `batch_size` transitions, and their weights
        (None: uniform sampling needs no importance weights)."""
        storage = self.storage
        if not storage.can_sample():
            raise RuntimeError("replay holds too few rows to sample")
        low, high = storage.window()
        t = np.empty(batch_size, np.int64)
        b = np.empty(batch_size, np.int64)
        todo = np.arange(batch_size)
        self._begin_batch()
        for _ in range(MAX_DRAWS):
            age = self._rng.integers(low, high, size=todo.size)
            t[todo] = (storage.oldest() + age) % storage.num_rows
            b[todo] = self._columns(todo.size)
            todo = todo[~storage.valid(t[todo], b[todo])]
            if todo.size == 0:
                return t, b, None
        raise RuntimeError(f"replay found no valid transition in {MAX_DRAWS} draws")

    def _begin_batch(self):
        """Called once per batch, before its draws (see CheckpointPerBatchSampler)."""

    def _columns(self, n):
        """The columns of `n` draws: any, uniformly (so every valid slot is as likely)."""
        if self.storage.num_envs == 1:  # integers(1) draws nothing: the same stream
            return np.zeros(n, np.int64)
        return self._rng.integers(self.storage.num_envs, size=n)

    def update(self, indices: Any, priorities: Any) -> None:
        """Uniform sampling ignores priorities."""

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


class PrioritizedSampler:
    """Proportional prioritized sampling over a sum tree (see the module docstring)."""

    def __init__(self, storage, rng, priority_exponent, uniform_sample_probability,
                 normalize_weights=True):  # fmt: skip
        self.storage, self._rng = storage, rng
        self._uniform = UniformSampler(storage, rng)
        self.tree = SumTree(storage.num_rows * storage.num_envs)
        self.priority_exponent = priority_exponent
        self.uniform_sample_probability = uniform_sample_probability
        self.normalize_weights = normalize_weights
        self.max_seen_priority = 1.0
        self.importance_sampling_exponent = 0.4  # annealed by the run loop

    def _power(self, priorities):
        # 0^alpha must be 0 (NumPy gives 0^0 = 1): a zero priority is never sampled.
        priorities = np.asarray(priorities, np.float64)
        return np.where(priorities == 0, 0.0, np.power(priorities, self.priority_exponent))

    def _leaves(self, t, b):
        return np.asarray(t) * self.storage.num_envs + np.asarray(b)

    def added(self, t: int) -> None:
        """New transitions enter at the max seen priority; LAST rows at zero."""
        columns = np.arange(self.storage.num_envs)
        rows = np.full(columns.size, t)
        can_start = self.storage.can_start(rows, columns)
        priority = np.where(can_start, self._power(self.max_seen_priority), 0.0)
        self.tree.set(self._leaves(rows, columns), priority)

    def sample_indices(self, batch_size):
        """Rows and columns drawn by priority (uniform with probability u)."""
        if self.tree.total() <= 0:
            return self._uniform.sample(batch_size)[:2]
        storage = self.storage
        t = np.empty(batch_size, np.int64)
        b = np.empty(batch_size, np.int64)
        todo = np.arange(batch_size)
        for _ in range(MAX_DRAWS):
            uniform = self._rng.random(todo.size) < self.uniform_sample_probability
            targets = self._rng.random(todo.size) * self.tree.total()
            t[todo], b[todo] = np.divmod(self.tree.query(targets), storage.num_envs)
            if uniform.any():
                t_u, b_u, _ = self._uniform.sample(int(uniform.sum()))
                t[todo[uniform]], b[todo[uniform]] = t_u, b_u
            ok = storage.in_window(t[todo]) & storage.valid(t[todo], b[todo])
            todo = todo[~ok]
            if todo.size == 0:
                return t, b
        raise RuntimeError(f"prioritized replay found no valid transition in {MAX_DRAWS} draws")

    def probabilities(self, t, b):
        """P(i) = (1 - u) p_i^alpha / sum + u / N, N the number of stored transitions."""
        u = self.uniform_sample_probability
        leaf = self.tree.get(self._leaves(t, b))
        return (1 - u) * leaf / self.tree.total() + u / self.storage.size

    def sample(self, batch_size: int) -> tuple[Any, Any, Any]:
        """Rows, columns and importance weights (1/N / P)^beta (normalized by the
        batch maximum) of `batch_size` transitions."""
        t, b = self.sample_indices(batch_size)
        size = self.storage.size
        weights = np.power(1.0 / size / self.probabilities(t, b), self.importance_sampling_exponent)
        if self.normalize_weights:
            weights /= weights.max()
        if not np.all(np.isfinite(weights)):
            raise RuntimeError("non-finite importance sampling weights")
        return t, b, weights.astype(np.float32)

    def update(self, indices: Any, priorities: Any) -> None:
        """Writes new priorities (e.g. |TD error|) for sampled transitions; `priorities`
        as an array or as the learner's tensor (on any device)."""
        t, b = indices
        priorities = host_array(priorities)
        self.max_seen_priority = max(self.max_seen_priority, float(priorities.max()))
        # LAST rows never start a transition: they stay at zero.
        can_start = self.storage.can_start(t, b)
        self.tree.set(self._leaves(t, b), np.where(can_start, self._power(priorities), 0.0))

    def state_dict(self) -> dict:
        # A copy (16 MiB for 1M slots): the live tree keeps changing while a checkpoint
        # could still be writing it.
        return {"tree": self.tree.nodes.copy(), "max_seen_priority": self.max_seen_priority}

    def load_state_dict(self, state: dict) -> None:
        self.tree.nodes[:] = state["tree"]
        self.max_seen_priority = float(state["max_seen_priority"])


def host_array(values):
    """`values` (a tensor on any device, or an array) as a float64 NumPy array."""
    if hasattr(values, "detach"):  # a torch tensor: the learner's priorities
        values = values.detach().cpu().numpy()
    return np.asarray(values, np.float64)
