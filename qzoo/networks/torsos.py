"""Torsos: the convolutional and MLP bodies that turn observations into features
(Mnih et al. 2015's Nature CNN, Dopamine's 'same'-padded variant, MinAtar's small CNN,
an MLP), and the weight initializations of DQN Zoo and Dopamine."""

import math

import torch
from torch import nn

from qzoo.errors import UserError


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


def glorot_init_(module):
    """Keras's defaults, Dopamine's NatureDQNNetwork (offline DQN, and each network of
    batch_rl's multi-network REM): Glorot-uniform weights, U(+-sqrt(6 / (fan_in +
    fan_out))), zero biases."""
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    return module


def variance_scaling_init_(module):
    """batch_rl's MultiHeadQNetwork and QuantileNetwork, Dopamine's Rainbow (C51):
    VarianceScaling(scale 1/sqrt(3), fan_in, uniform), U(+-sqrt(3 scale / fan_in)) =
    U(+-1.316 / sqrt(fan_in)), zero biases."""
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        bound = math.sqrt(3.0 / math.sqrt(3.0) / module.weight[0].numel())
        nn.init.uniform_(module.weight, -bound, bound)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    return module


def he_normal_init_(module):
    """flax's he_normal (purejaxql's PQN networks): truncated normal (at 2 standard
    deviations) of standard deviation sqrt(2 / fan_in) after truncation, zero biases.
    Their output layers are lecun_normal instead (`lecun_normal_init_`)."""
    return _truncated_fan_in_(module, 2.0)


def lecun_normal_init_(module):
    """flax's lecun_normal: he_normal with variance 1 / fan_in."""
    return _truncated_fan_in_(module, 1.0)


def _truncated_fan_in_(module, scale):
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        # jax's truncated normal of unit variance has standard deviation 0.8796 before
        # its rescaling: variance_scaling divides by it.
        std = math.sqrt(scale / module.weight[0].numel()) / 0.87962566103423978
        nn.init.trunc_normal_(module.weight, std=std, a=-2 * std, b=2 * std)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    return module


def orthogonal_init_(module):
    """CleanRL's layer_init (its pqn.py): orthogonal weights of gain sqrt(2), zero biases."""
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        nn.init.orthogonal_(module.weight, gain=math.sqrt(2))
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    return module


INITS = {
    "dqn_zoo": legacy_init_,
    "glorot": glorot_init_,
    "variance_scaling": variance_scaling_init_,
    "he_normal": he_normal_init_,
    "orthogonal": orthogonal_init_,
}


class ChannelNorm(nn.Module):
    """flax's LayerNorm after a convolution (purejaxql's PQN): each position's channels
    normalised, with a scale and bias per channel, on [B, C, H, W] tensors."""

    def __init__(self, channels, eps=1e-6):
        super().__init__()
        self.norm = nn.LayerNorm(channels, eps=eps)

    def forward(self, x):
        return self.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)


def _conv_block(in_channels, out, kernel, stride, layer_norm):
    """Conv2d, then (with `layer_norm`) a ChannelNorm, then ReLU."""
    norm = [ChannelNorm(out)] if layer_norm else []
    return [nn.Conv2d(in_channels, out, kernel, stride=stride), *norm, nn.ReLU()]


def training_layout(x):
    """`x` in the channels-last memory layout when it is a CPU forward pass that will be
    differentiated: oneDNN's channels-last kernels run the Nature CNN's forward and
    backward passes faster on a CPU, most of the gain in the first layer's weight
    gradient. Passes without gradients (acting, targets) are faster as they are, and
    GPUs keep theirs.
    The same values in another layout, but the kernels sum in another order: results
    differ from the default layout's in the last bits (about 1e-8)."""
    if x.is_cpu and torch.is_grad_enabled():
        return x.contiguous(memory_format=torch.channels_last)
    return x


class NatureTorso(nn.Module):
    """Mnih et al. 2015: conv 32x8x8/4, 64x4x4/2, 64x3x3/1, ReLU, VALID -> 3136."""

    def __init__(self, in_channels, layer_norm=False):
        """`layer_norm`: a ChannelNorm before each ReLU (PQN)."""
        super().__init__()
        self.net = nn.Sequential(
            *_conv_block(in_channels, 32, 8, 4, layer_norm),
            *_conv_block(32, 64, 4, 2, layer_norm),
            *_conv_block(64, 64, 3, 1, layer_norm),
            nn.Flatten(),
        )  # fmt: skip
        self.out_features = 3136

    def forward(self, x):
        return self.net(training_layout(x))


