"""The learner's precision: float32, or bfloat16 autocast (--precision)."""

import contextlib

import torch


def autocast(precision, device):
    """The context the learner's forward passes run in: bfloat16 autocast (Micikevicius
    et al. 2018's mixed precision, with bfloat16's float32 range: no loss scaling) for
    --precision bfloat16, else nothing. Networks return float32 outputs either way."""
    if precision == "bfloat16":
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
