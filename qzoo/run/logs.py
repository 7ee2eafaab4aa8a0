"""Consumers of the run generator's records: results.csv, TensorBoard, console."""

import csv
import io
import math
import sys
import time

import numpy as np

from qzoo.errors import UserError
from qzoo.files import atomic_write
from qzoo.terminal import progress_bar


class CsvLog:
    """results.csv, DQN Zoo's columns first, as a view of the rows kept in the checkpoint.

    Every `write` rewrites the whole file from all rows through a temporary file and a
    rename (DQN Zoo appends, and its issue #8 shows what a kill mid-append leaves):
    a kill leaves the old file or the new one, and a deleted, truncated or garbled
    file is repaired by the next write. A few hundred rows take milliseconds."""

    def __init__(self, path):
        self.path = path

    def check(self, rows):
        """Raises UserError if an existing results.csv was not written by qzoo for these
        rows: its first line must be their header (or the start of it: a file cut short).
        NUL bytes, cut or garbled rows after the header are damage that `write` repairs.
        With no rows, only an empty file (or NUL bytes) may be there."""
        try:
            with open(self.path, "rb") as f:
                data = f.read().replace(b"\0", b"")
        except FileNotFoundError:
            return
        if not data:
            return
        if not rows:
            raise UserError(
                f"{self.path} exists but there is no checkpoint to rebuild it from; qzoo does "
                "not overwrite it: move it away or use another --run-dir"
            )
        header = _csv_bytes([], _columns(rows)).rstrip(b"\r\n")
        first = data.split(b"\n", 1)[0].rstrip(b"\r")
        if first != header and not header.startswith(data):
            raise UserError(
                f"{self.path} was not written by qzoo for this run (its first line is not the "
                "header of the run's columns); qzoo does not overwrite it: move it away or "
                "use another --run-dir"
            )

    def write(self, rows):
        """Replaces results.csv by the header and `rows`, atomically."""
        data = _csv_bytes(rows, _columns(rows))
        atomic_write(self.path, lambda f: f.write(data))


def _columns(rows):
    """Every key of every row, in order of appearance (a newer qzoo may add a column to
    a run's later rows: they get it, the earlier rows an empty cell)."""
    return list(dict.fromkeys(key for row in rows for key in row))


def _csv_bytes(rows, columns):
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _format(v) for k, v in row.items()})
    return buffer.getvalue().encode()


def _format(value):
    if isinstance(value, np.generic):
        value = value.item()  # repr(np.float64(1.0)) is 'np.float64(1.0)' in numpy 2
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    return value


class TensorBoardLog:
    def __init__(self, folder, purge_step):
        from torch.utils.tensorboard import SummaryWriter

        self._writer = SummaryWriter(folder, purge_step=purge_step)

    def write(self, row):
        for key, value in row.items():
            if key not in ("iteration", "frame") and isinstance(value, (int, float)):
                self._writer.add_scalar(key, value, row["frame"])
        self._writer.flush()

    def close(self):
        self._writer.close()


def console_line(row):
    keys = ("iteration", "frame", "eval_episode_return", "train_episode_return",
            "train_exploration_epsilon", "train_loss", "train_mean_q", "train_frame_rate")  # fmt: skip
    parts = []
    for key in keys:
        if key not in row:
            continue
        value = row[key]
        parts.append(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}")
    return " ".join(parts)


class Progress:
    """A tqdm bar per phase with frames per second, time left and recent returns."""

    def __init__(self, config, enabled):
        self.config, self.enabled = config, enabled and sys.stderr.isatty() or enabled == "force"

    def __call__(self, phase):
        if not self.enabled:
            return None
        total = self.config.train_frames if phase == "train" else self.config.eval_frames
        bar = progress_bar(total, phase, "frame", force=True)
        last = [time.perf_counter()]

        def update(frames, episodes):
            bar.update(frames)
            if episodes.completed and time.perf_counter() - last[0] > 1.0:
                last[0] = time.perf_counter()
                recent = episodes.completed[-10:]
                bar.set_postfix(
                    episodes=len(episodes.completed), ret=f"{sum(recent) / len(recent):.1f}"
                )
            if bar.n >= total:
                bar.close()

        return update
