"""A replay shard (Ape-X's sharded replay): the experience of some of the actors, in
qzoo's replay (replay/: FrameStorage, every frame stored once, and the uniform or
prioritized sampler), serving batches to the learner.

Actor i writes to shard i mod K. A shard keeps one `Replay` per actor it serves (a
slot), each `--replay-capacity / --actors` transitions in `--envs-per-actor` columns,
because the storage writes the columns of one actor in lockstep and actors run at
their own pace. A batch is drawn from the shard's slots together:
- uniform: each draw picks a slot with probability proportional to its size, then a
  transition uniformly in it, so every stored transition is as likely;
- prioritized: each draw picks a slot in proportion to its sum of p^alpha, then a
  transition by priority in it, so P(i) = p_i^alpha / sum over the shard; importance
  weights (1/N / P(i))^beta use the shard's N and sum. (Each slot's own mix of uniform
  draws, 1e-3 of them, is uniform over the slot rather than over the shard: a
  difference of at most 1e-3 in any probability.)
As in Ape-X (and RLlib's implementation of it), each batch comes from one shard and is
normalised within it; the learner takes batches from every shard.
"""

import dataclasses
import math
import os

import numpy as np

from qzoo.replay import make_replay
from qzoo.replay.batch import Batch, Row

ROW_FIELDS = 6  # frame, action, reward, first, last, zero_discount (no agent_info)


def slots_of(shard, num_shards, num_actors):
    """The actors shard `shard` serves, in slot order (actor i -> shard i mod K)."""
    return list(range(shard, num_actors, num_shards))


class ReplayShard:
    """One shard (see the module docstring). A plain class, a Ray actor in a run."""

    def __init__(self, config, info, shard):
        slots = slots_of(shard, config.replay_shards, config.actors)
        per_actor = dataclasses.replace(
            config, num_envs=config.envs_per_actor,
            replay_capacity=config.replay_capacity // config.actors,
        )  # fmt: skip
        # The shard's draws: a child of the run's seed, one per shard.
        sequence = np.random.SeedSequence([config.seed, 14, shard])
        self.rng = np.random.Generator(np.random.PCG64(sequence))
        self.replays = [make_replay(per_actor, info, self.rng) for _ in slots]
        self.prioritized = config.prioritized
        self.n_steps = config.n_steps

    def stats(self):
        """(transitions stored, transitions ever added, whether a batch can be drawn,
        the largest priority seen, the process id: a new one tells of a restart)."""
        size = sum(r.size for r in self.replays)
        adds = sum(r.num_adds for r in self.replays)
        can_sample = any(r.can_sample() for r in self.replays)
        if not self.prioritized:
            return size, adds, can_sample, math.nan, os.getpid()
        top = max(r.sampler.max_seen_priority for r in self.replays)
        return size, adds, can_sample, top, os.getpid()

    def add(self, slot, data):
        """Writes an actor's chunk: `data` = (Row of [L, M] arrays, priorities [P, M] or
        None). Priorities are those of the transitions starting at the P rows that end
        n rows before the newest (the newest n wait for the next chunk's, at the max
        priority seen, as a new transition enters a local replay)."""
        chunk, priorities = data
        replay = self.replays[slot]
        if replay.num_adds == 0:
            chunk = chunk._replace(first=np.array(chunk.first))  # Ray's arrays are read-only
            # A fresh slot (a new run or a restarted shard) may begin mid-episode: its
            # first row starts what it holds, with zero-padded stacks.
            chunk.first[0] = True
        for row in zip(*chunk[:ROW_FIELDS]):
            replay.add(Row(*row))
        if priorities is not None and len(priorities):
            storage = replay.storage
            p = len(priorities)
            counters = storage.num_adds - self.n_steps - p + np.arange(p)
            kept = counters >= max(0, storage.num_adds - storage.rows)  # still stored
            t = np.repeat(counters[kept] % storage.num_rows, storage.num_envs)
            b = np.tile(np.arange(storage.num_envs), int(kept.sum()))
            if t.size:
                replay.update_priorities((t, b), priorities[kept].reshape(-1))
        return self.stats()

    def sample(self, batch_size, importance_sampling_exponent):
        """A `Batch` of `batch_size` transitions from this shard's slots, its indices
        (slot, t, b) for `update_priorities`; None while no slot can sample."""
        ready = [j for j, r in enumerate(self.replays) if r.can_sample()]
        if not ready:
            return None
        # What a draw picks from: transitions (sequences in R2D1's SequenceSlots).
        sizes = np.array([self.replays[j].sampler.storage.size for j in ready], np.float64)
        mass = sizes
        if self.prioritized:
            totals = np.array([self.replays[j].sampler.tree.total() for j in ready])
            mass = totals if totals.sum() > 0 else sizes
        counts = self.rng.multinomial(batch_size, mass / mass.sum())
        parts, probabilities = [], []
        for j, count in zip(ready, counts):
            if count == 0:
                continue
            replay = self.replays[j]
            if self.prioritized:
                t, b = replay.sampler.sample_indices(count)
                leaf = replay.sampler.tree.get(t * replay.storage.num_envs + b)
                u = replay.sampler.uniform_sample_probability
                probabilities.append((1 - u) * leaf / mass.sum() + u / sizes.sum())
            else:
                t, b, _ = replay.sampler.sample(count)
            parts.append((np.full(count, j), t, b, self.gather(replay, t, b)))
        batch = self.join([part[3] for part in parts])
        weights = None
        if self.prioritized:
            p = np.concatenate(probabilities)
            weights = np.power(1.0 / sizes.sum() / p, importance_sampling_exponent)
            weights = (weights / weights.max()).astype(np.float32)
        indices = tuple(np.concatenate([part[i] for part in parts]) for i in range(3))
        return batch._replace(weights=weights, indices=indices)

    def gather(self, replay, t, b):
        """The batch of slots (t, b) of one actor's replay (a hook for R2D1's sequences)."""
        return replay.storage.gather(t, b)

    def join(self, batches):
        """One batch of several slots' batches."""
        return Batch(*(np.concatenate([batch[i] for batch in batches]) for i in range(5)))

    def update_priorities(self, indices, priorities):
        """New priorities from the learner for the (slot, t, b) it was given. Rows that
        actors overwrote since the draw get the new priority too (Ape-X's behaviour:
        the ring moves on while a batch is in flight)."""
        slot, t, b = indices
        for j in np.unique(slot):
            mine = slot == j
            self.replays[j].update_priorities((t[mine], b[mine]), priorities[mine])

    def state_dict(self):
        return {"slots": [r.state_dict() for r in self.replays],
                "rng": self.rng.bit_generator.state}  # fmt: skip

    def load_state_dict(self, state):
        for replay, saved in zip(self.replays, state["slots"]):
            replay.load_state_dict(saved)
        self.rng.bit_generator.state = state["rng"]
        return self.stats()