def _same_padding(size, kernel, stride):
    """TF's 'same' padding along one axis: (before, after), the odd pixel after."""
    total = max((-(-size // stride) - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


class DopamineTorso(nn.Module):
    """Dopamine's and batch_rl's Nature CNN (batch_rl_dopamine.md §2.4): the same three
    convolutions with TF's 'same' padding, 84 -> 21 -> 11 -> 11, flatten 7,744 (not
    3,136). Flattened channel-first (TF: channel-last), a permutation that only
    matters to weights copied from TF."""

    def __init__(self, in_channels, height=84, width=84):
        super().__init__()
        layers = []
        for out, kernel, stride in ((32, 8, 4), (64, 4, 2), (64, 3, 1)):
            top, bottom = _same_padding(height, kernel, stride)
            left, right = _same_padding(width, kernel, stride)
            layers += [nn.ZeroPad2d((left, right, top, bottom)),
                       nn.Conv2d(in_channels, out, kernel, stride=stride), nn.ReLU()]  # fmt: skip
            in_channels, height, width = out, -(-height // stride), -(-width // stride)
        self.net = nn.Sequential(*layers, nn.Flatten())
        self.out_features = in_channels * height * width

    def forward(self, x):
        return self.net(training_layout(x))


class MinAtarTorso(nn.Module):
    """Young & Tian 2019 (MinAtar): conv 16x3x3/1, ReLU, flatten."""

    def __init__(self, in_channels, height=10, width=10, layer_norm=False):
        super().__init__()
        self.net = nn.Sequential(*_conv_block(in_channels, 16, 3, 1, layer_norm), nn.Flatten())
        self.out_features = 16 * (height - 2) * (width - 2)

    def forward(self, x):
        return self.net(x)


class MlpTorso(nn.Module):
    """ReLU layers of the given widths for vector observations (others, such as
    MinAtar's or Atari's with --torso mlp, flattened first)."""

    def __init__(self, in_features, widths, layer_norm=False):
        super().__init__()
        layers = []
        for width in widths:
            norm = [nn.LayerNorm(width, eps=1e-6)] if layer_norm else []
            layers += [nn.Linear(in_features, width), *norm, nn.ReLU()]
            in_features = width
        self.net = nn.Sequential(*layers)
        self.out_features = in_features

    def forward(self, x):
        return self.net(x.flatten(1))


def mlp_shape(config):
    """(the MLP torso's widths, the head's hidden units): two layers of --mlp-hidden
    and a hidden layer of as many in the head, or --mlp-layers' widths and a head
    with no hidden layer (0), as CleanRL's dqn.py's 120, 84 then the Q-values."""
    if config.mlp_layers:
        return tuple(int(w) for w in config.mlp_layers.split(",")), 0
    return (config.mlp_hidden, config.mlp_hidden), config.mlp_hidden


def user_torso(user, name, observation_shape):
    """The module a registered torso's build makes for `observation_shape` ([stack, ...]),
    with its `out_features` (read from the module, else measured by one forward pass of
    zeros). UserError naming the torso when its build or its output is not usable."""
    try:
        body = user.build(tuple(observation_shape))
    except Exception as e:  # noqa: BLE001  the user's code may raise anything: one line
        raise UserError(f"--torso {name}: its build failed for observations of shape "
                        f"{tuple(observation_shape)} ({type(e).__name__}: {e})") from None  # fmt: skip
    if not isinstance(body, nn.Module):
        raise UserError(f"--torso {name}: its build returned {type(body).__name__}; "
                        "expected a torch.nn.Module")  # fmt: skip
    try:  # one pass on zeros: how many features it gives (and that it gives a vector)
        with torch.no_grad():
            out = body(torch.zeros(2, *observation_shape))
    except Exception as e:  # noqa: BLE001  as above
        raise UserError(f"--torso {name}: a forward pass on observations of shape "
                        f"{tuple(observation_shape)} failed ({type(e).__name__}: {e})") from None  # fmt: skip
    if not isinstance(out, torch.Tensor) or out.dim() != 2 or out.shape[0] != 2:
        shape = tuple(out.shape[1:]) if isinstance(out, torch.Tensor) else type(out).__name__
        raise UserError(f"--torso {name}: it gives features of shape {shape} per "
                        "observation; expected one vector (flatten them)")  # fmt: skip
    said = getattr(body, "out_features", None)
    if said is not None and said != out.shape[1]:
        raise UserError(f"--torso {name}: its out_features says {said} but it gives "
                        f"{out.shape[1]} features; expected them to agree")  # fmt: skip
    body.out_features = int(out.shape[1])
    return body
