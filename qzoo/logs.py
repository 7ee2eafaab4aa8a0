"""Consumers of the run generator's records: results.csv, TensorBoard, console."""

import csv
import io
import math
import os
import sys
import time


class CsvLog:
    """results.csv with DQN Zoo's columns first; re-opened in append mode for every
    row (DQN Zoo issue #8). `offset` is the byte length after the last row, kept in
    checkpoints so that a resumed run drops rows written after its checkpoint."""

    def __init__(self, path, offset=0):
        self.path = path
        self.offset = offset
        if os.path.exists(path):
            with open(path, "r+b") as f:  # rows after the checkpoint are redone
                f.truncate(offset)
        elif offset:
            self.offset = 0

    def write(self, row):
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=list(row))
        if self.offset == 0:
            writer.writeheader()
        writer.writerow({k: _format(v) for k, v in row.items()})
        data = buffer.getvalue().encode()
        with open(self.path, "ab") as f:
            f.write(data)
        self.offset += len(data)


def _format(value):
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
        from tqdm import tqdm

        total = self.config.train_frames if phase == "train" else self.config.eval_frames
        bar = tqdm(total=total, desc=phase, unit="frame", unit_scale=True, leave=False)
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
