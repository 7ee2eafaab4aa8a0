"""Proportional prioritized replay (Schaul et al. 2016, arXiv:1511.05952) over the
deduplicated frame replay, with DQN Zoo's semantics (dqn_zoo.md §5):

- stored leaf value p^alpha, with 0^alpha = 0 (so a zero priority is never sampled);
- each draw is uniform with probability `uniform_sample_probability` (1e-3),
  otherwise proportional: P = (1 - u) p^alpha / sum + u / N;
- importance weights (1/N / P)^beta, divided by the batch maximum;
- new transitions enter at the largest priority seen so far (which starts at 1);
- beta is annealed over replay additions by the caller (loop.py).

Slots are the replay's [T, B] rows (leaf = t * B + b). Rows that cannot start a
transition (an episode's LAST row) get priority 0; rows that are not valid yet or
any more (the newest n rows, the oldest history after a wrap) are rejected and
redrawn, exactly as uniform sampling does.
"""

import numpy as np

from qzoo.replay.frames import LAST, FrameReplay


class SumTree:
    """Binary sum tree over float64 leaves, vectorized with NumPy.

    Node i has children 2i and 2i+1, the root is node 1, leaves start at `capacity`
    (a power of two).
    """

    def __init__(self, size):
        self.capacity = 1 << max(0, int(size - 1).bit_length())
        self.nodes = np.zeros(2 * self.capacity, np.float64)
        self._depth = self.capacity.bit_length() - 1

    def total(self):
        return self.nodes[1]

    def get(self, indices):
        return self.nodes[self.capacity + np.asarray(indices)]

    def set(self, indices, values):
        """Sets leaves (the last value wins for repeated indices) and their sums."""
        values = np.asarray(values, np.float64)
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError("sum tree values must be finite and non-negative")
        nodes = self.capacity + np.asarray(indices, np.int64).reshape(-1)
        if nodes.size == 1:
            # One leaf (an add with one environment): Python scalars walk the 20
            # levels of a 1M tree several times faster than size-1 NumPy arrays.
            node, tree = int(nodes[0]), self.nodes
            tree[node] = float(values.reshape(-1)[0])
            while node > 1:
                node //= 2
                tree[node] = tree[2 * node] + tree[2 * node + 1]
            return
        self.nodes[nodes] = values
        # Repeated parents recompute the same sum, so no np.unique is needed.
        for _ in range(self._depth):
            nodes //= 2
            self.nodes[nodes] = self.nodes[2 * nodes] + self.nodes[2 * nodes + 1]

    def query(self, targets):
        """For each target in [0, total), the smallest leaf whose cumulative sum
        exceeds it; never a zero-valued leaf."""
        targets = np.array(targets, np.float64)
        nodes = np.ones(len(targets), np.int64)
        for _ in range(self._depth):
            left = self.nodes[2 * nodes]
            go_right = targets >= left
            targets = np.where(go_right, targets - left, targets)
            nodes = 2 * nodes + go_right
        return nodes - self.capacity


class PrioritizedFrameReplay(FrameReplay):
    def __init__(self, *args, priority_exponent, uniform_sample_probability,
                 normalize_weights=True, **kwargs):  # fmt: skip
        super().__init__(*args, **kwargs)
        self.tree = SumTree(self.num_rows * self.num_envs)
        self.priority_exponent = priority_exponent
        self.uniform_sample_probability = uniform_sample_probability
        self.normalize_weights = normalize_weights
        self.max_seen_priority = 1.0
        self.importance_sampling_exponent = 0.4

    def _power(self, priorities):
        # 0^alpha must be 0 (NumPy gives 0^0 = 1): a zero priority is never sampled.
        priorities = np.asarray(priorities, np.float64)
        return np.where(priorities == 0, 0.0, np.power(priorities, self.priority_exponent))

    def add(self, frame, action, reward, first, last, zero_discount):
        t = self.cursor
        super().add(frame, action, reward, first, last, zero_discount)
        leaves = t * self.num_envs + np.arange(self.num_envs)
        priority = np.where(last, 0.0, self._power(self.max_seen_priority))
        self.tree.set(leaves, priority)

    def sample_indices(self, batch_size):
        if self.tree.total() <= 0:
            return super().sample_indices(batch_size)
        t = np.empty(batch_size, np.int64)
        b = np.empty(batch_size, np.int64)
        todo = np.arange(batch_size)
        for _ in range(1000):
            uniform = self._rng.random_sample(todo.size) < self.uniform_sample_probability
            targets = self._rng.random_sample(todo.size) * self.tree.total()
            leaves = self.tree.query(targets)
            t[todo], b[todo] = np.divmod(leaves, self.num_envs)
            if uniform.any():
                t[todo[uniform]], b[todo[uniform]] = super().sample_indices(int(uniform.sum()))
            ok = self._in_window(t[todo]) & self.valid(t[todo], b[todo])
            todo = todo[~ok]
            if todo.size == 0:
                return t, b
        raise RuntimeError("prioritized replay found no valid transition in 1000 draws")

    def _in_window(self, t):
        """Rows whose stack history and n-step future are both in the replay."""
        order = (t - self._oldest()) % self.num_rows
        full = self.rows == self.num_rows
        return (order >= (self.stack - 1 if full else 0)) & (order < self.rows - self.n_steps)

    def probabilities(self, t, b):
        """P(i) = (1 - u) p_i^alpha / sum + u / N, N the number of stored transitions."""
        u = self.uniform_sample_probability
        leaf = self.tree.get(t * self.num_envs + b)
        return (1 - u) * leaf / self.tree.total() + u / self.size

    def sample(self, batch_size):
        batch = super().sample(batch_size)
        t, b = batch["indices"]
        probabilities = self.probabilities(t, b)
        weights = np.power(1.0 / self.size / probabilities, self.importance_sampling_exponent)
        if self.normalize_weights:
            weights /= weights.max()
        if not np.all(np.isfinite(weights)):
            raise RuntimeError("non-finite importance sampling weights")
        batch["weights"] = weights.astype(np.float32)
        return batch

    def update_priorities(self, indices, priorities):
        """Writes new priorities (e.g. |TD error|) for sampled transitions."""
        t, b = indices
        priorities = np.asarray(priorities, np.float64)
        self.max_seen_priority = max(self.max_seen_priority, float(priorities.max()))
        # LAST rows never start a transition: they stay at zero.
        is_last = (self.flags[t, b] & LAST) != 0
        self.tree.set(t * self.num_envs + b, np.where(is_last, 0.0, self._power(priorities)))

    def state_dict(self):
        state = super().state_dict()
        state.update(tree=self.tree.nodes.copy(), max_seen_priority=self.max_seen_priority)
        return state

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.tree.nodes[:] = state["tree"]
        self.max_seen_priority = state["max_seen_priority"]
