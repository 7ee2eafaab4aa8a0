"""Uniform and prioritized sampling on the replay's device (`--replay-device cpu|cuda`),
with no host synchronisation between a batch's draw and its priority update.

Why no sync: on a GPU, every `bool(tensor)`, `float(tensor)` or `.cpu()` waits for the
device to finish all queued work, so the host cannot run ahead queuing the next
update, and a sampled update cannot be captured as one CUDA graph. Here sample ->
(learner) -> priority update is tensor ops only; anything that needs the host's
attention is kept on the device and read once per iteration (`check`).

Rejection sampling in one round: each of the batch's positions gets ROUNDS candidate
draws at once and keeps the first valid one, which is uniform over the valid slots, as
the host samplers' redraw loop (samplers.py). A position whose ROUNDS candidates are
all invalid (probability q^ROUNDS for a fraction q of invalid slots: below 1e-30 for
q = 0.1, CartPole's worst) keeps its last candidate and the miss is counted on the
device; `check()` (once per iteration) then stops the run with a clear error, so a run
never trains on an invalid transition unawares."""

from typing import Any

import numpy as np
import torch

ROUNDS = 32  # candidates per position, drawn at once (see the module docstring)


def first_accepted(t, b, ok):
    """Per position (column) of [ROUNDS, batch] candidates `t`, `b`, the first one
    `ok` accepts (the last when none is), and how many positions found none (a device
    tensor)."""
    found = ok.any(0)
    # argmax over the flags picks the first accepted candidate.
    pick = torch.where(found, ok.to(torch.uint8).argmax(0), ok.shape[0] - 1)[None]
    return t.gather(0, pick)[0], b.gather(0, pick)[0], (~found).sum()


def first_valid(draw, accept, batch_size):
    """Rows and columns of `batch_size` draws, each the first of its ROUNDS candidates
    (`draw((ROUNDS, batch_size))`) that `accept(t, b)` passes, and the number of
    positions that found none (a device tensor)."""
    t, b = draw((ROUNDS, batch_size))
    return first_accepted(t, b, accept(t.reshape(-1), b.reshape(-1)).view(t.shape))


def by_priority(cumulative, coins, targets, uniform, uniform_probability, num_envs, in_window,
                valid):  # fmt: skip
    """Prioritized replay's draw of a batch (DQN Zoo's semantics, samplers.py), the one
    function the device sampler and the captured update (learning/captured.py) call:
    per candidate [ROUNDS, B], a coin (uniforms `coins`) for a uniform draw (the batch's
    valid `uniform` draw, rows and columns [B]: always while every priority is zero), or
    the slot whose `cumulative` priority sum first exceeds `targets` (uniforms) x the
    total; the first candidate that is uniform, or in the window (`in_window(t)`) and
    `valid(t, b)`, per position. Returns rows, columns and the positions that found none."""
    total = cumulative[-1]
    heads = (coins < uniform_probability) | (total <= 0)
    slot = torch.searchsorted(cumulative, (targets * total).reshape(-1), right=True)
    slot = slot.clamp(max=cumulative.numel() - 1)
    t_p, b_p = slot // num_envs, slot % num_envs
    ok = heads | (in_window(t_p) & valid(t_p, b_p)).view(heads.shape)
    t = torch.where(heads, uniform[0], t_p.view(heads.shape))
    b = torch.where(heads, uniform[1], b_p.view(heads.shape))
    return first_accepted(t, b, ok)


def importance_weights(leaf, total, size, uniform_probability, beta, normalize):
    """(1/N / P)^beta for slots of values `leaf` (p^alpha) out of `total`, N = `size`
    transitions, P = (1 - u) leaf / total + u / N; divided by their max with `normalize`."""
    probability = (1 - uniform_probability) * leaf / total + uniform_probability / size
    weights = (1.0 / size / probability).pow(beta)
    return weights / weights.max() if normalize else weights


class DeviceUniformSampler:
    """Uniform over valid transitions, with replacement, drawn on the storage's device
    from the torch `generator` (see the module docstring for the rounds)."""

    def __init__(self, storage, generator):
        self.storage, self.generator = storage, generator
        self.misses = torch.zeros((), dtype=torch.int64, device=storage.device)

    def added(self, t: int) -> None:
        """Called after the storage wrote row `t`."""

    def draw(self, shape):
        """Rows and columns of uniform draws in the valid window (not yet checked for
        validity), both int64 tensors of `shape`."""
        storage, g, device = self.storage, self.generator, self.storage.device
        low, high = storage.window()
        age = torch.randint(low, high, shape, generator=g, device=device)
        t = (storage.oldest() + age) % storage.num_rows
        return t, torch.randint(storage.num_envs, shape, generator=g, device=device)

    def sample(self, batch_size: int) -> tuple[Any, Any, Any]:
        """Rows `t` and columns `b` (device tensors) of `batch_size` transitions, and
        None for weights (uniform sampling needs no importance weights)."""
        if not self.storage.can_sample():  # host-side counters: no sync
            raise RuntimeError("replay holds too few rows to sample")
        t, b, missed = first_valid(self.draw, self.storage.valid, batch_size)
        self.misses += missed
        return t, b, None

    def check(self):
        """Raises if a draw since the last call found no valid transition (one host
        sync: the run loop calls it once per iteration)."""
        misses = int(self.misses)
        self.misses.zero_()  # in place: a captured update (learning/captured.py) writes it
        if misses:
            raise RuntimeError(
                f"replay: {misses} sampled position(s) found no valid transition among "
                f"{ROUNDS} candidates (replay/device_samplers.py): the replay holds "
                "almost no valid transitions"
            )

    def update(self, indices: Any, priorities: Any) -> None:
        """Uniform sampling ignores priorities."""

    def state_dict(self) -> dict:
        return {}  # the generator is the replay stream's, checkpointed by qzoo/streams.py

    def load_state_dict(self, state: dict) -> None:
        pass


