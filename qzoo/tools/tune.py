"""`qzoo tune`: hyperparameter search with Optuna, as rl-baselines3-zoo's --optimize.

  qzoo tune AGENT --env ENV [--trials N] [--seeds K] [--space NAME=SPEC ...] [--out DIR]
            [--storage URL] [--study NAME] [-- TRAIN OPTION ...]

A TPE sampler proposes each trial's options from the preset's search space
(config/search_spaces.py; --space NAME=SPEC narrows, widens or adds one, NAME=off
leaves it out); each trial trains seeds 1..K as ordinary run folders OUT/trial-<n>-seed-<s>
(`qzoo eval`, `plot` and `train` take them), reporting each iteration's evaluation
return to a median pruner; its value is the mean (or --aggregate iqm) of the seeds'
last evaluation returns. The train options after `--` are the same for every trial
(and are not searched).

The study is kept in a database (default sqlite:///OUT/study.db): several `qzoo tune`
processes on one --storage share its trials, each taking the next, until --trials
trials are complete or pruned. Ctrl-C, then the same command, continues the study: a
finished trial is kept; the interrupted one is marked failed and its options enqueued
again, and that retry resumes its run folders. A process killed outright leaves its
trial running until its heartbeat is older than 2 x --heartbeat seconds; then the
next trial start of any process fails it and enqueues it the same way. At the end, the
best trial is printed with the `qzoo train` commands that reproduce it.
"""

import contextlib
import dataclasses
import os
import shlex
import sys
import time
import warnings

from qzoo.configuration import option
from qzoo.configuration.values import Choice, Int, Text
from qzoo.errors import UserError
from qzoo.tools import tune_trial
from qzoo.tools.tune_space import SPEC_FORMS, parse_spaces, search_space


@dataclasses.dataclass
class TuneOptions:
    # fmt: off
    env: str = option(None, "tune", "the environment, as qzoo train's --env", Text())
    trials: int = option(50, "tune", "trials to complete or prune, over every process on the "
                         "study", Int(1, 1_000_000))
    seeds: int = option(1, "tune", "seeds per trial (1..K), each a run folder", Int(1, 1000))
    aggregate: str = option("mean", "tune", "a trial's value from its seeds' last evaluation "
                            "returns: mean or iqm (interquartile mean)", Choice("mean", "iqm"))
    out: str = option(None, "tune", "the study's folder: runs go to OUT/trial-<n>-seed-<s>",
                      Text())
    storage: str = option(None, "tune", "the study's database, an SQLAlchemy URL", Text())
    study: str = option(None, "tune", "the study's name in the storage", Text())
    sampler: str = option("tpe", "tune", "tpe (Optuna's TPESampler) or random",
                          Choice("tpe", "random"))
    sampler_seed: int = option(None, "tune", "seed of the sampler (several processes on one "
                               "study should differ)", Int(0, 2**32 - 1))
    startup_trials: int = option(5, "tune", "trials sampled at random, and completed before "
                                 "the pruner prunes (rl-baselines3-zoo's N_STARTUP_TRIALS)",
                                 Int(0, 100_000))
    warmup_iterations: int = option(None, "tune", "iterations of a trial's first seed never "
                                    "pruned", Int(0, 1_000_000))
    pruner: str = option("median", "tune", "median (Optuna's MedianPruner) or none",
                         Choice("median", "none"))
    heartbeat: int = option(60, "tune", "seconds between a running trial's heartbeats; one "
                            "silent for twice that is redone", Int(1, 86_400))
    # fmt: on


SHOWN = {"env": "none", "out": "runs/tune-<agent>-<env>", "storage": "sqlite:///OUT/study.db",
         "study": "<agent>-<env>", "sampler_seed": "none",
         "warmup_iterations": "a third of the run's iterations"}  # fmt: skip
USAGE = ("qzoo tune AGENT --env ENV [--trials N] [--seeds K] [--space NAME=SPEC ...] "
         "[--out DIR] [--storage URL] [-- TRAIN OPTION ...]")  # fmt: skip


@dataclasses.dataclass
class Plan:
    """What every trial of the study shares."""

    agent: str
    env: str
    extra: list
    seeds: list
    out: str
    iterations: int
    aggregate: str


