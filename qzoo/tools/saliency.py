"""What a Q-network responds to: guided backpropagation of conv feature maps and
gradient saliency of Q, computed on a copy of the network (never the shared one).

- Guided backpropagation (Springenberg, Dosovitskiy, Brox & Riedmiller 2015, "Striving
  for Simplicity: The All Convolutional Net", arXiv:1412.6806): the gradient of one
  unit's activation with respect to the input, where every ReLU also lets through only
  positive gradients. simple_dqn's nvis (reference A10) applies it to the strongest
  activation of each conv layer's first feature maps over a played game; so does this.
- Gradient saliency (Simonyan, Vedaldi & Zisserman 2014, "Deep Inside Convolutional
  Networks", arXiv:1312.6034): |d max_a Q(s, a) / d s|, the input pixels (or features)
  whose change would change the value most.
"""

import copy
from typing import NamedTuple

import torch
from torch import nn


class Stage(NamedTuple):
    """One conv layer of the torso and the ReLU after it (whose output is the layer's
    feature maps)."""

    conv: nn.Conv2d
    relu: nn.Module


def conv_stages(network):
    """The torso's conv layers in forward order, each with the ReLU that follows it;
    [] for a torso without convolutions (the MLP of vector observations)."""
    stages, pending = [], None
    for module in network.torso.modules():
        if isinstance(module, nn.Conv2d):
            pending = module
        elif isinstance(module, nn.ReLU) and pending is not None:
            stages.append(Stage(pending, module))
            pending = None
    return stages


def _inputs(network, obs):
    """Float inputs [B, ...] that gradients are taken against, in observation units
    (0..255 pixels, 0/1 MinAtar channels, raw features); the network's own scaling is
    applied after them, as in its forward."""
    return torch.as_tensor(obs).float().clone().requires_grad_(True)


def feature_maps(network, obs, batch=256):
    """[B, C, H, W] feature maps (after the ReLU) of every conv stage, for `obs`."""
    stages = conv_stages(network)
    out = [[] for _ in stages]
    hooks = [
        s.relu.register_forward_hook(lambda m, i, o, k=k: out[k].append(o.detach()))
        for k, s in enumerate(stages)
    ]
    try:
        with torch.no_grad():
            for start in range(0, len(obs), batch):
                x = torch.as_tensor(obs[start : start + batch]).float()
                network.torso(x * network.input_scale)
    finally:
        for hook in hooks:
            hook.remove()
    return [torch.cat(maps) for maps in out]


class TopActivation(NamedTuple):
    """Where feature map `feature` of conv stage `layer` is strongest over the states:
    state index, spatial position and value."""

    layer: int
    feature: int
    state: int
    y: int
    x: int
    value: float


def top_activations(network, obs, num_maps=4):
    """For each conv stage and each of its first `num_maps` feature maps, the state and
    position of its largest activation over `obs` (simple_dqn's max-activation search)."""
    found = []
    for layer, maps in enumerate(feature_maps(network, obs)):
        for feature in range(min(num_maps, maps.shape[1])):
            fm = maps[:, feature]
            index = int(torch.argmax(fm))
            state, rest = divmod(index, fm.shape[1] * fm.shape[2])
            y, x = divmod(rest, fm.shape[2])
            found.append(TopActivation(layer, feature, state, y, x, float(fm.reshape(-1)[index])))
    return found


def _guided_copy(network):
    """A copy whose ReLUs pass back only positive gradients (guided backpropagation).
    The shared network classes are not changed: hooks on a deep copy."""
    guided = copy.deepcopy(network)
    for module in guided.modules():
        if isinstance(module, nn.ReLU):
            module.inplace = False  # a full backward hook cannot see in-place outputs
            module.register_full_backward_hook(lambda m, grad_in, grad_out: (grad_in[0].clamp(0),))
    return guided


def guided_backprop(network, obs, tops):
    """[len(tops), ...] input-space maps: for each TopActivation, the guided gradient of
    that one activation with respect to its state (Springenberg et al. 2015)."""
    guided = _guided_copy(network)
    stages = conv_stages(guided)
    maps = []
    for top in tops:
        captured = {}
        hook = stages[top.layer].relu.register_forward_hook(
            lambda m, i, o, captured=captured: captured.setdefault("maps", o)
        )
        x = _inputs(guided, obs[top.state : top.state + 1])
        try:
            guided.torso(x * guided.input_scale)
        finally:
            hook.remove()
        # Only the chosen unit starts the backward pass, as nvis's one-hot activation.
        unit = captured["maps"][0, top.feature, top.y, top.x]
        (grad,) = torch.autograd.grad(unit, x)
        maps.append(grad[0].detach())
    return torch.stack(maps) if maps else torch.zeros((0,) + tuple(obs.shape[1:]))


def q_values(network, x, generator=None):
    """Q-values [B, A] of inputs `x` with gradients, for every network kind (the network's
    own q_values of distributional heads are detached): C51's expectation over its
    support, the mean over quantiles, and IQN's mean at fixed evenly spaced taus."""
    taus = None
    if network.kind == "implicit_quantile":
        k = 32
        taus = ((torch.arange(k) + 0.5) / k).expand(len(x), k)
    out = network(x, taus, generator=generator)
    if network.kind == "categorical":
        return (torch.softmax(out.q_logits, -1) * network.support).sum(-1)
    if network.kind in ("quantile", "implicit_quantile"):
        return out.q_dist.mean(1)
    return out.q_values


def q_saliency(network, obs, seed=0, batch=64):
    """(saliency [B, ...] = |d max_a Q(s, a) / d s|, q [B, A]) for states `obs`
    (Simonyan et al. 2014), on a copy of the network."""
    network = copy.deepcopy(network)
    generator = torch.Generator().manual_seed(seed)  # noisy heads: the same noise each run
    saliency, qs = [], []
    for start in range(0, len(obs), batch):
        x = _inputs(network, obs[start : start + batch])
        q = q_values(network, x, generator)
        # Each state's max depends only on its own input: one backward for the batch.
        (grad,) = torch.autograd.grad(q.max(dim=1).values.sum(), x)
        saliency.append(grad.abs())
        qs.append(q.detach())
    return torch.cat(saliency), torch.cat(qs)
