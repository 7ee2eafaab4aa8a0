"""R2D1's acting side: an epsilon-greedy policy that carries one recurrent state per
environment (rlpyt's R2d1Agent, B3.5).

It has `Policy`'s interface (policy.py: called with observations, epsilons and a
generator, returns actions and the mean max Q; `load_weights`), plus what the actor's
marked hooks use:
- `observe(first, reward)` before every call: environments whose observation starts an
  episode get a zero state and no previous action (reset per environment, never for all);
  every environment's previous reward is what replay stores with the row, so the network
  sees the same inputs when a sequence is replayed;
- `agent_info` after every call: the state each environment acted FROM (rlpyt's
  `prev_rnn_state`; replay stores it every --store-state-interval rows) and the online
  Q-values of the action taken and of the greedy one (for input priorities, B3.4).

The state lives on the network's device and is carried from step to step; a phase's
fresh environments all start episodes, so it restarts with them. `state_dict` puts it
in the checkpoint.
"""

from typing import NamedTuple

import numpy as np
import torch

from qzoo.acting.exploration import epsilon_greedy


class RecurrentInfo(NamedTuple):
    """What the actor hands replay with a row: `state` [N, 2, H] (h and c the network
    acted from; a tensor on the policy's device), `q_taken` and `q_max` [N] (numpy)."""

    state: torch.Tensor
    q_taken: np.ndarray
    q_max: np.ndarray


class RecurrentPolicy:
    """Epsilon-greedy actions from a recurrent Q-network (networks/recurrent.py), one
    state per environment."""

    def __init__(self, network, num_envs):
        self.network = network
        self.device = next(network.parameters()).device
        self.agent_info = None
        self._reset(num_envs)

    def _reset(self, n):
        self._state = self.network.initial_state(n, self.device)
        self._prev_action = torch.full((n,), -1, dtype=torch.int64, device=self.device)
        self._prev_reward = torch.zeros(n, device=self.device)
        self._observed = False

    def load_weights(self, state_dict):
        self.network.load_state_dict(state_dict)

    def observe(self, first, reward):
        """Episode starts `first` [N] (bool) and rewards on arriving at the observations
        about to be acted on [N] (as replay stores them)."""
        if self._prev_action.shape[0] != len(first):
            self._reset(len(first))
        first = torch.as_tensor(np.asarray(first, bool), device=self.device)
        keep = (~first).float()[None, :, None]
        self._state = (self._state[0] * keep, self._state[1] * keep)
        self._prev_action = torch.where(first, -1, self._prev_action)
        reward = torch.as_tensor(np.asarray(reward, np.float32), device=self.device)
        self._prev_reward = torch.where(first, 0.0, reward)
        self._observed = True

    @torch.no_grad()
    def __call__(self, observation, epsilon, generator):
        """Actions [N] (numpy int64) and the mean over environments of max_a Q."""
        if not self._observed:
            raise RuntimeError("RecurrentPolicy.observe(first, reward) must precede each step")
        self._observed = False
        obs = torch.as_tensor(observation, device=self.device)
        state_in = self._state
        q, self._state = self.network(obs, self._prev_action, self._prev_reward, state_in)
        q = q.float()
        epsilon = torch.as_tensor(epsilon, dtype=torch.float32, device=self.device)
        actions = epsilon_greedy(q, epsilon, generator)
        self._prev_action = actions
        q_max = q.max(dim=1).values
        q_taken = q.gather(1, actions[:, None]).squeeze(1)
        # One device-to-host copy for the actions and the statistics.
        both = torch.cat([actions.float(), q_taken, q_max, q_max.mean()[None]]).cpu().numpy()
        n = len(actions)
        state = torch.stack([state_in[0][0], state_in[1][0]], dim=1)  # [N, 2, H]
        self.agent_info = RecurrentInfo(state, both[n : 2 * n], both[2 * n : 3 * n])
        return both[:n].astype(np.int64), float(both[-1])

    @torch.no_grad()
    def q_values(self, observation):
        """Q-values [N, A] of `observation` from the current states, which stay as
        they are (the next call acts from them)."""
        obs = torch.as_tensor(observation, device=self.device)
        q, _ = self.network(obs, self._prev_action, self._prev_reward, self._state)
        return q.float()

    def state_dict(self):
        return {"h": self._state[0], "c": self._state[1], "prev_action": self._prev_action,
                "prev_reward": self._prev_reward}  # fmt: skip

    def load_state_dict(self, state):
        device = self.device
        self._state = (state["h"].to(device), state["c"].to(device))
        self._prev_action = state["prev_action"].to(device)
        self._prev_reward = state["prev_reward"].to(device)


def pair(network, num_envs):
    """A recurrent policy for the training actor and one for evaluation: one network,
    two sets of states."""
    return RecurrentPolicy(network, num_envs), RecurrentPolicy(network, num_envs)


def states(driver):
    """The training and evaluation actors' recurrent states, for the run's
    checkpoint ({} for a feed-forward run). Phases restart their environments (and so
    the states) today; actors that keep environments across phases resume from these."""
    policies = (driver.actor.policy, driver.evaluator.policy)
    if not all(isinstance(p, RecurrentPolicy) for p in policies):
        return {}
    return {"recurrent_states": [p.state_dict() for p in policies]}


def load_states(driver, state):
    policies = (driver.actor.policy, driver.evaluator.policy)
    if all(isinstance(p, RecurrentPolicy) for p in policies):
        policies[0].load_state_dict(state["recurrent_states"][0])
        policies[1].load_state_dict(state["recurrent_states"][1])
