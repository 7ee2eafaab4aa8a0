"""Target-network outputs computed ahead of an update (--prefetch-targets'
acting/prefetch.py), handed to the objective without the objective knowing: it calls
the target network at s_t as always, and a stand-in answers with the output already
made for that very tensor (the same network and input, so the same values)."""

from typing import Any

from torch import nn

from qzoo.learning.objectives import LossOutput


class PrefetchedTargets:
    """An objective whose target network's pass at a batch's s_t is answered from
    outputs `remember`ed for that tensor (each used once); other passes run."""

    def __init__(self, objective: Any) -> None:
        self.objective = objective
        self._known: dict[int, tuple[Any, Any]] = {}

    def remember(self, s_t: Any, outputs: Any) -> None:
        """The target network's `outputs` at the tensor `s_t` of the next batch."""
        self._known[id(s_t)] = (s_t, outputs)

    def known(self, s_t: Any) -> Any:
        """The outputs remembered for the tensor `s_t`, or None."""
        found = self._known.get(id(s_t))
        return found[1] if found is not None and found[0] is s_t else None

    def __call__(self, online: nn.Module, target: nn.Module, batch: Any,
                 generator: Any) -> LossOutput:  # fmt: skip
        known = self._known.pop(id(batch.s_t), None)
        if known is not None and known[0] is batch.s_t:
            answered = _Answered(target, batch.s_t, known[1])
            return self.objective(online, answered, batch, generator)
        return self.objective(online, target, batch, generator)

    def __getattr__(self, name):  # the objective's own attributes (e.g. its kind)
        if name == "objective":  # not set yet (a copy being made)
            raise AttributeError(name)
        return getattr(self.objective, name)


class _Answered:
    """`target`, except that its pass at the tensor `s_t` returns `outputs`."""

    def __init__(self, target, s_t, outputs):
        self.target, self.s_t, self.outputs = target, s_t, outputs

    def __call__(self, obs, *args, **kwargs):
        if obs is self.s_t:
            return self.outputs
        return self.target(obs, *args, **kwargs)
