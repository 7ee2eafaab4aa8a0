"""`qzoo profile train|act|env`: where the time goes, and the throughput.

  qzoo profile train|act|env [--env pong] [--agent dqn] [--steps N] [--num-envs N]
                             [--top N] [--profiler cprofile|torch] [--json]

simple_dqn's three profiling scripts as one command, each N agent steps of a fresh
agent (nothing is read or written):
  env    the environment alone, random actions (profile_random.sh: the emulator's speed)
  act    the environment and greedy action selection by the network (profile_test.sh)
  train  full training steps: acting, replay writes, SGD steps and target copies on the
         run's cadence (profile_train.sh), after filling the replay to where learning
         starts (not profiled)
The steps are timed once as they are, then once under the profiler: the throughput
comes from the first, and the table (cProfile's top functions by cumulative time, or
with --profiler torch PyTorch's operators by CPU time) from the second, with each
part's share of the time (game, network acting, replay, learning), so a user can see
which one is the bottleneck.
"""

import contextlib
import cProfile
import dataclasses
import io
import json
import os
import pstats
import re
import sys
import time

import numpy as np

import qzoo.configuration as config_lib
from qzoo import envs
from qzoo.configuration import option
from qzoo.configuration.values import Choice, Int, Text
from qzoo.errors import UserError, closest
from qzoo.run import threads
from qzoo.terminal import progress_bar

KINDS = ("train", "act", "env")
# Default --steps: each well under a minute on Pong on one CPU core (timed + profiled).
STEPS = {"train": 500, "act": 1000, "env": 2000}
# The parts a step's time is split into: (file under qzoo/, function) of each.
PARTS = {
    "env": [("envs/atari.py", "step"), ("envs/atari.py", "reset"), ("envs/gym.py", "step"),
            ("envs/gym.py", "reset")],
    "act": [("acting/policy.py", "__call__")],
    "replay": [("replay/__init__.py", "add"), ("replay/__init__.py", "sample"),
               ("replay/__init__.py", "update_priorities")],
    "learn": [("learning/learner.py", "learn"), ("learning/learner.py", "update_target")],
}  # fmt: skip


@dataclasses.dataclass
class ProfileOptions:
    # fmt: off
    env: str = option("pong", "profile", "the environment: an Atari game, minatar/<game> or "
                      "a Gymnasium id, as qzoo train's --env (--game: the same)", Text())
    agent: str = option("dqn", "profile", "the preset (train and act)",
                        Choice(*config_lib.PRESETS))
    steps: int = option(None, "profile", "agent steps timed, then profiled", Int(1, 10**7))
    num_envs: int = option(1, "profile", "environments stepped together", Int(1, 1024))
    top: int = option(20, "profile", "rows of the table", Int(1, 1000))
    profiler: str = option("cprofile", "profile", "cprofile (Python functions) or torch "
                           "(PyTorch's operators)", Choice("cprofile", "torch"))
    json: bool = option(False, "profile", "print one JSON object instead of the table")
    # fmt: on


# `--game`, the option's old name, still works: it is --env.
_GAME = re.compile(r"^--game(?==|$)")


def _check_kind(kind):
    """Refuses a kind other than train, act or env (before a word after it is blamed)."""
    if kind is not None and kind not in KINDS:
        hint = closest(kind, KINDS)
        raise UserError(
            f"profile needs train, act or env, got {kind!r}"
            + (f" (did you mean {hint[0]}?)" if hint else "")
        )


