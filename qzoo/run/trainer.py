"""The run loop (DQN Zoo's `main` + `run_loop`): iterations of training frames
followed by evaluation frames, iteration 0 evaluating only. It coordinates; the
parts do the work:

      +-------------------- Trainer (this module): counts frames, decides -------------------+
      |        when the learner updates (replay ratio), when targets copy, when to           |
      |        evaluate; yields one results row per iteration                                |
      +-----------+-------------------------------+------------------------------+-----------+
                  |                               |                              |
   Actor (actors.py)   Row per step     Replay (replay/)              Batch    Learner (learner.py)
   N envs, stacker,  ---------------->  FrameStorage + Uniform/   -----------> networks, optimizer,
   epsilon per env,                     PrioritizedSampler        <----------- Objective (objectives.py)
   own random stream                                                priorities  own random stream
          ^                                                                            |
          +------------- Policy: the learner's online network (by reference) ----------+

One training step, top to bottom (`Trainer.train_phase` with --acting serial; the
other drivers in qzoo/acting/ interleave the same calls differently):
  row, frames = actor.step(frame_t)     # epsilon-greedy on the policy's device, env.step
  replay.add(row)                       # newest frame, action, clipped reward, flags
  for each update due (one per learn_period frames, or per --replay-ratio):
      learner.learn(replay.sample(32))  # objective -> loss -> backward -> optimizer step
  every target_network_update_period frames: learner.update_target(tau)  # 1: a copy

Random streams (streams.py): the training actor, evaluation, replay sampling and the
learner each draw from their own, so evaluation never changes training.
"""

import contextlib
import math
import os
import sys
import time

import numpy as np
import torch

from qzoo import envs
from qzoo.acting import recurrent_policy
from qzoo.acting.actor import EpisodeStats, Policy
from qzoo.acting.drivers import make_driver, run_episodes, run_phase
from qzoo.acting.epsilon import training_epsilon
from qzoo.acting.explore import LinearSchedule
from qzoo.acting.ratio import UpdateSchedule, updates_per_frame
from qzoo.envs.scores import normalized_columns
from qzoo.errors import Diverged, UserError
from qzoo.learning.learner import Learner
from qzoo.replay import Replay, UniformSampler, make_replay, replay_bytes_needed
from qzoo.replay.frames import observation_shape
from qzoo.run import allocator
from qzoo.run.streams import Streams


def resolve_device(name):
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


def _available_memory():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_run(config, info):
    """Refuses, before anything is written, what needs the environment to check:
    replay logging of observations that are not uint8 frames of one environment, and a
    run whose peak memory the machine cannot hold."""
    if config.log_replay and (config.num_envs != 1 or np.dtype(info.frame_dtype) != np.uint8):
        raise UserError(
            f"--log-replay {config.log_replay}: the DQN Replay Dataset holds uint8 frames of "
            f"one environment; {info.name} gives {np.dtype(info.frame_dtype)} observations "
            f"with --num-envs {config.num_envs}: use --num-envs 1 and an Atari or MinAtar game"
        )
    if config.offline:
        from qzoo.offline import dopamine
        from qzoo.offline.dataset import replay_logs

        layout = os.path.join(config.offline, "dataset.json")
        if not os.path.isdir(config.offline) or (
            not os.path.exists(layout) and not dopamine.suffixes(replay_logs(config.offline))
        ):
            raise UserError(
                f"--offline {config.offline}: no DQN Replay Dataset there (neither "
                "*_ckpt.N.gz files nor `qzoo dataset convert`'s dataset.json)"
            )
        from qzoo.offline.dataset import dataset_suffixes

        dataset_suffixes(config.offline, config.offline_checkpoints, config.offline_reload)
    return check_peak_memory(config, info)


