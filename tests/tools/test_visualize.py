"""`qzoo visualize`: guided backpropagation and gradient saliency, on hand-made networks
(numbers worked out by hand) and on tiny real MinAtar and CartPole runs."""

import base64
import io
import re

import numpy as np
import pytest
import torch
from analysis_runs import train
from torch import nn

from qzoo.cli.main import main
from qzoo.configuration import Config
from qzoo.envs import EnvInfo
from qzoo.networks.heads import NetworkOutputs
from qzoo.networks.network import make_network
from qzoo.tools import saliency


class Stub(nn.Module):
    """A network as the tools see it: a torso of 1x1 convolutions, no input scaling."""

    def __init__(self, *weights):
        super().__init__()
        layers = []
        for w in map(torch.tensor, weights):
            conv = nn.Conv2d(w.shape[1], w.shape[0], 1, bias=False)
            conv.weight.data = w[..., None, None]
            layers += [conv, nn.ReLU()]
        self.torso = nn.Sequential(*layers, nn.Flatten())
        self.input_scale = 1.0


def test_guided_backprop_passes_only_positive_gradients_through_relus():
    # x = (1, 0.5); conv 1 gives (1 - 0.5, 2 + 0.5) = (0.5, 2.5), both through the ReLU;
    # conv 2 gives -0.5 + 2.5 = 2. Plain backprop of that unit: (-1, 1) back through
    # ReLU 1 and W1^T: (-1 + 2, 1 + 1) = (1, 2). Guided backprop clamps (-1, 1) to
    # (0, 1) at ReLU 1: W1^T (0, 1) = (2, 1).
    network = Stub([[1.0, -1.0], [2.0, 1.0]], [[-1.0, 1.0]])
    obs = torch.tensor([1.0, 0.5])[None, :, None, None]
    top = saliency.TopActivation(layer=1, feature=0, state=0, y=0, x=0, value=2.0)
    (guided,) = saliency.guided_backprop(network, obs, [top])
    np.testing.assert_allclose(guided.reshape(-1), [2.0, 1.0])
    x = obs.clone().requires_grad_(True)
    network.torso(x).sum().backward()
    np.testing.assert_allclose(x.grad.reshape(-1), [1.0, 2.0])  # the shared net is unhooked


def test_top_activations_find_the_strongest_state_and_position():
    network = Stub([[1.0]], [[2.0]])
    obs = torch.tensor([[[[0.0, 1.0, 2.0]]], [[[5.0, 0.0, 0.0]]], [[[0.0, 0.0, 3.0]]]])
    tops = saliency.top_activations(network, obs, num_maps=4)  # only 1 map per layer
    assert [(t.layer, t.feature, t.state, t.y, t.x, t.value) for t in tops] == [
        (0, 0, 1, 0, 0, 5.0), (1, 0, 1, 0, 0, 10.0)]  # fmt: skip


class LinearQ(nn.Module):
    kind = "q"

    def __init__(self, w):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(w))

    def forward(self, x, taus=None, generator=None):
        return NetworkOutputs(x @ self.w, None, None)


def test_q_saliency_is_the_gradient_of_the_greedy_action_value():
    # Q(x) = x W: at (1, 1) Q = (3, -2.5), action 0 wins, |dQ_0/dx| = (1, 2); at
    # (0, -1) Q = (-2, -0.5), action 1 wins, |dQ_1/dx| = (3, 0.5).
    network = LinearQ([[1.0, -3.0], [2.0, 0.5]])
    sal, q = saliency.q_saliency(network, torch.tensor([[1.0, 1.0], [0.0, -1.0]]))
    np.testing.assert_allclose(sal, [[1.0, 2.0], [3.0, 0.5]])
    np.testing.assert_allclose(q, [[3.0, -2.5], [-2.0, -0.5]])


@pytest.mark.parametrize("distribution", ["none", "categorical", "quantile", "implicit_quantile"])
def test_q_values_carry_gradients_for_every_head(distribution):
    info = EnvInfo("minatar/breakout", "minatar", 3, (4, 10, 10), np.uint8, "breakout")
    config = Config(env="minatar/breakout", distribution=distribution, num_quantiles=8,
                    num_atoms=11)  # fmt: skip
    network = make_network(config, info, (4, 10, 10))
    x = torch.rand(2, 4, 10, 10, requires_grad=True)
    q = saliency.q_values(network, x)
    taus = ((torch.arange(32) + 0.5) / 32).expand(2, 32)
    expected = network(x, taus if distribution == "implicit_quantile" else None).q_values
    torch.testing.assert_close(q, expected)
    assert q.requires_grad and q.shape == (2, 3)


@pytest.fixture(scope="module")
def minatar_run(tmp_path_factory):
    return str(train(tmp_path_factory.mktemp("vis") / "run", "minatar/breakout"))


def decoded_images(page):
    """Every inline image of the page, decoded; fails on anything not a PNG data URI."""
    from matplotlib.image import imread

    sources = re.findall(r'<img src="([^"]*)"', page)
    assert sources and all(s.startswith("data:image/png;base64,") for s in sources)
    return [imread(io.BytesIO(base64.b64decode(s.split(",", 1)[1])), format="png")
            for s in sources]  # fmt: skip


def test_html_page_is_self_contained_with_guided_maps_and_saliency(minatar_run, tmp_path):
    out = tmp_path / "saliency.html"
    assert main(["visualize", minatar_run, "--out", str(out), "--frames", "3"]) == 0
    page = out.read_text()
    assert "<script" not in page and "http" not in page and "<link" not in page
    # One conv layer (MinAtar's torso) x 4 maps x (guided, state) + 3 x (state, saliency).
    images = decoded_images(page)
    assert len(images) == 4 * 2 + 3 * 2
    assert all(i.shape[:2] == (160, 160) for i in images)  # 10x10 enlarged by 16
    assert "conv 1: 16 maps of 3x3/1" in page and "paddle blue, ball orange" in page


def test_png_sheet(minatar_run, tmp_path):
    from matplotlib.image import imread

    out = tmp_path / "sheet.png"
    assert main(["visualize", minatar_run, "--out", str(out), "--maps", "2"]) == 0
    assert imread(out).ndim == 3


def test_a_network_without_conv_layers_gets_feature_saliency(tmp_path):
    run = str(train(tmp_path / "cartpole", "CartPole-v1"))
    out = tmp_path / "cartpole.html"
    assert main(["visualize", run, "--out", str(out)]) == 0
    page = out.read_text()
    assert "no conv layers" in page and "Guided" not in page
    assert len(decoded_images(page)) == 1


def test_atari_stacks_show_the_last_three_frames_as_rgb():
    from qzoo.tools import visualize

    info = EnvInfo("pong", "atari", 6, (2, 2), np.uint8, "pong")
    state = np.stack([np.full((2, 2), v, np.uint8) for v in (10, 51, 102, 255)])
    rgb = visualize._state_rgb(state, info, "stack")
    np.testing.assert_allclose(rgb[0, 0], [0.2, 0.4, 1.0])  # frames 2, 3, 4 (A10)
    grad = np.stack([np.full((2, 2), v, np.float32) for v in (-1.0, -1.0, 0.0, 3.0)])
    np.testing.assert_allclose(visualize._map_rgb(grad, info, "stack")[0, 0], [0, 0.25, 1])
    # A feature map never active has a zero gradient: grey, not black.
    zero = visualize._map_rgb(np.zeros((4, 2, 2), np.float32), info, "stack")
    np.testing.assert_allclose(zero, 0.5)
