"""qzoo from Python: the public names the package root re-exports (`qzoo.__all__`).

    import qzoo

    result = qzoo.train("dqn", env="CartPole-v1", iterations=5,
                        callbacks=[qzoo.StopAtReturn(475)])
    agent = qzoo.load(result.run_dir)
    print(qzoo.evaluate(agent, episodes=10)["return"]["mean"])

A face on the command line's code, not a second loop: qzoo.config checks options by
the command line's rules (the same names, with underscores), and qzoo.train runs the
same run folder as `qzoo train`, so the same options give the same results.csv rows.
Everything not listed in `__all__` is internal and may change."""

import dataclasses
import math
import os
from collections.abc import Callable, Sequence
from typing import Any

from qzoo.configuration import Config, build_config, layered_values, torsos, user_envs
from qzoo.configuration import environments as environments_lib
from qzoo.errors import ConfigError, UserError
from qzoo.run.callbacks import Callback, StopAfterTime, StopAtReturn, StopTraining
from qzoo.tools.agent import Agent

CallbackLike = Callback | Callable[[dict], Any]


@dataclasses.dataclass
class TrainResult:
    """What qzoo.train and qzoo.resume return: the run folder, its config, every results
    row (results.csv's, as dicts), and why a callback stopped it (None: it ran to its
    last iteration; a stopped run resumes with qzoo.resume(run_dir))."""

    run_dir: str
    config: Config
    rows: list[dict]
    stopped: str | None = None

    @property
    def final_return(self) -> float:
        """The last evaluation's mean return (eval_episode_return of the last row that
        evaluated; NaN if none did)."""
        for row in reversed(self.rows):
            if row.get("eval_num_episodes"):
                return float(row["eval_episode_return"])
        return math.nan

    def load(self, iteration: int | None = None) -> Agent:
        """The trained agent (see qzoo.load)."""
        return load(self.run_dir, iteration)


def config(agent: str, **options: Any) -> Config:
    """The config of preset `agent` (`qzoo agents` lists them) with `options`, named
    as on the command line with underscores (`env="CartPole-v1"`, `n_steps=3`) and
    given as Python values or as text, checked by the command line's rules.

    `env` also takes a callable returning a Gymnasium environment (a function or
    class); one that other processes cannot import by name (a lambda, a nested
    function, one defined in the script being run) works with every acting mode but
    --actor-process and --ray. Raises ConfigError (a ValueError) with the line `qzoo
    train` prints for the same options."""
    try:
        return build_config(agent, _python_values(options), strict=True)
    except UserError as e:
        raise ConfigError(str(e)) from None


def _python_values(options: dict) -> dict:
    """`options` as the command line's values: an environment function by its name,
    NumPy scalars as Python's, a whole float for an integer option, a list of widths as
    text; and --gym-packages extended by the modules that registered the torso and the
    environment named, so that every process that rebuilds the run finds them."""
    import gymnasium
    import numpy as np

    from qzoo.configuration import FIELDS
    from qzoo.configuration.values import Int, Widths

    values = {}
    for name, value in options.items():
        if "-" in name:
            raise ConfigError(f"option {name!r}: expected its Python name, "
                              f"{name.replace('-', '_')}=")  # fmt: skip
        if isinstance(value, np.generic):
            value = value.item()
        domain = FIELDS[name].metadata["domain"] if name in FIELDS else None
        if isinstance(domain, Int) and isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(domain, Widths) and isinstance(value, (list, tuple)):
            value = ",".join(str(width) for width in value)
        values[name] = value
    env = values.get("env")
    if isinstance(env, gymnasium.Env):
        raise ConfigError("env: a Gymnasium environment made already; expected its name, or "
                          "a function or class that makes one (qzoo makes one per "
                          "environment it steps): env=lambda: YourEnv(...)")  # fmt: skip
    if callable(env):
        values["env"] = user_envs.name_for(env)
    modules = [m for m in (user_envs.module_of(values.get("env", "")),
                           torsos.module_of(values.get("torso", ""))) if m]  # fmt: skip
    if modules:
        given = [m.strip() for m in str(values.get("gym_packages", "")).split(",") if m.strip()]
        values["gym_packages"] = ",".join(dict.fromkeys(given + modules))
    return values


