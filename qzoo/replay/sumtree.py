"""The sum tree behind proportional prioritized replay (Schaul et al. 2016,
arXiv:1511.05952): O(log N) writes and proportional draws over N float64 leaves."""

import numpy as np


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
            # levels of a 1M tree faster than size-1 NumPy arrays.
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
