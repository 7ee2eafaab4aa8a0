"""The whole update as one captured graph (`--capture`): sample -> stacks and n-step
returns -> loss -> gradient -> clipping and the optimizer's step -> priority update ->
statistics, with the replay on the learner's device (`--replay-device`).

`--compile` captures the gradient step alone; the draw of a batch from a device replay
is still dozens of small tensor operations, each a kernel launch (and Python's
dispatch) on a GPU, costing more than the captured step itself for a Nature CNN. Here
everything between two replay additions is one compiled function: on a GPU with
mode="reduce-overhead" one CUDA graph replay; on a CPU compiled C++. What changes per
call is read from tensors at fixed addresses, so the graph is reused: the replay's
window and prioritized replay's beta are written into small device tensors when they
change, and the draw's random numbers are made into a fixed buffer before each call (a
generator cannot enter a graph), as `--compile` does (networks/draws.py). Draws
therefore differ from `--replay-device`'s eager sampler (equally uniform or
prioritized, other indices); a run with `--capture` resumes exactly on a CPU.

`--capture-updates K` puts K updates in one call (one graph replay, one set of host
checks, for K updates) when K or more fall due between two replay additions, as with
many environments (128 environments at DQN Zoo's ratio: 32 updates per step). Each
update keeps its own draws, made in the same order as K single calls, so the numbers
are those of K single calls."""

import torch

from qzoo.errors import UserError
from qzoo.learning import optim
from qzoo.learning.compiled import CompiledUpdate, mark_static, own_code
from qzoo.networks import draws
from qzoo.replay.device_samplers import (
    ROUNDS,
    DevicePrioritizedSampler,
    by_priority,
    first_accepted,
    importance_weights,
)

# Uniforms per candidate: row and column; prioritized adds the coin and the target.
_UNIFORM_DRAWS, _PRIORITIZED_DRAWS = 2, 4
QUEUED = 16  # updates the host may queue ahead of the GPU


