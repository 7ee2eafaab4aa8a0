"""`qzoo eval RUN`: evaluates a run's network and prints statistics of its returns.

  qzoo eval RUN [--checkpoint K|latest] [--episodes N | --frames F] [--epsilon E]
                [--protocol dqn_zoo|machado|noop30] [--seed S] [--num-envs N] [--json]

The network is the latest one or that of iteration K (kept by --snapshot-interval);
RUN may also be a model folder `qzoo export` wrote (its one network).
The environment is the run's (game, frame stack, preprocessing), built afresh and
seeded from --seed alone: the same command prints the same numbers. Statistics are
the mean, median, min, max and standard deviation (over episodes, numpy's population
std) of the raw returns and of the human-normalized returns (Atari's 57 games; n/a
elsewhere). With --frames, the episodes completed within F frames count, and if none
did, the partial returns (as DQN Zoo's evaluation phase).
"""

import dataclasses
import json
import math

import numpy as np

from qzoo import envs
from qzoo.acting.from_config import evaluation_policy
from qzoo.configuration import option
from qzoo.configuration.values import Int
from qzoo.envs.scores import normalized_return
from qzoo.errors import UserError
from qzoo.replay.frames import FrameStacker
from qzoo.run import threads
from qzoo.streams import Streams
from qzoo.terminal import progress_bar
from qzoo.tools import args as args_lib
from qzoo.tools.runs import acting_config, load_run

DEFAULT_EPISODES = 10


@dataclasses.dataclass
class EvalOptions:
    # fmt: off
    checkpoint: object = option("latest", "eval", "the network: latest, or iteration K's",
                                args_lib.Snapshot())
    episodes: int = option(None, "eval", "episodes to play", Int(1, 10**6))
    frames: int = option(None, "eval", "frames to play instead of a number of episodes",
                         Int(1, 10**10))
    epsilon: float = option(None, "eval", "epsilon-greedy's epsilon", args_lib.EPSILON)
    protocol: str = option(None, "eval", "Atari protocol: dqn_zoo, machado (sticky actions), "
                           "noop30 (Mnih et al. 2015: 30 no-ops, 5-minute episodes)",
                           args_lib.PROTOCOL)
    seed: int = option(0, "eval", "seed of the environments and of exploration", args_lib.SEED)
    num_envs: int = option(1, "eval", "environments stepped together (each plays its share "
                           "of --episodes)", Int(1, 1024))
    json: bool = option(False, "eval", "print one JSON object instead of a table")
    # fmt: on


SHOWN = {
    "episodes": f"{DEFAULT_EPISODES}",
    "frames": "none",
    "epsilon": "the run's evaluation epsilon; 0.05 under noop30",
    "protocol": "the run's",
}


def main(argv):
    """`qzoo eval` (see the module docstring)."""
    run_dir, opts, given = args_lib.parse_tool(
        EvalOptions, argv, "qzoo eval", __doc__.split("\n\n")[1].strip(),
        "Evaluates a run's network; prints the statistics of its returns.",
        positional="run_folder", shown=SHOWN,
    )  # fmt: skip
    if {"episodes", "frames"} <= given:
        raise UserError("--episodes and --frames: expected one of the two, not both")
    iteration = None if opts.checkpoint == "latest" else opts.checkpoint
    run = load_run(run_dir, iteration)
    threads.apply(run.config)
    config, protocol, epsilon = acting_config(run, opts.protocol, opts.epsilon)
    episodes = None if opts.frames else opts.episodes or DEFAULT_EPISODES
    result = evaluate(run, config, epsilon, opts.seed, opts.num_envs, episodes, opts.frames)
    result = {"run": str(run_dir), "checkpoint": run.iteration,
              "latest": run.iteration == run.rows[-1]["iteration"], "protocol": protocol,
              "epsilon": epsilon, "seed": opts.seed, "num_envs": opts.num_envs, **result}  # fmt: skip
    if opts.json:
        print(json.dumps(result))
    else:
        print(report(result))


