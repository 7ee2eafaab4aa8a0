"""Uniform draws from the learner's random stream, or from a tape of them.

Every random number an update draws (noisy layers' noise, IQN's taus, REM's mixing
weights, augmentation's shifts) comes through `uniform` or `factorised_noise`. A
compiled update (`--compile`, learning/compiled.py) cannot take a `torch.Generator`
into its graph, so it records one update's draws, kind and size (`Recorder`), then
before each update makes exactly those draws from the generator, outside the graph and
in the same order, and hands them in as a `Tape`: the update sees the numbers an eager
one would, and the learner's stream advances identically."""

import math

import torch

_PHI_MINUS_2 = 0.5 * (1 + math.erf(-2 / math.sqrt(2)))  # standard normal CDF at -2


def _uniform(size, generator, device):
    return torch.rand(size, device=device, generator=generator)


def _noise(size, generator, device):
    # Truncated normal on [-2, 2] by inverting the normal CDF on [Phi(-2), Phi(2)] (one
    # pass, no rejection), then f(x) = sign(x) sqrt(|x|) (DQN Zoo).
    u = torch.rand(size, device=device, generator=generator)
    u = u * (1 - 2 * _PHI_MINUS_2) + _PHI_MINUS_2
    x = math.sqrt(2) * torch.erfinv(2 * u - 1)
    return x.sign() * x.abs().sqrt()


def _normal(size, generator, device):
    return torch.randn(size, device=device, generator=generator)


_KINDS = {"uniform": _uniform, "noise": _noise, "normal": _normal}


class Tape:
    """Pre-drawn tensors, handed out in order."""

    def __init__(self, tensors):
        self._tensors, self._next = list(tensors), 0

    def take(self, kind, size, device):
        tensor = self._tensors[self._next]
        self._next += 1
        return tensor


class Recorder:
    """A generator's stand-in that draws from it and remembers each draw."""

    def __init__(self, generator):
        self.generator, self.draws = generator, []

    def take(self, kind, size, device):
        self.draws.append((kind, size))
        return _KINDS[kind](size, self.generator, device)


class _Mean:
    """A generator's stand-in whose factorised noise is zero: noisy layers then compute
    with their mean weights (Dopamine evaluates noisy networks so)."""


MEAN = _Mean()


def _take(kind, size, generator, device):
    if generator is MEAN and kind == "noise":
        return torch.zeros(size, device=device)
    if isinstance(generator, (Tape, Recorder)):
        return generator.take(kind, size, device)
    return _KINDS[kind](size, generator, device)


def uniform(size, generator, device):
    """U[0, 1) of shape `size` (a tuple) from `generator` (a torch.Generator or None:
    torch.rand's), a `Tape` or a `Recorder`."""
    return _take("uniform", size, generator, device)


def normal(size, generator, device):
    """N(0, 1) of shape `size`, as `uniform` draws U[0, 1)."""
    return _take("normal", size, generator, device)


def factorised_noise(size, generator, device):
    """f(x) = sign(x) sqrt(|x|) of a normal truncated to [-2, 2], shape `size`: the
    factorised noise of noisy networks (Fortunato et al. 2018, arXiv:1706.10295, eq.
    11; DQN Zoo truncates). Drawn whole before a compiled update: inside its graph the
    compiler would recompute erfinv for every element of every product it feeds."""
    return _take("noise", size, generator, device)


def draw(recorded, generator, device):
    """The tensors a `Tape` replays: each recorded draw made again, in order."""
    return [_KINDS[kind](size, generator, device) for kind, size in recorded]
