"""One environment of a run, stepped one agent step at a time with colour pictures:
the rendering path that `qzoo play` and `qzoo record` share.

- Atari: ale-py's vector environment gives only the agent's 84x84 grayscale frames, so
  here the game runs in one `ale_py.ALEInterface` under the run's protocol (sticky
  actions, `noop_min` to `noop_max` no-op frames at the start, the frame cap) with the same
  preprocessing: the action repeated `action_repeats` times, the max of the last two
  grayscale screens, resized to 84x84 by area averaging in float32 as ale-py's vector
  environment does (tests/tools/test_tools.py checks they agree pixel for pixel). Every
  emulator frame comes back in full-resolution colour (210x160, 60 per second).
- MinAtar: its channels drawn as a colour image, one colour per channel.
- Gymnasium: `render_mode="rgb_array"` where the environment renders (CartPole needs
  pygame); otherwise the observation vector drawn as bars, with a one-line note.
"""

import collections
import sys
import warnings

import numpy as np
import torch

from qzoo.acting.exploration import epsilon_greedy
from qzoo.replay.frames import FrameStacker
from qzoo.streams import Streams

# `obs`: the stacked observation the agent acts on, [1, ...]; `pictures`: the RGB
# frames [H, W, 3] uint8 the step showed (four per Atari step, one elsewhere).
Step = collections.namedtuple("Step", "obs reward last pictures")


def area_weights(size_in, size_out):
    """An area-averaging resize along one axis (OpenCV's INTER_AREA when shrinking):
    each output pixel averages the input pixels it covers, partly covered ones in
    proportion. Returns ([size_out, K] input indices, [size_out, K] float32 weights),
    K the most input pixels one output pixel covers (unused slots weigh 0)."""
    scale = size_in / size_out
    span = int(np.ceil(scale)) + 1
    index = np.zeros((size_out, span), np.int64)
    weight = np.zeros((size_out, span), np.float32)
    for i in range(size_out):
        lo, hi = i * scale, (i + 1) * scale
        for k, j in enumerate(range(int(np.floor(lo)), min(size_in, int(np.ceil(hi))))):
            index[i, k], weight[i, k] = j, (min(hi, j + 1) - max(lo, j)) / scale
    return index, weight


def area_resize(image, rows, cols):
    """`image` [H, W] resized by the `area_weights` tables `rows` and `cols`, summed in
    float32 in OpenCV's order (along each row first, then down the columns, adding the
    terms one by one), then rounded: equal, pixel for pixel, to what ale-py's vector
    environment gives the agent. (A matrix product rounds differently on a few pixels
    per frame, and its BLAS threads crawl on a busy machine.)"""
    image = image.astype(np.float32)
    (row_index, row_weight), (col_index, col_weight) = rows, cols
    across = image[:, col_index[:, 0]] * col_weight[:, 0]
    for k in range(1, col_index.shape[1]):
        across = across + image[:, col_index[:, k]] * col_weight[:, k]
    out = across[row_index[:, 0]] * row_weight[:, 0, None]
    for k in range(1, row_index.shape[1]):
        out = out + across[row_index[:, k]] * row_weight[:, k, None]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


class AtariGame:
    """One Atari game under a run's protocol (see the module docstring)."""

    def __init__(self, config, game, seed):
        import ale_py
        from ale_py import roms

        from qzoo.envs.atari import protocol_settings

        protocol = protocol_settings(config)
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
        self.ale = ale = ale_py.ALEInterface()
        ale.setInt("random_seed", int(seed) % 2**31)
        ale.setFloat("repeat_action_probability", protocol.sticky)
        ale.setInt("max_num_frames_per_episode", protocol.max_frames)
        ale.loadROM(roms.get_rom_path(game))
        self.actions = list(ale.getMinimalActionSet())  # the order ale-py's vector env uses
        self.action_names = [a.name for a in self.actions]
        self.noop = ale_py.Action.NOOP
        self.noop_min, self.noop_max = protocol.noop_min, protocol.noop_max
        self.repeats, self.fps = config.action_repeats, 60
        self.rng = np.random.default_rng(seed)  # the no-op starts
        height, width = ale.getScreenDims()
        self._rows, self._cols = area_weights(height, 84), area_weights(width, 84)

    def frame(self, screens):
        """The agent's 84x84 frame from the last one or two grayscale screens."""
        pooled = np.maximum(screens[-2], screens[-1]) if len(screens) > 1 else screens[-1]
        return area_resize(pooled, self._rows, self._cols)

    def reset(self):
        """(frame, pictures) of a new episode after its random no-op frames."""
        ale = self.ale
        ale.reset_game()
        pictures, screens = [ale.getScreenRGB()], [ale.getScreenGrayscale()]
        for _ in range(int(self.rng.integers(self.noop_min, self.noop_max + 1))):
            ale.act(self.noop)
            if ale.game_over():  # the no-ops ended the game: start it again
                ale.reset_game()
            pictures.append(ale.getScreenRGB())
            screens = [*screens[-1:], ale.getScreenGrayscale()]
        return self.frame(screens), pictures

    def step(self, action):
        """(frame, reward, last, pictures) of one agent step."""
        ale, reward, pictures, screens = self.ale, 0.0, [], []
        for _ in range(self.repeats):
            reward += ale.act(self.actions[action])
            pictures.append(ale.getScreenRGB())
            screens = [*screens[-1:], ale.getScreenGrayscale()]
            if ale.game_over():
                break
        return self.frame(screens), reward, ale.game_over(), pictures


