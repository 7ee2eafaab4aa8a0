"""The run loop (DQN Zoo's `main` + `run_loop`): iterations of training frames
followed by evaluation frames, iteration 0 evaluating only.

`Trainer` holds everything that changes during a run (so that a checkpoint of its
`state_dict` resumes exactly); `run` is a generator yielding one record per
iteration, which logging, checkpointing and progress display consume.

One training step, top to bottom (`Trainer._train_phase`):
  q = agent.q_values(obs); a = epsilon_greedy(q, epsilon(frame_t))
  replay.add(newest frame, a, clipped reward, FIRST/LAST/zero-discount flags)
  env.step(a); frame_t += 4 x (environments that really stepped)
  every learn_period frames: agent.learn(replay.sample(32))
  every target_network_update_period frames: copy online -> target
"""

import math
import time

import numpy as np
import torch

from qzoo import envs
from qzoo.agent import Agent
from qzoo.envs.scores import normalized_columns
from qzoo.explore import LinearSchedule, epsilon_greedy
from qzoo.replay.frames import FrameReplay, FrameStacker, observation_shape
from qzoo.replay.priority import PrioritizedFrameReplay


class EpisodeStats:
    """Raw (unclipped) returns of the episodes completed in one phase."""

    def __init__(self, num_envs):
        self.current = np.zeros(num_envs)
        self.completed = []

    def step(self, step):
        self.current[step.first] = 0.0
        self.current += np.where(step.first, 0.0, step.reward)
        self.completed.extend(self.current[step.last].tolist())

    def mean_return(self):
        """Mean over completed episodes, else the partial return (DQN Zoo)."""
        if self.completed:
            return float(np.mean(self.completed))
        return float(self.current.mean())


class UnbiasedEwma:
    """Sutton & Barto's unbiased constant-step-size average, stepped per frame
    (DQN Zoo's UnbiasedExponentialWeightedAverageAgentTracker, step size 1e-3)."""

    def __init__(self, step_size=1e-3):
        self.step_size, self.trace, self.value = step_size, 0.0, math.nan

    def step(self, x, times=1):
        for _ in range(times):
            self.trace += self.step_size * (1.0 - self.trace)
            beta = self.step_size / self.trace
            self.value = x if math.isnan(self.value) else (1 - beta) * self.value + beta * x


def resolve_device(name):
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return name


