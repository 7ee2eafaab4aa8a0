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
from typing import Any

import numpy as np
import torch

from qzoo.learning.augmentation import Augmented
from qzoo.learning.compiled import CompiledUpdate
from qzoo.learning.objectives import make_objective
from qzoo.learning.optim import clip_by_global_norm_, make_optimizer
from qzoo.learning.precision import autocast
from qzoo.networks.network import make_network
from qzoo.replay.batch import Batch


class Learner:
    def __init__(self, config: Any, info: Any, observation_shape: tuple, device: Any,
                 generator: torch.Generator) -> None:  # fmt: skip
        """`generator`: the learner's torch random stream (noise, taus) on `device`."""
        self.config = config
        self.device = torch.device(device)
        self.online = make_network(config, info, observation_shape).to(self.device)
        # Target parameters start equal to the online ones (DQN Zoo).
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self._parameters = list(self.online.parameters())
        self.optimizer = make_optimizer(config, self._parameters)
        self.objective = make_objective(config)
        if config.augmentation != "none":  # DrQ: batches shifted before the objective
            self.objective = Augmented(self.objective, config.augmentation, config.shift_offsets)
        self.generator = generator
        self._stats = torch.zeros(3, device=self.device)  # loss sum, q sum, updates
        # Held around the eager update's optimizer step, so that a thread copying the
        # online weights (the async actor, acting/asynchronous.py) never reads half a
        # step; None for a compiled or captured update, which steps inside its graph.
        self.step_lock = None if config.compile or config.capture else threading.Lock()
        # A replay on a device takes priorities as device tensors
        # (replay/device_samplers.py):
        # no copy to the host, so nothing waits for the update to finish.
        self._host_priorities = config.replay_device == "host"
        # --compile: the gradient step as one compiled graph (compiled.py).
        self._compiled = None
        if config.compile:
            self._compiled = CompiledUpdate(
                self.online, self.target, self.objective, self.optimizer,
                config.max_global_grad_norm, device, config.precision,
            )  # fmt: skip

    def learn(self, batch: Batch) -> torch.Tensor | np.ndarray | None:
        """One SGD step on a `Batch` from replay.

        Returns the new priorities [B] when the batch carries importance weights
        (prioritized replay; numpy, or a tensor on this device for a replay on a
        device), else None.
        """
        config = self.config
        batch = batch.to(self.device)
        if self._compiled is not None:  # clipping and the optimizer's step included
            grads, loss, mean_q, priorities = self._compiled(batch, self.generator)
            for p, g in zip(self._parameters, grads):
                p.grad = g
        else:
            with autocast(config.precision, self.device):
                out = self.objective(self.online, self.target, batch, self.generator)
            per_example = out.loss if batch.weights is None else out.loss * batch.weights
            loss = per_example.mean()
            for p in self._parameters:  # zero_grad(set_to_none=True), without its overhead
                p.grad = None
            loss.backward()
            loss, mean_q, priorities = loss.detach(), out.q_tm1.detach().mean(), out.priorities
            if config.max_global_grad_norm > 0:
                clip_by_global_norm_(self._parameters, config.max_global_grad_norm)
            with self.step_lock or contextlib.nullcontext():  # None only when compiled
                self.optimizer.step()
        # Statistics stay on the device: reading them every step would stall a GPU.
        with torch.no_grad():
            self._stats += torch.stack([loss, mean_q, loss.new_ones(())])
        if batch.weights is None:
            return None
        if self._host_priorities:
            return priorities.cpu().numpy()
        return priorities.detach()

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
