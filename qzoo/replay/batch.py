"""What flows between the parts: rows from actors into replay, batches from replay
into the learner. Typed structures of arrays, never dicts of strings."""

from typing import NamedTuple

import numpy as np


class Row(NamedTuple):
    """One replay row per environment: the newest observation o_t of each of N
    environments, the action taken at it and how the environment arrived there.

    frame [N, ...]: the newest frame of o_t; action [N]: the action taken at o_t
    (ignored when o_t is last); reward [N]: the clipped reward on arriving at o_t;
    first / last [N]: o_t starts / ends an episode; zero_discount [N]: arriving at
    o_t terminated the episode or lost a life (nothing bootstraps through it).
    agent_info: what a recurrent policy acted from (R2D1's `RecurrentInfo`:
    acting/recurrent_policy.py), None for feed-forward policies.
    """

    frame: np.ndarray
    action: np.ndarray
    reward: np.ndarray
    first: np.ndarray
    last: np.ndarray
    zero_discount: np.ndarray
    agent_info: object = None


class Batch(NamedTuple):
    """A batch of n-step transitions (DQN Zoo's `s_tm1, a_tm1, r_t, discount_t, s_t`).

    `discount_t` already holds gamma^k: 0 after a termination or a lost life, gamma^k
    after k steps otherwise. `weights` are importance-sampling weights (None for
    uniform sampling); `indices` are the replay slots the transitions came from, for
    priority updates.
    """

    s_tm1: np.ndarray
    a_tm1: np.ndarray
    r_t: np.ndarray
    discount_t: np.ndarray
    s_t: np.ndarray
    weights: np.ndarray | None = None
    indices: tuple | None = None

    def to(self, device):
        """The same batch as tensors on `device` (indices stay on the host)."""
        return to_device(self, device)


class SequenceBatch(NamedTuple):
    """A batch of B sequences, time-major (S = W + T + n replayed steps):

    frames [S + stack - 1, B, *frame]: each frame once (stacks are built on the device by
    `stacked_observations`); frame_mask [S, B, stack]: False where a stacked frame
    predates its episode (blank); prev_action [S, B] (-1: none, at episode starts) and
    prev_reward [S, B]: the recurrent inputs; action, r_t, discount_t [T, B]: the trained
    steps' actions and n-step returns (discount_t holds gamma^k, 0 after termination);
    bootstrap [T, B]: index of each target's observation in the steps from W on;
    transition [T, B]: whether each trained row starts a transition; zero_state [B]: an
    episode began inside the burn-in; state [1, B, 2, H]: the stored (h, c) at the start;
    weights [B] (prioritized) and indices (points, columns) for priority updates.
    """

    frames: np.ndarray
    frame_mask: np.ndarray
    prev_action: np.ndarray
    prev_reward: np.ndarray
    action: np.ndarray
    r_t: np.ndarray
    discount_t: np.ndarray
    bootstrap: np.ndarray
    transition: np.ndarray
    zero_state: np.ndarray
    state: np.ndarray
    weights: np.ndarray | None = None
    indices: tuple | None = None

    def to(self, device):
        """The same batch as tensors on `device` (indices stay on the host)."""
        return to_device(self, device)


def to_device(batch, device):
    """A NamedTuple batch with its arrays as tensors on `device`; `indices` (replay
    slots, for priority updates) stay on the host, None fields stay None."""
    import torch  # here, not at the top: a replay shard's process never loads PyTorch

    fields = {k: None if v is None else torch.as_tensor(v, device=device)
              for k, v in batch._asdict().items() if k != "indices"}  # fmt: skip
    return batch._replace(**fields)


class ReturnBatch(NamedTuple):
    """Transitions with their returns already made (PQN's rollouts: Q(lambda) returns
    `g_t` of taking `a_tm1` at `s_tm1`), regressed on by learning/objectives.py's
    QRegression. `weights` and `indices` as a Batch's (none: no replay)."""

    s_tm1: np.ndarray
    a_tm1: np.ndarray
    g_t: np.ndarray
    weights: np.ndarray | None = None
    indices: tuple | None = None

    def to(self, device):
        return to_device(self, device)
