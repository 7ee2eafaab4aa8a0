"""The learner's side of a Ray run (Ape-X, Horgan et al. 2018, arXiv:1803.00933): this
process holds qzoo's `Learner` (on the GPU when there is one) and coordinates N actor
processes (workers.ActorWorker), K replay shards (shards.ReplayShard) and an evaluator
(workers.EvalWorker), all Ray actors that Ray restarts when they die.

The replay ratio (transitions sampled per transition collected, rlpyt's definition)
holds both ways: the learner never runs ahead of the data, and actors stop being given
work while the learner is more than --replay-ratio-tolerance behind. `RayDriver` is a
driver (acting/driver.py) like the local ones, so a results row, the checkpoint and
resume go through the same code (run/trainer.py, run/run_folder.py). What a Ray run
does not promise: bit-identical results or resume (actors run concurrently; the
actors' and shards' random streams are not in the checkpoint); priorities of rows that
actors overwrote while a batch was in flight go to the new rows (as in Ape-X)."""

import math
import time
import uuid
from types import SimpleNamespace

import numpy as np

from qzoo.acting.driver import Driver, Progress
from qzoo.acting.ratio import updates_per_frame
from qzoo.acting.schedule import importance_sampling_schedule
from qzoo.distributed.cluster import Faults, lost_errors
from qzoo.distributed.recurrent import worker_classes
from qzoo.distributed.workers import CHUNK_STEPS, ray_epsilons, to_numpy
from qzoo.replay.samplers import host_array

EMPTY = (0, 0, False, math.nan, None)  # a shard's stats before it answered (shards.py)
PREFETCH = 2  # batches requested ahead from each shard


def frames_per_update(config):
    """Frames collected per SGD step under the replay ratio: learn_period (DQN Zoo), or
    batch_size x action_repeats / R for rlpyt's --replay-ratio R (acting/ratio.py)."""
    return float(1 / updates_per_frame(config))


