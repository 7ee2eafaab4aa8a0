"""Whole networks (dqn_zoo.md §3): a torso (torsos.py, with DQN Zoo's legacy
initialization or Dopamine's, batch_rl_dopamine.md §2.4) and a head (heads.py: plain,
shared-bias, dueling, noisy, IQN's tau embedding), or several networks side by side;
R2D1's recurrent network is in recurrent.py.

Inputs are channel-first. Atari pixels (0..255) are divided by 255 inside the
network; MinAtar's 0/1 channels and vector observations are used as they are."""

import dataclasses
import math

import torch
from torch import nn

from qzoo.configuration import user_modules
from qzoo.configuration.torsos import BUILT_IN
from qzoo.configuration.torsos import registered as registered_torso
from qzoo.errors import UserError
from qzoo.networks.heads import CosineEmbedding, Head, NetworkOutputs
from qzoo.networks.recurrent import make_recurrent_network
from qzoo.networks.torsos import (
    INITS,
    DopamineTorso,
    MinAtarTorso,
    MlpTorso,
    NatureTorso,
    lecun_normal_init_,
    legacy_init_,
    mlp_shape,
    user_torso,
)


def _input_dtype(obs):
    """bfloat16 for pixels under CPU bfloat16 autocast, else float32. The same values
    either way: integers up to 256 are exact in bfloat16, and bfloat16's multiply by
    the input scale rounds float32's product, as autocast's cast of it would; but one
    pass over the batch instead of three (float32 copy, multiply, cast)."""
    pixels = obs.dtype == torch.uint8 and obs.is_cpu
    if pixels and torch.is_autocast_enabled("cpu"):
        return torch.get_autocast_dtype("cpu")  # bfloat16: the only one --precision sets
    return torch.float32


class Network(nn.Module):
    """Torso + head, with the outputs each family of losses needs (dqn_zoo.md §3).

    kind "none": q_values [B, A], the mean of the heads q_heads [B, A, K] (K = 1: the
    one head; ensembles and REM act and evaluate on the plain mean, as batch_rl).
    "categorical" (C51, Rainbow): q_logits [B, A, atoms].
    "quantile" (QR-DQN): q_dist [B, quantiles, A]. "implicit_quantile" (IQN): q_dist
    [B, N, A] at the given taus [B, N]. Distributional q_values are means and carry
    no gradient, as in DQN Zoo.
    """

    def __init__(self, torso, head, kind="none", support=None, tau_embedding=None, input_scale=1.0,
                 init=legacy_init_):  # fmt: skip
        super().__init__()
        self.torso, self.head, self.kind = torso, head, kind
        self.input_scale = input_scale
        self.tau_embedding = tau_embedding
        if support is not None:
            self.register_buffer("support", support)
        # NoisyLinear and SharedBiasLinear keep their own initialization.
        self.apply(init)
        self._mlp = _plain_mlp_layers(torso, head, kind, tau_embedding)

    def forward(self, obs, taus=None, generator=None):
        """Outputs for observations `obs` (IQN: at `taus`); noisy heads draw their
        noise from `generator` (a random stream of the caller's)."""
        x = obs.to(_input_dtype(obs))
        if self.input_scale != 1.0:
            x = x * self.input_scale
        # .float(): under --precision bfloat16 (autocast) the layers compute in bfloat16;
        # losses and targets take their outputs in float32 (a no-op otherwise).
        if self._mlp is not None:
            out = _mlp_forward(self._mlp, x).float().view(-1, self.head.num_actions, 1)
            return NetworkOutputs(out[..., 0], None, None, out)
        features = self.torso(x)
        if self.kind == "implicit_quantile":
            batch, n = taus.shape
            embedded = features[:, None, :] * self.tau_embedding(taus)  # [B, N, F]
            q_dist = self.head(embedded.reshape(batch * n, -1), generator).float()
            q_dist = q_dist.reshape(batch, n, -1)
            return NetworkOutputs(q_dist.mean(1).detach(), None, q_dist)
        out = self.head(features, generator).float()  # [B, A, K]
        if self.kind == "categorical":
            probs = torch.softmax(out, dim=-1)
            return NetworkOutputs((probs * self.support).sum(-1).detach(), out, None)
        if self.kind == "quantile":
            q_dist = out.transpose(1, 2)
            return NetworkOutputs(q_dist.mean(1).detach(), None, q_dist)
        # One head is its own mean: a view, not a reduction (the same values and
        # gradients, for less work per pass).
        q_values = out[..., 0] if out.shape[-1] == 1 else out.mean(-1)
        return NetworkOutputs(q_values, None, None, out)


