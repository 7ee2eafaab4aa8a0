"""Network heads: plain and shared-bias linear, dueling streams, factorised noisy
layers, IQN's cosine tau embedding (dqn_zoo.md §3), and the mixing of several Q heads.

Every head maps features [B, F] to [B, A, K]: K = 1 for Q-values, K = atoms for
C51 logits, K = quantiles for QR-DQN, K = heads for a multi-head Q-network (ensemble
and REM; batch_rl's last layer of A x K units, action-major: unit a * K + k).
"""

import collections
import math

import torch
from torch import nn

from qzoo.networks.draws import factorised_noise, uniform

# q_heads: a Q-network's heads [B, A, K] (K = 1 for one head), before any mixing.
NetworkOutputs = collections.namedtuple(
    "NetworkOutputs", "q_values q_logits q_dist q_heads", defaults=(None,)
)


def random_convex_combination(num_heads, size=(), generator=None, device=None):
    """REM's mixing weights (Agarwal et al. 2020, arXiv:1907.04543, section 4.2):
    alpha_k ~ Uniform(0, 1), divided by their sum (batch_rl's STOCHASTIC transform), so
    that they are non-negative and sum to 1. Shape [*size, num_heads]."""
    alpha = uniform((*size, num_heads), generator, device)
    return alpha / alpha.sum(-1, keepdim=True)


def mix_heads(q_heads, weights):
    """sum_k weights_k Q_k: heads [B, A, K] with weights [K] (one mixture for the batch,
    REM's training) or [B, K] (one per row: an actor's per-episode mixture). -> [B, A]."""
    return (q_heads * weights.unsqueeze(-2)).sum(-1)


# PQN's LayerNorm epsilon: flax's default (purejaxql, the authors' code; PyTorch's is 1e-5).
LAYER_NORM_EPS = 1e-6


class SharedBiasLinear(nn.Module):
    """Linear layer whose outputs share one scalar bias (DQN Zoo's
    `linear_with_shared_bias`, used by tuned Double DQN, van Hasselt et al. 2016)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        self.bias = nn.Parameter(torch.empty(1))
        bound = 1.0 / math.sqrt(in_features)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x):
        return x @ self.weight.t() + self.bias


class NoisyLinear(nn.Module):
    """Factorised Gaussian noisy linear layer (Fortunato et al. 2018, arXiv:1706.10295).

    y = mu(x) + sigma(x * f(eps_in)) * f(eps_out), with eps drawn afresh on every
    forward pass and shared across the batch. mu has the legacy initialization (its
    bias is optional); sigma always has a bias, and its weights and bias start at the
    constant weight_init / sqrt(fan_in), as in DQN Zoo.
    """

    def __init__(self, in_features, out_features, weight_init=0.1, bias=True):
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(
            torch.empty(out_features, in_features).uniform_(-bound, bound)
        )
        self.bias_mu = (
            nn.Parameter(torch.empty(out_features).uniform_(-bound, bound)) if bias else None
        )
        sigma = weight_init / math.sqrt(in_features)
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma))

    def forward(self, x, generator=None):
        """Noise is drawn from `generator` (the caller's random stream), else from
        torch's global generator."""
        fan_out, fan_in = self.weight_mu.shape
        noise = factorised_noise((fan_in + fan_out,), generator, x.device)
        eps_in, eps_out = noise.split([fan_in, fan_out])
        mu = nn.functional.linear(x, self.weight_mu, self.bias_mu)
        sigma = nn.functional.linear(x * eps_in, self.weight_sigma, self.bias_sigma)
        return mu + sigma * eps_out


class Head(nn.Module):
    """Linear(hidden) -> ReLU -> Linear(A x K), or dueling streams (Wang et al. 2016,
    arXiv:1511.06581): Q = V + A - mean_a A, per atom or quantile; `hidden` 0: no
    hidden layer, each stream one Linear (--mlp-layers). With
    `noisy_weight_init` > 0 every layer is a NoisyLinear; as in DQN Zoo's Rainbow the
    dueling streams' last noisy layers then have no mu bias. `shared_hidden`: the
    dueling streams share one hidden layer and their last layers keep their biases
    (Dopamine's FullRainbowNetwork)."""

    def __init__(self, in_features, hidden, num_actions, width=1, dueling=False,
                 noisy_weight_init=0.0, shared_bias=False, shared_hidden=False,
                 layer_norm=False):  # fmt: skip
        """`layer_norm`: a LayerNorm before the hidden layer's ReLU (PQN)."""
        super().__init__()
        self.num_actions, self.width, self.dueling = num_actions, width, dueling

        def linear(i, o, bias=True):
            if noisy_weight_init > 0:
                return NoisyLinear(i, o, noisy_weight_init, bias)
            return nn.Linear(i, o, bias=bias)

        last_bias = noisy_weight_init == 0
        fan_in = hidden or in_features  # the last layer's

        def hidden_layer():  # none with hidden 0 (--mlp-layers)
            if not hidden:
                return []
            norm = [nn.LayerNorm(hidden, eps=LAYER_NORM_EPS)] if layer_norm else []
            return [linear(in_features, hidden), *norm, nn.ReLU()]

        # Layers are made in the order they always were: noisy layers draw their
        # initial weights from PyTorch's global stream as they are made.
        if dueling and shared_hidden and hidden:  # Dopamine's: one hidden layer, biases
            self.hidden = nn.Sequential(*hidden_layer())
            self.advantage = nn.Sequential(linear(fan_in, num_actions * width))
            self.value = nn.Sequential(linear(fan_in, width))
        elif dueling:
            self.advantage = nn.Sequential(
                *hidden_layer(), linear(fan_in, num_actions * width, last_bias)
            )
            self.value = nn.Sequential(*hidden_layer(), linear(fan_in, width, last_bias))
        else:
            if shared_bias and noisy_weight_init == 0:
                last = SharedBiasLinear(fan_in, num_actions * width)
            else:
                last = linear(fan_in, num_actions * width)
            self.net = nn.Sequential(*hidden_layer(), last)

    def output_layers(self):
        """The layers that make the head's outputs (the last of each stream)."""
        if not self.dueling:
            return [self.net[-1]]
        return [self.advantage[-1], self.value[-1]]

    def forward(self, x, generator=None):
        """[B, F] -> [B, A, K]; noisy layers draw their noise from `generator`."""
        if not self.dueling:
            return _sequential(self.net, x, generator).view(-1, self.num_actions, self.width)
        if hasattr(self, "hidden"):  # the streams' shared hidden layer
            x = _sequential(self.hidden, x, generator)
        advantage = _sequential(self.advantage, x, generator).view(-1, self.num_actions, self.width)
        value = _sequential(self.value, x, generator).view(-1, 1, self.width)
        return value + advantage - advantage.mean(dim=1, keepdim=True)


def _sequential(layers, x, generator):
    """nn.Sequential's forward, handing the random generator to noisy layers."""
    for layer in layers:
        x = layer(x, generator) if isinstance(layer, NoisyLinear) else layer(x)
    return x


class CosineEmbedding(nn.Module):
    """IQN's tau embedding (Dabney et al. 2018, arXiv:1806.06923): ReLU(Linear(
    cos(pi i tau) for i = 1..latent_dim)). DQN Zoo drops the paper's constant i = 0
    term; so does qzoo."""

    def __init__(self, latent_dim, out_features):
        super().__init__()
        self.register_buffer("frequencies", math.pi * torch.arange(1, latent_dim + 1).float())
        self.linear = nn.Linear(latent_dim, out_features)

    def forward(self, taus):
        return torch.relu(self.linear(torch.cos(taus[..., None] * self.frequencies)))
