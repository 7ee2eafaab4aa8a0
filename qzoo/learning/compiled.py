"""The learner's update as one compiled graph (`--compile`).

An eager update of a small network is mostly PyTorch's per-operation cost, not
arithmetic: dispatch and the autograd engine dominate a small network's update on a
CPU. Here the objective, the mean loss, its gradient and the statistics are one pure
function of the online parameters and the batch, `torch.func.grad_and_value` over
`torch.func.functional_call` (no autograd tape at run time: the backward pass is traced
with the forward), compiled whole by `torch.compile`: on a CPU into C++ kernels around
the BLAS products, on a GPU with mode="reduce-overhead" (CUDA graphs: one launch replays
every kernel of the step). Global-norm clipping and the optimizer's step run in the
graph too (`optim.graph_update`, on the `torch.optim` object's own state tensors, so
checkpoints and resume are the eager path's files). The compiled arithmetic fuses and
reorders float32 operations, so results agree with the eager path to float tolerance,
not bit for bit (tests/learning/test_compiled.py); a compiled run is itself deterministic
on a CPU."""

import types

import torch
from torch import nn

from qzoo.learning import optim
from qzoo.learning.learner import Learner
from qzoo.learning.precision import autocast
from qzoo.networks import draws


class _Pair(nn.Module):
    """The online and target networks as one module, so that `functional_call` can
    swap in the online parameters being differentiated; `forward` is the objective."""

    def __init__(self, online, target, objective):
        super().__init__()
        self.online, self.target, self.objective = online, target, objective

    def forward(self, batch, generator):
        return self.objective(self.online, self.target, batch, generator)


class CompiledUpdate:
    """One update on a batch, compiled once: the gradient, clipping and `optimizer`'s
    step (in place), returning `(grads, loss, mean_q, priorities)`.

    `grads` (clipped) are in the order of `online.parameters()`; `loss` is the
    (importance weighted) mean loss, `mean_q` the mean of Q(s_tm1, a_tm1), `priorities`
    the objective's new priorities [B]; all detached.
    """

    def __init__(self, online, target, objective, optimizer, max_global_grad_norm, device,
                 precision="float32"):  # fmt: skip
        self._pair = _Pair(online, target, objective)
        self.optimizer = optimizer
        self._update_ = optim.graph_update(optimizer, max_global_grad_norm)
        self._names = [f"online.{name}" for name, _ in online.named_parameters()]
        self._parameters = list(online.parameters())
        # Detached views of the live parameters, made once: the optimizer and
        # load_state_dict write the parameters in place, and the traced function must
        # not see autograd leaves.
        self.params = {n: p.detach() for n, p in zip(self._names, self._parameters)}
        if torch.device(device).type == "cuda":
            # Fixed addresses: CUDA graphs then read the weights where they are instead
            # of copying them into the graph's own inputs before every replay.
            for view in self.params.values():
                torch._dynamo.mark_static_address(view)
        self._device, self._draws, self._precision = torch.device(device), None, precision
        mode = "reduce-overhead" if torch.device(device).type == "cuda" else None
        self._compiled = torch.compile(own_code(self.step), mode=mode, dynamic=False,
                                       fullgraph=True)  # fmt: skip

    def step(self, params, batch, generator, states=None):
        """The update as a function of the parameters, the batch, the draws (a generator,
        a list of drawn tensors, or a draws.Recorder) and the optimizer states (None: no
        optimizer step): (grads, loss, mean_q, priorities)."""
        if isinstance(generator, list):  # this update's draws, made outside the graph
            generator = draws.Tape(generator)

        def loss_of(params):
            with autocast(self._precision, self._device):
                out = torch.func.functional_call(self._pair, params, (batch, generator))
            per_example = out.loss if batch.weights is None else out.loss * batch.weights
            loss = per_example.mean()
            return loss, (out.q_tm1.detach().mean(), out.priorities.detach())

        grads, (loss, (mean_q, priorities)) = torch.func.grad_and_value(loss_of, has_aux=True)(
            params
        )
        # In the parameters' own layout: optimizers (fused Adam) read a gradient as laid out
        # like its parameter, and a traced backward may hand out a transposed one.
        grads = [grads[name].contiguous() for name in self._names]
        if states is not None:  # the optimizer's step, in the graph too
            self._update_([params[name] for name in self._names], grads, states)
        return grads, loss.detach(), mean_q, priorities

    def __call__(self, batch, generator):
        params = self.params
        # Replay slots (host NumPy) are not the step's business.
        batch = batch._replace(indices=None)
        with torch.no_grad():  # torch.func.grad differentiates regardless
            if self._draws is None:
                self._draws = self._record(params, batch, generator)
            tensors = draws.draw(self._draws, generator, self._device)
            if self._device.type == "cuda":
                # Outputs of the previous replay (gradients, priorities) are spent.
                torch.compiler.cudagraph_mark_step_begin()
            # Fetched every call: loading a checkpoint replaces the optimizer's tensors.
            states = optim.graph_state(self.optimizer)
            if self._device.type == "cuda":
                mark_static(states)
            return self._compiled(params, batch, tensors, states)

    def _record(self, params, batch, generator):
        """The draws (kinds and sizes) of one update: the same for every update (fixed
        batch, taus and layer shapes). Found by one uncompiled update on a copy of the
        generator, thrown away: every real update is compiled, so a resumed run
        continues exactly as an uninterrupted one."""
        copy = torch.Generator(generator.device)
        copy.set_state(generator.get_state())
        recorder = draws.Recorder(copy)
        self.step(params, batch, recorder)
        return recorder.draws


class CompiledLearner(Learner):
    """The learner whose SGD step is one compiled graph (CompiledUpdate): the same
    interface, the same checkpoints (the optimizer's own state tensors)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.step_lock = None  # the step runs inside the graph
        self._compiled = CompiledUpdate(
            self.online, self.target, self.objective, self.optimizer,
            self.max_global_grad_norm, self.device, self.precision,
        )  # fmt: skip

    def sgd_step(self, batch):
        grads, loss, mean_q, priorities = self._compiled(batch, self.generator)
        for p, g in zip(self.parameters, grads):
            p.grad = g
        return loss, mean_q, priorities

    def compiled_update(self) -> "CompiledUpdate":
        """The compiled step, which a captured update (captured.py) runs inside its own."""
        return self._compiled


def mark_static(states):
    """CUDA graphs update mutated inputs in place only at fixed addresses: the
    optimizer's state tensors are marked so (again after a checkpoint replaced them)."""
    for state in states:
        for tensor in state.values():
            if not hasattr(tensor, "_dynamo_static_input_type"):
                torch._dynamo.mark_static_address(tensor)


def own_code(method):
    """`method` bound to a copy of its code object. Dynamo caches compiled graphs per
    code object, at most 8 (`recompile_limit`): without a copy every learner of another
    shape or agent in a process (a test suite, a sweep) adds a graph to the one `_step`,
    and the ninth fails. With one, each learner has its own cache."""
    function = method.__func__
    code = function.__code__.replace()  # a new code object, the same code
    copy = types.FunctionType(code, function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)  # fmt: skip
    return types.MethodType(copy, method.__self__)