def _plain_mlp_layers(torso, head, kind, tau_embedding):
    """The Linear layers, in order, of a network made of Linear and ReLU only (an MLP
    torso, a plain head with one Q head, no noise), else None.

    Its forward then calls them directly: the same operations on the same tensors (the
    same results, gradients and random draws: none), without the 11 nested module
    calls, which cost as much as the arithmetic for a small network. Forward hooks on
    its submodules are not called."""
    if kind != "none" or tau_embedding is not None or not isinstance(torso, MlpTorso):
        return None
    if head.dueling or head.width != 1:
        return None
    layers = [*torso.net, *head.net]
    linear = [m for m in layers if type(m) is nn.Linear]
    if [type(m) for m in layers] != [nn.Linear, nn.ReLU] * (len(linear) - 1) + [nn.Linear]:
        return None  # noisy, shared-bias or other layers: the modules' own forward
    return linear if all(m.bias is not None for m in linear) else None


def _mlp_forward(layers, x):
    """Linear, ReLU, ..., Linear over `layers` (see _plain_mlp_layers)."""
    x = x.flatten(1)  # a view; the same tensor for vectors
    for layer in layers[:-1]:
        x = torch.relu(nn.functional.linear(x, layer.weight, layer.bias))
    return nn.functional.linear(x, layers[-1].weight, layers[-1].bias)


class SeparateNetworks(nn.Module):
    """K whole Q-networks whose Q-values stack into heads [B, A, K] (batch_rl's
    MultiNetworkQNetwork, used by online REM with K = 4; Agarwal et al. 2020,
    arXiv:1907.04543). q_values is their plain mean, as for heads on one torso.

    batch_rl gives each network its own copy of the optimizer; one Adam or RMSProp over
    all the parameters is the same update (both are per parameter), but a global-norm
    clip (--max-global-grad-norm) here spans all K networks together.
    """

    kind = "none"

    def __init__(self, members):
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, obs, taus=None, generator=None):
        q_heads = torch.stack([m(obs, generator=generator).q_values for m in self.members], -1)
        return NetworkOutputs(q_heads.mean(-1), None, None, q_heads)


def make_network(config, info, observation_shape):
    """The network for `config` on an environment described by `info`."""
    if config.recurrent:  # R2D1's recurrent network (recurrent.py)
        return make_recurrent_network(config, info, observation_shape)
    if config.num_heads > 1 and config.separate_networks:
        one = dataclasses.replace(config, num_heads=1, separate_networks=False)
        members = [make_network(one, info, observation_shape) for _ in range(config.num_heads)]
        return SeparateNetworks(members)
    user_modules.import_modules(
        config.gym_packages, "the run's gym_packages"
    )  # they register user torsos
    torso = config.torso
    if torso == "auto":
        torso = {"atari": "nature_cnn", "minatar": "minatar_cnn"}.get(info.domain, "mlp")
    user = registered_torso(torso)
    if user is not None:
        body, hidden = user_torso(user, torso, observation_shape), user.head_hidden
    elif torso not in BUILT_IN:
        raise UserError(
            f"the run's torso {torso!r} is not registered in this process: import the module "
            "that registers it (qzoo.register_torso) first, or name it in the run's "
            "gym_packages (qzoo.train records the module of a torso registered in one)"
        )
    elif torso == "nature_cnn":
        body, hidden = NatureTorso(observation_shape[0], config.layer_norm), 512
    elif torso == "dopamine_cnn":
        body, hidden = DopamineTorso(*observation_shape), 512
    elif torso == "minatar_cnn":
        body = MinAtarTorso(observation_shape[0], *observation_shape[1:], config.layer_norm)
        hidden = 128
    else:
        widths, hidden = mlp_shape(config)
        body = MlpTorso(int(math.prod(observation_shape)), widths, config.layer_norm)
    kind = config.distribution
    width = {"categorical": config.num_atoms, "quantile": config.num_quantiles,
             "none": config.num_heads}.get(kind, 1)  # fmt: skip
    head = Head(
        body.out_features, hidden, info.num_actions, width, dueling=config.dueling,
        noisy_weight_init=config.noisy_weight_init if config.noisy else 0.0,
        shared_bias=config.shared_bias, shared_hidden=config.dueling_shared_hidden,
        layer_norm=config.layer_norm,
    )  # fmt: skip
    support = None
    if kind == "categorical":
        support = torch.linspace(-config.vmax, config.vmax, config.num_atoms)
    embedding = None
    if kind == "implicit_quantile":
        embedding = CosineEmbedding(config.tau_latent_dim, body.out_features)
    # Only pixels are rescaled: MinAtar's channels are already 0/1, and dividing
    # them by 255 would starve its small network of signal.
    input_scale = 1.0 / 255.0 if info.domain == "atari" else 1.0
    network = Network(body, head, kind, support, embedding, input_scale, INITS[config.init])
    if config.init == "he_normal":  # flax's default for the output layers: lecun_normal
        for layer in head.output_layers():
            lecun_normal_init_(layer)
    return network
