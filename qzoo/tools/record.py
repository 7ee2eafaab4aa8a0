"""`qzoo record RUN`: records a run's agent playing, as an MP4 video.

  qzoo record RUN [--out video.mp4] [--episodes N] [--frames N] [--checkpoint K|latest]
                  [--epsilon E] [--protocol P] [--seed S] [--scale K] [--no-panel]

Atari is recorded from the emulator's own colour screen, every frame (60 per second,
the console's rate, as simple_dqn's record.sh), at full resolution scaled by --scale
(2 by default, pixels kept sharp); MinAtar and Gymnasium as screen.py draws them. A
side panel shows the score, the action and every action's Q-value (--no-panel: the
game alone). The video is H.264 in an MP4 file, written by imageio's ffmpeg plugin
(`pip install 'qzoo[video]'`: the ffmpeg binary comes in the imageio-ffmpeg wheel),
to a temporary file renamed into place when complete. Default --out:
RUN/videos/iteration-K.mp4.
"""

import dataclasses
import os
import shutil
import sys

import numpy as np

from qzoo.configuration import option
from qzoo.configuration.values import Bool, Int
from qzoo.errors import UserError
from qzoo.files import held_temporary, remove_stale, size_text
from qzoo.run import threads, tracking
from qzoo.signals import deferred
from qzoo.terminal import progress_bar
from qzoo.tools import args as args_lib
from qzoo.tools.runs import acting_config, load_run
from qzoo.tools.screen import Agent, Screen, scale_picture

SCALE = {"atari": 2, "minatar": 24, "gym": 1}  # default --scale per domain
PANEL_WIDTH = 200  # pixels


@dataclasses.dataclass
class RecordOptions:
    # fmt: off
    out: str = option(None, "record", "the MP4 file to write", args_lib.Path(".mp4"))
    episodes: int = option(1, "record", "episodes to record", Int(1, 1000))
    frames: int = option(None, "record", "stop after this many video frames",
                         Int(1, 10**8))
    checkpoint: object = option("latest", "record", "the network: latest, or iteration K's",
                                args_lib.Snapshot())
    epsilon: float = option(None, "record", "epsilon-greedy's epsilon", args_lib.EPSILON)
    protocol: str = option(None, "record", "Atari protocol: dqn_zoo, machado or noop30",
                           args_lib.PROTOCOL)
    seed: int = option(0, "record", "seed of the game and of exploration", args_lib.SEED)
    scale: int = option(None, "record", "pixels per screen pixel", Int(1, 64))
    panel: bool = option(True, "record", "a side panel with the score, action and Q-values",
                         Bool())
    # fmt: on


SHOWN = {"out": "RUN/videos/iteration-K.mp4", "frames": "whole episodes",
         "epsilon": "the run's evaluation epsilon", "protocol": "the run's",
         "scale": "2 on Atari, 24 on MinAtar, 1 elsewhere"}  # fmt: skip


def _imageio():
    """imageio, with its ffmpeg plugin's binary; UserError naming the extra if absent."""
    try:
        import imageio.v2 as imageio
        import imageio_ffmpeg

        imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError) as e:
        raise UserError(
            f"qzoo record needs imageio and imageio-ffmpeg ({e}); pip install 'qzoo[video]'"
        ) from None
    return imageio


def main(argv, say_interrupt=True):
    """`qzoo record` (see the module docstring); `say_interrupt` False: Ctrl-C prints no
    line of its own (qzoo export says its own)."""
    run_dir, opts, _ = args_lib.parse_tool(
        RecordOptions, argv, "qzoo record", __doc__.split("\n\n")[1].strip(),
        "Records a run's agent playing as an MP4 video.", positional="run_folder", shown=SHOWN,
    )  # fmt: skip
    imageio = _imageio()  # before any work: a missing extra is said at once
    run = load_run(run_dir, None if opts.checkpoint == "latest" else opts.checkpoint)
    threads.apply(run.config)
    config, _, epsilon = acting_config(run, opts.protocol, opts.epsilon)
    out = opts.out or os.path.join(run_dir, "videos", f"iteration-{run.iteration}.mp4")
    screen = Screen(run, config, opts.seed)
    agent = Agent(run, epsilon, opts.seed)
    scale = opts.scale or SCALE[run.info.domain]
    folder, suffix = os.path.dirname(os.path.abspath(out)), "-" + os.path.basename(out)
    try:
        os.makedirs(folder, exist_ok=True)
        remove_stale(folder, ".tmp-", suffix)  # a killed recording's
        tmp, held = held_temporary(folder, ".tmp-", suffix)
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from None
    try:
        # macro_block_size 2: H.264's 4:2:0 colour needs even sizes (frames are padded).
        # ffmpeg's own messages are kept off the terminal: what fails is said in one line.
        writer = imageio.get_writer(tmp, format="FFMPEG", mode="I", fps=screen.fps,
                                    codec="libx264", pixelformat="yuv420p", quality=8,
                                    macro_block_size=2, ffmpeg_log_level="fatal")  # fmt: skip
        with writer:
            returns, frames = record(writer, screen, agent, opts, scale, run.iteration)
        check_mp4(tmp, out)
        os.chmod(tmp, 0o644)  # mkstemp's files are private; a video is not
        os.replace(tmp, out)
    except OSError as e:
        raise UserError(f"cannot write {out}: {e.strerror or e}") from None
    except RuntimeError as e:  # imageio-ffmpeg's report of ffmpeg failing
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"cannot write {out}: ffmpeg failed ({first})") from None
    except KeyboardInterrupt:  # between two frames (Video.add): ffmpeg ended cleanly
        if say_interrupt:
            print(f"qzoo: interrupted; {out} was not written", file=sys.stderr)
        raise
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
        os.close(held)
    listed = ", ".join(f"{r:g}" for r in returns)
    print(f"{out}: {frames} frames at {screen.fps:g} fps; episode returns {listed or 'none'}")
    tracked = tracking.log_video(run_dir, out, run.iteration)  # a --track run: its W&B run
    if tracked:
        print(f"{out}: logged to W&B run {tracked}")


