"""Offline training on Ray: `qzoo train AGENT --env GAME --offline DIR --ray
[--replay-shards K]`. The learner (this process, on the GPU when there is one) trains
from a DQN Replay Dataset split across K replay shards (dataset_shards.py: disjoint
parts, each shard memory-mapping only its own), and an evaluator (workers.EvalWorker)
plays the evaluation frames. There are no training actors: `--actors` and
`--envs-per-actor` keep their default, 1 (configuration/rules/ray.py refuses another value).

`OfflineRayDriver` is the local offline driver (offline/driver.py) with its dataset
replaced by `ShardedDataset`, so an iteration's updates, target copies, frame counts,
results row, checkpoint and resume are the local offline run's, plus the columns
`learner_update_rate`, `replay_sample_rate` and `replay_shard_restarts`;
`learner_wait_fraction` is the part of the training phase the learner waited for a
batch. Not promised, as for other Ray runs: bit-identical results or resume (the
shards' and the learner's picks of shards are not in the checkpoint)."""

import collections
import math
import sys
import time
import uuid
from types import SimpleNamespace

import numpy as np

from qzoo.acting.driver import Progress
from qzoo.distributed.cluster import Faults, lost_errors
from qzoo.distributed.dataset_shards import DatasetShard, data_rows, split
from qzoo.distributed.workers import EvalWorker, to_numpy
from qzoo.errors import UserError
from qzoo.offline.dataset import dataset_checkpoints, first_suffixes
from qzoo.offline.driver import OfflineDriver
from qzoo.replay.batch import Batch

PREFETCH = 2  # batches requested ahead per shard


def call(faults, kind, index, method, *args):
    """`method.remote(*args)`'s answer, asked again while Ray restarts the actor."""
    import ray

    while True:
        try:
            return ray.get(method.remote(*args))
        except lost_errors() as e:
            faults.lost(kind, index, e)
            time.sleep(0.2)


class ShardedDataset:
    """The replay of an offline Ray run as the offline driver uses it (`can_sample`,
    `sample`, `update_priorities`, `state_dict`): batches from the shards, prefetched.
    `per_checkpoint`: --offline-reload's one checkpoint per batch.

    A batch is formed whole, by one shard (as in Ape-X). Without --offline-reload the
    learner picks the shard with probability proportional to its valid transitions, and
    the shard draws each of the batch's transitions uniformly over its own, so every
    transition of the dataset is as likely in each draw as in a local run (1/N), though
    the transitions of one batch come from one shard's part. With --offline-reload R the
    learner draws the R checkpoints of each iteration as the local run does (from the
    replay stream, at the start of the training phase, so a resumed run draws the same),
    splits them across the shards, and for each batch picks one of the R uniformly
    (batch_rl's FixedReplayBuffer), then a shard holding part of it in proportion to its
    valid transitions there; the batch is drawn from that checkpoint only.

    PREFETCH x K requests stay in flight, their answers taken in the order asked (not as
    they come: a faster shard would otherwise be over-sampled). A lost request (its shard
    died) is asked again of the same shard once Ray has restarted it (the dataset is on
    disk: nothing is lost); the restart is logged and counted."""

    num_adds = 0  # nothing is ever added

    def __init__(self, shards, faults, suffixes, parts, counts, batch_size, rng,
                 per_checkpoint=False):  # fmt: skip
        self.shards, self.faults, self.parts = shards, faults, parts
        self.suffixes, self.batch_size, self.rng = suffixes, batch_size, rng
        self.per_checkpoint = per_checkpoint
        # valid[k, j]: shard k's valid transitions of checkpoint suffixes[j].
        self.valid = np.zeros((len(shards), len(suffixes)), np.int64)
        for k, (mine, numbers) in enumerate(zip(parts, counts)):
            for (suffix, _, _), count in zip(mine, numbers):
                self.valid[k, suffixes.index(suffix)] += count
        self.size = int(self.valid.sum())
        self.pending = collections.deque()  # (ref, shard, suffix or None), oldest first
        self.waited = 0.0

    def can_sample(self):
        return self.size > 0

    def _pick(self):
        """(shard, checkpoint suffix or None) of the next batch."""
        if not self.per_checkpoint:
            per_shard = self.valid.sum(axis=1)
            return int(self.rng.choice(len(per_shard), p=per_shard / per_shard.sum())), None
        held = np.flatnonzero(self.valid.sum(axis=0))
        j = int(held[self.rng.integers(len(held))])
        k = int(self.rng.choice(len(self.shards), p=self.valid[:, j] / self.valid[:, j].sum()))
        return k, self.suffixes[j]

    def _ask(self, k, suffix):
        return self.shards[k].sample.remote(self.batch_size, self.parts[k], suffix)

    def _fill(self):
        while len(self.pending) < PREFETCH * len(self.shards):
            k, suffix = self._pick()
            self.pending.append((self._ask(k, suffix), k, suffix))

    def sample(self, batch_size):
        """The oldest request's batch (asked again of its shard if that died)."""
        import ray

        assert batch_size == self.batch_size, "requests are prefetched at the config's size"
        self._fill()
        while True:
            ref, k, suffix = self.pending[0]
            started = time.perf_counter()
            try:
                batch, pid = ray.get(ref)
            except lost_errors() as e:
                self.faults.lost("replay shard", k, e)
                time.sleep(0.1)
                self.pending[0] = (self._ask(k, suffix), k, suffix)
                continue
            finally:
                self.waited += time.perf_counter() - started
            self.faults.answered("replay shard", k, pid)
            self.pending.popleft()
            self._fill()
            # Ray hands out read-only arrays; torch wants writable ones.
            return batch._replace(
                **{name: np.array(getattr(batch, name)) for name in Batch._fields[:5]}
            )

    def update_priorities(self, indices, priorities):
        """A dataset is sampled uniformly: priorities are not kept."""

    def close(self):
        """Drops the requests in flight (their batches are never used)."""
        self.pending.clear()

    def state_dict(self):
        """Read-only: a checkpoint needs nothing of it (as DatasetStorage)."""
        return {}

    def load_state_dict(self, state):
        pass


