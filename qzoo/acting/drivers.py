"""Acting drivers: how a training phase interleaves acting, storing and learning
(--acting; rlpyt's samplers and runners, B7-B8). The Trainer (loop.py) picks one.

  serial       the actor steps the environments, then the learner does the updates
               due (DQN Zoo); the default, bit-identical to qzoo before --acting.
  parallel     the same, with the environments stepped in --actor-workers processes
               (workers.py) and actions chosen batched on the learner's device (rlpyt's
               GpuSampler: an action server). Same seeds, same rows as serial.
  alternating  two halves of the workers, one half's environment step overlapping the
               other's action selection (alternating.py; rlpyt's AlternatingSampler).
  async        the actor in its own thread with its own copy of the network,
               refreshed every --publish-period updates, the learner updating at its
               own pace, the replay ratio held both ways (asynchronous.py); with
               --actor-process the actor is a process of its own (process.py).

A driver owns the training actor and the evaluator (evaluation is always a plain
phase, over worker processes when --actor-workers is above 1) and reports rlpyt's
runner diagnostics as results columns: train_updates_per_second (rlpyt's
UpdatesPerSecond), replay_ratio (CumReplayRatio: transitions sampled / transitions
collected, warm-up included), learner_wait_fraction (async: the fraction of the
phase the learner waited at the ratio gate, 1 - rlpyt's OptThrottle; NaN otherwise).
"""

import functools
import math

from qzoo.acting.actor import Actor


def run_episodes(actor, progress, frame_t):
    """Steps `actor` (made with `episodes`) until each of its environments has finished
    one episode (Dopamine's evaluation of N episodes on N environments at once)."""
    actor.start()
    try:
        while not actor.episodes.all_finished():
            _, new_frames = actor.step(frame_t())
            if progress is not None:
                progress(new_frames, actor.episodes)
    finally:
        stats = actor.stop()
    return stats


def run_phase(actor, num_frames, progress, frame_t, on_step=None):
    """Steps `actor` until it has advanced `num_frames` frames; `on_step(row, frames)`
    after each step; `frame_t()` the training frame counter the epsilon follows."""
    actor.start()
    try:
        while actor.frames < num_frames:
            row, new_frames = actor.step(frame_t())
            if on_step is not None:
                on_step(row, new_frames)
            if progress is not None:
                progress(new_frames, actor.episodes)
    finally:
        stats = actor.stop()
    return stats


class SerialDriver:
    """Acting and learning take turns in one thread (module docstring: serial,
    parallel and, with `actor_class` AlternatingActor, alternating)."""

    def __init__(self, trainer, policy, evaluation, actor_class=Actor):
        """`policy` acts in training, `evaluation` in evaluation (they differ with deep
        exploration and R2D1's recurrent states)."""
        config, info, streams = trainer.config, trainer.info, trainer.streams
        self.trainer = trainer
        make_env = None
        if config.acting in ("parallel", "alternating") or config.actor_workers > 1:
            from qzoo.acting.workers import ProcessVectorEnv

            make_env = functools.partial(ProcessVectorEnv, info=info, workers=config.actor_workers)
        self.actor = actor_class(config, info, policy, streams.actor,
                                 trainer.train_epsilon, make_env=make_env)  # fmt: skip
        self.evaluator = Actor(config, info, evaluation, streams.evaluation,
                               lambda _: config.eval_exploration_epsilon, eval_mode=True,
                               make_env=make_env, episodes=config.eval_episodes)  # fmt: skip

    def train_phase(self, num_frames, progress):
        trainer = self.trainer

        def on_step(row, new_frames):
            trainer.store(row, new_frames)
            trainer._learn(trainer.frame_t, trainer.frame_t + new_frames)
            trainer.frame_t += new_frames

        return run_phase(self.actor, num_frames, progress, lambda: trainer.frame_t, on_step)

    def columns(self, train, stats):
        """rlpyt's runner diagnostics for the results row (module docstring)."""
        trainer, duration = self.trainer, train.get("duration", math.nan)
        collected = trainer.transitions_collected
        return {
            "train_updates_per_second": stats["num_updates"] / duration if duration else math.nan,
            "replay_ratio": trainer.transitions_sampled / collected if collected else math.nan,
            "learner_wait_fraction": train.get("learner_wait_fraction", math.nan),
        }


def make_driver(trainer, policy, evaluation):
    """The driver --acting names; `policy` and `evaluation` act with the learner's
    online network (in training and in evaluation)."""
    acting = trainer.config.acting
    if trainer.config.env_batch_size:  # ale-py's asynchronous mode (batches.py)
        from qzoo.acting.batches import BatchDriver

        return BatchDriver(trainer, policy, evaluation)
    if acting == "async" and trainer.config.actor_process:
        from qzoo.acting.process import ProcessDriver

        return ProcessDriver(trainer, policy, evaluation)
    if acting == "async":
        from qzoo.acting.asynchronous import AsyncDriver

        return AsyncDriver(trainer, policy, evaluation)
    if acting == "alternating":
        from qzoo.acting.alternating import AlternatingActor

        return SerialDriver(trainer, policy, evaluation, actor_class=AlternatingActor)
    return SerialDriver(trainer, policy, evaluation)  # serial, or parallel