def main(argv):
    """`qzoo profile` (see the module docstring)."""
    from qzoo.tools import args as args_lib

    argv = [_GAME.sub("--env", token) for token in argv]  # --game pong, --game=pong
    kind, opts, _ = args_lib.parse_tool(
        ProfileOptions, argv, "qzoo profile", __doc__.split("\n\n")[1].strip(),
        "Where the time goes in training, acting or the environment.", positional="kind",
        needs="train, act or env", shown={"steps": "train 500, act 1000, env 2000"},
        check=_check_kind,
    )  # fmt: skip
    # A replay just big enough to start learning after a short fill, DQN Zoo's cadence.
    config = config_lib.build_config(opts.agent, {
        "env": opts.env, "num_envs": opts.num_envs, "device": "cpu",
        "replay_capacity": 20_000 * opts.num_envs, "min_replay_capacity_fraction": 0.05,
    })  # fmt: skip
    threads.apply(config)
    steps = opts.steps or STEPS[kind]
    work = {"env": EnvWork, "act": ActWork, "train": TrainWork}[kind](config)
    # One bar over the replay's fill, the timed steps and the profiled ones (tqdm's small
    # cost per step falls in "other").
    work.bar = progress_bar(work.fill_steps + 2 * steps, f"profile {kind}", "step")
    try:
        work.fill()
        seconds = work.run(steps)  # timed as it is
        table, shares = profiled(work, steps, opts.profiler, opts.top)
    finally:
        work.close()
        if work.bar is not None:
            work.bar.close()
    steps *= opts.num_envs
    repeats = config.action_repeats
    result = {"kind": kind, "env": config.env, "agent": config.agent, "steps": steps,
              "num_envs": opts.num_envs, "seconds": seconds, "steps_per_second": steps / seconds,
              "frames_per_second": steps * repeats / seconds, "threads": threads_in_use(),
              "profiler": opts.profiler, "shares": shares, "top": table}  # fmt: skip
    print(json.dumps(result) if opts.json else report(result))


def threads_in_use():
    import torch

    return torch.get_num_threads()


class Work:
    """Steps to time: `fill()` (not timed) then `run(steps)`, updating `bar`."""

    bar, fill_steps = None, 0

    def fill(self):
        pass

    def tick(self, steps=1):
        if self.bar is not None:
            self.bar.update(steps)


class EnvWork(Work):
    """The vector environment alone, uniformly random actions."""

    def __init__(self, config):
        self.env = envs.make(config, config.num_envs, config.seed)
        self.rng = np.random.default_rng(0)
        self.num_actions = self.env.info.num_actions
        self.env.reset(seed=1)

    def run(self, steps):
        started = time.perf_counter()
        for _ in range(steps):
            self.env.step(self.rng.integers(self.num_actions, size=self.env.num_envs))
            self.tick()
        return time.perf_counter() - started

    def close(self):
        self.env.close()


class ActWork(Work):
    """An evaluation actor: the environment and greedy actions of a fresh network."""

    def __init__(self, config):
        from qzoo.acting.actor import Actor
        from qzoo.acting.from_config import acting_of, in_process
        from qzoo.acting.policy import Policy
        from qzoo.networks.network import make_network
        from qzoo.replay.frames import observation_shape
        from qzoo.streams import Streams

        info = envs.describe(config)
        network = make_network(config, info, observation_shape(info.frame_shape,
                                                                config.frame_stack)).eval()  # fmt: skip
        policy = Policy(network, config.tau_samples_policy)
        self.actor = Actor(acting_of(config), info, policy, Streams(config.seed).evaluation,
                           lambda _: 0.0, in_process(config), eval_mode=True)  # fmt: skip
        self.actor.start()

    def run(self, steps):
        started = time.perf_counter()
        for _ in range(steps):
            self.actor.step()
            self.tick()
        return time.perf_counter() - started

    def close(self):
        self.actor.stop()


