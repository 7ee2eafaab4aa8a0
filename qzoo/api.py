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
    if "env" in options and callable(options["env"]):
        options["env"] = user_envs.name_for(options["env"])
    try:
        return build_config(agent, options, strict=True)
    except UserError as e:
        raise ConfigError(str(e)) from None


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
    """Runs `start`; a TrainResult of its outcome."""
    from qzoo.configuration import default_run_dir

    folder = chosen.run_dir or default_run_dir(chosen)
    try:
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
    return Agent(load_run(path, iteration, device), seed)


def _looks_like_repo_id(path: str) -> bool:
    parts = path.split("/")
    return len(parts) == 2 and all(parts) and not path.startswith((".", "~"))


def evaluate(agent: Agent, episodes: int | None = None, *, frames: int | None = None,
             protocol: str | None = None, epsilon: float | None = None, seed: int = 0,
             num_envs: int = 1) -> dict:  # fmt: skip
    """Plays `agent` in fresh environments as `qzoo eval --json` does, and returns what
    it prints: "returns" (per episode), their statistics under "return" (mean, median,
    min, max, std), "normalized_return" (Atari), "episodes", "frames". `episodes`
    (default 10) or `frames`; `protocol` (Atari: dqn_zoo, machado, noop30) and
    `epsilon` default to the run's evaluation; `seed` makes it repeatable."""
    from qzoo.tools import evaluate as evaluate_lib
    from qzoo.tools.runs import Run, acting_config

    if episodes is not None and frames is not None:
        raise ValueError("episodes and frames: expected one of the two, not both")
    run = Run(agent.config, agent.info, agent.network, agent.iteration, agent.rows)
    try:
        chosen, protocol, epsilon = acting_config(run, protocol, epsilon)
    except UserError as e:
        raise ValueError(str(e)) from None
    if frames is None:
        episodes = episodes or evaluate_lib.DEFAULT_EPISODES
    result = evaluate_lib.evaluate(run, chosen, epsilon, seed, num_envs, episodes, frames)
    return {"checkpoint": agent.iteration, "protocol": protocol, "epsilon": epsilon,
            "seed": seed, "num_envs": num_envs, **result}  # fmt: skip


def register_torso(name: str, build: Callable[[tuple], Any], *, head_hidden: int = 0) -> None:
    """Makes `torso=name` (--torso name) build the network's body with `build(shape)`:
    given the observation shape ([frame stack, ...]), it returns a torch.nn.Module
    mapping a batch of observations (float32; Atari's pixels already divided by 255)
    to a batch of feature vectors (`out_features` says how many, else one forward
    pass measures it). The heads still go on top: dueling, distributional, noisy,
    ensembles; `head_hidden` units in their hidden layer (0: none). For the command
    line and other processes, register it in a module named in --gym-packages."""
    try:
        torsos.register(name, build, head_hidden)
    except UserError as e:
        raise ConfigError(str(e)) from None


__all__ = [
    "Agent", "Callback", "Config", "ConfigError", "StopAfterTime", "StopAtReturn",
    "StopTraining", "TrainResult", "UserError", "config", "evaluate", "load",
    "register_torso", "resume", "train",
]  # fmt: skip
