"""The run loop (DQN Zoo's `main` + `run_loop`): iterations of training frames
followed by evaluation frames, iteration 0 evaluating only (with --eval-period 1). It
coordinates; the parts do the work:

      +-------------------- Trainer (this module): counts frames, decides -------------------+
      |        when the learner updates (replay ratio), when targets copy, when to           |
      |        evaluate; yields one results row per iteration                                |
      +-----------+-------------------------------+------------------------------+-----------+
                  |                               |                              |
   Actor               Row per step     Replay                        Batch    Learner
   N envs, stacker,  ---------------->  FrameStorage + Uniform/   -----------> networks, optimizer,
   epsilon per env,                     PrioritizedSampler        <----------- Objective
   own random stream                                                priorities  own random stream
          ^                                                                            |
          +------------- Policy: the learner's online network (by reference) ----------+

(acting/actor.py, replay/, learning/learner.py, learning/objectives.py.) A training
phase and an evaluation phase per iteration are the driver's (acting/, offline/,
distributed/; one serial step: run/updates.py); the Trainer makes the results row and
the checkpoint. Random streams (qzoo/streams.py): the training actor, evaluation,
replay sampling and the learner each draw from their own, so evaluation never changes
training."""

import math
import time
from typing import Any

from qzoo.acting.exploration import uses_epsilon
from qzoo.envs.scores import normalized_columns
from qzoo.errors import Diverged
from qzoo.run.factory import build

# One results.csv row: column name -> value (DQN Zoo's columns, then qzoo's).
ResultsRow = dict[str, float | int]

# Wall-clock columns: they differ between two otherwise identical runs.
WALL_CLOCK_COLUMNS = ("eval_frame_rate", "train_frame_rate", "train_steps_per_second",
                      "train_updates_per_second", "learner_wait_fraction", "wall_time")  # fmt: skip


class Trainer:
    """A run: its parts (run/factory.py) and its counters; one results row per
    `run_iteration`, the checkpoint in `state_dict`."""

    def __init__(self, config: Any, info: Any = None) -> None:
        parts = build(config, info)
        self.config, self.info, self.obs_shape = parts.config, parts.info, parts.obs_shape
        self.streams, self.learner = parts.streams, parts.learner
        self.updates, self.driver = parts.updates, parts.driver
        self.iteration = 0
        self.wall_time = 0.0

    # What tests, tools and benchmarks read of a run.
    @property
    def replay(self):
        return None if self.updates is None else self.updates.replay

    @property
    def actor(self):
        return getattr(self.driver, "actor", None)

    @property
    def evaluator(self):
        return getattr(self.driver, "evaluator", None)

    @property
    def frame_t(self):
        """Training frames so far (DQN Zoo's frame_t)."""
        return self.driver.frame_t

    def learn_once(self, lock=None, batch=None):
        """One update, as a driver makes it (run/updates.py)."""
        self.updates.learn_once(lock, batch)

    # ---- phases ---------------------------------------------------------------
    def train_phase(self, num_frames: int, progress: Any = None) -> dict:
        """Acts (or, offline, replays) `num_frames` frames, learning as due."""
        return self.driver.train_phase(num_frames, progress)

    def eval_phase(self, num_frames: int, progress: Any = None) -> dict:
        """Evaluates for `num_frames` frames (or --eval-episodes episodes)."""
        return self.driver.eval_phase(num_frames, progress)

    def run_iteration(self, progress: Any = None) -> ResultsRow:
        """Train (not on iteration 0), then evaluate; returns the results row.

        Raises Diverged when the iteration's loss or mean Q is not finite.
        """
        config, started = self.config, time.perf_counter()
        if self.iteration > 0:
            train = self.train_phase(config.train_frames, progress and progress("train"))
        else:
            train = dict.fromkeys(
                ("episode_return", "frame_rate", "steps_per_second", "state_value"), math.nan
            )
            train["num_episodes"] = 0
        stats = self.learner.pop_statistics()
        self.driver.check()  # a device replay's failed draws (replay/device_samplers.py)
        if stats["num_updates"] and not (
            math.isfinite(stats["loss"]) and math.isfinite(stats["mean_q"])
        ):
            raise Diverged(
                f"iteration {self.iteration} diverged: train_loss {stats['loss']}, "
                f"train_mean_q {stats['mean_q']}; the checkpoint of iteration "
                f"{self.iteration - 1} is kept; try a lower --learning-rate"
            )
        # --eval-period K > 1 (Atari 100k, Dopamine's runner) skips the untrained network
        # too: 100 whole episodes of a policy that never loses can cost more than training.
        due = self.iteration % config.eval_period == 0
        due = due and (self.iteration > 0 or config.eval_period == 1)
        if due or self.iteration == config.iterations:
            evaluation = self.eval_phase(config.eval_frames, progress and progress("eval"))
        else:  # --eval-period: not this iteration (evaluation never changes training)
            evaluation = {"episode_return": math.nan, "num_episodes": 0, "frame_rate": math.nan}
        self.wall_time += time.perf_counter() - started
        # An epsilon at frame -1 on iteration 0, as DQN Zoo reports it; none offline.
        epsilon = self.driver.epsilon(self.frame_t if self.iteration > 0 else -1)
        row = {
            "iteration": self.iteration,
            "frame": self.iteration * config.train_frames,
            "eval_episode_return": evaluation["episode_return"],
            "train_episode_return": train["episode_return"],
            "eval_num_episodes": evaluation["num_episodes"],
            "train_num_episodes": train["num_episodes"],
            "eval_frame_rate": evaluation["frame_rate"],
            "train_frame_rate": train["frame_rate"],
            "train_exploration_epsilon": epsilon,
            "train_state_value": train["state_value"],
            **self.driver.prioritized_columns(),
            **normalized_columns(self.info.game, evaluation["episode_return"]),
            "train_loss": stats["loss"],
            "train_mean_q": stats["mean_q"],
            "train_num_updates": stats["num_updates"],
            "train_steps_per_second": train["steps_per_second"],
            **self.driver.columns(train, stats),
            "wall_time": self.wall_time,
        }
        if not uses_epsilon(config):
            del row["train_exploration_epsilon"]  # as DQN Zoo's Rainbow results.csv
        row.update(self.driver.extra_columns())  # a Ray run's rates and restarts
        self.iteration += 1
        return row

    # ---- checkpointing --------------------------------------------------------
    def state_dict(self) -> dict:
        """Everything that changes during a run: counters, learner, every random stream,
        and the driver's part (replay unless --no-checkpoint-replay, the replay log,
        R2D1's recurrent states; a Ray run's shards and counters)."""
        common = {
            "iteration": self.iteration,
            "frame_t": self.frame_t,
            "wall_time": self.wall_time,
            "learner": self.learner.state_dict(),
            "replay": None,
            "streams": self.streams.state_dict(),
        }
        return self.driver.state_dict(common)

    def load_state_dict(self, state: dict) -> None:
        self.iteration = int(state["iteration"])
        self.wall_time = float(state["wall_time"])
        self.learner.load_state_dict(state["learner"])
        self.streams.load_state_dict(state["streams"])
        self.driver.load_state_dict(state)

    def finish(self):
        """After the last iteration (the replay log's last snapshot; Ray's actors)."""
        self.driver.close()


def run(trainer, progress=None):
    """Yields one results row per iteration until `config.iterations` (inclusive)."""
    while trainer.iteration <= trainer.config.iterations:
        yield trainer.run_iteration(progress)
    trainer.finish()