def _with_options(base: Config, options: dict) -> Config:
    """`base` with `options` over it, checked as qzoo.config checks them."""
    domain = environments_lib.resolve(base.env)[0]
    layers = layered_values(base.agent, domain, {"offline": base.offline})
    defaults = {f.name: layers.get(f.name, f.default) for f in dataclasses.fields(Config)}
    given = {k: v for k, v in dataclasses.asdict(base).items()
             if k != "agent" and v != defaults[k]}  # fmt: skip
    return config(base.agent, **{**given, **options})


def train(config_or_agent: Config | str, *, run_dir: str | None = None,
          callbacks: Sequence[CallbackLike] = (), progress: bool | None = None,
          **options: Any) -> TrainResult:  # fmt: skip
    """Trains (or, when `run_dir` holds its checkpoint, resumes) a run as `qzoo train`
    does, in its run folder (`run_dir`, default `runs/<agent>-<env>-<seed>`): the same
    checkpoints, results.csv, TensorBoard events and exact resume.

    `config_or_agent`: a Config (qzoo.config) or a preset's name; `options` go over
    it as in qzoo.config. `callbacks`: Callback objects or functions of each results
    row, called after its checkpoint is saved; one that returns False or raises
    StopTraining stops the run, which can then be resumed. `progress`: the progress
    bar (None: the config's). Ctrl-C saves as on the command line and raises
    KeyboardInterrupt; bad options raise ConfigError, a folder that is not this run's
    or damaged files UserError."""
    from qzoo.run import training

    if run_dir is not None:
        options["run_dir"] = run_dir
    if progress is not None:
        options["progress"] = progress
    if isinstance(config_or_agent, Config):
        chosen = _with_options(config_or_agent, options) if options else config_or_agent
    else:
        chosen = config(config_or_agent, **options)
    return _outcome(chosen, lambda: training.train(chosen, callbacks=callbacks))


def _outcome(chosen: Config, start: Callable) -> TrainResult:
    """Runs `start` (SIGTERM stopping it as Ctrl-C does, in the main thread: a
    scheduler's stop saves the run as the command line's does); a TrainResult."""
    from qzoo.configuration import default_run_dir
    from qzoo.signals import term_as_interrupt

    folder = chosen.run_dir or default_run_dir(chosen)
    try:
        with term_as_interrupt():
            outcome = start()
    except StopTraining as e:  # before the first row: nothing was saved
        return TrainResult(folder, chosen, [], str(e))
    return TrainResult(folder, chosen, list(outcome.rows), outcome.stopped)


def resume(run_dir: str, *, callbacks: Sequence[CallbackLike] = (), **changes: Any) -> TrainResult:
    """Resumes the run in `run_dir` with the options it was started with, as `qzoo
    resume RUN` does. `changes` may change how it runs (device, threads, progress,
    tensorboard, snapshot_interval, ...) or extend it (iterations=N, more than it
    has); any other option raises ConfigError, as it would make another run."""
    from qzoo.cli.resume import OPTIONS, config_for
    from qzoo.run import training

    refused = sorted(set(changes) - set(OPTIONS))
    if refused:
        raise ConfigError(f"--{refused[0].replace('_', '-')}: a resume keeps the run's "
                          f"options; it takes {', '.join(OPTIONS)} (to change others, start "
                          "another run)")  # fmt: skip
    try:
        chosen = config_for(run_dir, changes)
    except UserError as e:
        raise (ConfigError(str(e)) if str(e).startswith("--") else e) from None
    return _outcome(chosen, lambda: training.train(chosen, callbacks=callbacks))


def load(path: str, iteration: int | None = None, *, device: str = "cpu", seed: int = 0) -> Agent:
    """The trained agent in `path`: a run folder (its latest network, or iteration
    `iteration`'s, kept by --snapshot-interval), a model folder `qzoo export` wrote,
    or, with the hub extra (pip install 'qzoo[hub]'), a Hugging Face Hub repo id
    (owner/name) that `qzoo push` uploaded. `seed` seeds its epsilon-greedy draws."""
    import os

    from qzoo.tools.runs import load_run

    if not os.path.exists(path) and _looks_like_repo_id(path):
        from qzoo.tools.push import download

        path = download(path)
    try:
        return Agent(load_run(path, iteration, device), seed, source=path)
    except UserError as e:  # the tools' words: --checkpoint is load's `iteration` here
        raise UserError(str(e).replace("--checkpoint: bad value", "iteration:")) from None