def check_peak_memory(config, info):
    """Refuses, before anything is allocated, a run whose peak memory the machine
    cannot hold: the replay (allocated up front; none offline), plus what a checkpoint
    save adds while streaming it (at most 10% of it or 256 MiB), plus networks and the
    process itself (a generous 1 GiB)."""
    replay = 0
    if not config.offline:
        replay = replay_bytes_needed(config, info)
    saving = max(replay // 10, 256 * 2**20) if config.checkpoint_replay else 0
    peak = replay + saving + 2**30
    available = _available_memory()
    if available is not None and peak > available:
        gib = 2**30
        raise UserError(
            f"--replay-capacity {config.replay_capacity}: the run needs about "
            f"{peak / gib:.1f} GiB at its peak (replay {replay / gib:.1f} GiB, checkpoint "
            f"save {saving / gib:.1f} GiB, networks and process 1.0 GiB) but "
            f"{available / gib:.1f} GiB is available; lower --replay-capacity"
        )
    return peak


class Trainer:
    """A run's actors, learner, replay, schedules, random streams and counters."""

    def __init__(self, config, info=None):
        info = info or envs.describe(config)
        check_peak_memory(config, info)
        allocator.keep_freed_memory()  # also for runs made without the CLI
        self._setup_learner(config, info)
        if config.offline:
            self.replay = self._open_dataset()
        else:
            stream = self.streams.replay
            self.replay = make_replay(config, self.info, stream.numpy, stream.torch)
        self.replay_log = self._replay_log() if config.log_replay else None
        # Uniform host replay, compressed or feeding a GPU: each next batch of a step's
        # updates is drawn (and decoded) while the learner updates on the one before,
        # exactly (ahead.py).
        self._ahead = None
        host = config.replay_device == "host" and not config.prioritized and not config.offline
        if host and (config.replay_compression != "none" or self.learner.device.type == "cuda"):
            from qzoo.replay.ahead import SampleAhead

            self._ahead = SampleAhead()
        self.captured = None  # --capture: the whole update as one graph (captured.py)
        if config.capture:
            from qzoo.learning.captured import CapturedUpdate

            self.captured = CapturedUpdate(self.learner, self.replay, config.batch_size)
        self.updates = UpdateSchedule(updates_per_frame(config),
                                      config.target_network_update_period)  # fmt: skip
        self.epsilon = LinearSchedule(
            config.exploration_begin_frame, config.exploration_decay_frames,
            config.exploration_epsilon_begin_value, config.exploration_epsilon_end_value,
        )  # fmt: skip
        # In-process actors act with the learner's online network, by reference.
        deep = config.head_mixing if config.deep_exploration else None
        policy = Policy(self.learner.online, config.tau_samples_policy, deep)
        evaluation = Policy(self.learner.online, config.tau_samples_policy,  # heads' mean
                            noise=config.eval_noise)  # fmt: skip
        if config.recurrent:  # R2D1 hook: each actor carries its own recurrent state
            policy, evaluation = recurrent_policy.pair(self.learner.online, config.num_envs)
        self.train_epsilon = training_epsilon(config, self.epsilon)  # [N] or a scalar
        # The acting driver (qzoo/acting/) builds the actors and runs training phases.
        self.driver = make_driver(self, policy, evaluation)
        self.actor, self.evaluator = self.driver.actor, self.driver.evaluator
        self.iteration = 0
        self.frame_t = 0  # training frames so far (a persistent counter, as frame_t)
        self.wall_time = 0.0
        # rlpyt's CumReplayRatio: transitions sampled / transitions collected.
        self.transitions_sampled = self.transitions_collected = 0

    def _setup_learner(self, config, info):
        """What every trainer has, here or on Ray (distributed/trainer.py): the config,
        the environment's description, the random streams, the learner, and prioritized
        replay's beta, annealed over replay additions (DQN Zoo)."""
        self.config, self.info = config, info
        device = resolve_device(config.device)
        replay = {"replay": "cpu" if config.replay_device == "host" else config.replay_device}
        self.streams = Streams(config.seed, device, replay)
        torch.manual_seed(config.seed)  # network initialization only
        self.obs_shape = observation_shape(info.frame_shape, config.frame_stack)
        self.learner = Learner(config, info, self.obs_shape, device, self.streams.learner.torch)
        self.importance_sampling_exponent = LinearSchedule(
            config.min_replay_size, config.importance_sampling_end_t - config.min_replay_size,
            config.importance_sampling_exponent_begin_value,
            config.importance_sampling_exponent_end_value,
        )  # fmt: skip

    def _open_dataset(self, suffixes=None):
        """All the chosen checkpoints at once (default), or `suffixes`, sampled as
        batch_rl does (one checkpoint per batch) when --offline-reload is set."""
        from qzoo.offline.dataset import first_suffixes, open_dataset
        from qzoo.offline.storage import CheckpointPerBatchSampler

        config = self.config
        if suffixes is None:
            suffixes = first_suffixes(config)
        storage = open_dataset(config.offline, self.info, config.frame_stack, config.n_steps,
                               config.discount, suffixes, config.offline_transitions)  # fmt: skip
        print(f"offline: {len(storage.suffixes)} checkpoints of {config.offline} (suffixes "
              f"{', '.join(map(str, storage.suffixes))}), {storage.valid_count():,} "
              "transitions", file=sys.stderr)  # fmt: skip
        sampler = CheckpointPerBatchSampler if config.offline_reload else UniformSampler
        return Replay(storage, sampler(storage, self.streams.replay.numpy))

    def _replay_log(self):
        from qzoo.offline.writer import LoggedReplayWriter, RowLogger

        config = self.config
        writer = LoggedReplayWriter(
            os.path.join(config.log_replay, "replay_logs"), config.log_replay_capacity,
            self.info.frame_shape, stack=config.frame_stack,
            staging=os.path.join(config.log_replay, ".staging"),
        )  # fmt: skip
        return RowLogger(writer)

    def finish(self):
        """After the last iteration: the replay log's final partial snapshot."""
        if self.replay_log is not None:
            self.replay_log.writer.close()
        if self._ahead is not None:
            self._ahead.close()

    # ---- phases ---------------------------------------------------------------
    def train_phase(self, num_frames, progress=None):
        """Acts for `num_frames` frames, storing rows and learning as due (the acting
        driver's way, qzoo/acting/); offline, learns for the frames the replayed
        transitions stand for."""
        if self.config.offline:
            return self._offline_phase(num_frames, progress)
        return self.driver.train_phase(num_frames, progress)

    def _offline_phase(self, num_frames, progress):
        """No acting: the SGD steps and target copies due over `num_frames` frames
        (batch_rl's 250,000 training steps = 1,000,000 frames = 62,500 updates at one
        update per 16 frames)."""
        config = self.config
        if config.offline_reload:  # batch_rl reloads N random checkpoints every iteration
            from qzoo.offline.dataset import dataset_suffixes

            found = dataset_suffixes(config.offline, config.offline_checkpoints)
            rng = self.streams.replay.numpy
            chosen = sorted(rng.choice(found, config.offline_reload, replace=False).tolist())
            self.replay = self._open_dataset(chosen)
        started, frames, empty = time.perf_counter(), 0, EpisodeStats(0)
        while frames < num_frames:
            step = min(self.config.learn_period, num_frames - frames)
            self._learn(self.frame_t, self.frame_t + step)
            self.frame_t, frames = self.frame_t + step, frames + step
            if progress is not None:
                progress(step, empty)
        duration = time.perf_counter() - started
        return {"episode_return": math.nan, "num_episodes": 0, "state_value": math.nan,
                "frame_rate": frames / duration, "steps_per_second": math.nan,
                "duration": duration}  # fmt: skip

    def eval_phase(self, num_frames, progress=None):
        """Acts for `num_frames` frames (with --eval-episodes, until that many episodes
        end, one per environment) with the evaluation epsilon; learns nothing."""
        if self.config.eval_episodes:
            return run_episodes(self.evaluator, progress, lambda: self.frame_t)
        return run_phase(self.evaluator, num_frames, progress, lambda: self.frame_t)

    def store(self, row, new_frames):
        """Adds an actor's row to replay (and the replay log)."""
        self.replay.add(row)
        if self.replay_log is not None:
            self.replay_log.add(row)
        self.transitions_collected += new_frames // self.config.action_repeats

    def can_learn(self):
        config, replay = self.config, self.replay
        if not config.offline and replay.size < config.min_replay_size:
            return False  # a dataset is complete from the start
        return replay.can_sample()

    def _learn(self, old_frame, new_frame):
        """SGD steps and target updates due between two frame counts."""
        if not self.can_learn():
            return
        due = self.updates.updates_due(old_frame, new_frame)
        if due > 1 and self._ahead is not None:  # the next batch decoded during an update
            for batch in self._ahead.batches(due, self.sample_batch):
                self.learn_once(batch=batch)
        else:
            for _ in range(due):
                self.learn_once()
        if self.updates.target_due(old_frame, new_frame):
            self.learner.update_target(self.config.target_update_tau)

    def sample_batch(self, lock=None):
        """A batch from replay at the current importance-sampling exponent; `lock`
        guards the replay when an actor writes to it concurrently."""
        config, replay = self.config, self.replay
        with lock or contextlib.nullcontext():
            if config.prioritized:
                beta = self.importance_sampling_exponent(replay.num_adds)
                replay.sampler.importance_sampling_exponent = beta
            return replay.sample(config.batch_size)

    def learn_once(self, lock=None, batch=None):
        """One SGD step on `batch`, or on one sampled now; `lock` guards the replay
        when an actor writes to it concurrently (the SGD step itself runs outside it)."""
        config, replay = self.config, self.replay
        lock = lock or contextlib.nullcontext()
        if self.captured is not None:  # draw, update and priorities in one graph
            if config.prioritized:
                self.captured.set_beta(self.importance_sampling_exponent(replay.num_adds))
            with lock:
                self.captured.update()
            self.transitions_sampled += config.batch_size
            return
        if batch is None:
            batch = self.sample_batch(lock)
        priorities = self.learner.learn(batch)
        if priorities is not None:
            with lock:
                replay.update_priorities(batch.indices, priorities)
        self.transitions_sampled += config.batch_size

    def run_iteration(self, progress=None):
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
        sampler = getattr(getattr(self, "replay", None), "sampler", None)
        if hasattr(sampler, "check"):  # a device replay's failed draws (device_samplers.py)
            sampler.check()
        if stats["num_updates"] and not (
            math.isfinite(stats["loss"]) and math.isfinite(stats["mean_q"])
        ):
            raise Diverged(
                f"iteration {self.iteration} diverged: train_loss {stats['loss']}, "
                f"train_mean_q {stats['mean_q']}; the checkpoint of iteration "
                f"{self.iteration - 1} is kept; try a lower --learning-rate"
            )
        if self.iteration % config.eval_period == 0 or self.iteration == config.iterations:
            evaluation = self.eval_phase(config.eval_frames, progress and progress("eval"))
        else:  # --eval-period: not this iteration (evaluation never changes training)
            evaluation = {"episode_return": math.nan, "num_episodes": 0, "frame_rate": math.nan}
        self.wall_time += time.perf_counter() - started
        # An epsilon at frame -1 on iteration 0, as DQN Zoo reports it; none offline.
        epsilon = float(np.mean(self.train_epsilon(self.frame_t if self.iteration > 0 else -1)))
        if config.offline:
            epsilon = math.nan
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
            **self._prioritized_columns(),
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
        self.iteration += 1
        return row

    def _prioritized_columns(self):
        if not self.config.prioritized:
            return {}
        return {
            "importance_sampling_exponent": self.importance_sampling_exponent(self.replay.num_adds),
            "max_seen_priority": self.replay.sampler.max_seen_priority,
        }

    # ---- checkpointing --------------------------------------------------------
    def state_dict(self):
        """Everything that changes during a run: counters, learner, replay (unless
        --no-checkpoint-replay), every random stream, and R2D1's recurrent states."""
        return {
            **recurrent_policy.states(self),  # R2D1 hook: {} without --recurrent
            "iteration": self.iteration,
            "frame_t": self.frame_t,
            "wall_time": self.wall_time,
            "learner": self.learner.state_dict(),
            "replay": self.replay.state_dict() if self.config.checkpoint_replay else None,
            "streams": self.streams.state_dict(),
            "replay_log": self._replay_log_state(),
            "transitions": np.array([self.transitions_sampled, self.transitions_collected]),
        }

    def _replay_log_state(self):
        if self.replay_log is None:
            return None
        return self.replay_log.state_dict(rows=self.config.checkpoint_replay)

    def load_state_dict(self, state):
        self.iteration, self.frame_t = int(state["iteration"]), int(state["frame_t"])
        self.wall_time = float(state["wall_time"])
        self.learner.load_state_dict(state["learner"])
        if state["replay"] is not None:
            self.replay.load_state_dict(state["replay"])
        self.streams.load_state_dict(state["streams"])
        if state.get("transitions") is not None:  # runs saved before replay_ratio: 0, 0
            self.transitions_sampled, self.transitions_collected = map(int, state["transitions"])
        if self.replay_log is not None and state.get("replay_log") is not None:
            self.replay_log.load_state_dict(state["replay_log"])
        recurrent_policy.load_states(self, state)  # R2D1 hook


def uses_epsilon(config):
    """False for noisy-net agents without epsilon-greedy (Rainbow)."""
    return not (
        config.noisy
        and config.exploration_epsilon_begin_value == 0
        and config.exploration_epsilon_end_value == 0
    )


# Wall-clock columns: they differ between two otherwise identical runs.
WALL_CLOCK_COLUMNS = ("eval_frame_rate", "train_frame_rate", "train_steps_per_second",
                      "train_updates_per_second", "learner_wait_fraction", "wall_time")  # fmt: skip


def run(trainer, progress=None):
    """Yields one results row per iteration until `config.iterations` (inclusive)."""
    while trainer.iteration <= trainer.config.iterations:
        yield trainer.run_iteration(progress)
    trainer.finish()