class DevicePrioritizedSampler(DeviceUniformSampler):
    """Proportional prioritized sampling (Schaul et al. 2016, arXiv:1511.05952) with DQN
    Zoo's semantics, as samplers.py's PrioritizedSampler: leaf values p^alpha with
    0^alpha = 0, a draw uniform with probability `uniform_sample_probability` (a valid
    uniform draw, as there), importance weights (1/N / P)^beta divided by the batch
    maximum, new rows at the largest priority seen (LAST rows at zero), invalid draws
    redrawn. The sum tree's role is taken by a flat float64 vector of the [T, B] slots
    (slot = t * B + b), a cumulative sum and `searchsorted` (the smallest slot whose
    cumulative sum exceeds the target, never a zero-valued one, as SumTree.query).
    Priorities arrive as device tensors and the largest seen stays on the device."""

    def __init__(self, storage, generator, priority_exponent, uniform_sample_probability,
                 normalize_weights=True):  # fmt: skip
        super().__init__(storage, generator)
        slots = storage.num_rows * storage.num_envs
        self.priorities = torch.zeros(slots, dtype=torch.float64, device=storage.device)
        self.priority_exponent = priority_exponent
        self.uniform_sample_probability = uniform_sample_probability
        self.normalize_weights = normalize_weights
        self.max_seen = torch.ones((), dtype=torch.float64, device=storage.device)
        self.importance_sampling_exponent = 0.4  # annealed by the run loop

    @property
    def max_seen_priority(self):
        return float(self.max_seen)

    def leaf_values(self, p):
        """p^alpha, the value a slot of priority p holds; 0^alpha must be 0 (0^0 would
        be 1): a zero priority is never sampled."""
        return torch.where(p == 0, 0.0, p.pow(self.priority_exponent))

    def added(self, t: int) -> None:
        """New transitions enter at the max seen priority; LAST rows at zero."""
        storage = self.storage
        columns = torch.arange(storage.num_envs, device=storage.device)
        rows = torch.full_like(columns, t)
        value = storage.can_start(rows, columns).to(torch.float64) * self.leaf_values(self.max_seen)
        self.priorities[t * storage.num_envs : (t + 1) * storage.num_envs] = value

    def sample_indices(self, batch_size):
        """Rows and columns drawn by priority (uniform with probability u, and always
        while every priority is zero). As the host's loop: each round flips the
        uniform coin; heads gives a valid uniform draw (one per position suffices:
        only the first heads is ever used), tails a slot by priority, kept if valid."""
        storage, g, device = self.storage, self.generator, self.storage.device
        t_u, b_u, missed = first_valid(self.draw, storage.valid, batch_size)
        shape = (ROUNDS, batch_size)
        coins = torch.rand(shape, generator=g, device=device)
        targets = torch.rand(shape, generator=g, device=device, dtype=torch.float64)
        t, b, missed_p = by_priority(
            self.priorities.cumsum(0), coins, targets, (t_u, b_u),
            self.uniform_sample_probability, storage.num_envs, storage.in_window, storage.valid,
        )  # fmt: skip
        self.misses += missed + missed_p
        return t, b

    def probabilities(self, t, b):
        """P(i) = (1 - u) p_i^alpha / sum + u / N, N the number of stored transitions."""
        u = self.uniform_sample_probability
        leaf = self.priorities[t * self.storage.num_envs + b]
        return (1 - u) * leaf / self.priorities.sum() + u / self.storage.size

    def sample(self, batch_size: int) -> tuple[Any, Any, Any]:
        """Rows, columns and importance weights (1/N / P)^beta (normalized by the
        batch maximum) of `batch_size` transitions."""
        if not self.storage.can_sample():
            raise RuntimeError("replay holds too few rows to sample")
        t, b = self.sample_indices(batch_size)
        leaf = self.priorities[t * self.storage.num_envs + b]
        weights = importance_weights(
            leaf, self.priorities.sum(), self.storage.size, self.uniform_sample_probability,
            self.importance_sampling_exponent, self.normalize_weights,
        )  # fmt: skip
        # Checked on the device: a failed check stops the program when the device
        # reaches it (an error on a CPU, a device-side assert on a GPU).
        torch._assert_async(torch.isfinite(weights).all(), "non-finite importance weights")
        return t, b, weights.to(torch.float32)

    def update(self, indices: Any, priorities: Any) -> None:
        """Writes new priorities (|TD error|: a tensor on any device, or an array) for
        sampled slots."""
        t, b = indices
        p = torch.as_tensor(priorities).to(self.storage.device, torch.float64)
        torch._assert_async(
            (torch.isfinite(p) & (p >= 0)).all(), "priorities must be finite and non-negative"
        )
        torch.maximum(self.max_seen, p.max(), out=self.max_seen)
        # LAST rows never start a transition: they stay at zero.
        value = torch.where(self.storage.can_start(t, b), self.leaf_values(p), 0.0)
        self.priorities[t * self.storage.num_envs + b] = value

    def state_dict(self) -> dict:
        # A copy: the live vector keeps changing while a checkpoint could be writing it.
        priorities = self.priorities.clone()
        if priorities.device.type == "cpu":
            priorities = priorities.numpy()
        return {"priorities": priorities, "max_seen_priority": self.max_seen_priority}

    def load_state_dict(self, state: dict) -> None:
        priorities = state["priorities"]  # a tensor (a live state), or an array
        if not isinstance(priorities, torch.Tensor):
            priorities = torch.as_tensor(np.asarray(priorities))
        self.priorities.copy_(priorities)
        self.max_seen.fill_(float(state["max_seen_priority"]))
