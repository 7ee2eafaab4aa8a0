"""`qzoo play RUN`: watch a run's agent play in the terminal.

  qzoo play RUN [--checkpoint K|latest] [--epsilon E] [--protocol P] [--seed S]
                [--fps F] [--frames N]

Each agent step is drawn in 24-bit ANSI colour (two pixels per character cell, the
game shrunk to the terminal's size), next to the score, the action and the Q-values of
every action, at the game's own speed by default (--fps: agent steps per second).
Keys: p pause, n one step while paused, m take control / give it back (then the
arrows or w a s d, space for fire, or an action's key 0-9 A-Z as listed), + and -
faster and slower, q quit. The terminal is restored on exit, Ctrl-C included.

Without a terminal (stdout piped), or with --frames N, N frames (default 100) are
drawn one after another on stdout, and play exits: what a test or a log can read.
"""

import dataclasses
import os
import select
import shutil
import sys
import time

import numpy as np

from qzoo.configuration import option
from qzoo.configuration.values import Int, Real
from qzoo.run import threads
from qzoo.tools import args as args_lib
from qzoo.tools.runs import acting_config, load_run
from qzoo.tools.screen import Agent, Screen

DEFAULT_FRAMES = 100  # without a terminal
PANEL = 36  # columns of the side panel
KEYS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # an action's key, by its index
# Keys of the terminal that mean an Atari action by name (arrows send escape codes).
NAMED = {"\x1b[A": "UP", "w": "UP", "\x1b[B": "DOWN", "s": "DOWN", "\x1b[D": "LEFT",
         "a": "LEFT", "\x1b[C": "RIGHT", "d": "RIGHT", " ": "FIRE"}  # fmt: skip


@dataclasses.dataclass
class PlayOptions:
    # fmt: off
    checkpoint: object = option("latest", "play", "the network: latest, or iteration K's",
                                args_lib.Snapshot())
    epsilon: float = option(None, "play", "epsilon-greedy's epsilon", args_lib.EPSILON)
    protocol: str = option(None, "play", "Atari protocol: dqn_zoo, machado or noop30",
                           args_lib.PROTOCOL)
    seed: int = option(0, "play", "seed of the game and of exploration", args_lib.SEED)
    fps: float = option(None, "play", "agent steps shown per second", Real(0, 1000, low_open=True))
    frames: int = option(None, "play", "draw this many frames on stdout, then exit (no keys)",
                         Int(1, 10**7))
    # fmt: on


SHOWN = {"epsilon": "the run's evaluation epsilon", "protocol": "the run's",
         "fps": "the game's speed", "frames": f"until q; {DEFAULT_FRAMES} without a terminal"}  # fmt: skip


def main(argv):
    """`qzoo play` (see the module docstring)."""
    run_dir, opts, _ = args_lib.parse_tool(
        PlayOptions, argv, "qzoo play", __doc__.split("\n\n")[1].strip(),
        "Watch a run's agent play in the terminal.", positional="run_folder", shown=SHOWN,
    )  # fmt: skip
    run = load_run(run_dir, None if opts.checkpoint == "latest" else opts.checkpoint)
    threads.apply(run.config)
    config, _, epsilon = acting_config(run, opts.protocol, opts.epsilon)
    session = Session(run, Screen(run, config, opts.seed), Agent(run, epsilon, opts.seed),
                      epsilon, opts.fps)  # fmt: skip
    interactive = opts.frames is None and sys.stdin.isatty() and sys.stdout.isatty()
    if interactive:
        session.interactive()
    else:
        session.batch(opts.frames or DEFAULT_FRAMES, animate=sys.stdout.isatty())