class TrainWork(Work):
    """Training steps of a fresh run (Trainer), its replay first filled to where
    learning starts."""

    def __init__(self, config):
        from qzoo.run.trainer import Trainer

        self.trainer = Trainer(config)
        self.step_frames = config.action_repeats * config.num_envs
        self.fill_steps = -(-(config.min_replay_size + config.batch_size) // config.num_envs)

    def fill(self):
        self.trainer.train_phase(self.fill_steps * self.step_frames, self.progress)

    def run(self, steps):
        started = time.perf_counter()
        self.trainer.train_phase(steps * self.step_frames, self.progress)
        return time.perf_counter() - started

    def progress(self, frames, episodes):
        self.tick(frames // self.step_frames)

    def close(self):
        pass


def profiled(work, steps, profiler, top):
    """Runs the steps again under `profiler`; returns the table's rows and each part's
    share of the time (cProfile only: the torch profiler sees operators, not parts)."""
    if profiler == "torch":
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU])
        with _quiet_stderr():  # Kineto's start and stop lines, written by its C++ code
            prof.start()
        try:
            work.run(steps)
        finally:
            with _quiet_stderr():
                prof.stop()
        rows = sorted(prof.key_averages(), key=lambda e: -e.cpu_time_total)[:top]
        table = [{"function": e.key, "calls": e.count, "cumulative_s": e.cpu_time_total / 1e6,
                  "own_s": e.self_cpu_time_total / 1e6} for e in rows]  # fmt: skip
        return table, None
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    work.run(steps)
    profile.disable()
    total = time.perf_counter() - started
    stats = pstats.Stats(profile, stream=io.StringIO())
    entries = stats.stats  # {(file, line, name): (primitive calls, calls, own, cumulative, _)}
    shares = {}
    for part, functions in PARTS.items():
        seconds = sum(
            value[3]
            for (path, _, name), value in entries.items()
            if any(_under_qzoo(path, f) and name == n for f, n in functions)
        )
        shares[part] = seconds / total
    shares["other"] = max(0.0, 1.0 - sum(shares.values()))
    ranked = sorted(entries.items(), key=lambda item: -item[1][3])
    table = [{"function": _name(key), "calls": value[1], "cumulative_s": value[3],
              "own_s": value[2]} for key, value in ranked
             if not _under_qzoo(key[0], "tools/profile.py") and key[2] != "disable"][:top]  # fmt: skip
    return table, shares


@contextlib.contextmanager
def _quiet_stderr():
    """File descriptor 2 to /dev/null for a moment (C++ code prints there directly)."""
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def _under_qzoo(path, relative):
    return path.replace(os.sep, "/").endswith("qzoo/" + relative)


def _name(key):
    """cProfile's (file, line, function) as `qzoo/envs/atari.py:92(step)`."""
    path, line, name = key
    if path == "~":  # a builtin
        return name
    parts = path.replace(os.sep, "/").split("/")
    short = "/".join(parts[parts.index("qzoo") :]) if "qzoo" in parts else "/".join(parts[-2:])
    return f"{short}:{line}({name})"


def report(result):
    """The text `qzoo profile` prints."""
    lines = [
        (f"profile {result['kind']}: {result['agent']} on {result['env']}, {result['steps']:,} "
         f"agent steps ({result['num_envs']} env, {result['threads']} threads)"),
        (f"throughput: {result['steps_per_second']:,.0f} steps/s, {result['frames_per_second']:,.0f}"
         f" frames/s ({result['seconds']:.2f} s, not profiled)"),
    ]  # fmt: skip
    if result["shares"]:
        parts = ", ".join(f"{k} {v:.0%}" for k, v in result["shares"].items())
        lines.append(f"time by part (under cProfile): {parts}")
    unit = "cumulative s" if result["profiler"] == "cprofile" else "CPU s (with children)"
    lines.append(f"{'calls':>9s} {unit:>22s} {'own s':>9s}  function")
    if not result["top"]:
        lines.append(
            f"{'':33s}(none: no {'function' if unit[0] == 'c' else 'PyTorch operator'} ran)"
        )
    for row in result["top"]:
        lines.append(f"{row['calls']:9d} {row['cumulative_s']:22.3f} {row['own_s']:9.3f}  "
                     f"{row['function']}")  # fmt: skip
    return "\n".join(lines)
