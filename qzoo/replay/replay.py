"""Replay = a storage (how transitions live) and a sampler (which ones a batch holds),
working together: rows in, batches out, priorities back."""


class Replay:
    """A storage and a sampler working together."""

    def __init__(self, storage, sampler):
        self.storage, self.sampler = storage, sampler

    @property
    def size(self):
        return self.storage.size

    @property
    def num_adds(self):
        """Transitions ever added (rows times environments)."""
        return self.storage.num_adds * self.storage.num_envs

    def can_sample(self):
        return self.storage.can_sample()

    def add(self, row):
        self.sampler.added(self.storage.add(row))

    def sample(self, batch_size):
        t, b, weights = self.sampler.sample(batch_size)
        return self.storage.gather(t, b)._replace(weights=weights)

    def update_priorities(self, indices, priorities):
        self.sampler.update(indices, priorities)

    def state_dict(self):
        return {"storage": self.storage.state_dict(), "sampler": self.sampler.state_dict()}

    def load_state_dict(self, state):
        self.storage.load_state_dict(state["storage"])
        self.sampler.load_state_dict(state["sampler"])