class VectorGame:
    """A MinAtar or Gymnasium environment through qzoo's own GymVector (one copy), so
    that episodes end and are capped as in training, with pictures added."""

    def __init__(self, config, info, seed):
        import gymnasium

        from qzoo.envs.gym import GymVector, MinAtarEnv

        self.made, self.seed, self.started = [], int(seed), False
        self.minatar = info.domain == "minatar"
        self.render = self.minatar
        if self.minatar:
            game = info.name.split("/", 1)[1]
            make, self.fps = (lambda: MinAtarEnv(game)), 10
        else:
            probe = gymnasium.make(info.name)  # its metadata: can it render, how fast
            metadata = dict(probe.metadata)
            probe.close()
            self.render = "rgb_array" in metadata.get("render_modes", ())
            kwargs = {"render_mode": "rgb_array"} if self.render else {}
            make = lambda: gymnasium.make(info.name, **kwargs)
            self.fps = metadata.get("render_fps") or 30
        self.vector = GymVector(lambda: self.made.append(make()) or self.made[-1], 1,
                                info.name, config)  # fmt: skip
        self.action_names = [f"action {a}" for a in range(info.num_actions)]

    def picture(self, frame):
        import gymnasium

        if self.minatar:
            return minatar_picture(frame)
        if self.render:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    picture = self.made[0].render()
                if picture is not None:
                    return np.ascontiguousarray(picture[..., :3], dtype=np.uint8)
            # A renderer's missing package (pygame: DependencyNotInstalled), or its errors.
            except (gymnasium.error.Error, ImportError, OSError, RuntimeError, ValueError) as e:
                first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                print(f"qzoo: note: {self.made[0].spec.id} does not render ({first}); "
                      "showing its observation as bars", file=sys.stderr)  # fmt: skip
            self.render = False
        return bars_picture(frame)

    def reset(self):
        if self.started:  # the step after the last one is the reset (next-step autoreset)
            step = self.vector.step(np.zeros(1, np.int64))
        else:
            step, self.started = self.vector.reset(self.seed), True
        return step.frame[0], [self.picture(step.frame[0])]

    def step(self, action):
        step = self.vector.step(np.array([action]))
        frame = step.frame[0]
        return frame, float(step.reward[0]), bool(step.last[0]), [self.picture(frame)]


def minatar_picture(frame):
    """[C, H, W] 0/1 channels -> [H, W, 3]: black, and each channel in its own colour
    (a later channel over an earlier one), as MinAtar's own display does."""
    from matplotlib import colormaps

    palette = (np.array(colormaps["tab10"].colors) * 255).astype(np.uint8)
    picture = np.zeros(frame.shape[1:] + (3,), np.uint8)
    for channel in range(frame.shape[0]):
        picture[frame[channel] > 0] = palette[channel % len(palette)]
    return picture


def bars_picture(frame, height=120, bar=24):
    """An observation vector as bars around a middle line (values squashed by tanh)."""
    values = np.tanh(np.asarray(frame, np.float64).reshape(-1))
    picture = np.full((height, bar * len(values), 3), 32, np.uint8)
    middle = height // 2
    picture[middle, :] = 128
    for i, value in enumerate(values):
        top, bottom = sorted((middle, middle - round(value * (middle - 2))))
        colour = (80, 200, 120) if value >= 0 else (230, 90, 80)
        picture[top : bottom + 1, i * bar + 3 : (i + 1) * bar - 3] = colour
    return picture


class Screen:
    """A run's environment for watching: `reset()` and `step(action)` return `Step`s
    with the stacked observation and the pictures; `action_names`, `fps` (pictures per
    second of game time)."""

    def __init__(self, run, config, seed):
        info = run.info
        if info.domain == "atari":
            self.game = AtariGame(config, info.game, seed)
        else:
            self.game = VectorGame(config, info, seed)
        self.action_names, self.fps = self.game.action_names, self.game.fps
        self.stacker = FrameStacker(1, info.frame_shape, info.frame_dtype, config.frame_stack)

    def reset(self):
        frame, pictures = self.game.reset()
        obs = self.stacker.push(frame[None], np.ones(1, bool))
        return Step(obs.copy(), 0.0, False, pictures)

    def step(self, action):
        frame, reward, last, pictures = self.game.step(int(action))
        obs = self.stacker.push(frame[None], np.zeros(1, bool))
        return Step(obs.copy(), reward, last, pictures)


class Agent:
    """A run's network choosing actions for one environment, epsilon-greedy, with the
    Q-values it saw. Draws from the evaluation stream of `seed`, as `qzoo eval` does."""

    def __init__(self, run, epsilon, seed):
        self.network, self.epsilon = run.network, float(epsilon)
        self.generator = Streams(seed).evaluation.torch
        kind = self.network.kind
        self.tau_samples = run.config.tau_samples_policy if kind == "implicit_quantile" else None

    @torch.no_grad()
    def __call__(self, obs):
        """(action, Q-values [A] as numpy) for one observation [1, ...]."""
        obs = torch.as_tensor(obs)
        taus = None
        if self.tau_samples is not None:
            taus = torch.rand(1, self.tau_samples, generator=self.generator)
        q = self.network(obs, taus, generator=self.generator).q_values.float()
        action = epsilon_greedy(q, torch.tensor([self.epsilon]), self.generator)
        return int(action[0]), q[0].numpy()


def scale_picture(picture, factor):
    """Nearest-neighbour upscaling by an integer factor (pixels stay sharp)."""
    if factor == 1:
        return picture
    return picture.repeat(factor, axis=0).repeat(factor, axis=1)