def split_spaces(argv):
    """(argv without its --space options, their values): --space repeats."""
    rest, spaces, i = [], [], 0
    while i < len(argv):
        token = argv[i]
        if token == "--space":
            if i + 1 >= len(argv):
                raise UserError("--space: needs a value NAME=SPEC")
            spaces.append(argv[i + 1])
            i += 2
            continue
        if token.startswith("--space="):
            spaces.append(token[len("--space=") :])
        else:
            rest.append(token)
        i += 1
    return rest, spaces


def main(argv):
    """`qzoo tune AGENT ...`; returns the exit status (130 after Ctrl-C)."""
    from qzoo.tools.args import parse_tool
    from qzoo.tools.suite import check_extra, split_argv

    own, extra = split_argv(argv)
    own, spaces = split_spaces(own)
    description = (
        __doc__.split("\n\n", 2)[2] + "\n--space NAME=SPEC (repeats): NAME a train option, SPEC "
        "one of " + SPEC_FORMS + " (docs/tune.md)."
    )
    agent, options, _ = parse_tool(TuneOptions, own, "qzoo tune", USAGE, description,
                                   positional="agent", shown=SHOWN, needs="an agent")  # fmt: skip
    try:
        import optuna  # noqa: F401
    except ImportError as e:
        raise UserError(f"qzoo tune needs optuna ({e}); pip install 'qzoo[tune]'") from None
    plan, space = make_plan(agent, options, spaces, extra, check_extra)
    try:
        study = open_study(plan, options)
    except KeyboardInterrupt:
        print("qzoo tune: interrupted before the study was open; no trial had started",
              file=sys.stderr)  # fmt: skip
        return 130
    return run_study(study, plan, space, options, argv)


def make_plan(agent, options, spaces, extra, check_extra):
    """The study's plan and search space, every value checked (UserError, one line)."""
    import qzoo.configuration as config_lib
    from qzoo.cli import parser as cli
    from qzoo.configuration.environments import resolve
    from qzoo.tools.suite import train_config

    config_lib.check_agent(agent)
    if options.env is None:
        raise UserError("tune needs --env, e.g. --env CartPole-v1")
    check_extra(extra)
    given = parse_spaces(spaces)
    base = train_config(agent, options.env, 1, "", extra)
    fixed = set(cli.parse(cli.train_parser(agent, [agent, *extra]), [agent, *extra])) - {"agent"}
    space = search_space(agent, resolve(base.env)[0], given, fixed)
    if not space:
        raise UserError("--space: nothing left to search (every option is off or given after --)")
    for name, distribution in space.items():  # each bound is a run qzoo train accepts
        for value in _extremes(distribution):
            try:
                train_config(
                    agent, base.env, 1, "", [*extra, *tune_trial.option_argv({name: value})]
                )
            except UserError as e:
                raise UserError(f"--space {name}: {value!r}: {e}") from None
    out = options.out or os.path.join("runs", f"tune-{agent}-{base.env.replace('/', '_')}")
    seeds = list(range(1, options.seeds + 1))
    return Plan(agent, base.env, list(extra), seeds, out, base.iterations, options.aggregate), space


def _extremes(distribution):
    choices = getattr(distribution, "choices", None)
    return list(choices) if choices is not None else [distribution.low, distribution.high]


def open_study(plan, options):
    """The study in its storage, created or loaded; a loaded one must be this plan's.
    A refusal leaves no folder it made (OUT, the SQLite file's)."""
    import optuna

    # Optuna's own warnings ("Trial 5 failed ..." with a traceback on Ctrl-C) are not
    # the user's: qzoo tune says each trial's outcome, and an interrupt's, in one line.
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage_url = options.storage or f"sqlite:///{os.path.join(plan.out, 'study.db')}"
    made = make_folders(plan.out, storage_url)
    database = storage_url[len("sqlite:///") :] if storage_url.startswith("sqlite:///") else ""
    new_database = bool(database) and not os.path.exists(database)
    try:
        return _open_study(plan, options, storage_url)
    except BaseException:  # a refusal (or Ctrl-C) leaves none of the files it made
        # An SQLite file it made holds nothing (a full disk, say) unless another process
        # made it too and writes there: only an empty one goes.
        if new_database and os.path.isfile(database) and not os.path.getsize(database):
            with contextlib.suppress(OSError):
                os.unlink(database)
        for folder in made:
            with contextlib.suppress(OSError):
                os.rmdir(folder)
        raise