class Trainer:
    """A run's agent, replay, schedules, random states and counters."""

    def __init__(self, config, info=None):
        self.config = config
        self.info = info or envs.describe(config)
        torch.manual_seed(config.seed)
        self.random_state = np.random.RandomState(config.seed)  # env seeds, replay
        self.act_random = np.random.RandomState(self.random_state.randint(2**31))
        self.eval_random = np.random.RandomState(self.random_state.randint(2**31))
        self.obs_shape = observation_shape(self.info.frame_shape, config.frame_stack)
        self.agent = Agent(config, self.info, self.obs_shape, resolve_device(config.device))
        self.replay = make_replay(config, self.info, self.random_state)
        # Prioritized replay's beta, annealed over replay additions (DQN Zoo).
        self.importance_sampling_exponent = LinearSchedule(
            config.min_replay_size, config.importance_sampling_end_t - config.min_replay_size,
            config.importance_sampling_exponent_begin_value,
            config.importance_sampling_exponent_end_value,
        )  # fmt: skip
        self.epsilon = LinearSchedule(
            config.exploration_begin_frame, config.exploration_decay_frames,
            config.exploration_epsilon_begin_value, config.exploration_epsilon_end_value,
        )  # fmt: skip
        self.iteration = 0
        self.frame_t = 0  # training frames so far (a persistent counter, as frame_t)
        self.wall_time = 0.0

    # ---- phases ---------------------------------------------------------------
    def _phase(self, num_frames, train, progress=None):
        config, n = self.config, self.config.num_envs
        env = envs.make(config, n, config.seed, eval_mode=not train)
        stacker = FrameStacker(n, self.info.frame_shape, self.info.frame_dtype, config.frame_stack)
        episodes, state_value = EpisodeStats(n), UnbiasedEwma()
        rng = self.act_random if train else self.eval_random
        start, frames, agent_steps = time.perf_counter(), 0, 0
        try:
            step = env.reset(seed=self.random_state.randint(1, 2**31))
            obs = stacker.push(step.frame, step.first)
            while frames < num_frames:
                epsilon = self.epsilon(self.frame_t) if train else config.eval_exploration_epsilon
                q = self.agent.q_values(obs)
                actions = epsilon_greedy(q, epsilon, rng)
                if train:
                    state_value.step(float(q.max(axis=1).mean()), config.action_repeats)
                    reward = np.clip(step.reward, -config.max_abs_reward, config.max_abs_reward)
                    zero_discount = step.terminated | step.life_loss
                    self.replay.add(
                        step.frame, actions, reward, step.first, step.last, zero_discount
                    )
                step = env.step(actions)
                obs = stacker.push(step.frame, step.first)
                episodes.step(step)
                new_frames = step.real_steps * config.action_repeats
                frames += new_frames
                agent_steps += step.real_steps
                if train:
                    self._learn(self.frame_t, self.frame_t + new_frames)
                    self.frame_t += new_frames
                if progress is not None:
                    progress(new_frames, episodes)
        finally:
            env.close()
        duration = time.perf_counter() - start
        return {
            "episode_return": episodes.mean_return() if frames else math.nan,
            "num_episodes": len(episodes.completed),
            "frame_rate": frames / duration if frames else math.nan,
            "steps_per_second": agent_steps / duration if frames else math.nan,
            "state_value": state_value.value,
            "duration": duration,
        }

    def _learn(self, old_frame, new_frame):
        """SGD steps and target copies due between two frame counts (DQN Zoo counts
        in frames; with N environments several may fall due at once)."""
        config = self.config
        if self.replay.size < config.min_replay_size or not self.replay.can_sample():
            return
        for _ in range(new_frame // config.learn_period - old_frame // config.learn_period):
            if config.prioritized:
                self.replay.importance_sampling_exponent = self.importance_sampling_exponent(
                    self.replay.num_adds * self.replay.num_envs
                )
            batch = self.replay.sample(config.batch_size)
            priorities = self.agent.learn(batch)
            if priorities is not None:
                self.replay.update_priorities(batch["indices"], priorities)
        period = config.target_network_update_period
        if new_frame // period > old_frame // period:
            self.agent.update_target()

    def run_iteration(self, progress=None):
        """Train (not on iteration 0), then evaluate; returns the results row."""
        config, started = self.config, time.perf_counter()
        if self.iteration > 0:
            train = self._phase(config.train_frames, True, progress and progress("train"))
        else:
            train = dict.fromkeys(
                ("episode_return", "frame_rate", "steps_per_second", "state_value"), math.nan
            )
            train["num_episodes"] = 0
        stats = self.agent.pop_statistics()
        evaluation = self._phase(config.eval_frames, False, progress and progress("eval"))
        self.wall_time += time.perf_counter() - started
        # An epsilon at frame -1 on iteration 0, as DQN Zoo reports it.
        epsilon = self.epsilon(self.frame_t if self.iteration > 0 else -1)
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
            "importance_sampling_exponent": self.importance_sampling_exponent(
                self.replay.num_adds * self.replay.num_envs
            ),
            "max_seen_priority": self.replay.max_seen_priority,
        }

    # ---- checkpointing --------------------------------------------------------
    def state_dict(self):
        return {
            "iteration": self.iteration,
            "frame_t": self.frame_t,
            "wall_time": self.wall_time,
            "agent": self.agent.state_dict(),
            "replay": self.replay.state_dict() if self.config.checkpoint_replay else None,
            "random_state": self.random_state.get_state(),
            "act_random": self.act_random.get_state(),
            "eval_random": self.eval_random.get_state(),
            "torch_random": torch.get_rng_state(),
            # IQN's taus and noisy nets' noise are drawn on the agent's device.
            "cuda_random": (
                torch.cuda.get_rng_state(self.agent.device)
                if self.agent.device.type == "cuda"
                else None
            ),
        }

    def load_state_dict(self, state):
        self.iteration, self.frame_t = state["iteration"], state["frame_t"]
        self.wall_time = state["wall_time"]
        self.agent.load_state_dict(state["agent"])
        if state["replay"] is not None:
            self.replay.load_state_dict(state["replay"])
        self.random_state.set_state(state["random_state"])
        self.act_random.set_state(state["act_random"])
        self.eval_random.set_state(state["eval_random"])
        torch.set_rng_state(state["torch_random"])
        if state.get("cuda_random") is not None and self.agent.device.type == "cuda":
            torch.cuda.set_rng_state(state["cuda_random"], self.agent.device)


def uses_epsilon(config):
    """False for noisy-net agents without epsilon-greedy (Rainbow)."""
    return not (
        config.noisy
        and config.exploration_epsilon_begin_value == 0
        and config.exploration_epsilon_end_value == 0
    )


def make_replay(config, info, random_state):
    args = (
        config.replay_capacity, config.num_envs, info.frame_shape, info.frame_dtype,
        info.num_actions, config.frame_stack, config.n_steps, config.discount, random_state,
    )  # fmt: skip
    if not config.prioritized:
        return FrameReplay(*args)
    return PrioritizedFrameReplay(
        *args,
        priority_exponent=config.priority_exponent,
        uniform_sample_probability=config.uniform_sample_probability,
        normalize_weights=config.normalize_weights,
    )


# Wall-clock columns: they differ between two otherwise identical runs.
WALL_CLOCK_COLUMNS = ("eval_frame_rate", "train_frame_rate", "train_steps_per_second", "wall_time")


def run(trainer, progress=None):
    """Yields one results row per iteration until `config.iterations` (inclusive)."""
    while trainer.iteration <= trainer.config.iterations:
        yield trainer.run_iteration(progress)