def evaluate(run, config, epsilon, seed, num_envs=1, episodes=None, frames=None):
    """Plays `run`'s network in fresh environments of `config`, seeded by `seed`, for
    `episodes` episodes (each environment its share, so that short episodes are not
    favoured) or `frames` frames. Returns {"episodes", "frames", "partial", "returns",
    "return": statistics, "normalized_return": statistics or None outside Atari}.

    The loop is an Actor's (env, FrameStacker, Policy) written out, because the quotas
    need to know which environment finished an episode, which an Actor does not say."""
    stream = Streams(seed).evaluation  # evaluation's own stream, as in a run
    policy = evaluation_policy(run.network, config, num_envs)  # R2D1's: its states
    env = envs.make(config, num_envs, seed, eval_mode=True)
    quota = None
    if episodes is not None:
        quota = np.full(num_envs, episodes // num_envs) + (
            np.arange(num_envs) < episodes % num_envs
        )
    done = [[] for _ in range(num_envs)]
    current, played = np.zeros(num_envs), 0
    bar = progress_bar(episodes or frames, "eval", "episode" if episodes else "frame")
    try:
        stacker = FrameStacker(num_envs, run.info.frame_shape, run.info.frame_dtype,
                               config.frame_stack)  # fmt: skip
        step = env.reset(seed=int(stream.numpy.integers(1, 2**31)))
        obs = stacker.push(step.frame, step.first)
        eps = np.full(num_envs, epsilon, np.float32)
        while True:
            policy.observe(step.first, step.reward)
            actions, _ = policy(obs, eps, stream.torch)
            step = env.step(actions)
            obs = stacker.push(step.frame, step.first)
            current[step.first] = 0.0
            current += np.where(step.first, 0.0, step.reward)
            new_frames = step.real_steps * config.action_repeats
            played += new_frames
            finished = 0
            for i in np.flatnonzero(step.last):
                if quota is None or len(done[i]) < quota[i]:
                    done[i].append(float(current[i]))
                    finished += 1
            if bar is not None:
                bar.update(finished if episodes else new_frames)
            if quota is not None and all(len(d) >= q for d, q in zip(done, quota)):
                break
            if frames is not None and played >= frames:
                break
    finally:
        env.close()
        if bar is not None:
            bar.close()
    returns = [r for env_returns in done for r in env_returns]
    partial = not returns
    if partial:  # nothing finished within --frames: DQN Zoo reports the partial return
        returns = current.tolist()
    normalized = [normalized_return(run.info.game, r) for r in returns]
    return {
        "episodes": 0 if partial else len(returns),
        "frames": played,
        "partial": partial,
        "return": statistics(returns),
        "normalized_return": None if math.isnan(normalized[0]) else statistics(normalized),
        "returns": returns,
    }


def statistics(values):
    """Mean, median, min, max and (population) std of `values`."""
    values = np.asarray(values, np.float64)
    return {"mean": float(values.mean()), "median": float(np.median(values)),
            "min": float(values.min()), "max": float(values.max()),
            "std": float(values.std())}  # fmt: skip


def report(result):
    """The table `qzoo eval` prints."""
    which = "latest" if result["latest"] else "kept network"
    protocol = f"protocol {result['protocol']}; " if result["protocol"] else ""
    head = (
        f"{result['run']}: iteration {result['checkpoint']} ({which}); {protocol}"
        f"epsilon {result['epsilon']:g}; seed {result['seed']}; {result['num_envs']} "
        f"environment{'s' if result['num_envs'] > 1 else ''}"
    )
    if result["partial"]:
        played = f"no episode finished in {result['frames']:,} frames: partial returns"
    else:
        played = f"{result['episodes']} episodes, {result['frames']:,} frames"
    keys = ("mean", "median", "min", "max", "std")
    lines = [head, played, f"{'':12s}" + "".join(f"{k:>11s}" for k in keys)]
    for name, key in (("return", "return"), ("normalized", "normalized_return")):
        stats = result[key]
        cells = [f"{stats[k]:11.3f}" for k in keys] if stats else [f"{'n/a':>11s}"] * len(keys)
        lines.append(f"{name:12s}" + "".join(cells))
    return "\n".join(lines)