def make_folders(out, storage_url):
    """Makes OUT and the folder of an SQLite storage's file; returns those it made,
    deepest first. UserError for a file where a folder should be."""
    from qzoo.run.folder_files import os_errors

    if os.path.exists(out) and not os.path.isdir(out):
        raise UserError(f"--out {out}: a file; expected a folder (a new one, or the study's)")
    folders = [out]
    if storage_url.startswith("sqlite:///"):
        folders.insert(0, os.path.dirname(os.path.abspath(storage_url[len("sqlite:///") :])))
    made = []
    for folder in folders:
        missing, parent = [], os.path.abspath(folder or ".")
        while not os.path.exists(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        with os_errors("create", folder):
            os.makedirs(folder or ".", exist_ok=True)
        made += missing
    return sorted(set(made), key=len, reverse=True)


def _open_study(plan, options, storage_url):
    import inspect

    import optuna

    kwargs = {"heartbeat_interval": options.heartbeat, "grace_period": 2 * options.heartbeat}
    names = inspect.signature(optuna.storages.RDBStorage).parameters
    kwargs["heartbeat_stale_trial_callback" if "heartbeat_stale_trial_callback" in names
           else "failed_trial_callback"] = retry_callback()  # fmt: skip
    engine = {"connect_args": {"timeout": 60}} if storage_url.startswith("sqlite") else {}
    for attempt in range(5):  # processes started together race to create the tables
        try:
            with quiet():
                storage = optuna.storages.RDBStorage(storage_url, engine_kwargs=engine, **kwargs)
            break
        except Exception as e:  # noqa: BLE001 (SQLAlchemy's errors: a bad URL, no server)
            cause = str(getattr(e, "orig", None) or e).lower()  # the driver's words, not SQL's
            race = any(w in cause for w in ("exists", "unique", "locked", "no such"))
            if attempt == 4 or not storage_url.startswith("sqlite") or not race:  # said at once
                raise UserError(
                    f"--storage: cannot open {storage_url!r} ({_first_line(e)})"
                ) from None
            time.sleep(0.5 + attempt)
    warmup = options.warmup_iterations
    if warmup is None:
        warmup = plan.iterations // 3
    if options.sampler == "tpe":
        sampler = optuna.samplers.TPESampler(n_startup_trials=options.startup_trials,
                                             seed=options.sampler_seed)  # fmt: skip
    else:
        sampler = optuna.samplers.RandomSampler(seed=options.sampler_seed)
    if options.pruner == "median":
        pruner = optuna.pruners.MedianPruner(n_startup_trials=options.startup_trials,
                                             n_warmup_steps=warmup)  # fmt: skip
    else:
        pruner = optuna.pruners.NopPruner()
    name = options.study or f"{plan.agent}-{plan.env.replace('/', '_')}"
    study = optuna.create_study(storage=storage, sampler=sampler, pruner=pruner,
                                study_name=name, direction="maximize", load_if_exists=True)  # fmt: skip
    what = {"agent": plan.agent, "env": plan.env, "extra": plan.extra, "seeds": plan.seeds,
            "aggregate": plan.aggregate}  # fmt: skip
    saved = study.user_attrs.get("plan")
    if saved is None:
        study.set_user_attr("plan", what)
    elif saved != what:
        differ = ", ".join(f"{k}: {saved.get(k)!r} there, {v!r} here" for k, v in what.items()
                           if saved.get(k) != v)  # fmt: skip
        raise UserError(f"study {name!r} in {storage_url} is another tune ({differ}); use its "
                        "options, or another --study")  # fmt: skip
    return study


def run_study(study, plan, space, options, argv):
    """Runs trials until --trials are complete or pruned over every process; prints
    the best. Ctrl-C: the running trial is re-enqueued, exit status 130."""
    objective = tune_trial.Objective(plan, space)
    try:
        _run_trials(study, objective, options)
    except KeyboardInterrupt:  # in a trial, or between trials (waiting, say)
        redo(study, objective.current)
        again = shlex.join(["qzoo", "tune", *argv])
        what = (
            "no trial had started"
            if objective.current is None
            else f"trial {objective.current} will be redone, resuming its run folders"
        )
        print(f"qzoo tune: interrupted; {what}; continue with: {again}", file=sys.stderr)
        return 130
    print(summary(study, plan))
    return 0


def _run_trials(study, objective, options):
    """Runs trials until --trials are complete or pruned over every process."""
    import optuna
    from optuna.trial import TrialState

    waited, checked = False, None
    while True:
        # Stale trials: looked for before each trial and once a heartbeat while waiting
        # (two waiting processes failing one trial together would each enqueue its retry).
        if checked is None or time.monotonic() - checked >= options.heartbeat:
            with quiet():
                optuna.storages.fail_stale_trials(study)
            checked = time.monotonic()
        states = [t.state for t in study.get_trials(deepcopy=False)]
        done = states.count(TrialState.COMPLETE) + states.count(TrialState.PRUNED)
        running, waiting = states.count(TrialState.RUNNING), states.count(TrialState.WAITING)
        if done >= options.trials:
            return
        if done + running + waiting >= options.trials and not waiting:
            if not waited:
                print(f"qzoo tune: {running} trial(s) running elsewhere; waiting for them (a "
                      "killed one is redone here once its heartbeat is stale)", flush=True)  # fmt: skip
                waited = True
            # Looks each second: it ends within a second of the others' last trial.
            time.sleep(min(options.heartbeat, 1.0))
            continue
        objective.current = checked = None  # current: set by the trial once it has started
        with quiet():
            study.optimize(objective, n_trials=1)
        last = (
            study.get_trials(deepcopy=False)[-1]
            if objective.current is None
            else next(t for t in study.get_trials(deepcopy=False) if t.number == objective.current)
        )
        objective.current = None  # finished: an interrupt from here on redoes nothing
        print(f"qzoo tune: trial {last.number} {outcome(last)}", flush=True)


def outcome(trial):
    """'complete, value V' or 'pruned at step S (value V)', for the log."""
    from optuna.trial import TrialState

    if trial.state == TrialState.PRUNED and trial.intermediate_values:
        step = max(trial.intermediate_values)
        return f"pruned at step {step} (eval return {trial.intermediate_values[step]:g})"
    value = f", value {trial.value:g}" if trial.value is not None else ""
    return trial.state.name.lower() + value


def redo(study, number):
    """Optuna marked the interrupted trial failed; its options are enqueued again by
    the callback Optuna runs for a trial whose heartbeat went stale, so that both ways
    of stopping end alike (its retry keeps its run folders: tune_trial.FOLDER_TRIAL)."""
    from optuna.trial import TrialState

    if number is None:
        return
    trial = next(t for t in study.get_trials(deepcopy=False) if t.number == number)
    if trial.state == TrialState.FAIL:
        with quiet():
            retry_callback()(study, trial)


def retry_callback():
    """Optuna's retry of a failed trial (RetryHeartbeatStaleTrialCallback from 4.9 on,
    RetryFailedTrialCallback before)."""
    import optuna

    storages = optuna.storages
    with quiet():
        kind = getattr(storages, "RetryHeartbeatStaleTrialCallback", None)
        return (kind or storages.RetryFailedTrialCallback)()


@contextlib.contextmanager
def quiet():
    """Optuna's warnings that its heartbeat and retry are experimental: not the user's."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.simplefilter("ignore", FutureWarning)
        yield


def summary(study, plan):
    """The study's counts, and the best trial with the commands that reproduce it."""
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    counts = {s: sum(t.state == s for t in trials) for s in TrialState}
    lines = [
        f"qzoo tune: study {study.study_name}: {counts[TrialState.COMPLETE]} complete, "
        + f"{counts[TrialState.PRUNED]} pruned, {counts[TrialState.FAIL]} failed"
    ]
    if not counts[TrialState.COMPLETE]:
        return "\n".join(lines + ["no trial completed: no best trial"])
    best = study.best_trial
    seeds = ", ".join(f"seed {s}: {best.user_attrs.get(f'seed_{s}'):g}" for s in plan.seeds)
    lines.append(f"best: trial {best.number}, value {best.value:g} ({plan.aggregate} of {seeds})")
    lines.append("  " + " ".join(f"{k}={v!r}" for k, v in best.params.items()))
    lines.append("reproduce with:")
    for seed in plan.seeds:
        folder = os.path.join(plan.out, f"best-trial-{best.number}-seed-{seed}")
        lines.append("  " + tune_trial.command(plan, seed, folder, best.params))
    return "\n".join(lines)


def _first_line(error):
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
