"""The policy an actor asks for actions: epsilon-greedy on a Q-network, chosen on the
network's device so that only the actions (and one statistic) cross to the host."""

import numpy as np
import torch

from qzoo.acting.exploration import epsilon_greedy
from qzoo.networks import draws
from qzoo.networks.heads import mix_heads, random_convex_combination
from qzoo.networks.host_mlp import HostMlp


class Policy:
    """Epsilon-greedy actions from a Q-network, chosen on the network's device.

    In-process actors share the learner's online network by reference (always the
    newest weights); an actor elsewhere owns a copy and calls `load_weights`. On a CPU
    the choice runs in NumPy (PyTorch's dispatch costs more than a small network's
    arithmetic): epsilon-greedy with the same draws and actions, and a plain MLP's
    Q-values (networks/host_mlp.py).
    """

    def __init__(self, network: torch.nn.Module, tau_samples: int,
                 deep_exploration: str | None = None, noise: bool = True) -> None:  # fmt: skip
        """`tau_samples`: IQN's K, the taus averaged to choose an action (ignored by
        other networks). `deep_exploration`: None, or "identity" / "stochastic" for a
        multi-head network acting in each episode on one random head / one random
        convex combination of its heads (batch_rl's MultiNetworkDQNAgent with
        use_deep_exploration, after Bootstrapped DQN, Osband et al. 2016)."""
        self.network = network
        self.device = next(network.parameters()).device
        # IQN acts on the mean over K sampled taus (DQN Zoo's tau_samples_policy).
        self.tau_samples = tau_samples if network.kind == "implicit_quantile" else None
        self.deep_exploration = deep_exploration
        self.noise = noise  # False: noisy layers act on their mean weights
        self._episode_weights = None  # [N, K]: each environment's head mixture
        # A CPU policy over a plain MLP computes its Q-values in NumPy
        # (networks/host_mlp.py).
        self._host = None
        if self.device.type == "cpu" and deep_exploration is None and self.tau_samples is None:
            self._host = HostMlp.of(network)
        self._starts: np.ndarray | None = None  # episode starts told by `observe`

    def settings(self) -> dict:
        """How this policy acts, its network aside: a policy acting the same way on
        another network (an actor's copy) is built from them, `Policy(copy,
        **policy.settings())`, rather than from the config a second time."""
        return {"tau_samples": self.tau_samples or 0, "deep_exploration": self.deep_exploration,
                "noise": self.noise}  # fmt: skip

    def load_weights(self, state_dict: dict) -> None:
        self.network.load_state_dict(state_dict)

    def observe(self, first: np.ndarray, reward: np.ndarray) -> None:
        """Before each call, the actor tells which environments start an episode at the
        observations about to be acted on (`first` [N] bool) and the rewards replay
        stores with them; deep exploration draws new mixtures there, a recurrent policy
        (recurrent_policy.py) resets states."""
        self._starts = first

    def __call__(self, observation: np.ndarray, epsilon: np.ndarray,
                 generator: torch.Generator) -> tuple[np.ndarray, float]:  # fmt: skip
        """Actions [N] (numpy int64) for observations [N, ...] and epsilons [N], and
        the mean over environments of max_a Q (DQN Zoo's state value statistic)."""
        if self._host is not None:  # no tensors at all (not even inference mode's)
            q = self._host(observation)
            return epsilon_greedy(q, epsilon, generator), float(q.max(axis=1).mean())
        return self._network_call(observation, epsilon, generator)

    # Inference mode, not just no_grad: no version counters or views tracked (a third
    # of a small network's forward pass on a CPU).
    @torch.inference_mode()
    def _network_call(self, observation, epsilon, generator):
        obs = torch.as_tensor(observation, device=self.device)
        taus = None
        if self.tau_samples is not None:
            taus = torch.rand(len(obs), self.tau_samples, device=self.device, generator=generator)
        out = self.network(obs, taus, generator=generator if self.noise else draws.MEAN)
        if self.deep_exploration is None:
            q = out.q_values.float()
        else:
            q = self._episode_q(out.q_heads.float(), self._starts, generator)
        self._starts = None
        if self.device.type == "cpu":
            # Host arithmetic on views of the Q-values: NumPy's per-operation cost is
            # a fraction of PyTorch's, which dominates a small network's step (same
            # draws, same actions: exploration.py).
            q = q.numpy()
            actions = epsilon_greedy(q, epsilon, generator)
            return actions, float(q.max(axis=1).mean())
        epsilon = torch.as_tensor(epsilon, dtype=torch.float32, device=self.device)
        actions = epsilon_greedy(q, epsilon, generator)
        state_value = q.max(dim=1).values.mean()
        # One device-to-host copy for both (exact: actions are small integers).
        both = torch.cat([actions.float(), state_value[None]]).cpu().numpy()
        return both[:-1].astype(np.int64), float(both[-1])

    def _episode_q(self, q_heads, first, generator):
        """Q of each environment's episode mixture; a new one where an episode starts
        (batch_rl draws it in begin_episode and keeps it for the whole episode)."""
        n, _, k = q_heads.shape
        if self._episode_weights is None or len(self._episode_weights) != n:
            self._episode_weights = torch.full((n, k), 1.0 / k, device=self.device)
            first = np.ones(n, bool)
        if first is not None and first.any():
            if self.deep_exploration == "stochastic":
                new = random_convex_combination(k, (n,), generator, self.device)
            else:
                head = torch.randint(k, (n,), generator=generator, device=self.device)
                new = torch.nn.functional.one_hot(head, k).float()
            starts = torch.as_tensor(first, device=self.device)[:, None]
            self._episode_weights = torch.where(starts, new, self._episode_weights)
        return mix_heads(q_heads, self._episode_weights)