def _looks_like_repo_id(path: str) -> bool:
    """owner/name, where no folder `owner` exists here (runs/nope is a local typo)."""
    parts = path.split("/")
    return (len(parts) == 2 and all(parts) and not path.startswith((".", "~"))
            and not os.path.exists(parts[0]))  # fmt: skip


def evaluate(agent: Agent | str, episodes: int | None = None, *, frames: int | None = None,
             protocol: str | None = None, epsilon: float | None = None, seed: int = 0,
             num_envs: int = 1) -> dict:  # fmt: skip
    """Plays `agent` (or the agent of the run or model folder `agent` names) in fresh
    environments as `qzoo eval --json` does, and returns what it prints: "returns" (per
    episode), their statistics under "return" (mean, median, min, max, std),
    "normalized_return" (Atari), "episodes", "frames". `episodes` (default 10) or
    `frames`; `protocol` (Atari: dqn_zoo, machado, noop30) and `epsilon` default to the
    run's evaluation; `seed` makes it repeatable. An environment with no time limit of
    its own needs `frames` (or the run's --max-frames-per-episode): an episode the
    agent never ends would play for ever. ValueError for a bad argument."""
    from qzoo.tools import evaluate as evaluate_lib
    from qzoo.tools.runs import Run, acting_config

    if isinstance(agent, str):
        agent = load(agent)
    if not isinstance(agent, Agent):
        raise TypeError(f"agent: {type(agent).__name__}; expected an Agent (qzoo.load) or "
                        "the path of a run or model folder")  # fmt: skip
    if episodes is not None and frames is not None:
        raise ValueError("episodes and frames: expected one of the two, not both")
    for name, value, low, high in (("episodes", episodes, 1, 10**6), ("frames", frames, 1, 10**10),
                                   ("num_envs", num_envs, 1, 1024)):  # fmt: skip
        if value is not None and (type(value) is not int or not low <= value <= high):
            raise ValueError(
                f"{name}: bad value {value!r}; expected an integer in [{low}, {high:_}]"
            )
    if epsilon is not None and not (isinstance(epsilon, (int, float)) and 0 <= epsilon <= 1):
        raise ValueError(f"epsilon: bad value {epsilon!r}; expected a number in [0, 1]")
    run = Run(agent.config, agent.info, agent.network, agent.iteration, agent.rows)
    try:
        chosen, protocol, epsilon = acting_config(run, protocol, epsilon)
    except UserError as e:
        raise ValueError(str(e)) from None
    if frames is None:
        episodes = episodes or evaluate_lib.DEFAULT_EPISODES
    result = evaluate_lib.evaluate(run, chosen, epsilon, seed, num_envs, episodes, frames)
    latest = not agent.rows or agent.iteration == agent.rows[-1]["iteration"]
    return {"run": agent.source, "checkpoint": agent.iteration, "latest": latest,
            "protocol": protocol, "epsilon": epsilon, "seed": seed, "num_envs": num_envs,
            **result}  # fmt: skip


def register_torso(name: str, build: Callable[[tuple], Any], *, head_hidden: int = 0) -> None:
    """Makes `torso=name` (--torso name) build the network's body with `build(shape)`:
    given the observation shape ([frame stack, ...]), it returns a torch.nn.Module
    mapping a batch of observations (float32; Atari's pixels already divided by 255)
    to a batch of feature vectors (`out_features` says how many, else one forward
    pass measures it). The heads still go on top: dueling, distributional, noisy,
    ensembles; `head_hidden` units in their hidden layer (0: none). For the command
    line and other processes, register it in a module named in --gym-packages."""
    import sys

    caller = sys._getframe(1).f_globals.get("__name__", "")  # the module registering it
    try:
        torsos.register(name, build, head_hidden, caller)
    except UserError as e:
        raise ConfigError(str(e)) from None


__all__ = [
    "Agent", "Callback", "Config", "ConfigError", "StopAfterTime", "StopAtReturn",
    "StopTraining", "TrainResult", "UserError", "config", "evaluate", "load",
    "register_torso", "resume", "train",
]  # fmt: skip
