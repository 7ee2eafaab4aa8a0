"""PQN's training (Gallici, Fellows, Ellis, Pou, Masmitja, Foerster & Martin 2025,
"Simplifying Deep Temporal Difference Learning", ICLR; purejaxql, CleanRL's pqn.py): no
replay and no target network. A training phase is rollouts: every environment steps
`rollout_steps` times with the current network, epsilon-greedy; the rollout's Peng's
Q(lambda) returns are made from the maxima of the Q-values the network acted on
(learning/losses.py's lambda_returns); then `update_epochs` passes over the rollout's
transitions in `num_minibatches` shuffled minibatches regress Q(s, a) on them
(learning/objectives.py's QRegression). The returns come from the network that acted,
before its updates: that snapshot plays the part of a target network.

qzoo's environments reset on the step after an episode ends (envs/__init__.py): the
action at a last observation is never a transition, and is left out. A termination or
a lost life (DQN Zoo's protocol) stops the return there; a truncation (the episode
cap) bootstraps from the value reached and stops the trace (PQN's references treat it
as a termination). A phase is a whole number of rollouts; each starts its phase's
environments afresh, as every qzoo driver does."""

import math

import numpy as np
import torch

from qzoo.acting.actor import Actor
from qzoo.acting.driver import Driver, Progress, mean_epsilon
from qzoo.acting.exploration import epsilon_greedy
from qzoo.acting.from_config import acting_of, in_process
from qzoo.acting.policy import Policy
from qzoo.acting.schedule import LinearSchedule
from qzoo.acting.serial import evaluate
from qzoo.learning.losses import lambda_returns
from qzoo.replay.batch import ReturnBatch


class RolloutPolicy(Policy):
    """Epsilon-greedy on the network (Policy's draws), keeping for each step what the
    returns need as its `agent_info`: the observations acted on and their max_a Q."""

    @torch.inference_mode()
    def __call__(self, observation, epsilon, generator):
        obs = torch.as_tensor(observation, device=self.device)
        q = self.network(obs, generator=generator).q_values.float()
        q_max = q.max(dim=1).values
        if self.device.type == "cpu":  # as Policy: the same draws on NumPy's views
            actions = epsilon_greedy(q.numpy(), epsilon, generator)
        else:
            eps = torch.as_tensor(epsilon, dtype=torch.float32, device=self.device)
            actions = epsilon_greedy(q, eps, generator).cpu().numpy()
        self.agent_info = (np.array(observation), q_max.cpu().numpy())
        return actions, float(q_max.mean())


class PQNDriver(Driver):
    """Rollouts, their Q(lambda) returns and epochs of minibatch updates (the module
    docstring); evaluation as the serial driver's."""

    def __init__(self, parts, evaluation):
        config, info, streams = parts.config, parts.info, parts.streams
        self.config, self.learner, self.train_epsilon = config, parts.learner, parts.train_epsilon
        acting = acting_of(config)
        self.policy = RolloutPolicy(parts.learner.online, config.tau_samples_policy)
        self.actor = Actor(acting, info, self.policy, streams.actor, parts.train_epsilon,
                           in_process(config))  # fmt: skip
        self.evaluator = Actor(acting, info, evaluation, streams.evaluation,
                               lambda _: config.eval_exploration_epsilon, in_process(config),
                               eval_mode=True, episodes=config.eval_episodes)  # fmt: skip
        self.shuffles = streams.replay.numpy  # the minibatches' order (no replay to draw)
        self.frame_t = 0
        self.num_updates = 0
        # CleanRL's pqn.py: lr_0 (1 - (i - 1) / iterations) before rollout i, constant
        # through its epochs: linear in the frames before the rollout, 0 at the run's end.
        self.learning_rate = LinearSchedule(0, config.iterations * config.train_frames,
                                            config.learning_rate, 0.0)  # fmt: skip

    def train_phase(self, num_frames: int, progress: Progress = None) -> dict:
        """Rollouts until the phase has `num_frames` frames (a whole number of them)."""
        actor, rollout_steps = self.actor, self.config.rollout_steps
        actor.start()
        try:
            rows = [self._step(progress)]  # the first observation, and its action
            while actor.frames < num_frames:
                self._anneal()
                rows += [self._step(progress) for _ in range(rollout_steps)]
                self._learn(rows)
                rows = rows[-1:]  # the next rollout starts where this one ended
        finally:
            stats = actor.stop()
        return stats

    def _anneal(self):
        if self.config.learning_rate_decay == "linear":
            self.learner.set_learning_rate(self.learning_rate(self.frame_t))

    def _step(self, progress):
        row, new_frames = self.actor.step(self.frame_t)
        self.frame_t += new_frames
        if progress is not None:
            progress(new_frames, self.actor.episodes)
        return row

    def _learn(self, rows):
        """The returns of the rollout `rows` (T + 1 of them: T transitions) and the
        epochs of minibatch updates on its transitions."""
        config = self.config
        acted, reached = rows[:-1], rows[1:]
        observations = np.stack([row.agent_info[0] for row in acted])  # [T, N, ...]
        actions = np.stack([row.action for row in acted])
        ended = np.stack([row.zero_discount for row in reached])  # terminations, lost lives
        last = np.stack([row.last for row in reached])
        returns = lambda_returns(
            torch.as_tensor(np.stack([row.reward for row in reached]), dtype=torch.float32),
            torch.as_tensor(config.discount * (1.0 - ended), dtype=torch.float32),
            torch.as_tensor(np.stack([row.agent_info[1] for row in reached])),
            torch.as_tensor(np.where(last, 0.0, config.q_lambda), dtype=torch.float32),
        ).numpy()
        valid = ~np.stack([row.last for row in acted])  # no transition from a last observation
        s_tm1, a_tm1, g_t = observations[valid], actions[valid], returns[valid]
        for _ in range(config.update_epochs):
            order = self.shuffles.permutation(len(g_t))
            for part in np.array_split(order, config.num_minibatches):
                self.learner.learn(ReturnBatch(s_tm1[part], a_tm1[part], g_t[part]))
                self.num_updates += 1

    def eval_phase(self, num_frames: int, progress: Progress = None) -> dict:
        config = self.config
        return evaluate(self.evaluator, num_frames, progress, lambda: self.frame_t,
                        config.eval_episodes, config.eval_finish_episodes)  # fmt: skip

    def epsilon(self, frame_t: int) -> float:
        return mean_epsilon(self.train_epsilon, frame_t)

    def columns(self, train: dict, stats: dict) -> dict:
        columns = super().columns(train, stats)
        return {**columns, "replay_ratio": math.nan}

    def state_dict(self, common: dict) -> dict:
        return {**common, "pqn_updates": np.array([self.num_updates])}

    def load_state_dict(self, state: dict) -> None:
        self.frame_t = int(state["frame_t"])
        self.num_updates = int(state["pqn_updates"][0])