class RayDriver(Driver):
    """Training and evaluation on Ray (see the module docstring), for the learner of
    this process; the Ray actors are made here (their names carry a run token).

    One turn of the coordination loop (`_pump`), top to bottom:
      _dispatch()   an idle actor gets `collect(weights)`: CHUNK_STEPS steps of its
                    environments, unless the learner is behind the replay ratio (then
                    actors wait)
      _reap()       a finished chunk goes from the actor to its shard (by reference: the
                    data moves actor -> shard in Ray's object store, not through here);
                    frames are counted, episode returns kept
      _prefetch()   each shard that can sample has PREFETCH batches requested ahead
      _learn_one()  while the learner is behind the ratio and a batch is ready: one SGD
                    step, new priorities back to the shard, a target copy every
                    target_network_update_period frames' worth of updates, the weights
                    published (`ray.put`) every --publish-period updates"""

    def __init__(self, config, info, streams, learner):
        import ray

        self.config, self.info, self.streams, self.learner = config, info, streams, learner
        self.importance_sampling_exponent = importance_sampling_schedule(config)
        self.epsilons = ray_epsilons(config)
        self.frame_t = 0  # frames collected so far
        self._collect_to = 0  # the frame count the next training phase collects up to
        self.frames_per_update = frames_per_update(config)
        self.target_every = max(1, round(config.target_network_update_period
                                         / self.frames_per_update))  # fmt: skip
        self.chunk_frames = CHUNK_STEPS * config.envs_per_actor * config.action_repeats
        # Counters (checkpointed), statistics of the current iteration, restarts.
        self.updates, self.learn_start_frame, self.transitions = 0, None, 0
        self.returns, self.state_values = [], np.full(config.actors, math.nan)
        self.faults = Faults()
        self.waited = 0.0
        self._progress = None
        # The Ray actors; names (with a run token) let an operator find them.
        token, options = uuid.uuid4().hex[:8], {"max_restarts": -1, "max_task_retries": 0}
        shard_class, actor_class, eval_class = worker_classes(config)  # R2D1's for --recurrent
        shard = ray.remote(num_cpus=0, **options)(shard_class)
        actor = ray.remote(num_cpus=1, **options)(actor_class)
        k, m = config.replay_shards, config.envs_per_actor
        self.shards = [shard.options(name=f"qzoo-shard-{j}-{token}").remote(config, self.info, j)
                       for j in range(k)]  # fmt: skip
        self.actors = [
            actor.options(name=f"qzoo-actor-{i}-{token}").remote(
                config, self.info, i, self.epsilons[i * m : (i + 1) * m]
            )
            for i in range(config.actors)
        ]
        self.evaluator = ray.remote(num_cpus=0, max_restarts=-1)(eval_class).options(
            name=f"qzoo-evaluator-{token}").remote(config, self.info)  # fmt: skip
        self.shard_stats = [EMPTY] * k
        self.idle, self.collecting, self.adds, self.samples = set(range(config.actors)), {}, {}, {}
        self.in_flight = 0  # frames of the chunks being collected
        self.version, self.weights = -1, None
        self._publish()
        self._last = self._snapshot()
        self._train_mark = None  # (time, frames) where the last training phase ended

    # ---- the coordination loop ------------------------------------------------
    def _publish(self):
        """The learner's weights into Ray's object store; actors fetch them on their next
        collect (only when newer than theirs)."""
        import ray

        self.version += 1
        self.weights = [ray.put(to_numpy(self.learner.weights()))]

    def _target_updates(self, frame):
        if self.learn_start_frame is None:
            return 0
        return int((frame - self.learn_start_frame) / self.frames_per_update)

    def _behind(self):
        """Whether the learner has updates due (it never runs ahead of the data)."""
        return self.updates < self._target_updates(self.frame_t)

    def _may_collect(self):
        """Whether an actor may start one more chunk: the updates the learner will owe
        once the chunks in flight land are within the tolerance (--replay-ratio-tolerance
        of its updates, and at least one chunk per actor, so that every actor can work
        while it keeps up)."""
        if self.learn_start_frame is None:
            return True
        due = self._target_updates(self.frame_t + self.in_flight)
        slack = max(
            self.config.replay_ratio_tolerance * due,
            len(self.actors) * self.chunk_frames / self.frames_per_update,
        )
        return due - self.updates <= slack

    def _pump(self, done, extra=()):
        import ray

        while not done():
            self._dispatch()
            self._prefetch()
            if self._learn_one():
                continue
            pending = [*self.collecting, *self.adds, *extra]
            if self._behind():
                pending += list(self.samples)
            started = time.perf_counter()
            if pending:
                ray.wait(pending, num_returns=1, timeout=1.0)
            else:
                time.sleep(0.01)
            if self._behind():  # the learner had updates due and no batch
                self.waited += time.perf_counter() - started
            self._reap()

    def _dispatch(self):
        for i in sorted(self.idle):
            if not self._may_collect():
                return
            actor = self.actors[i]
            data, stats = actor.collect.options(num_returns=2).remote(self.version, self.weights)
            self.collecting[stats] = (i, data)
            self.in_flight += self.chunk_frames
            self.idle.discard(i)

    def _reap(self):
        import ray

        if self.collecting:
            ready, _ = ray.wait(list(self.collecting), num_returns=len(self.collecting), timeout=0)
            for ref in ready:
                i, data = self.collecting.pop(ref)
                self.in_flight -= self.chunk_frames
                self.idle.add(i)
                try:
                    stats = ray.get(ref)
                except lost_errors() as e:
                    self.faults.lost("actor", i, e)
                    continue
                self.faults.answered("actor", i, stats["pid"])
                self.frame_t += stats["frames"]
                self.returns.extend(stats["returns"])
                self.state_values[i] = stats["state_value"]
                k = i % len(self.shards)
                self.adds[self.shards[k].add.remote(i // len(self.shards), data)] = k
                # Transitions sent (beta anneals over them, as over a local replay's
                # additions; a shard's own count restarts with it).
                self.transitions += CHUNK_STEPS * self.config.envs_per_actor
                if self._progress is not None:
                    self._progress(stats["frames"], SimpleNamespace(completed=self.returns))
        if self.adds:
            ready, _ = ray.wait(list(self.adds), num_returns=len(self.adds), timeout=0)
            for ref in ready:
                k = self.adds.pop(ref)
                try:
                    self.shard_stats[k] = ray.get(ref)
                    self.faults.answered("replay shard", k, self.shard_stats[k][4])
                except lost_errors() as e:
                    self.faults.lost("replay shard", k, e)
                    self.shard_stats[k] = EMPTY
        stored = sum(s[0] for s in self.shard_stats)
        if self.learn_start_frame is None and stored >= self.config.min_replay_size:
            self.learn_start_frame = self.frame_t

    def _prefetch(self):
        if self.learn_start_frame is None:
            return
        beta = self.importance_sampling_exponent(self.transitions)
        for k, shard in enumerate(self.shards):
            if not self.shard_stats[k][2]:
                continue
            for _ in range(PREFETCH - sum(j == k for j in self.samples.values())):
                self.samples[shard.sample.remote(self.config.batch_size, beta)] = k

    def _learn_one(self):
        """One SGD step on a prefetched batch, when one is ready and updates are due."""
        import ray

        if not self._behind() or not self.samples:
            return False
        ready, _ = ray.wait(list(self.samples), num_returns=1, timeout=0)
        if not ready:
            return False
        k = self.samples.pop(ready[0])
        try:
            batch = ray.get(ready[0])
        except lost_errors() as e:
            self.faults.lost("replay shard", k, e)
            self.shard_stats[k] = EMPTY
            return True
        if batch is None:  # the shard cannot sample (yet, or again after a restart)
            self.shard_stats[k] = self.shard_stats[k][:2] + (False,) + self.shard_stats[k][3:]
            return True
        # Ray hands out read-only arrays; torch wants writable ones (a Batch's or
        # R2D1's SequenceBatch's).
        batch = batch._replace(**{k: np.array(v) for k, v in batch._asdict().items()
                                  if isinstance(v, np.ndarray)})  # fmt: skip
        priorities = self.learner.learn(batch)
        if priorities is not None:  # as an array: a shard needs no torch tensor
            self.shards[k].update_priorities.remote(batch.indices, host_array(priorities))
        self.updates += 1
        if self.updates % self.target_every == 0:  # soft with --target-update-tau < 1
            self.learner.update_target(self.config.target_update_tau)
        if self.updates % (self.config.publish_period or 100) == 0:
            self._publish()
        return True

    # ---- phases (Trainer.run_iteration calls them) -----------------------------
    def train_phase(self, num_frames: int, progress: Progress = None) -> dict:
        """Until iteration x train_frames frames are collected (frames collected while the
        previous evaluation ran count too); the phase's statistics."""
        # Rates over the time since the last training phase ended: the actors went on
        # collecting (and the learner learning) through the evaluation between, and
        # measured from this phase's start alone an iteration whose frames were all
        # collected then would show no frames and an absurd update rate.
        started, frames = self._train_mark or (time.perf_counter(), self.frame_t)
        self._progress = progress
        self._collect_to += num_frames
        try:
            self.collect_until(self._collect_to)
        finally:
            self._progress = None
        ended = time.perf_counter()
        duration, self._train_mark = ended - started, (ended, self.frame_t)
        returns, self.returns = self.returns, []
        values = self.state_values[~np.isnan(self.state_values)]
        return {"episode_return": float(np.mean(returns)) if returns else math.nan,
                "num_episodes": len(returns),
                "frame_rate": (self.frame_t - frames) / duration,
                "steps_per_second": (self.frame_t - frames) / self.config.action_repeats / duration,
                "state_value": float(values.mean()) if values.size else math.nan,
                "duration": duration}  # fmt: skip

    def collect_until(self, frame):
        """Acts and learns, the replay ratio held, until `frame` frames are collected."""
        self._pump(lambda: self.frame_t >= frame)

    def eval_phase(self, num_frames: int, progress: Progress = None) -> dict:
        """The evaluator plays `num_frames` frames with the newest weights while actors
        and learner go on."""
        import ray

        if self._train_mark is None:  # the first iteration of this process
            self._train_mark = (time.perf_counter(), self.frame_t)
        self._publish()
        while True:
            ref = self.evaluator.evaluate.remote(self.weights[0], num_frames)
            self._pump(lambda ref=ref: bool(ray.wait([ref], timeout=0)[0]), extra=[ref])
            try:
                stats = ray.get(ref)
            except lost_errors() as e:
                self.faults.lost("evaluator", 0, e)
                continue
            self.faults.answered("evaluator", 0, None)
            if progress is not None:
                progress(num_frames, SimpleNamespace(completed=[]))
            return stats

    def _snapshot(self):
        return (
            time.perf_counter(),
            self.frame_t,
            self.updates,
            self.transitions,
            self.waited,
        )

    def epsilon(self, frame_t: int) -> float:
        """results.csv's train_exploration_epsilon: the mean of the fixed epsilons."""
        return float(np.mean(self.epsilons))

    def extra_columns(self) -> dict:
        """The Ray run's rates over the iteration (train and evaluation), the realised
        replay ratio and the restarts so far."""
        row = {}
        now = self._snapshot()
        elapsed = now[0] - self._last[0]
        frames, updates, added, waited = (a - b for a, b in zip(now[1:], self._last[1:]))
        self._last = now
        config = self.config
        collected = 0 if self.learn_start_frame is None else self.frame_t - self.learn_start_frame
        sampled = self.updates * config.batch_size
        row.update({
            "actor_frame_rate": frames / elapsed,
            "learner_update_rate": updates / elapsed,
            "replay_add_rate": added / elapsed,
            "replay_sample_rate": updates * config.batch_size / elapsed,
            "replay_ratio": sampled / (collected / config.action_repeats) if collected else math.nan,
            "replay_ratio_target": config.batch_size * config.action_repeats / self.frames_per_update,
            "learner_wait_fraction": waited / elapsed,
            "actor_restarts": self.faults.restarts["actor"],
            "replay_shard_restarts": self.faults.restarts["replay shard"],
        })  # fmt: skip
        return row

    def prioritized_columns(self) -> dict:
        if not self.config.prioritized:
            return {}
        return {
            "importance_sampling_exponent": self.importance_sampling_exponent(self.transitions),
            "max_seen_priority": float(np.nanmax([s[3] for s in self.shard_stats] + [1.0])),
        }

    # ---- checkpointing and the end ---------------------------------------------
    def state_dict(self, common: dict) -> dict:
        """The trainer's part; the replay is every shard's (unless
        --no-checkpoint-replay), and the Ray loop's counters."""
        replay = None
        if self.config.checkpoint_replay:
            replay = [self._shard_state(k) for k in range(len(self.shards))]
        start = -1 if self.learn_start_frame is None else self.learn_start_frame
        return {**common, "replay": replay,
                "ray": {"updates": self.updates, "learn_start_frame": start,
                        "transitions": self.transitions}}  # fmt: skip

    def _shard_state(self, k):
        """Shard k's replay, waiting for Ray to restart it if it is down."""
        import ray

        while True:
            try:
                return ray.get(self.shards[k].state_dict.remote())
            except lost_errors() as e:
                self.faults.lost("replay shard", k, e)
                time.sleep(0.5)

    def load_state_dict(self, state: dict) -> None:
        import ray

        self.frame_t = int(state["frame_t"])
        self._collect_to = int(state["iteration"]) * self.config.train_frames
        self.updates = int(state["ray"]["updates"])
        self.transitions = int(state["ray"]["transitions"])
        start = int(state["ray"]["learn_start_frame"])
        self.learn_start_frame = None if start < 0 else start
        if state["replay"] is not None:
            self.shard_stats = ray.get(
                [s.load_state_dict.remote(saved) for s, saved in zip(self.shards, state["replay"])]
            )
        elif self.learn_start_frame is not None:
            # Without the replay, learning starts again once the shards hold enough.
            self.learn_start_frame, self.updates = None, 0
        self._last = self._snapshot()
        self._publish()

    def close(self) -> None:
        """Stops the run's Ray actors (a local Ray instance ends with this process)."""
        import ray

        for handle in [*self.actors, *self.shards, self.evaluator]:
            ray.kill(handle)
