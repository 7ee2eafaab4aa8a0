"""A trained agent to call from Python (qzoo.load): its network, the config it was
trained with, and the environment that gives the observations it takes. Acting is the
evaluation policy of a run (acting/policy.py): the same epsilon-greedy draws, IQN's
taus, noisy layers as evaluation has them, R2D1's recurrent state."""

from typing import Any

import numpy as np
import torch

from qzoo.acting.from_config import evaluation_policy
from qzoo.envs.atari import PROTOCOLS
from qzoo.networks import draws
from qzoo.replay.frames import observation_shape
from qzoo.tools.agent_env import AgentEnv
from qzoo.tools.runs import Run

Observation = np.ndarray | torch.Tensor


class Agent:
    """A trained network with its run's config; see qzoo.load.

    Observations are what `make_env()`'s environment gives: one (the shape
    `observation_shape`) or a batch of them (one more leading axis), as NumPy arrays
    or torch tensors."""

    def __init__(self, run: Run, seed: int = 0, source: str = "") -> None:
        """`run`: what tools/runs.py loaded; `source`: where from (a folder, a repo id)."""
        self.source = source
        self.config = run.config
        self.network = run.network
        self.iteration = run.iteration
        self.rows = run.rows
        self.num_actions = int(run.info.num_actions)
        self.observation_shape = observation_shape(run.info.frame_shape, run.config.frame_stack)
        self.info = run.info  # the environment's description (EnvInfo)
        self._generator = torch.Generator(device=next(run.network.parameters()).device)
        self._generator.manual_seed(seed)
        self._policy: Any = None

    def __repr__(self) -> str:
        return (f"Agent({self.config.agent} on {self.config.env}, iteration {self.iteration}, "
                f"{self.num_actions} actions, observations {self.observation_shape})")  # fmt: skip

    @property
    def recurrent(self) -> bool:
        """Whether the network carries a state from step to step (R2D1)."""
        return bool(self.config.recurrent)

    def _batch(self, observation: Observation) -> tuple[np.ndarray, bool]:
        """(a batch as the network's input dtype, whether `observation` was one)."""
        if isinstance(observation, torch.Tensor):
            observation = observation.detach().cpu().numpy()
        array = np.asarray(observation, dtype=self.info.frame_dtype)
        single = array.shape == self.observation_shape
        if not single and array.shape[1:] != self.observation_shape:
            raise ValueError(f"observation of shape {array.shape}; expected "
                             f"{self.observation_shape} or a batch [N, *that]")  # fmt: skip
        return (array[None] if single else array), single

    def act(self, observation: Observation, epsilon: float = 0.0,
            first: Any = None, reward: Any = None) -> Any:  # fmt: skip
        """The action for one observation (an int), or actions for a batch (int64, as a
        NumPy array, or a tensor for a tensor): greedy, or epsilon-greedy with the
        agent's own random stream (seeded by qzoo.load's `seed`).

        R2D1's agents carry a recurrent state per batch row: pass `first` (True where
        an observation starts an episode; the first call starts them all) and `reward`
        (what arriving at the observation gave); others ignore both."""
        batch, single = self._batch(observation)
        n = len(batch)
        policy = self._policy_for(n)
        starts = np.zeros(n, bool) if first is None else np.broadcast_to(np.asarray(first, bool), n)
        rewards = np.zeros(n, np.float32) if reward is None else np.broadcast_to(
            np.asarray(reward, np.float32), n)  # fmt: skip
        policy.observe(starts, rewards)
        actions, _ = policy(batch, np.full(n, epsilon, np.float32), self._generator)
        if single:
            return int(actions[0])
        return torch.as_tensor(actions) if isinstance(observation, torch.Tensor) else actions

    def _policy_for(self, n):
        """The evaluation policy, made anew when the batch size changes (a recurrent
        one then starts every row's episode)."""
        if self._policy is None or (self.recurrent and self._policy_size != n):
            self._policy = evaluation_policy(self.network, self.config, n)
            self._policy_size = n
            if self.recurrent:
                self._policy.observe(np.ones(n, bool), np.zeros(n, np.float32))
        return self._policy

    def reset(self) -> None:
        """Forgets R2D1's recurrent states: the next `act` starts every episode."""
        self._policy = None

    @torch.inference_mode()
    def q_values(self, observation: Observation) -> Any:
        """Q-values [A] for one observation, [N, A] for a batch (a NumPy array, or a
        tensor for a tensor). Distributional agents give their means; IQN averages
        over the run's K sampled taus; noisy layers act as in evaluation; R2D1's are
        from its current recurrent state (without advancing it)."""
        batch, single = self._batch(observation)
        if self.recurrent:
            q = self._policy_for(len(batch)).q_values(batch)
        else:
            q = self._outputs(batch).q_values.float()
        return self._shaped(q, single, observation)

    @torch.inference_mode()
    def distribution(self, observation: Observation) -> tuple[Any, Any]:
        """The return distribution per action, as (values, probabilities), each [A, M]
        for one observation or [N, A, M] for a batch; Q = sum(values * probabilities).
        C51: the support's M atoms and their probabilities; QR-DQN: the M quantiles,
        each 1/M; IQN: the quantiles at K taus drawn from the agent's stream.
        ValueError for an agent that learns Q-values only."""
        kind = getattr(self.network, "kind", "none")
        if kind == "none" or self.recurrent:
            raise ValueError(f"{self.config.agent} learns Q-values, not a distribution "
                             "(--distribution none): use q_values")  # fmt: skip
        batch, single = self._batch(observation)
        out = self._outputs(batch)
        if kind == "categorical":
            probs = torch.softmax(out.q_logits.float(), dim=-1)
            support: torch.Tensor = self.network.get_buffer("support")
            values = support.float().expand_as(probs)
        else:  # quantiles [N, M, A] -> [N, A, M], each of weight 1/M
            values = out.q_dist.float().transpose(1, 2)
            probs = torch.full_like(values, 1.0 / values.shape[-1])
        return (self._shaped(values, single, observation),
                self._shaped(probs, single, observation))  # fmt: skip

    def _outputs(self, batch):
        device = next(self.network.parameters()).device
        obs = torch.as_tensor(batch, device=device)
        taus = None
        if self.network.kind == "implicit_quantile":
            k = self.config.tau_samples_policy
            taus = torch.rand(len(obs), k, device=device, generator=self._generator)
        noise = self._generator if self.config.eval_noise else draws.MEAN
        return self.network(obs, taus, generator=noise)

    @staticmethod
    def _shaped(values, single, observation):
        values = values[0] if single else values
        return values.cpu() if isinstance(observation, torch.Tensor) else values.cpu().numpy()

    def make_env(self, protocol: str | None = None, seed: int | None = None) -> AgentEnv:
        """A Gymnasium environment with the preprocessing and frame stack the agent was
        trained with, whose observations `act` takes; `protocol` replaces an Atari run's
        (dqn_zoo, machado, noop30), `seed` seeds its resets."""
        if protocol is not None and (self.info.domain != "atari" or protocol not in PROTOCOLS):
            expected = (
                ", ".join(PROTOCOLS)
                if self.info.domain == "atari"
                else (f"None: protocols are Atari's, and {self.config.env} is not an Atari game")
            )
            raise ValueError(f"protocol {protocol!r}; expected {expected}")
        return AgentEnv(self.config, self.info, protocol, seed)
