"""Torsos and heads (dqn_zoo.md §3), with DQN Zoo's legacy initialization.

Inputs are channel-first; uint8 inputs are divided by 255 inside the network.
"""

import math

import torch
from torch import nn


def legacy_init_(module):
    """U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases (DQN Zoo's
    `_dqn_default_initializer`, from the Torch7 DQN of Mnih et al. 2015).

    For Linear and Conv2d this happens to equal PyTorch's default (kaiming-uniform
    with a=sqrt(5) gives the same bound); it is applied explicitly so that the
    network does not depend on that default.
    """
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        fan_in = module.weight[0].numel()
        bound = 1.0 / math.sqrt(fan_in)
        nn.init.uniform_(module.weight, -bound, bound)
        if module.bias is not None:
            nn.init.uniform_(module.bias, -bound, bound)
    return module


class NatureTorso(nn.Module):
    """Mnih et al. 2015: conv 32x8x8/4, 64x4x4/2, 64x3x3/1, ReLU, VALID -> 3136."""

    def __init__(self, in_channels):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_channels, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
            nn.Flatten(),
        )  # fmt: skip
        self.out_features = 3136

    def forward(self, x):
        return self.net(x)


class MinAtarTorso(nn.Module):
    """Young & Tian 2019 (MinAtar): conv 16x3x3/1, ReLU, flatten."""

    def __init__(self, in_channels, height=10, width=10):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(in_channels, 16, 3), nn.ReLU(), nn.Flatten())
        self.out_features = 16 * (height - 2) * (width - 2)

    def forward(self, x):
        return self.net(x)


class MlpTorso(nn.Module):
    """Two ReLU layers for vector observations."""

    def __init__(self, in_features, hidden):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU()
        )
        self.out_features = hidden

    def forward(self, x):
        return self.net(x)


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


class QNetwork(nn.Module):
    """Torso -> Linear 512 (or the MLP width) -> ReLU -> Linear(num_actions) = q_values."""

    def __init__(self, torso, num_actions, hidden=512, shared_bias=False):
        super().__init__()
        self.torso = torso
        last = SharedBiasLinear if shared_bias else nn.Linear
        self.head = nn.Sequential(
            nn.Linear(torso.out_features, hidden), nn.ReLU(), last(hidden, num_actions)
        )
        self.apply(legacy_init_)

    def forward(self, obs):
        if obs.dtype == torch.uint8:
            obs = obs.float().div_(255.0)
        return self.head(self.torso(obs.float()))


def make_network(config, info, observation_shape):
    """The Q network for `config` on an environment described by `info`."""
    torso = config.torso
    if torso == "auto":
        torso = {"atari": "nature_cnn", "minatar": "minatar_cnn"}.get(info.domain, "mlp")
    if torso == "nature_cnn":
        body, hidden = NatureTorso(observation_shape[0]), 512
    elif torso == "minatar_cnn":
        body, hidden = MinAtarTorso(observation_shape[0], *observation_shape[1:]), 128
    else:
        body = MlpTorso(int(math.prod(observation_shape)), config.mlp_hidden)
        hidden = config.mlp_hidden
    return QNetwork(body, info.num_actions, hidden, config.shared_bias)
