"""R2D1's recurrent Q-network (Kapturowski et al. 2019, "Recurrent Experience Replay in
Distributed Reinforcement Learning", ICLR), in rlpyt's form (`AtariR2d1Model`, B4):

  torso (qzoo's, from --torso) -> FC 512 + ReLU (image torsos only)
  -> one-layer LSTM(--lstm-size 512) fed [features, one-hot previous action, previous reward]
  -> head: Linear 512 -> ReLU -> |A|, or rlpyt's dueling head (`RlpytDuelingHead`).

Inputs are time-major [T, B, ...] (rlpyt's and cuDNN's layout) or one step [B, ...]. The
previous action is an integer with -1 meaning "none" (an episode's first step), encoded
as an all-zero one-hot; rlpyt feeds action 0's one-hot there (its GPU sampler zeroes the
action index), which a network cannot tell from a real action 0. The recurrent state is
(h, c), each [1, B, H]; None means zeros.

Deviation on purpose: rlpyt's conv pads conv2 and conv3 by 1 on its 104x80 frames
(6,912 features); here the torso is qzoo's on qzoo's frames (nature_cnn on 84x84: 3,136).
"""

import math

import torch
from torch import nn

from qzoo.networks.torsos import INITS, DopamineTorso, MinAtarTorso, MlpTorso, NatureTorso


class _ScaleGradient(torch.autograd.Function):
    @staticmethod
    def forward(x, scale):
        return x.view_as(x)

    @staticmethod
    def setup_context(ctx, inputs, output):  # torch.func's form (see learning/losses.py)
        ctx.scale = inputs[1]

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


class RlpytDuelingHead(nn.Module):
    """rlpyt's `DuelingHeadModel` (B4): the input's gradient is scaled by 2^-1/2 on the
    way back (Wang et al. 2016); advantage = MLP(in -> hidden -> ReLU) -> Linear(|A|) with
    no bias plus one shared scalar bias starting at 0; value = MLP(in -> hidden -> ReLU ->
    1); Q = V + A - mean_a A."""

    def __init__(self, in_features, hidden, num_actions, grad_scale=2**-0.5):
        super().__init__()
        self.grad_scale = grad_scale
        self.advantage_hidden = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU())
        self.advantage_out = nn.Linear(hidden, num_actions, bias=False)
        self.advantage_bias = nn.Parameter(torch.zeros(1))
        self.value = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x):
        x = _ScaleGradient.apply(x, self.grad_scale)
        advantage = self.advantage_out(self.advantage_hidden(x)) + self.advantage_bias
        return self.value(x) + advantage - advantage.mean(-1, keepdim=True)


class RecurrentNetwork(nn.Module):
    """Torso -> (FC) -> LSTM -> head (see the module docstring)."""

    kind = "recurrent"

    def __init__(self, torso, num_actions, fc_size, lstm_size, head_size, dueling, input_scale,
                 init):  # fmt: skip
        super().__init__()
        self.torso, self.num_actions, self.input_scale = torso, num_actions, input_scale
        features = torso.out_features
        self.fc = None
        if fc_size:
            self.fc = nn.Sequential(nn.Linear(features, fc_size), nn.ReLU())
            features = fc_size
        self.lstm = nn.LSTM(features + num_actions + 1, lstm_size)
        self.lstm_size = lstm_size
        if dueling:
            self.head = RlpytDuelingHead(lstm_size, head_size, num_actions)
        else:
            self.head = nn.Sequential(
                nn.Linear(lstm_size, head_size), nn.ReLU(), nn.Linear(head_size, num_actions)
            )
        for module in self.modules():  # convolutions and linear layers; the LSTM keeps
            if not isinstance(module, nn.LSTM):  # PyTorch's default, as in rlpyt
                init(module)
        if dueling:
            nn.init.zeros_(self.head.advantage_bias)

    def forward(self, obs, prev_action, prev_reward, state=None):
        """Q-values [T, B, A] (or [B, A] for one step [B, ...]) and the new state (h, c).

        obs [T, B, *observation_shape]; prev_action [T, B] integers, -1 for none;
        prev_reward [T, B]; state (h, c) each [1, B, H] or None (zeros)."""
        one_step = prev_action.dim() == 1
        if one_step:
            obs, prev_action, prev_reward = obs[None], prev_action[None], prev_reward[None]
        steps, batch = prev_action.shape
        x = obs.reshape((steps * batch,) + tuple(obs.shape[2:])).float()
        if self.input_scale != 1.0:
            x = x * self.input_scale
        features = self.torso(x)
        if self.fc is not None:
            features = self.fc(features)
        features = features.view(steps, batch, -1)
        action = prev_action.long()
        one_hot = nn.functional.one_hot(action.clamp(min=0), self.num_actions).float()
        one_hot = one_hot * (action >= 0).unsqueeze(-1)
        lstm_in = torch.cat([features, one_hot, prev_reward.float().unsqueeze(-1)], -1)
        if one_step and lstm_in.device.type == "cpu":  # acting on a CPU
            lstm_out, (h, c) = self._cell(lstm_in, state)
        else:
            lstm_out, (h, c) = self.lstm(lstm_in, state)
        q = self.head(lstm_out)
        return (q[0] if one_step else q), (h, c)

    def _cell(self, lstm_in, state):
        """One step of the LSTM as torch.lstm_cell, the same weights and arithmetic: on a
        CPU nn.LSTM goes through oneDNN, which reorders its weights at every call: far
        more work than one step of one environment's arithmetic."""
        lstm = self.lstm
        if state is None:
            state = self.initial_state(lstm_in.shape[1], lstm_in.device)
        h, c = torch.lstm_cell(lstm_in[0], (state[0][0], state[1][0]), lstm.weight_ih_l0,
                               lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0)  # fmt: skip
        return h[None], (h[None], c[None])

    def initial_state(self, batch, device=None):
        zeros = torch.zeros(1, batch, self.lstm_size, device=device)
        return zeros, zeros.clone()


def make_recurrent_network(config, info, observation_shape):
    """R2D1's network for `config` on an environment described by `info`: qzoo's torso
    (auto: nature_cnn on Atari, minatar_cnn on MinAtar, mlp elsewhere); image torsos get
    rlpyt's FC 512, the mlp torso (already fully connected) feeds the LSTM directly and
    its head is --mlp-hidden wide."""
    torso = config.torso
    if torso == "auto":
        torso = {"atari": "nature_cnn", "minatar": "minatar_cnn"}.get(info.domain, "mlp")
    if torso == "nature_cnn":
        body = NatureTorso(observation_shape[0])
    elif torso == "dopamine_cnn":
        body = DopamineTorso(*observation_shape)
    elif torso == "minatar_cnn":
        body = MinAtarTorso(observation_shape[0], *observation_shape[1:])
    else:
        body = MlpTorso(int(math.prod(observation_shape)), (config.mlp_hidden,) * 2)
    fc, head = (0, config.mlp_hidden) if torso == "mlp" else (512, 512)
    input_scale = 1.0 / 255.0 if info.domain == "atari" else 1.0
    return RecurrentNetwork(body, info.num_actions, fc, config.lstm_size, head, config.dueling,
                            input_scale, INITS[config.init])  # fmt: skip