def check_mp4(path, out):
    """Refuses an MP4 file that ffmpeg did not complete: its top-level boxes must tile
    the file and hold the index (moov) and the data (mdat). imageio-ffmpeg does not
    look at ffmpeg's exit status, and ffmpeg writes the index last: a disk that fills
    up then leaves a file without it, which no player opens."""
    boxes, size = set(), os.path.getsize(path)
    with open(path, "rb") as f:
        position = 0
        while position + 8 <= size:
            f.seek(position)
            length, kind = int.from_bytes(f.read(4), "big"), f.read(4)
            if length == 1:  # a 64-bit size follows
                length = int.from_bytes(f.read(8), "big")
            elif length == 0:  # to the end of the file
                length = size - position
            if length < 8:
                break
            boxes.add(kind)
            position += length
    if position != size or not {b"moov", b"mdat"} <= boxes:
        free = size_text(shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free)
        raise UserError(f"cannot write {out}: ffmpeg did not complete it (a full disk? "
                        f"{free} free there)")  # fmt: skip


def record(writer, screen, agent, opts, scale, iteration):
    """Plays `opts.episodes` episodes (at most `opts.frames` video frames) into
    `writer`; returns the returns of the episodes completed and the frames written.
    Each step's pictures show the action being taken and the Q-values that chose it
    (the no-op start of an episode has none yet), as `qzoo play` shows them."""
    video = Video(writer, screen.action_names, scale, opts.panel, iteration, opts.frames)
    bar = progress_bar(opts.frames or opts.episodes, "record",
                       "frame" if opts.frames else "episode")  # fmt: skip
    returns = []
    try:
        step, score = screen.reset(), 0.0
        video.add(step.pictures, None, None, score, 1)
        while len(returns) < opts.episodes and not video.full:
            action, q = agent(step.obs)
            step = screen.step(action)
            score += step.reward
            video.add(step.pictures, action, q, score, len(returns) + 1)
            if bar is not None and opts.frames:
                bar.update(len(step.pictures))
            if step.last:
                returns.append(score)
                if bar is not None and not opts.frames:
                    bar.update(1)
                if len(returns) < opts.episodes and not video.full:
                    step, score = screen.reset(), 0.0
                    video.add(step.pictures, None, None, score, len(returns) + 1)
    finally:
        if bar is not None:
            bar.close()
    return returns, video.written


class Video:
    """Frames of one size: the picture scaled up, the panel beside it, padded to even
    sizes; at most `limit` of them."""

    def __init__(self, writer, names, scale, panel, iteration, limit):
        self.writer, self.names, self.scale, self.panel = writer, names, scale, panel
        self.iteration, self.limit, self.written = iteration, limit, 0
        self.size = None  # (height, width) of the game's part, from the first picture

    @property
    def full(self):
        return self.limit is not None and self.written >= self.limit

    def add(self, pictures, action, q, score, episode):
        panel = None
        for picture in pictures:
            if self.full:
                return
            picture = scale_picture(picture, self.scale)
            if self.size is None:
                lines = 5 + len(self.names)
                height = max(picture.shape[0], lines * LINE + 8) if self.panel else 0
                self.size = (max(height, picture.shape[0]) + 1) // 2 * 2, picture.shape[1]
            if self.panel and panel is None:  # one panel per step, for all its pictures
                panel = panel_image(self.size[0], self.names, action, q, score, episode,
                                    self.iteration)  # fmt: skip
            height, width = self.size
            out = np.zeros((height, (width + 1) // 2 * 2 + (PANEL_WIDTH if self.panel else 0), 3),
                           np.uint8)  # fmt: skip
            out[: picture.shape[0], : picture.shape[1]] = picture[:height, :width]
            if self.panel:
                out[:, -PANEL_WIDTH:] = panel
            with deferred():  # a frame cut in half is a corrupt packet to ffmpeg
                self.writer.append_data(out)
            self.written += 1


LINE = 13  # pixels per line of the panel's text


def panel_image(height, names, action, q, score, episode, iteration):
    """The side panel [height, PANEL_WIDTH, 3]: score, action, and a bar per action's
    Q-value (the chosen one in green)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", (PANEL_WIDTH, height), (24, 24, 24))
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    text = [f"iteration {iteration}  episode {episode}", f"score {score:g}",
            f"action {names[action] if action is not None else '-'}", "Q-values"]  # fmt: skip
    for i, line in enumerate(text):
        draw.text((6, 4 + i * LINE), line, fill=(230, 230, 230), font=font)
    top = 4 + len(text) * LINE
    if q is not None:
        low, high = float(np.min(q)), float(np.max(q))
        for i, (name, value) in enumerate(zip(names, q)):
            y = top + i * LINE
            fraction = (value - low) / (high - low) if high > low else 1.0
            colour = (90, 200, 110) if i == action else (110, 130, 170)
            draw.rectangle((96, y + 2, 96 + round(fraction * 60), y + LINE - 3), fill=colour)
            draw.text((6, y), f"{name[:9]:9s}", fill=colour, font=font)
            draw.text((160, y), f"{value:.2f}", fill=(200, 200, 200), font=font)
    return np.asarray(image)
