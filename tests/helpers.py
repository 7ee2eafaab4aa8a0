"""What several test modules share: the repository's root, tiny runs' options, and
small builders of replay contents, datasets and checks (pytest puts tests/ on the path,
as tests/conftest.py's folder)."""

import contextlib
from pathlib import Path

import numpy as np
import torch

from qzoo.configuration import build_config
from qzoo.replay import FrameStorage, Row
from qzoo.replay.device import DeviceFrameStorage

REPO = Path(__file__).resolve().parents[1]

# A tiny CartPole run, as build_config's options: a few seconds on a CPU.
TINY = {"iterations": 2, "train_frames": 400, "eval_frames": 200, "replay_capacity": 1000,
        "min_replay_capacity_fraction": 0.1, "learn_period": 4}  # fmt: skip
# Small distributional and IQN heads, for agents that would otherwise be slow to test.
SMALL_HEADS = {"mlp_hidden": 16, "num_quantiles": 8, "tau_samples_policy": 4,
               "tau_samples_s_tm1": 5, "tau_samples_s_t": 6, "num_atoms": 11}  # fmt: skip
# The same tiny run on the command line (plus what a test adds).
TINY_ARGS = ["--iterations", "2", "--train-frames", "300", "--eval-frames", "100",
             "--replay-capacity", "1000", "--min-replay-capacity-fraction", "0.1",
             "--no-tensorboard", "--no-progress"]  # fmt: skip


def replacing(base, extra):
    """The options of `base` that `extra` does not give again, then `extra`'s: a command
    line gives each option once (qzoo refuses a repeated one, --flag and --no-flag alike)."""

    def name(token):
        return token.partition("=")[0].replace("--no-", "--")

    again = {name(t) for t in extra if t.startswith("--")}
    kept, i = [], 0
    while i < len(base):
        takes_value = "=" not in base[i] and i + 1 < len(base) and not base[i + 1].startswith("--")
        width = 2 if takes_value else 1
        if name(base[i]) not in again:
            kept += base[i : i + width]
        i += width
    return [*kept, *extra]


# ---- replay contents (device replay against host replay) -------------------------
GAMMA = 0.9


def random_rows(count, num_envs, frame_shape, dtype, seed=0):
    """Rows of episodes of random lengths in each column: terminations, truncations
    (LAST without zero discount), life losses and abandoned episodes (a FIRST right
    after a row that is not LAST)."""
    rng = np.random.default_rng(seed)
    start = np.ones(num_envs, bool)
    for _ in range(count):
        first, rest = start, ~start
        last = rest & (rng.random(num_envs) < 0.2)
        zero = rest & (rng.random(num_envs) < 0.3)
        start = last | (rest & (rng.random(num_envs) < 0.05))
        frame = rng.integers(1, 256, (num_envs,) + frame_shape).astype(dtype)
        yield Row(frame, rng.integers(0, 6, num_envs), rng.choice([-1.0, 0.0, 0.5, 1.0], num_envs),
                  first, last, zero)  # fmt: skip


def pair(capacity, num_envs, frame_shape, dtype, stack, n_steps):
    args = (capacity, num_envs, frame_shape, dtype, 6, stack, n_steps, GAMMA)
    return FrameStorage(*args), DeviceFrameStorage(*args, "cpu")


def window_slots(storage):
    """Every (t, b) in the storage's window, as two int64 arrays."""
    low, high = storage.window()
    t = (storage.oldest() + np.arange(low, high)) % storage.num_rows
    t, b = np.meshgrid(t, np.arange(storage.num_envs), indexing="ij")
    return t.reshape(-1), b.reshape(-1)


def filled(capacity=46, rows=60, stack=4, n_steps=3, seed=0):
    host, device = pair(capacity, 2, (2,), np.uint8, stack, n_steps)
    for row in random_rows(rows, 2, (2,), np.uint8, seed):
        host.add(row)
        device.add(row)
    return host, device