class CapturedUpdate:
    """`update()` runs one whole update (module docstring); `set_beta(beta)` sets
    prioritized replay's importance-sampling exponent for the next ones.

    `compile=False` runs the same function eagerly (the reference the tests compare
    the compiled graph with)."""

    def __init__(self, learner, replay, batch_size, compile=True, updates=1):
        storage, sampler = replay.storage, replay.sampler
        if storage.device != learner.device:
            raise UserError(
                f"--capture: the replay is on {storage.device} and the learner on "
                f"{learner.device}; use --replay-device {learner.device.type}"
            )
        self.learner, self.storage, self.sampler = learner, storage, sampler
        self.batch_size, self.updates = batch_size, updates
        self.prioritized = isinstance(sampler, DevicePrioritizedSampler)
        device = storage.device
        self._inner = CompiledUpdate(
            learner.online, learner.target, learner.objective, learner.optimizer,
            learner.max_global_grad_norm, device, learner.precision,
        )  # fmt: skip
        # oldest row, low and high ages of the valid window, transitions stored.
        self._window = torch.zeros(4, dtype=torch.int64, device=device)
        self._beta = torch.zeros((), dtype=torch.float64, device=device)
        kinds = _PRIORITIZED_DRAWS if self.prioritized else _UNIFORM_DRAWS
        # One set of uniforms (and of the objective's draws) per update of a call.
        self._uniforms = torch.zeros((updates, kinds, ROUNDS, batch_size),
                                     dtype=torch.float64, device=device)  # fmt: skip
        self._adds = None  # storage.num_adds when the window was last written
        self._draws = None  # the objective's draws (kinds, sizes), recorded once
        self._tapes = None  # fixed buffers for them, one list per update of a call
        self._function = self._step
        self._queued = None
        if device.type == "cuda":
            # QUEUED updates: fewer calls when each makes `updates`.
            self._queued = [torch.cuda.Event() for _ in range(max(2, QUEUED // updates))]
            self._next_event = self._recorded = 0
        if compile:
            mode = "reduce-overhead" if device.type == "cuda" else None
            self._function = torch.compile(own_code(self._step), mode=mode, dynamic=False,
                                           fullgraph=True)  # fmt: skip
        if device.type == "cuda":
            # Read and written where they are: CUDA graphs would otherwise copy each
            # into a buffer of their own before every replay (the replay: gigabytes).
            static = [
                self._window,
                self._beta,
                self._uniforms,
                learner.statistics_buffer(),
                sampler.misses,
                *_storage_tensors(storage),
            ]
            if self.prioritized:
                static += [sampler.priorities, sampler.max_seen]
            for tensor in {id(x): x for x in static}.values():  # flags may be actions
                torch._dynamo.mark_static_address(tensor)

    def set_beta(self, beta):
        self._beta.fill_(beta)  # queued on the device: no wait

    def update(self, n=1):
        """`n` updates (1 or `updates`) on batches drawn now; nothing waits for the
        device. Dynamo compiles one graph per `n` used."""
        if n not in (1, self.updates):
            raise ValueError(f"{n} updates per call: 1 or {self.updates}")
        storage, generator = self.storage, self.learner.generator
        if not storage.can_sample():  # host counters
            raise RuntimeError("replay holds too few rows to sample")
        if self._adds != storage.num_adds:
            low, high = storage.window()
            values = (storage.oldest(), low, high, storage.size)
            for i, value in enumerate(values):
                self._window[i].fill_(value)
            self._adds = storage.num_adds
        with torch.no_grad():
            if self._draws is None:
                self._record()
            for k in range(n):  # in the order n single calls would draw them
                uniforms = self._uniforms[k]
                torch.rand(uniforms.shape, generator=self.sampler.generator,
                           dtype=torch.float64, device=storage.device, out=uniforms)  # fmt: skip
                for buffer, (kind, size) in zip(self._tapes[k], self._draws):
                    buffer.copy_(draws.draw([(kind, size)], generator, storage.device)[0])
            # Fetched every call: loading a checkpoint replaces the optimizer's tensors.
            states = optim.graph_state(self._inner.optimizer)
            if storage.device.type == "cuda":
                mark_static(states)
                torch.compiler.cudagraph_mark_step_begin()
            self._function(self._inner.params, states, self._tapes[:n])
            if self._queued is not None:
                self._bound_queue()

    def _bound_queue(self):
        """At most QUEUED updates (QUEUED // K calls of K) waiting on the GPU: the host
        runs ahead (nothing in an update waits for the device), but a learner far ahead
        of its GPU would publish weights and count updates that are not done yet."""
        events, i = self._queued, self._next_event
        events[i].record()
        self._next_event = (i + 1) % len(events)
        self._recorded += 1
        if self._recorded >= len(events):  # the oldest of the ring
            events[self._next_event].synchronize()

    def _step(self, params, states, tapes):
        for k, tape in enumerate(tapes):  # unrolled in the graph: len(tapes) is fixed
            t, b, weights = self._sample(k)
            batch = self.storage.gather(t, b)._replace(weights=weights, indices=None)
            _, loss, mean_q, priorities = self._inner.step(params, batch, tape, states)
            if self.prioritized:
                self._write_priorities(t, b, priorities)
            self.learner.statistics_buffer().add_(
                torch.stack([loss, mean_q, torch.ones_like(loss)])
            )

    # ---- the draw, from the uniforms and the window tensors --------------------
    def _candidates(self, u_t, u_b):
        """Rows and columns uniform over the valid window (not yet checked for
        validity) from uniforms in [0, 1) of the same shape."""
        storage, window = self.storage, self._window
        oldest, low, high = window[0], window[1], window[2]
        span = high - low
        age = low + torch.minimum((u_t * span).to(torch.int64), span - 1)
        t = (oldest + age) % storage.num_rows
        b = torch.clamp((u_b * storage.num_envs).to(torch.int64), max=storage.num_envs - 1)
        return t, b

    def _uniform_indices(self, k):
        u = self._uniforms[k]
        t, b = self._candidates(u[0], u[1])
        ok = self.storage.valid(t.reshape(-1), b.reshape(-1)).view(t.shape)
        t, b, missed = first_accepted(t, b, ok)
        self.sampler.misses.add_(missed)
        return t, b

    def _sample(self, k):
        """Update k's batch of a call: rows, columns and weights."""
        if not self.prioritized:
            t, b = self._uniform_indices(k)
            return t, b, None
        return self._prioritized_sample(k)

    def _prioritized_sample(self, k):
        """As DevicePrioritizedSampler.sample (the same semantics), from the uniforms:
        a valid uniform draw per position, each candidate's coin for uniform, a target
        in [0, total) for a slot by priority, kept if valid and in the window."""
        storage, sampler, window = self.storage, self.sampler, self._window
        u = self._uniforms[k]

        def in_window(t):  # from the window tensors, not the host's counters
            age = (t - window[0]) % storage.num_rows
            return (age >= window[1]) & (age < window[2])

        cumulative = sampler.priorities.cumsum(0)
        t, b, missed = by_priority(
            cumulative, u[2], u[3], self._uniform_indices(k), sampler.uniform_sample_probability,
            storage.num_envs, in_window, storage.valid,
        )  # fmt: skip
        sampler.misses.add_(missed)
        leaf = sampler.priorities[t * storage.num_envs + b]
        weights = importance_weights(
            leaf, cumulative[-1], window[3].to(torch.float64), sampler.uniform_sample_probability,
            self._beta, sampler.normalize_weights,
        )  # fmt: skip
        return t, b, weights.to(torch.float32)

    def _write_priorities(self, t, b, priorities):
        """DevicePrioritizedSampler.update, in the graph."""
        storage, sampler = self.storage, self.sampler
        p = priorities.to(torch.float64)
        # Through a 1-element view: torch.compile drops a copy_ into a 0-dim tensor.
        sampler.max_seen.view(1).copy_(torch.maximum(sampler.max_seen, p.max()).view(1))
        value = torch.where(storage.can_start(t, b), sampler.leaf_values(p), 0.0)
        sampler.priorities[t * storage.num_envs + b] = value

    def _record(self):
        """The objective's draws (kinds, sizes) for one update, found by running it
        uncompiled on a copy of the learner's generator (as CompiledUpdate._record),
        on a batch drawn from zero uniforms (the replay stream is not touched)."""
        saved = self._uniforms.clone()
        self._uniforms.zero_()
        t, b, weights = self._sample(0)
        self.sampler.misses.zero_()
        self._uniforms.copy_(saved)
        batch = self.storage.gather(t, b)._replace(weights=weights, indices=None)
        generator = self.learner.generator
        copy = torch.Generator(generator.device)
        copy.set_state(generator.get_state())
        recorder = draws.Recorder(copy)
        self._inner.step(self._inner.params, batch, recorder)
        self._draws = recorder.draws
        device = self.storage.device
        self._tapes = [[torch.empty(size, device=device) for _, size in self._draws]
                       for _ in range(self.updates)]  # fmt: skip
        if device.type == "cuda":
            for tape in self._tapes:
                for buffer in tape:
                    torch._dynamo.mark_static_address(buffer)


def _storage_tensors(storage):
    """The device storage's arrays a draw reads."""
    return [storage._flat_frames, storage.actions, storage.rewards, storage.flags,
            storage._offsets]  # fmt: skip