class Session:
    """The game, the agent (or a human at the keys) and what is drawn."""

    def __init__(self, run, screen, agent, epsilon, fps):
        self.run, self.screen, self.agent, self.epsilon = run, screen, agent, epsilon
        repeats = run.config.action_repeats if run.info.domain == "atari" else 1
        self.fps = fps or screen.fps / repeats  # agent steps per second of game time
        self.step = screen.reset()
        self.score, self.episode, self.steps = 0.0, 1, 0
        self.action, self.q, self.human = None, None, False
        self.paused, self.note = False, ""

    def advance(self, human_action=None):
        """One agent step (the human's action in manual mode); a new episode after the
        last one."""
        if self.step.last:
            self.step, self.score, self.steps = self.screen.reset(), 0.0, 0
            self.episode += 1
        action, self.q = self.agent(self.step.obs)  # Q-values shown even in manual mode
        self.action = action if human_action is None else human_action
        self.step = self.screen.step(self.action)
        self.score += self.step.reward
        self.steps += 1

    def draw(self, cols, rows):
        """The frame as lines of ANSI text fitting `cols` x `rows`."""
        image = ansi_image(self.step.pictures[-1], max(8, cols - PANEL - 1), max(2, rows))
        panel = self.panel(max(rows, len(image)))
        width, height = visible_width(image[0]), max(len(image), len(panel))
        image += [""] * (height - len(image))
        panel += [""] * (height - len(panel))
        return [a + " " * (width - visible_width(a)) + " " + b for a, b in zip(image, panel)]

    def panel(self, rows):
        names = self.screen.action_names
        who = "you" if self.human else f"agent, epsilon {self.epsilon:g}"
        lines = [
            f"\x1b[1mqzoo play\x1b[0m iteration {self.run.iteration}",
            f"score {self.score:g}  episode {self.episode}  step {self.steps}",
            f"{who}; {self.fps:g} steps/s" + ("  \x1b[33mpaused\x1b[0m" if self.paused else ""),
            f"action {names[self.action] if self.action is not None else '-'}",
            "Q-values:",
        ]
        if self.q is not None:
            low, high = float(np.min(self.q)), float(np.max(self.q))
            for i, value in enumerate(self.q):
                bar = "\u2588" * round(10 * (value - low) / (high - low)) if high > low else ""
                mark = "\x1b[1;32m>" if i == self.action else " "
                key = KEYS[i] if i < len(KEYS) else " "
                lines.append(f"{mark}{key} {names[i][:12]:12s}{value:9.3f} {bar}\x1b[0m")
        lines.append("p pause n step m control +- speed q quit")
        if self.note:
            lines.append(self.note)
        return lines[:rows]

    def batch(self, frames, animate):
        """Draws `frames` frames one after another; `animate`: over each other, at --fps."""
        cols, rows = shutil.get_terminal_size((80, 24))
        out = sys.stdout
        for n in range(frames):
            started = time.perf_counter()
            self.advance()
            lines = self.draw(cols, rows - 1)
            out.write(("\x1b[H" if animate else f"frame {n + 1}\n") + "\n".join(lines) + "\n")
            out.flush()
            if animate:
                time.sleep(max(0.0, 1.0 / self.fps - (time.perf_counter() - started)))

    def interactive(self):
        """The game at --fps with the keys of the module docstring, until q."""
        with Terminal() as terminal:
            next_frame = time.perf_counter()
            while True:
                human_action, step_once = None, False
                for key in terminal.keys(max(0.0, next_frame - time.perf_counter())):
                    if key in ("q", "\x03"):
                        return
                    if key == "p":
                        self.paused = not self.paused
                    elif key == "n":
                        step_once = True
                    elif key == "m":
                        self.human = not self.human
                    elif key in ("+", "="):
                        self.fps = min(1000.0, self.fps * 1.5)
                    elif key == "-":
                        self.fps = max(0.5, self.fps / 1.5)
                    elif self.human:
                        human_action = self.key_action(key, human_action)
                if time.perf_counter() < next_frame and not step_once:
                    continue
                next_frame = time.perf_counter() + 1.0 / self.fps
                if not self.paused or step_once:
                    if self.human and human_action is None:
                        human_action = 0  # NOOP: the first of every minimal action set
                    self.advance(human_action if self.human else None)
                cols, rows = shutil.get_terminal_size((80, 24))
                terminal.show(self.draw(cols, rows - 1))

    def key_action(self, key, current):
        """The action a key means in manual mode (or `current` if none)."""
        names = self.screen.action_names
        if key in NAMED and NAMED[key] in names:
            return names.index(NAMED[key])
        index = KEYS.find(key) if len(key) == 1 else -1  # A-Z: shifted, w a s d stay arrows
        if 0 <= index < len(names):
            return index
        return current


class Terminal:
    """The terminal in cbreak mode (keys without Enter; Ctrl-C still interrupts), on the
    alternate screen without a cursor; everything restored on exit, whatever the exit."""

    def __enter__(self):
        import termios
        import tty

        self.fd = sys.stdin.fileno()
        self.saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd)
        sys.stdout.write("\x1b[?1049h\x1b[?25l\x1b[2J")
        return self

    def __exit__(self, *exc):
        import termios

        termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)
        sys.stdout.write("\x1b[0m\x1b[?25h\x1b[?1049l")
        sys.stdout.flush()
        return False

    def keys(self, timeout):
        """The keys pressed until `timeout` seconds from now (escape sequences whole)."""
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return []
        data = os.read(self.fd, 1024).decode(errors="ignore")
        keys, i = [], 0
        while i < len(data):
            size = 3 if data.startswith("\x1b[", i) else 1
            keys.append(data[i : i + size])
            i += size
        return keys

    def show(self, lines):
        sys.stdout.write("\x1b[H" + "\x1b[K\n".join(lines) + "\x1b[K\x1b[J")
        sys.stdout.flush()


def ansi_image(picture, cols, rows):
    """An RGB picture scaled to fit `cols` x `rows` character cells (nearest pixel), as
    lines of ANSI 24-bit colour: each cell is an upper half block, its foreground the
    upper pixel and its background the lower one, so a cell is two square-ish pixels."""
    height, width = picture.shape[:2]
    scale = min(cols / width, 2 * rows / height)
    out_w = max(1, int(width * scale))
    out_h = max(2, int(height * scale) // 2 * 2)
    small = picture[(np.arange(out_h) * height // out_h)][:, (np.arange(out_w) * width // out_w)]
    lines = []
    for y in range(0, out_h, 2):
        parts, previous = [], None
        for top, bottom in zip(small[y].tolist(), small[y + 1].tolist()):
            if (top, bottom) != previous:  # only colour changes are written
                parts.append("\x1b[38;2;{};{};{};48;2;{};{};{}m".format(*top, *bottom))
                previous = (top, bottom)
            parts.append("\u2580")
        lines.append("".join(parts) + "\x1b[0m")
    return lines


def visible_width(line):
    """Characters of `line` that take a column (escape sequences take none)."""
    width, i = 0, 0
    while i < len(line):
        if line[i] == "\x1b":
            i = line.index("m", i) + 1
        else:
            width, i = width + 1, i + 1
    return width
