"""A DQN Replay Dataset split across replay shards (offline training on Ray).

`split` gives each of K shards disjoint parts of the dataset's checkpoints, covering
every transition; a `DatasetShard` memory-maps only the checkpoints of its parts and
draws uniformly over its valid transitions, as the local sampler does. A shard keeps
no state of its own: every request names the parts, so a shard that Ray restarted
serves the same data. A plain class, a Ray actor in a run (distributed/offline.py)."""

import itertools
import os
import sys

import numpy as np

from qzoo.offline.dataset import dataset_checkpoints
from qzoo.offline.storage import DatasetStorage
from qzoo.replay.samplers import MAX_DRAWS


def data_rows(checkpoint):
    """The rows of a checkpoint (a dict of arrays) that hold data."""
    rows = len(checkpoint["action"])
    return min(int(checkpoint["add_count"]), rows)


def split(sizes, num_shards):
    """Each shard's parts [(suffix, lo, hi), ...] of the checkpoints `sizes` = {suffix:
    rows holding data}: a checkpoint and the rows [lo, hi) whose transitions the shard
    serves (a transition belongs to its first row, Dopamine's index), out of the rows that
    hold data (all of a full checkpoint, the first add_count of a partial one, such as a
    run's final snapshot). With at least as many checkpoints as shards, each shard gets
    whole checkpoints, balanced by rows (the largest first, each to the shard holding the
    fewest rows so far); with fewer, the checkpoints' rows laid end to end are cut into K
    runs of equal length, so a shard's part is a piece of one checkpoint or the end of one
    and the start of the next. The parts are disjoint and cover every row, hence every
    transition."""
    suffixes = sorted(sizes)
    if len(suffixes) >= num_shards:
        load, mine = [0] * num_shards, [[] for _ in range(num_shards)]
        for suffix in sorted(suffixes, key=lambda s: (-sizes[s], s)):
            k = load.index(min(load))
            load[k] += sizes[suffix]
            mine[k].append(suffix)
        return [[(int(s), 0, sizes[s]) for s in sorted(m)] for m in mine]
    starts = np.cumsum([0] + [sizes[s] for s in suffixes])
    bounds = [k * int(starts[-1]) // num_shards for k in range(num_shards + 1)]
    parts = []
    for start, end in itertools.pairwise(bounds):
        mine = []
        for j, suffix in enumerate(suffixes):
            lo, hi = max(start, starts[j]), min(end, starts[j + 1])
            if lo < hi:
                mine.append((suffix, int(lo - starts[j]), int(hi - starts[j])))
        parts.append(mine)
    return parts


def _was_restarted():
    """Whether Ray restarted the actor this runs in (False outside one: a plain object)."""
    ray = sys.modules.get("ray")  # imported in every Ray actor
    if ray is None or not ray.is_initialized():
        return False
    context = ray.get_runtime_context()
    return context.get_actor_id() is not None and context.was_current_actor_reconstructed


class DatasetShard:
    """One shard of a dataset. It memory-maps only the checkpoints of its parts, with the
    local run's `DatasetStorage` (Dopamine's rules: validity, stacks, n-step returns), and
    reads only the frames of its rows (plus the K - 1 rows before and n after, which the
    states of a transition starting in its range need). It draws uniformly over its valid
    transitions as the local sampler does (replay/samplers.py, rejection sampling): a part
    with probability proportional to its rows, a row uniformly in it, redrawn while
    invalid. Every request names the parts; a shard whose parts differ (a new one, one
    that Ray restarted, or after --offline-reload's redraw) opens them first."""

    def __init__(self, config, info, shard):
        self.config, self.info, self.shard = config, info, shard
        self.parts, self.storage = None, None
        self.reseed(0)

    def reseed(self, generation):
        """The shard's draws: a child of the run's seed per shard and `generation` (the
        iteration a run resumed at), and of the process when Ray restarted it, so that
        neither a resume nor a restart draws the batches drawn before again."""
        restart = os.getpid() if _was_restarted() else 0
        sequence = np.random.SeedSequence([self.config.seed, 15, self.shard, generation, restart])
        self.rng = np.random.Generator(np.random.PCG64(sequence))

    def _open(self, parts):
        parts = [tuple(int(x) for x in part) for part in parts]
        if parts == self.parts:
            return
        self.storage = None  # the old checkpoints' maps close with it
        c = self.config
        self.suffixes = np.array([s for s, _, _ in parts], np.int64)
        self.lo = np.array([lo for _, lo, _ in parts], np.int64)
        self.hi = np.array([hi for _, _, hi in parts], np.int64)
        if parts:
            found = dataset_checkpoints(c.offline, self.info, self.suffixes.tolist(),
                                        c.offline_transitions)  # fmt: skip
            self.storage = DatasetStorage([found[s] for s in self.suffixes.tolist()],
                                          c.frame_stack, c.n_steps, c.discount)  # fmt: skip
        self.parts = parts

    def counts(self, parts):
        """(valid transitions of each part, the process id: a new one tells of a
        restart)."""
        self._open(parts)
        counts = []
        for j, (lo, hi) in enumerate(zip(self.lo.tolist(), self.hi.tolist())):
            valid = self.storage.valid(np.arange(lo, hi), np.full(hi - lo, j))
            counts.append(int(valid.sum()))
        return counts, os.getpid()

    def sample(self, batch_size, parts, suffix=None):
        """(a `Batch` of `batch_size` transitions drawn uniformly from the valid ones of
        `parts`, or of those of checkpoint `suffix` only, the process id). The batch's
        indices are (checkpoint suffix, row) of each transition."""
        self._open(parts)
        columns = np.arange(len(self.suffixes))
        if suffix is not None:
            columns = columns[self.suffixes == suffix]
        weights = (self.hi - self.lo)[columns].astype(np.float64)
        t = np.empty(batch_size, np.int64)
        b = np.empty(batch_size, np.int64)
        todo = np.arange(batch_size)
        for _ in range(MAX_DRAWS):
            b[todo] = self.rng.choice(columns, size=todo.size, p=weights / weights.sum())
            t[todo] = self.rng.integers(self.lo[b[todo]], self.hi[b[todo]])
            todo = todo[~self.storage.valid(t[todo], b[todo])]
            if todo.size == 0:
                break
        else:
            raise RuntimeError(f"shard {self.shard} found no valid transition in {MAX_DRAWS} draws")
        batch = self.storage.gather(t, b)
        return batch._replace(indices=(self.suffixes[b], t)), os.getpid()
