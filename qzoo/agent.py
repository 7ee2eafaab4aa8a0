"""Acting and learning for DQN (Mnih et al. 2015) and Double DQN (van Hasselt et al.
2016): online and target networks, the optimizer, and one SGD step.

The difference between the two agents is one flag, `double_q`, which picks the
loss in `learn` (plus preset values in config.py).
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

    @torch.no_grad()
    def q_values(self, observation):
        """Online Q-values [N, A] (numpy float32) for a batch of observations."""
        return self.online(self._tensor(observation)).float().cpu().numpy()

    def learn(self, batch):
        """One SGD step on a batch from replay (DQN Zoo's `_learn`)."""
        s_tm1, s_t = self._tensor(batch["s_tm1"]), self._tensor(batch["s_t"])
        a_tm1 = self._tensor(batch["a_tm1"])
        r_t, discount_t = self._tensor(batch["r_t"]), self._tensor(batch["discount_t"])
        with torch.no_grad():
            q_t_value = self.target(s_t)
        if self.config.double_q:
            # One forward pass for s_tm1 and s_t; the s_t half carries no gradient.
            q = self.online(torch.cat([s_tm1, s_t]))
            q_tm1, q_t_selector = q[: len(s_tm1)], q[len(s_tm1) :].detach()
            td_error = losses.double_q_learning(
                q_tm1, a_tm1, r_t, discount_t, q_t_value, q_t_selector
            )
        else:
            q_tm1 = self.online(s_tm1)
            td_error = losses.q_learning(q_tm1, a_tm1, r_t, discount_t, q_t_value)
        bound = self.config.grad_error_bound
        if bound > 0:
            td_error = losses.clip_gradient(td_error, -bound, bound)
            loss = losses.l2_loss(td_error).mean()
        else:
            loss = losses.huber_loss(td_error).mean()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.max_global_grad_norm > 0:
            clip_by_global_norm_(list(self.online.parameters()), self.config.max_global_grad_norm)
        self.optimizer.step()
        # Kept on the device: reading them every step would stall a GPU.
        with torch.no_grad():
            self._stats += torch.stack(
                [loss.detach(), q_tm1.detach().gather(1, a_tm1.long()[:, None]).mean(), loss.new_ones(())]
            )
        return td_error.detach()

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
