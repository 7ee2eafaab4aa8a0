"""Acting and learning for every preset: online and target networks, the optimizer,
and one SGD step (DQN Zoo's `<agent>/agent.py`, one class for all seven).

The algorithmic differences between agents are the few lines of `_td_losses`, which
pick the loss from losses.py by the return distribution and `double_q`; the rest
(weights, clipping, priorities) is shared. Each network application gets its own
noise sample (noisy nets) and its own taus (IQN), as in DQN Zoo.
"""

import copy

import numpy as np
import torch

from qzoo import losses
from qzoo.networks import make_network
from qzoo.optim import clip_by_global_norm_, make_optimizer


class Agent:
    def __init__(self, config, info, observation_shape, device):
        self.config = config
        self.device = torch.device(device)
        self.online = make_network(config, info, observation_shape).to(self.device)
        # Target parameters start equal to the online ones (DQN Zoo).
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.optimizer = make_optimizer(config, self.online.parameters())
        self._stats = torch.zeros(3, device=self.device)  # loss sum, q sum, updates

    def _tensor(self, array):
        return torch.as_tensor(array, device=self.device)

    def _taus(self, batch, n):
        """IQN's tau ~ U[0, 1), fresh for every network application."""
        return torch.rand(batch, n, device=self.device)

    def _apply(self, network, obs, n_taus):
        taus = (
            self._taus(len(obs), n_taus)
            if self.config.distribution == "implicit_quantile"
            else None
        )
        return network(obs, taus), taus

    @torch.no_grad()
    def q_values(self, observation):
        """Online Q-values [N, A] (numpy float32) for a batch of observations."""
        obs = self._tensor(observation)
        out, _ = self._apply(self.online, obs, self.config.tau_samples_policy)
        return out.q_values.float().cpu().numpy()

    def _td_losses(self, s_tm1, a_tm1, r_t, discount_t, s_t):
        """Per-example losses [B] and the online Q(s_tm1, a_tm1) [B]."""
        config = self.config
        online_tm1, tau_tm1 = self._apply(self.online, s_tm1, config.tau_samples_s_tm1)
        with torch.no_grad():
            target_t, _ = self._apply(self.target, s_t, config.tau_samples_s_t)
            # Double Q selects at s_t with the online network; QR-DQN and IQN select
            # with the target network (IQN with its own taus), C51 inside its loss.
            selector = None
            if config.double_q:
                selector, _ = self._apply(self.online, s_t, config.tau_samples_policy)
            elif config.distribution == "implicit_quantile":
                selector, _ = self._apply(self.target, s_t, config.tau_samples_policy)
        q_taken = online_tm1.q_values.gather(1, a_tm1[:, None]).squeeze(1)
        kind = config.distribution
        if kind == "none":
            if config.double_q:
                td = losses.double_q_learning(
                    online_tm1.q_values, a_tm1, r_t, discount_t, target_t.q_values,
                    selector.q_values,
                )  # fmt: skip
            else:
                td = losses.q_learning(
                    online_tm1.q_values, a_tm1, r_t, discount_t, target_t.q_values
                )
            return td, q_taken
        if kind == "categorical":
            atoms = self.online.support
            if config.double_q:
                loss = losses.categorical_double_q_learning(
                    atoms, online_tm1.q_logits, a_tm1, r_t, discount_t, atoms,
                    target_t.q_logits, selector.q_values,
                )  # fmt: skip
            else:
                loss = losses.categorical_q_learning(
                    atoms, online_tm1.q_logits, a_tm1, r_t, discount_t, atoms, target_t.q_logits
                )
            return loss, q_taken
        if kind == "quantile":
            n = config.num_quantiles
            tau_tm1 = ((torch.arange(n, device=self.device) + 0.5) / n).expand(len(a_tm1), n)
        selector_dist = selector.q_dist if selector is not None else target_t.q_dist
        loss = losses.quantile_q_learning(
            online_tm1.q_dist, tau_tm1, a_tm1, r_t, discount_t, selector_dist, target_t.q_dist,
            config.huber_param,
        )  # fmt: skip
        return loss, q_taken

    def learn(self, batch):
        """One SGD step on a batch from replay (DQN Zoo's `_learn`).

        Returns new priorities [B] (numpy) for prioritized replay: |TD error| for
        Q-learning losses, the loss clipped to [0, 100] for distributional ones.
        """
        config = self.config
        s_tm1, s_t = self._tensor(batch["s_tm1"]), self._tensor(batch["s_t"])
        a_tm1 = self._tensor(batch["a_tm1"])
        r_t, discount_t = self._tensor(batch["r_t"]), self._tensor(batch["discount_t"])
        values, q_taken = self._td_losses(s_tm1, a_tm1, r_t, discount_t, s_t)
        if config.distribution == "none":
            priorities = values.detach().abs()
            if config.grad_error_bound > 0:
                # Identity forward; the gradient into the TD error is clipped. With
                # weights, the effective gradient is clip(w * delta) / B: not Huber x w.
                td = losses.clip_gradient(values, -config.grad_error_bound, config.grad_error_bound)
                per_example = losses.l2_loss(td)
            else:
                per_example = losses.huber_loss(values)
        else:
            per_example = values
            priorities = values.detach().abs().clamp(0, 100)
        if "weights" in batch:
            per_example = per_example * self._tensor(batch["weights"])
        loss = per_example.mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.max_global_grad_norm > 0:
            clip_by_global_norm_(list(self.online.parameters()), config.max_global_grad_norm)
        self.optimizer.step()
        # Statistics stay on the device: reading them every step would stall a GPU.
        with torch.no_grad():
            self._stats += torch.stack([loss.detach(), q_taken.detach().mean(), loss.new_ones(())])
        if "weights" in batch:
            return priorities.cpu().numpy()
        return None

    def update_target(self):
        self.target.load_state_dict(self.online.state_dict())

    def pop_statistics(self):
        """Mean loss and mean Q(s_tm1, a_tm1) over updates since the last call."""
        loss_sum, q_sum, updates = self._stats.tolist()
        self._stats.zero_()
        if updates == 0:
            return {"loss": np.nan, "mean_q": np.nan, "num_updates": 0}
        return {"loss": loss_sum / updates, "mean_q": q_sum / updates, "num_updates": int(updates)}

    def state_dict(self):
        return {
            "online": self.online.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state):
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
