"""`qzoo visualize RUN [--out saliency.html|.png] [--maps 4] [--steps 500] [--frames 8]`

What a run's network responds to, over one episode played by its latest weights at
the run's eval epsilon (at most --steps agent steps):
- guided backpropagation (Springenberg et al. 2015) of the strongest activation of each
  conv layer's first --maps feature maps, next to the state that produced it
  (simple_dqn's nvis, reference A10);
- gradient saliency |d max_a Q / d state| (Simonyan et al. 2014) at --frames steps
  spread over the episode.
States are shown as simple_dqn does for Atari stacks: the last three frames as R, G, B
(grey: unchanged; blue: the newest change, then green, then red). MinAtar's channels
(one per object kind) are each given a colour. A network without conv layers (the MLP
of CartPole and other vector observations) gets gradient saliency over its input
features: a features x steps heat map. .html is one self-contained page (images inline
as base64 PNG, no scripts); .png is one sheet.
"""

import base64
import html
import io

import numpy as np
import torch

from qzoo.errors import UserError
from qzoo.tools import saliency as saliency_lib
from qzoo.tools.args import integer_option

EXTENSIONS = (".html", ".png")


def parser():
    """The argument parser of `qzoo visualize` (qzoo.cli.parser.Parser: one-line errors)."""
    from qzoo.cli.parser import Parser

    p = Parser(
        prog="qzoo visualize",
        usage="qzoo visualize RUN [--out saliency.html|.png] [--maps 4] [--steps 500] "
        "[--frames 8] [--seed 0]",
        description=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("run", nargs="?", metavar="RUN", help="a run folder written by qzoo train")
    p.add_argument("--out", default="saliency.html", metavar="FILE", help="output: .html or .png")
    p.add_argument(
        "--maps", default="4", metavar="N", help="feature maps per conv layer (default: 4)"
    )
    p.add_argument(
        "--steps", default="500", metavar="N", help="most agent steps played (default: 500)"
    )
    p.add_argument(
        "--frames", default="8", metavar="N", help="steps shown with saliency (default: 8)"
    )
    p.add_argument("--seed", default="0", metavar="N", help="seed of the episode (default: 0)")
    return p


def main(argv):
    """`qzoo visualize` with the arguments after the command; UserError on bad input."""
    from qzoo.cli.parser import parse
    from qzoo.run import threads
    from qzoo.tools import results
    from qzoo.tools.runs import load_run

    options = parse(parser(), argv)
    if options["run"] is None:
        raise UserError("visualize needs a run folder")
    ext = results.check_out(options["out"], EXTENSIONS)
    maps = integer_option("maps", options["maps"], 1, 64)
    steps = integer_option("steps", options["steps"], 1, 1_000_000)
    frames = integer_option("frames", options["frames"], 1, 64)
    seed = integer_option("seed", options["seed"], 0, 2**31 - 1)
    run = load_run(options["run"])
    threads.apply(run.config)  # PyTorch's default of one thread per core, sized as in training
    report = analyse(run, maps, steps, frames, seed)
    if ext == ".html":
        page = html_page(report).encode()
        results.write_file(options["out"], lambda f: f.write(page))
    else:
        results.save_figure(sheet(report), options["out"])
    print(f"wrote {options['out']}: {report['title']}")


def play_episode(run, steps, seed):
    """The stacked observations [T, ...] of one episode (at most `steps`) played by the
    run's network at its eval epsilon, and the episode's return so far."""
    from qzoo import envs
    from qzoo.acting.policy import Policy
    from qzoo.replay.frames import FrameStacker

    config, info = run.config, run.info
    env = envs.make(config, 1, seed, eval_mode=True)
    try:
        stacker = FrameStacker(1, info.frame_shape, info.frame_dtype, config.frame_stack)
        step = env.reset(seed=seed)
        obs = stacker.push(step.frame, step.first)
        policy = Policy(run.network, config.tau_samples_policy)
        generator = torch.Generator().manual_seed(seed)
        epsilon = np.full(1, config.eval_exploration_epsilon, np.float32)
        states, total = [], 0.0
        while len(states) < steps:
            states.append(obs[0].copy())
            actions, _ = policy(obs, epsilon, generator)
            step = env.step(actions)
            total += float(step.reward[0])
            if step.last[0]:  # the next step would be the reset of a new episode
                break
            obs = stacker.push(step.frame, step.first)
    finally:
        env.close()
    return np.stack(states), total


def analyse(run, num_maps, steps, frames, seed):
    """Everything the page or sheet shows, as images (float RGB arrays in [0, 1])."""
    states, episode_return = play_episode(run, steps, seed)
    network = run.network
    kind = _state_kind(run.info)
    report = {
        "title": f"{run.config.agent} on {run.config.env}, weights after iteration "
        f"{run.iteration} ({len(states)} steps played, return {episode_return:g})",
        "kind": kind,
        "layers": [],
        "channels": _channel_names(run.info),
        "num_channels": run.info.frame_shape[0],
    }
    stages = saliency_lib.conv_stages(network)
    if stages:
        tops = saliency_lib.top_activations(network, states, num_maps)
        guided = saliency_lib.guided_backprop(network, states, tops).numpy()
        for layer, stage in enumerate(stages):
            conv = stage.conv
            block = {"name": f"conv {layer + 1}: {conv.out_channels} maps of "
                             f"{conv.kernel_size[0]}x{conv.kernel_size[1]}/{conv.stride[0]}",
                     "maps": []}  # fmt: skip
            for top, grad in zip(tops, guided):
                if top.layer == layer:
                    block["maps"].append({
                        "label": f"map {top.feature}: {top.value:.3g} at step {top.state}",
                        "guided": _map_rgb(grad, run.info, kind),
                        "state": _state_rgb(states[top.state], run.info, kind),
                    })  # fmt: skip
            report["layers"].append(block)
    shown = np.unique(np.linspace(0, len(states) - 1, min(frames, len(states))).astype(int))
    sal, q = saliency_lib.q_saliency(network, states, seed)
    sal, q = sal.numpy(), q.numpy()
    if kind == "vector":
        report["feature_saliency"] = sal.reshape(len(states), -1)
    else:
        report["saliency"] = [
            {"label": f"step {t}: max Q {q[t].max():.3g}, action {int(q[t].argmax())}",
             "state": _state_rgb(states[t], run.info, kind), "saliency": _heat(sal[t])}
            for t in shown
        ]  # fmt: skip
    return report


def _state_kind(info):
    """'stack' (2-D frames: Atari), 'channels' ([C, H, W] frames: MinAtar), 'vector'."""
    return {2: "stack", 3: "channels"}.get(len(info.frame_shape), "vector")


def _palette(n):
    from matplotlib import colormaps

    return np.array([colormaps["tab10"](i % 10)[:3] for i in range(n)])


def _last_three(x):
    """[stack, H, W] in [0, 1] -> [H, W, 3]: the last three frames as R, G, B (A10)."""
    if len(x) < 3:
        return np.repeat(x[-1][..., None], 3, axis=-1)
    return np.moveaxis(x[-3:], 0, -1)


def _channels(x, channels):
    """The newest frame's `channels` [C, H, W] in [0, 1], each in its own colour."""
    x = x[-channels:]
    return np.clip(np.einsum("chw,cd->hwd", x, _palette(channels)), 0, 1)


def _state_rgb(state, info, kind):
    x = state.astype(np.float32)
    if kind == "stack":
        return _last_three(x / 255.0)
    return _channels(x, info.frame_shape[0])


def _map_rgb(grad, info, kind):
    """A guided-backprop map as an image: min-max scaled over the whole stack, then as
    the state is shown (nvis); MinAtar: |map| scaled by its largest value."""
    if kind == "stack":
        span = grad.max() - grad.min()
        # A map never active over the episode has no gradient: plain grey, not black.
        return _last_three((grad - grad.min()) / span if span > 0 else np.full_like(grad, 0.5))
    g = np.abs(grad)
    return _channels(g / g.max() if g.max() > 0 else g, info.frame_shape[0])


def _heat(sal):
    """Saliency [C, H, W] -> [H, W, 3]: the largest |gradient| over channels, scaled by
    the image's largest (Simonyan et al. 2014), in the inferno colour map."""
    from matplotlib import colormaps

    s = sal.max(axis=0)
    s = s / s.max() if s.max() > 0 else s
    return colormaps["inferno"](s)[..., :3]


def _png(rgb, side=168):
    """PNG bytes of an RGB image, enlarged by whole pixels to about `side` pixels."""
    from matplotlib.image import imsave

    scale = max(1, side // max(rgb.shape[:2]))
    big = np.repeat(np.repeat(rgb, scale, axis=0), scale, axis=1)
    buffer = io.BytesIO()
    imsave(buffer, np.clip(big, 0, 1), format="png")
    return buffer.getvalue()


def _img(data, alt):
    encoded = base64.b64encode(data).decode("ascii")
    return f'<img src="data:image/png;base64,{encoded}" alt="{html.escape(alt)}">'


STYLE = """body{font-family:sans-serif;margin:1.5em;background:#fafafa}
.layer{background:#e8f4f1;padding:.6em;margin:.6em 0}.cell{display:inline-block;
margin:.3em;vertical-align:top;font-size:12px}img{image-rendering:pixelated;margin:1px}"""


def html_page(report):
    """One self-contained page: inline PNGs, inline CSS, no scripts or links."""
    title = html.escape(report["title"])
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>qzoo visualize: {title}</title><style>{STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
    ]
    if report["layers"]:
        parts.append("<h2>Guided backpropagation (Springenberg et al. 2015)</h2><p>For each "
                     "conv layer's first feature maps, the input pattern behind the map's "
                     "strongest activation over the episode (left) and that state (right). "
                     f"{_legend(report)}</p>")  # fmt: skip
        for layer in report["layers"]:
            parts.append(f"<div class='layer'><h3>{html.escape(layer['name'])}</h3>")
            for m in layer["maps"]:
                parts.append(f"<div class='cell'>{html.escape(m['label'])}<br>"
                             f"{_img(_png(m['guided']), 'guided backprop')}"
                             f"{_img(_png(m['state']), 'state')}</div>")  # fmt: skip
            parts.append("</div>")
    parts.append("<h2>Gradient saliency of Q (Simonyan et al. 2014)</h2>")
    if "feature_saliency" in report:
        parts.append("<p>The network has no conv layers: |d max_a Q / d x| for each input "
                     "feature (rows) at each step of the episode (columns).</p>")  # fmt: skip
        parts.append(_img(_figure_png(_feature_figure(report)), "feature saliency"))
    else:
        parts.append(
            "<p>|d max_a Q / d state| at steps spread over the episode: the state "
            "(left) and where a change would move the value most (right, bright).</p>"
        )
        for s in report["saliency"]:
            parts.append(f"<div class='cell'>{html.escape(s['label'])}<br>"
                         f"{_img(_png(s['state']), 'state')}"
                         f"{_img(_png(s['saliency']), 'saliency')}</div>")  # fmt: skip
    parts.append("</body></html>")
    return "\n".join(parts)


COLOUR_NAMES = [
    "blue",
    "orange",
    "green",
    "red",
    "purple",
    "brown",
    "pink",
    "grey",
    "olive",
    "cyan",
]  # tab10's


def _legend(report):
    if report["kind"] == "stack":
        return ("States show the last three frames as R, G, B: grey is unchanged, blue the "
                "newest change, then green, then red.")  # fmt: skip
    names = report.get("channels") or [f"channel {i}" for i in range(report["num_channels"])]
    colours = ", ".join(f"{n} {COLOUR_NAMES[i % 10]}" for i, n in enumerate(names))
    return f"Each channel of the newest frame has its own colour: {colours}."


def _channel_names(info):
    """MinAtar's object names for its channels (minatar's own table), else None."""
    if info.domain != "minatar":
        return None
    from qzoo.envs.gym import minatar_environment

    channels = minatar_environment()(info.name.split("/", 1)[1]).env.channels
    return sorted(channels, key=channels.get)


def _feature_figure(report):
    from matplotlib.figure import Figure

    sal = report["feature_saliency"]
    figure = Figure(figsize=(8, 1.5 + 0.3 * sal.shape[1]), layout="constrained")
    ax = figure.subplots()
    image = ax.imshow(sal.T, aspect="auto", cmap="inferno", interpolation="nearest")
    ax.set_xlabel("step of the episode")
    ax.set_ylabel("input feature")
    ax.set_yticks(range(sal.shape[1]))
    figure.colorbar(image, ax=ax, label="|d max_a Q / d x|")
    return figure


def _figure_png(figure):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()


def sheet(report):
    """The PNG sheet: guided-backprop rows (one per conv layer: map, state, ...), then
    the saliency rows (states, saliency)."""
    from matplotlib.figure import Figure

    if "feature_saliency" in report:
        figure = _feature_figure(report)
        figure.suptitle(report["title"], fontsize=9)
        return figure
    layers, sal = report["layers"], report["saliency"]
    cols = max([2 * len(layer["maps"]) for layer in layers] + [len(sal)])
    rows = len(layers) + 2
    figure = Figure(figsize=(1.6 * cols, 1.8 * rows + 0.5), layout="constrained")
    axes = figure.subplots(rows, cols, squeeze=False)
    for ax in axes.ravel():
        ax.set_axis_off()
    for r, layer in enumerate(layers):
        for c, m in enumerate(layer["maps"]):
            for offset, (key, what) in enumerate((("guided", "guided"), ("state", "state"))):
                ax = axes[r, 2 * c + offset]
                ax.imshow(m[key], interpolation="nearest")
                ax.set_title(f"{layer['name'].split(':')[0]} map {c}: {what}", fontsize=7)
    for c, s in enumerate(sal):
        axes[-2, c].imshow(s["state"], interpolation="nearest")
        axes[-2, c].set_title(s["label"].split(":")[0], fontsize=7)
        axes[-1, c].imshow(s["saliency"], interpolation="nearest")
        axes[-1, c].set_title("saliency of Q", fontsize=7)
    figure.suptitle(report["title"] + "\n" + _legend(report), fontsize=9)
    return figure
