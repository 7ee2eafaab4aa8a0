"""Acting on the environments that are ready (--env-batch-size B).

With ale-py's asynchronous mode (qzoo/envs/atari_batches.py) each agent step acts on
B of the N environments, whichever finished their previous step first, so the
policy's device never waits for the slowest game. Everything per environment follows
the environment's id, not its place in the batch: its frame stack, its epsilon
(`epsilon(frame_t)`, [N] or a scalar, qzoo/acting/exploration.py, indexed by the ids),
its episode returns (`BatchEpisodeStats`) and its replay column (`ColumnQueues`), so
the replay, the samplers and checkpoints are those of synchronous acting.

Frames are real frames, those of the environments that stepped (`EnvStep.real_steps`
x --action-repeats), so the frame budget, the epsilon and update schedules and the
replay ratio (qzoo/acting/ratio.py) mean what they mean in synchronous acting. Only
training acts in batches; evaluation stays synchronous (a plain `Actor`)."""

import collections
import time

import numpy as np

from qzoo.acting.actor import Actor, EpisodeStats, UnbiasedEwma
from qzoo.acting.driver import Progress
from qzoo.acting.from_config import serial_parts
from qzoo.acting.serial import SerialDriver, run_phase
from qzoo.replay.batch import Row
from qzoo.replay.frames import FrameStacker

# Queued entries (each a frame: 7 KB on Atari) beyond which an environment starved
# by ale-py's threads is an error rather than a slow leak; real lags are far below it.
MAX_QUEUED = 2**17


class BatchStacker(FrameStacker):
    """`FrameStacker` pushed and read by environment id."""

    def push_ids(self, frame, first, ids):
        """Adds the newest frames of environments `ids` (stacks of those where `first`
        is set start from zeros); returns their stacked observations [B, ...]."""
        stacks = self._frames
        if self.stack > 1:
            stacks[ids, :-1] = stacks[ids, 1:]
            stacks[ids[first], :-1] = 0
        stacks[ids, -1] = frame
        return stacks[ids].reshape((len(ids),) + self._shape[1:])


class BatchEpisodeStats(EpisodeStats):
    """`EpisodeStats` stepped by environment id."""

    def step_ids(self, step, ids):
        current = np.where(step.first, 0.0, self.current[ids] + step.reward)
        self.current[ids] = current
        self.completed.extend(current[step.last].tolist())


class ColumnQueues:
    """Each environment's replay entries in its own queue, released as lockstep rows.

    A `Row` of all N columns is released whenever every queue holds one, so column i of
    the replay (replay/frames.py) holds environment i's own observations in order, episode
    starts and ends flagged as in synchronous acting: no transition crosses an autoreset.
    Rows wait only as long as the slowest environment lags behind (a few steps; what an
    environment has queued when a phase stops is dropped, as the last observation of a
    synchronous phase is)."""

    def __init__(self, num_envs):
        self._queues = [collections.deque() for _ in range(num_envs)]
        self._lengths = np.zeros(num_envs, np.int64)

    @property
    def lag(self):
        """Entries queued by the environment furthest ahead."""
        return int(self._lengths.max())

    def add(self, ids, frame, action, reward, first, last, zero_discount):
        """Queues one entry per environment in `ids`; returns the rows now complete
        (a list, usually of zero or one `Row`)."""
        for k, i in enumerate(ids):
            self._queues[i].append((frame[k], action[k], reward[k], first[k], last[k],
                                    zero_discount[k]))  # fmt: skip
        self._lengths[ids] += 1
        if self._lengths.sum() > MAX_QUEUED:
            raise RuntimeError(
                f"environments {np.flatnonzero(self._lengths == 0).tolist()} have not "
                f"stepped while the others queued {self.lag} steps: ale-py starves them"
            )
        rows = []
        while self._lengths.min() > 0:
            entries = [queue.popleft() for queue in self._queues]
            self._lengths -= 1
            rows.append(Row(*(np.stack(column) for column in zip(*entries))))
        return rows


class BatchActor(Actor):
    """An `Actor` acting on the environments ready (module docstring). `step`
    returns the rows completed (a list) and the real frames the batch advanced."""

    def start(self):
        acting, n = self.acting, self.num_envs
        self._env = self.make_env(n, self.eval_mode)
        self._stacker = BatchStacker(n, self.info.frame_shape, self.info.frame_dtype,
                                     acting.frame_stack)  # fmt: skip
        self._columns = ColumnQueues(n)
        self.episodes, self.state_value = BatchEpisodeStats(n), UnbiasedEwma()
        self.frames = self.agent_steps = 0
        self._started = time.perf_counter()
        # The same draw as Actor.start: environment i is seeded with seed + i.
        self._step, self._ids = self._env.reset(seed=int(self.stream.numpy.integers(1, 2**31)))
        self._obs = self._stacker.push_ids(self._step.frame, self._step.first, self._ids)

    def step(self, frame_t=0):
        """Acts once in the B environments ready; returns ([Row ...], frames)."""
        acting, step, ids = self.acting, self._step, self._ids
        epsilon = np.broadcast_to(np.asarray(self.epsilon(frame_t), np.float32),
                                  (self.num_envs,))[ids]  # fmt: skip
        reward = np.clip(step.reward, -acting.max_abs_reward, acting.max_abs_reward)
        self.policy.observe(step.first, reward)
        actions, state_value = self.policy(self._obs, epsilon, self.stream.torch)
        self.state_value.step(state_value, acting.action_repeats)
        rows = self._columns.add(ids, step.frame, actions, reward, step.first, step.last,
                                 step.terminated | step.life_loss)  # fmt: skip
        self._step, self._ids = self._env.step(actions)
        self._obs = self._stacker.push_ids(self._step.frame, self._step.first, self._ids)
        self.episodes.step_ids(self._step, self._ids)
        new_frames = self._step.real_steps * acting.action_repeats
        self.frames += new_frames
        self.agent_steps += self._step.real_steps
        return rows, new_frames


class BatchDriver(SerialDriver):
    """--acting serial with --env-batch-size: acting on batches of ready environments
    and learning take turns in one thread; evaluation is synchronous."""

    def __init__(self, parts, policy, evaluation):
        super().__init__(**serial_parts(parts, policy, evaluation, BatchActor, batches=True))
        self.parts, self.config = parts, parts.config

    def train_phase(self, num_frames: int, progress: Progress = None) -> dict:
        updates = self.updates

        def on_step(rows, new_frames):
            for row in rows:
                updates.store(row, 0)
            # Collected: agent steps of one environment, as they happen (a row of N
            # waits in ColumnQueues for the slowest environment).
            updates.collected(new_frames)
            updates.learn_due(updates.frame_t, updates.frame_t + new_frames)
            updates.advance(new_frames)

        return run_phase(self.actor, num_frames, progress, lambda: updates.frame_t, on_step)
