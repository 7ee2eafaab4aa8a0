"""Callbacks: the user's code called by a run, with each results row as it is written
(after its checkpoint is saved) and, if asked, every N training frames. A callback
stops the run by returning False or raising StopTraining; the run then keeps its last
checkpoint and resumes from it (`qzoo resume RUN`, qzoo.resume) exactly as after a
Ctrl-C. SB3's callbacks and Keras's EarlyStopping are the models."""

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

ResultsRow = dict[str, Any]


class Outcome(NamedTuple):
    """How a start of a run ended: its results rows, and why a callback stopped it
    (None: it ran to its last iteration)."""

    rows: list[ResultsRow]
    stopped: str | None


class StopTraining(KeyboardInterrupt):
    """Raised by a callback (or by qzoo for one that returned False) to stop the run.

    A KeyboardInterrupt, so that every part of a run (actor threads and processes, Ray
    actors) stops as it does on Ctrl-C, and `except Exception` in the user's code does
    not swallow it. Its message says why; qzoo.train returns it as `stopped`."""


class Callback:
    """Override `on_row`, `on_frames` or both; a plain function `f(row)` also serves as
    a callback (its `on_row`).

    `frame_period`: call `on_frames` every this many training frames (0: never). Each
    call is a Python call in the acting loop: a period of thousands of frames costs
    nothing measurable."""

    frame_period: int = 0

    def on_start(self, run_dir: str, rows: Sequence[ResultsRow]) -> None:
        """Before the first new iteration: the run folder and the rows it already has
        (a resume's)."""

    def on_row(self, row: ResultsRow) -> bool | None:
        """After each results row is saved: return False to stop the run here (None,
        what a function without a return gives, goes on)."""
        return None

    def on_frames(self, frame: int) -> bool | None:
        """Every `frame_period` training frames (`frame`: training frames so far, this
        iteration's included): return False to stop the run now; its last checkpoint
        is the last row's, and a resume redoes the iteration."""
        return None


class StopAtReturn(Callback):
    """Stops once a row's `column` (the evaluation return by default) reaches
    `threshold` (SB3's StopTrainingOnRewardThreshold)."""

    def __init__(self, threshold: float, column: str = "eval_episode_return") -> None:
        self.threshold, self.column = float(threshold), column

    def on_row(self, row: ResultsRow) -> bool | None:
        value = row.get(self.column, math.nan)
        if isinstance(value, (int, float)) and value >= self.threshold:
            raise StopTraining(
                f"{self.column} {value:g} reached {self.threshold:g} at iteration {row['iteration']}"
            )
        return None


class StopAfterTime(Callback):
    """Stops once `seconds` of wall-clock time have passed since this start of the run:
    at the first row after the budget or, with `within_iterations` (the default), at
    the first check every `frame_period` training frames, giving up that iteration's
    work so far (the run resumes from its last row)."""

    def __init__(self, seconds: float, within_iterations: bool = True,
                 frame_period: int = 1_000) -> None:  # fmt: skip
        self.seconds = float(seconds)
        self.frame_period = frame_period if within_iterations else 0
        self._started: float | None = None

    def on_start(self, run_dir: str, rows: Sequence[ResultsRow]) -> None:
        self._started = time.monotonic()

    def _check(self) -> None:
        if self._started is None:
            self._started = time.monotonic()
        spent = time.monotonic() - self._started
        if spent >= self.seconds:
            raise StopTraining(f"the wall-clock budget of {self.seconds:g} s was spent")

    def on_row(self, row: ResultsRow) -> bool | None:
        self._check()
        return None

    def on_frames(self, frame: int) -> bool | None:
        self._check()
        return None


class Callbacks:
    """The run's side of a list of callbacks (and functions): what run_folder.py calls."""

    def __init__(self, callbacks: Sequence[Callback | Callable[[ResultsRow], Any]]) -> None:
        self.callbacks = list(callbacks)
        self.frame_callbacks = [c for c in self.callbacks
                                if isinstance(c, Callback) and c.frame_period > 0]  # fmt: skip
        self._next = {id(c): c.frame_period for c in self.frame_callbacks}

    def start(self, run_dir: str, rows: Sequence[ResultsRow], frame: int) -> None:
        for callback in self.callbacks:
            if isinstance(callback, Callback):
                callback.on_start(run_dir, rows)
        for callback in self.frame_callbacks:  # the next multiple of its period
            self._next[id(callback)] = (frame // callback.frame_period + 1) * callback.frame_period

    def row(self, row: ResultsRow) -> None:
        for callback in self.callbacks:
            on_row = callback.on_row if isinstance(callback, Callback) else callback
            if _stops(on_row(row)):
                raise StopTraining(
                    f"{_name(callback)} returned False at iteration {row['iteration']}"
                )

    def frames(self, frame: int) -> None:
        """Calls each frame callback whose next multiple of its period `frame` reached."""
        for callback in self.frame_callbacks:
            if frame >= self._next[id(callback)]:
                period = callback.frame_period
                self._next[id(callback)] = (frame // period + 1) * period
                if _stops(callback.on_frames(frame)):
                    raise StopTraining(f"{_name(callback)} returned False at frame {frame:,}")

    def counting(self, progress: Callable, frame_t: Callable[[], int]) -> Callable:
        """`progress` (run/logs.py's, called with a phase's name) whose training phases
        also count their frames for the frame callbacks (`frame_t()`: training frames
        before the phase)."""

        def phase(name):
            show = progress(name)
            if name != "train":
                return show
            start, done = frame_t(), [0]

            def update(frames, episodes):
                if show is not None:
                    show(frames, episodes)
                done[0] += frames
                self.frames(start + done[0])

            return update

        return phase


def _stops(answer):
    """Whether a callback's answer stops the run: False (NumPy's too, or 0), not None."""
    return answer is not None and not answer


def _name(callback):
    return getattr(callback, "__qualname__", None) or type(callback).__qualname__