class OfflineRayDriver(OfflineDriver):
    """The offline driver with its dataset sharded on Ray and its evaluation in a Ray
    actor (see the module docstring)."""

    def __init__(self, parts, policy, evaluation):
        import ray

        config = parts.config
        self.faults = Faults()
        token, options = uuid.uuid4().hex[:8], {"max_restarts": -1, "max_task_retries": 0}
        shard = ray.remote(num_cpus=0, **options)(DatasetShard)
        self.shards = [shard.options(name=f"qzoo-shard-{k}-{token}").remote(config, parts.info, k)
                       for k in range(config.replay_shards)]  # fmt: skip
        self.remote_evaluator = ray.remote(num_cpus=0, max_restarts=-1)(EvalWorker).options(
            name=f"qzoo-evaluator-{token}").remote(config, parts.info)  # fmt: skip
        self.config = config
        self._reseed(0)
        self._dataset = None
        super().__init__(parts, policy, evaluation, open_dataset=self._open_dataset)
        self._last = self._snapshot()

    def _reseed(self, generation):
        """The learner's picks of shards and the shards' draws, per `generation`."""
        sequence = np.random.SeedSequence([self.config.seed, 15, generation])
        self.picks = np.random.Generator(np.random.PCG64(sequence))
        for shard in self.shards:
            shard.reseed.remote(generation)  # before any later request (Ray keeps order)

    def _open_dataset(self, suffixes=None):
        """The chosen checkpoints (as the local run's), split across the shards."""
        config, info = self.config, self.parts.info
        if suffixes is None:
            suffixes = first_suffixes(config)
        # Checked (and Dopamine's files converted, once) here, before any shard opens them.
        checkpoints = dataset_checkpoints(config.offline, info, suffixes,
                                          config.offline_transitions)  # fmt: skip
        parts = split({s: data_rows(c) for s, c in checkpoints.items()}, len(self.shards))
        answers = [call(self.faults, "replay shard", k, shard.counts, parts[k])
                   for k, shard in enumerate(self.shards)]  # fmt: skip
        for k, (_, pid) in enumerate(answers):
            self.faults.answered("replay shard", k, pid)
        if self._dataset is not None:
            self._dataset.close()
        dataset = ShardedDataset(self.shards, self.faults, sorted(suffixes), parts,
                                 [counts for counts, _ in answers], config.batch_size,
                                 self.picks, per_checkpoint=bool(config.offline_reload))  # fmt: skip
        if not dataset.can_sample():
            raise UserError(f"--offline {config.offline}: no valid transition in the chosen rows")
        print(f"offline: {len(suffixes)} checkpoints of {config.offline} (suffixes "
              f"{', '.join(map(str, sorted(suffixes)))}), {dataset.size:,} transitions over "
              f"{len(self.shards)} replay shards", file=sys.stderr)  # fmt: skip
        self._dataset = dataset
        return dataset

    def train_phase(self, num_frames: int, progress: Progress = None) -> dict:
        # With --offline-reload the phase opens a new dataset (waited from 0): count
        # only the wait of the dataset the phase sampled.
        before = self._dataset
        train = super().train_phase(num_frames, progress)
        waited = self._dataset.waited - (before.waited if self._dataset is before else 0.0)
        train["learner_wait_fraction"] = waited / train["duration"]
        return train

    def eval_phase(self, num_frames: int, progress: Progress = None) -> dict:
        """The evaluator plays `num_frames` frames with the learner's weights."""
        import ray

        weights = ray.put(to_numpy(self.parts.learner.weights()))
        evaluate = self.remote_evaluator.evaluate
        stats = call(self.faults, "evaluator", 0, evaluate, weights, num_frames)
        if progress is not None:
            progress(num_frames, SimpleNamespace(completed=[]))
        return stats

    def columns(self, train: dict, stats: dict) -> dict:
        duration = train.get("duration", math.nan)
        return {
            "train_updates_per_second": stats["num_updates"] / duration if duration else math.nan,
            "replay_ratio": math.nan,  # nothing is collected
            "learner_wait_fraction": train.get("learner_wait_fraction", math.nan),
        }

    def _snapshot(self):
        return time.perf_counter(), self.updates.transitions_sampled // self.config.batch_size

    def extra_columns(self) -> dict:
        """The learner's rates over the iteration (training and evaluation) and the
        shards' restarts so far."""
        now = self._snapshot()
        elapsed, updates = now[0] - self._last[0], now[1] - self._last[1]
        self._last = now
        return {
            "learner_update_rate": updates / elapsed,
            "replay_sample_rate": updates * self.config.batch_size / elapsed,
            "replay_shard_restarts": self.faults.restarts["replay shard"],
        }

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        # New draws for the resumed run (its start would otherwise draw the batches the
        # run's first iterations drew); the prefetched ones are dropped.
        self._dataset.close()
        self._reseed(int(state["iteration"]))
        self._dataset.rng = self.picks
        self._last = self._snapshot()

    def close(self) -> None:
        """Stops the run's Ray actors (a local Ray instance ends with this process)."""
        import ray

        super().close()
        for handle in [*self.shards, self.remote_evaluator]:
            ray.kill(handle)
