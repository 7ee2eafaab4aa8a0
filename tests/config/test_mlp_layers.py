"""--mlp-layers: an MLP of the given hidden widths, then one linear layer to the
outputs (CleanRL's dqn.py network with 120,84); the default network is untouched."""

import pytest
import torch
from torch import nn

from qzoo import envs
from qzoo.cli.main import main
from qzoo.configuration import make_config
from qzoo.networks.heads import NoisyLinear
from qzoo.networks.host_mlp import HostMlp
from qzoo.networks.network import make_network


def network(agent="dqn", **options):
    config = make_config(agent, "CartPole-v1", "gym", options)
    return make_network(config, envs.describe(config), (4,))


def shapes(module):
    """(kind, inputs, outputs) of each linear layer, in order."""
    layers = [m for m in module.modules() if isinstance(m, (nn.Linear, NoisyLinear))]
    weights = [getattr(m, "weight_mu", None) if isinstance(m, NoisyLinear) else m.weight
               for m in layers]  # fmt: skip
    return [(type(m).__name__, w.shape[1], w.shape[0]) for m, w in zip(layers, weights)]


def test_cleanrl_dqn_network_is_120_84_then_the_q_values():
    net = network(mlp_layers="120,84")
    assert shapes(net) == [("Linear", 4, 120), ("Linear", 120, 84), ("Linear", 84, 2)]
    # CleanRL's parameter count: 4 x 120 + 120 + 120 x 84 + 84 + 84 x 2 + 2.
    assert sum(p.numel() for p in net.parameters()) == 10_934
    # A plain MLP: the direct forward and the NumPy actor take it (networks._mlp).
    obs = torch.randn(5, 4)
    q = net(obs).q_values
    x = torch.relu(net.torso.net[0](obs))
    x = torch.relu(net.torso.net[2](x))
    assert torch.allclose(q, net.head.net[0](x))
    assert torch.allclose(torch.as_tensor(HostMlp.of(net)(obs.numpy())), q, atol=1e-6)


def test_default_mlp_keeps_its_three_hidden_layers():
    assert shapes(network()) == [("Linear", 4, 64), ("Linear", 64, 64), ("Linear", 64, 64),
                                 ("Linear", 64, 2)]  # fmt: skip


@pytest.mark.parametrize("agent, options, expected", [
    ("dqn", {"mlp_layers": "32", "dueling": True},
     [("Linear", 4, 32), ("Linear", 32, 2), ("Linear", 32, 1)]),  # one layer per stream
    ("dqn", {"mlp_layers": "16,8", "noisy": True},
     [("Linear", 4, 16), ("Linear", 16, 8), ("NoisyLinear", 8, 2)]),
    ("c51", {"mlp_layers": "16"}, [("Linear", 4, 16), ("Linear", 16, 2 * 51)]),
])  # fmt: skip
def test_mlp_layers_with_other_heads(agent, options, expected):
    net = network(agent, **options)
    assert shapes(net) == expected
    out = net(torch.randn(3, 4), generator=torch.Generator().manual_seed(0))
    assert out.q_values.shape == (3, 2)


def test_widths_are_kept_in_one_spelling():
    from qzoo.configuration import build_config

    config = build_config("dqn", {"env": "CartPole-v1", "mlp_layers": " 120, 084"})
    assert config.mlp_layers == "120,84"


def test_a_run_trains_with_cleanrl_network(tmp_path):
    run_dir = tmp_path / "run"
    argv = ["train", "dqn", "--env", "CartPole-v1", "--mlp-layers", "120,84", "--iterations", "1",
            "--train-frames", "600", "--eval-frames", "100", "--replay-capacity", "1000",
            "--min-replay-capacity-fraction", "0.2", "--run-dir", str(run_dir)]  # fmt: skip
    assert main(argv) == 0
    assert '"mlp_layers": "120,84"' in (run_dir / "config.json").read_text()


@pytest.mark.parametrize("mlp_layers", ["", "64,32"])
def test_an_mlp_torso_takes_image_observations_flattened(mlp_layers, tmp_path):
    """--torso mlp on MinAtar's [C, H, W] observations: the learner's pass and the NumPy
    actor's both flatten them (a traceback at the first action before)."""
    config = make_config("dqn", "minatar/breakout", "minatar",
                         {"torso": "mlp", "mlp_layers": mlp_layers})  # fmt: skip
    info = envs.describe(config)
    net = make_network(config, info, (4, 10, 10))
    obs = torch.rand(3, 4, 10, 10)
    q = net(obs).q_values
    assert q.shape == (3, info.num_actions)
    assert torch.allclose(net(obs.flatten(1)).q_values, q)
    assert torch.allclose(torch.as_tensor(HostMlp.of(net)(obs.numpy())), q, atol=1e-6)
    argv = ["train", "dqn", "--env", "minatar/breakout", "--torso", "mlp", "--iterations", "1",
            "--train-frames", "600", "--eval-frames", "100", "--replay-capacity", "1000",
            "--min-replay-capacity-fraction", "0.2", "--run-dir", str(tmp_path / "run")]  # fmt: skip
    assert main(argv + (["--mlp-layers", mlp_layers] if mlp_layers else [])) == 0
