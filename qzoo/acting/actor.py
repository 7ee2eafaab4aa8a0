"""Actors: environments, frame stacking and exploration, turning a policy's actions
into the rows replay stores.

An `Actor` owns its vector of environments, its frame stacker, one epsilon per
environment and its own random stream; it asks a `Policy` for actions, chosen on the
policy's device so that only the actions (and one statistic) cross to the host.
Training and evaluation are two actors with different streams and epsilons. An actor
holds no learner and no replay: its driver takes its rows to the replay, and its
policy holds a network (the learner's own, by reference, when acting and learning
alternate in one thread; a copy refreshed from `Learner.weights()` when an actor runs
concurrently in a thread or a process, since the optimizer updates weights in place).
"""

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from qzoo.acting.exploration import decorrelate
from qzoo.replay.batch import Row
from qzoo.replay.frames import FrameStacker


class EpisodeStats:
    """Raw (unclipped) returns of the episodes completed in one phase; with `once`, only
    each environment's first (an evaluation of one episode per environment)."""

    def __init__(self, num_envs, once=False):
        self.current = np.zeros(num_envs)
        self.completed = []
        self.finished = np.zeros(num_envs, bool) if once else None

    def step(self, step):
        # Most steps neither start nor end an episode: one add then (this runs every
        # agent step, where each NumPy call on a few elements costs about a microsecond).
        if step.first.any():
            self.current[step.first] = 0.0
            self.current += np.where(step.first, 0.0, step.reward)
        else:
            self.current += step.reward
        if step.last.any():
            last = step.last
            if self.finished is not None:
                last = last & ~self.finished
                self.finished |= step.last
            self.completed.extend(self.current[last].tolist())

    def stop_counting(self, running):
        """From now on only the episodes `running` ([N] bool) count, once they end; any
        other environment's next episodes do not (Dopamine's last evaluation episode)."""
        self.finished = ~np.asarray(running, bool)

    def all_finished(self):
        """With `once`: whether every environment has finished its episode."""
        return bool(self.finished.all())

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
        step_size, trace, value = self.step_size, self.trace, self.value
        for _ in range(times):  # locals: this runs every agent step
            trace += step_size * (1.0 - trace)
            beta = step_size / trace
            value = x if math.isnan(value) else (1 - beta) * value + beta * x
        self.trace, self.value = trace, value


@dataclasses.dataclass(frozen=True)
class Acting:
    """How an actor acts (acting/from_config.py makes it from a config): `num_envs`
    environments, observations of `frame_stack` frames, `action_repeats` frames per
    agent step, rewards clipped to +-`max_abs_reward` for replay; rlpyt's
    `episodic_lives` (a lost life starts the agent's episode anew) and decorrelating
    random steps at a training phase's start (`max_decorrelation_steps`)."""

    num_envs: int
    frame_stack: int
    action_repeats: int
    max_abs_reward: float
    episodic_lives: bool = False
    max_decorrelation_steps: int = 0


# make_env(num_envs, eval_mode): a vector environment (envs.make, or worker processes).
MakeEnv = Callable[[int, bool], Any]


class Actor:
    """Steps `num_envs` environments with a policy, one phase at a time.

    `epsilon(frame_t)` gives the exploration rate of each environment ([N] or a
    scalar for all; qzoo/acting/exploration.py). A training phase may start with rlpyt's
    decorrelating random actions (--max-decorrelation-steps). A phase starts fresh
    environments seeded from the actor's stream (`start`), emits one `Row` per `step`,
    and returns its statistics at `stop`. An episode still running when a phase stops
    is abandoned.
    """

    def __init__(self, acting: Acting, info: Any, policy: Any, stream: Any,
                 epsilon: Callable[[int], Any], make_env: MakeEnv, eval_mode: bool = False,
                 episodes: int = 0) -> None:  # fmt: skip
        """`info`: the environment's EnvInfo; `stream`: the actor's random streams;
        `make_env(num_envs, eval_mode)`: the vector environment (envs.make, or
        qzoo/acting/workers.py's processes). `episodes` > 0: a phase plays that many
        environments, one episode each (`run_episodes`)."""
        self.acting, self.info, self.policy, self.stream = acting, info, policy, stream
        self.epsilon, self.eval_mode = epsilon, eval_mode
        self.num_envs = episodes or acting.num_envs
        self.once = episodes > 0
        self.make_env = make_env
        # rlpyt's episodic lives (R2D1, training only): a life loss starts the agent's
        # episode anew (stack and recurrent state) while the game goes on.
        self.life_starts = acting.episodic_lives and not eval_mode
        self._env: Any = None

    def start(self) -> None:
        acting, n = self.acting, self.num_envs
        self._env = self.make_env(n, self.eval_mode)
        self._stacker = FrameStacker(n, self.info.frame_shape, self.info.frame_dtype,
                                     acting.frame_stack)  # fmt: skip
        self.episodes, self.state_value = EpisodeStats(n, self.once), UnbiasedEwma()
        self.frames = self.agent_steps = 0
        self._started = time.perf_counter()
        self._step = self._env.reset(seed=int(self.stream.numpy.integers(1, 2**31)))
        if acting.max_decorrelation_steps and not self.eval_mode:
            self._step = decorrelate(self._env, self._step, self.info.num_actions,
                                     acting.max_decorrelation_steps, self.stream.numpy)  # fmt: skip
        self._obs = self._stacker.push(self._step.frame, self._step.first)

    def step(self, frame_t: int = 0) -> tuple[Row, int]:
        """Acts once in every environment. Returns the `Row` of the observations
        acted on (for replay) and the number of frames the environments advanced."""
        acting, step = self.acting, self._step
        epsilon = np.full(self.num_envs, self.epsilon(frame_t), np.float32)
        bound = acting.max_abs_reward  # np.clip's own overhead exceeds min + max's
        reward = np.minimum(np.maximum(step.reward, -bound), bound)
        self.policy.observe(self._starts(step), reward)
        actions, state_value = self.policy(self._obs, epsilon, self.stream.torch)
        self.state_value.step(state_value, acting.action_repeats)
        # R2D1 hook: a recurrent policy's agent_info (the state it acted from) rides along.
        row = Row(step.frame, actions, reward, step.first, step.last,
                  step.terminated | step.life_loss,
                  getattr(self.policy, "agent_info", None))  # fmt: skip
        self._step = self._env.step(actions)
        self._obs = self._stacker.push(self._step.frame, self._starts(self._step))
        self.episodes.step(self._step)
        new_frames = self._step.real_steps * acting.action_repeats
        self.frames += new_frames
        self.agent_steps += self._step.real_steps
        return row, new_frames

    def _starts(self, step):
        """Where the agent's episode starts: the game's, and with episodic lives also
        after a lost life."""
        return step.first | step.life_loss if self.life_starts else step.first

    def finish_episodes(self) -> None:
        """Counts from now on only the episodes under way (a first observation alone is
        not one), each to its end; `episodes.all_finished()` says when they are done."""
        step = self._step
        self.episodes.stop_counting(~(step.first | step.last))

    def stop(self) -> dict:
        """Closes the environments; returns the phase's statistics."""
        self._env.close()
        self._env = None
        duration = time.perf_counter() - self._started
        frames = self.frames
        return {
            "episode_return": self.episodes.mean_return() if frames else math.nan,
            "num_episodes": len(self.episodes.completed),
            "frame_rate": frames / duration if frames else math.nan,
            "steps_per_second": self.agent_steps / duration if frames else math.nan,
            "state_value": self.state_value.value,
            "duration": duration,
        }