def cartpole_config(replay_device, prioritized=False):
    return build_config("dqn", {
        "env": "CartPole-v1", "iterations": "2", "train_frames": "300", "eval_frames": "20",
        "replay_capacity": "500", "min_replay_capacity_fraction": "0.2", "threads": "1",
        "replay_device": replay_device, "prioritized": str(prioritized).lower(),
    })  # fmt: skip


def rows(trainer, n):
    from qzoo.run.trainer import WALL_CLOCK_COLUMNS

    return [{k: repr(v) for k, v in trainer.run_iteration().items() if k not in WALL_CLOCK_COLUMNS}
            for _ in range(n)]  # fmt: skip


def resumed_rows(make_trainer, folder, before, after):
    """The rows of a run saved after `before` iterations and resumed in a new trainer
    (`make_trainer()`, as a new process would build it) for `after` more."""
    from qzoo.run import checkpoint

    first = make_trainer()
    got = rows(first, before)
    path = folder / "latest.safetensors"
    checkpoint.save(path, first.state_dict())
    second = make_trainer()
    second.load_state_dict(checkpoint.load(path))
    return got + rows(second, after)


@contextlib.contextmanager
def small_disk(folder, size="64k", lazy=False):
    """A `size` tmpfs mounted at `folder` (made here), nearly filled with a file named
    filler: a real full disk. Skips where mounting is not allowed (needs root).
    `lazy`: unmount lazily (a file the test's code removed may still be held open)."""
    import subprocess

    import pytest

    folder.mkdir()
    command = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)]
    if subprocess.run(command, check=False, capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        (folder / "filler").write_bytes(b"\0" * 60_000)  # a few kB left
        yield folder
    finally:
        subprocess.run(["umount", *(["-l"] if lazy else []), str(folder)], check=True)


# ---- a guard against host synchronisation ------------------------------------------
SYNCS = ("item", "tolist", "numpy", "cpu", "__bool__", "__float__", "__int__", "__index__")


@contextlib.contextmanager
def no_host_sync():
    """Every host-copying Tensor method raises inside the block."""
    saved = {name: getattr(torch.Tensor, name) for name in SYNCS}

    def refuse(name):
        def method(self, *args, **kwargs):
            raise AssertionError(f"host sync: Tensor.{name}")

        return method

    try:
        for name in SYNCS:
            setattr(torch.Tensor, name, refuse(name))
        yield
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)


# ---- DQN Replay Dataset files ------------------------------------------------------
def episodes(writer, lengths, start=1):
    """Adds episodes of the given lengths; frame k of the stream is filled with k."""
    k, shape = start, writer.observation.shape[1:]
    for length in lengths:
        for step in range(length):
            terminal = step == length - 1
            writer.add(np.full(shape, k % 256, np.uint8), k % 5, float(k % 3) - 1, terminal)
            k += 1
    return k


def returns_until(trainer, above):
    """The evaluation returns of `trainer`'s iterations (iteration 0: untrained), up to
    the first trained one above `above`: a learning test that passed asks for no more
    iterations, which keeps the suite's learning tests short when learning is quick."""
    from qzoo.run.trainer import run

    returns = []
    for row in run(trainer):
        returns.append(row["eval_episode_return"])
        if len(returns) > 1 and returns[-1] > above:
            trainer.finish()
            break
    return returns


def ctrl_c_at_iteration(monkeypatch, iteration):
    """A Ctrl-C (KeyboardInterrupt) as the trainer starts `iteration`; returns the
    unpatched Trainer.run_iteration, for a later command that should run normally."""
    from qzoo.run import trainer as loop

    run_iteration = loop.Trainer.run_iteration

    def interrupted(self, progress=None):
        if self.iteration == iteration:
            raise KeyboardInterrupt
        return run_iteration(self, progress)

    monkeypatch.setattr(loop.Trainer, "run_iteration", interrupted)
    return run_iteration
