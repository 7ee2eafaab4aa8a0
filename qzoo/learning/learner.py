"""The learner: online and target networks, the optimizer and one objective; one SGD
step per `learn(batch)` (DQN Zoo's `<agent>/agent.py` `_learn`, for every preset).

It knows nothing of environments or of how replay stores frames: a `Batch` comes
in, new priorities go out, and the loss and mean Q accumulate on the device until
`pop_statistics()` reads them (once per iteration, so a GPU is not stalled per step).
Actors get its weights by reference in the same process (`online`) or as a state dict
elsewhere (`weights()`).
"""

import contextlib
import copy
import threading

import numpy as np
import torch
from torch import nn

from qzoo.learning.objectives import Objective
from qzoo.learning.optim import clip_by_global_norm_
from qzoo.learning.precision import autocast
from qzoo.replay.batch import Batch


class Learner:
    """See the module docstring. Built by learning/from_config.py from a config; the fast
    update paths wrap it (learning/compiled.py's CompiledLearner, the captured update)."""

    def __init__(self, online: nn.Module, objective: Objective, optimizer: torch.optim.Optimizer,
                 generator: torch.Generator, max_global_grad_norm: float = 0.0,
                 precision: str = "float32") -> None:  # fmt: skip
        """`online`: the network, on its device (the target starts as its copy, as in
        DQN Zoo); `optimizer` over its parameters; `generator`: the learner's torch
        random stream (noise, taus) on that device; `max_global_grad_norm`: Optax's
        global-norm clip (0: none); `precision`: float32 or bfloat16 autocast."""
        self.online = online
        self.device = next(online.parameters()).device
        self.target = copy.deepcopy(online).requires_grad_(False)
        self.parameters = list(online.parameters())
        self.optimizer, self.objective, self.generator = optimizer, objective, generator
        self.max_global_grad_norm, self.precision = max_global_grad_norm, precision
        self._stats = torch.zeros(3, device=self.device)  # loss sum, q sum, updates
        # Held around the optimizer's step, so that a thread copying the online weights
        # (the async actor, acting/asynchronous.py) never reads half a step; None where
        # the step runs inside a graph (the compiled learner's).
        self.step_lock: threading.Lock | None = threading.Lock()

    def learn(self, batch: Batch) -> torch.Tensor | None:
        """One SGD step on a `Batch` from replay. Returns the new priorities [B] (a
        tensor on this device) when the batch carries importance weights (prioritized
        replay), else None."""
        batch = batch.to(self.device)
        loss, mean_q, priorities = self.sgd_step(batch)
        self.add_statistics(loss, mean_q)
        return None if batch.weights is None else priorities.detach()

    def sgd_step(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The objective's (importance-weighted) mean loss, its gradient, the clip and
        the optimizer's step; returns (loss, mean Q(s_tm1, a_tm1), priorities), detached."""
        with autocast(self.precision, self.device):
            out = self.objective(self.online, self.target, batch, self.generator)
        per_example = out.loss if batch.weights is None else out.loss * batch.weights
        loss = per_example.mean()
        for p in self.parameters:  # zero_grad(set_to_none=True), without its overhead
            p.grad = None
        loss.backward()
        if self.max_global_grad_norm > 0:
            clip_by_global_norm_(self.parameters, self.max_global_grad_norm)
        with self.step_lock or contextlib.nullcontext():  # None: the compiled learner's
            self.optimizer.step()
        return loss.detach(), out.q_tm1.detach().mean(), out.priorities

    def set_learning_rate(self, learning_rate: float) -> None:
        """The optimizer's step size from now on (a schedule's, PQN's linear decay)."""
        for group in self.optimizer.param_groups:
            group["lr"] = learning_rate

    def add_statistics(self, loss: torch.Tensor, mean_q: torch.Tensor, updates: int = 1) -> None:
        """Adds an update's loss and mean Q to the sums `pop_statistics` reads. They
        stay on the device: reading them every step would stall a GPU."""
        with torch.no_grad():
            self._stats += torch.stack([loss, mean_q, loss.new_full((), updates)])

    def statistics_buffer(self) -> torch.Tensor:
        """The device tensor [loss sum, Q sum, updates] behind `pop_statistics`, which a
        captured update (learning/captured.py) adds to inside its graph."""
        return self._stats

    @torch.no_grad()
    def update_target(self, tau: float = 1.0) -> None:
        """target <- tau online + (1 - tau) target, over the whole state dict (rlpyt's
        `update_target(tau)`, Polyak averaging as in Lillicrap et al. 2016, "Continuous
        control with deep RL"); tau = 1 is DQN Zoo's periodic hard copy, exactly."""
        if tau == 1.0:
            self.target.load_state_dict(self.online.state_dict())
            return
        online = self.online.state_dict()
        for name, target in self.target.state_dict().items():
            if target.is_floating_point():  # integer buffers (counts) are copied
                target.lerp_(online[name], tau)
            else:
                target.copy_(online[name])

    def weights(self) -> dict[str, torch.Tensor]:
        """The online network's parameters as a CPU state dict, for actors that run
        in another thread, process or machine."""
        return {k: v.detach().to("cpu", copy=True) for k, v in self.online.state_dict().items()}

    def pop_statistics(self) -> dict[str, float]:
        """Mean loss and mean Q(s_tm1, a_tm1) over updates since the last call."""
        loss_sum, q_sum, updates = self._stats.tolist()
        self._stats.zero_()
        if updates == 0:
            return {"loss": np.nan, "mean_q": np.nan, "num_updates": 0}
        return {"loss": loss_sum / updates, "mean_q": q_sum / updates, "num_updates": int(updates)}

    def state_dict(self) -> dict:
        return {
            "online": self.online.state_dict(),
            "target": self.target.state_dict(),
            "optimizer": self.optimizer.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        self.online.load_state_dict(state["online"])
        self.target.load_state_dict(state["target"])
        self.optimizer.load_state_dict(state["optimizer"])
