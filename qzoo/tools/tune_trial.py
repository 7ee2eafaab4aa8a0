"""One trial of `qzoo tune`: its sampled options, then one ordinary `qzoo train` run per
seed (the run folder OUT/trial-<n>-seed-<s>), each iteration's evaluation return
reported to the pruner; the trial's value is the seeds' final evaluation returns,
aggregated (mean, or IQM)."""

import csv
import math
import os
import shlex

from qzoo.errors import Diverged, flag
from qzoo.signals import deferred
from qzoo.tools import stats
from qzoo.tools.tune_space import as_option

# A retried trial (interrupted, then re-enqueued) trains in the folders of the trial it
# redoes, whose number this user attribute keeps; a resume continues them.
FOLDER_TRIAL = "folder_trial"


def suggest(trial, name, distribution):
    """The trial's value of `name` (an enqueued trial's own), by Optuna's public API."""
    import optuna.distributions as od

    if isinstance(distribution, od.CategoricalDistribution):
        return trial.suggest_categorical(name, distribution.choices)
    if isinstance(distribution, od.IntDistribution):
        return trial.suggest_int(name, distribution.low, distribution.high, log=distribution.log)
    return trial.suggest_float(name, distribution.low, distribution.high, log=distribution.log)


def option_argv(params: dict) -> list:
    """{name: value} -> ['--name', 'value', ...], in the space's order."""
    return [token for name, value in params.items() for token in (flag(name), as_option(value))]


def train_argv(plan, seed: int, folder: str, params: dict) -> list:
    """`qzoo train`'s arguments for one seed of a trial."""
    return [plan.agent, "--env", plan.env, "--seed", str(seed), "--run-dir", folder,
            *plan.extra, *option_argv(params)]  # fmt: skip


def command(plan, seed: int, folder: str, params: dict) -> str:
    """The `qzoo train` command line that trains that run."""
    return shlex.join(["qzoo", "train", *train_argv(plan, seed, folder, params)])


def aggregate(values: list, how: str) -> float:
    """The trial's value from its seeds' returns: their mean, or their IQM."""
    if how == "iqm":
        return float(stats.iqm([values]))
    return float(sum(values) / len(values))


def saved_rows(folder: str) -> list:
    """(iteration, eval return) of the rows already in the folder's results.csv."""
    try:
        with open(os.path.join(folder, "results.csv"), newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        return [(int(r["iteration"]), float(r["eval_episode_return"])) for r in rows]
    except (OSError, ValueError, KeyError, TypeError, csv.Error):
        return []


class Objective:
    """Optuna's objective: trains a trial's seeds and returns its value. `current`
    holds the number of the trial it is running, for an interrupt to redo."""

    def __init__(self, plan, space: dict) -> None:
        self.plan, self.space, self.current = plan, space, None

    def folder(self, trial, seed: int) -> str:
        number = trial.user_attrs.get(FOLDER_TRIAL, trial.number)
        return os.path.join(self.plan.out, f"trial-{number}-seed-{seed}")

    def __call__(self, trial) -> float:
        import optuna

        from qzoo.cli.main import train_command

        self.current = trial.number
        if FOLDER_TRIAL not in trial.user_attrs:
            trial.set_user_attr(FOLDER_TRIAL, trial.number)
        params = {name: suggest(trial, name, d) for name, d in self.space.items()}
        plan, steps = self.plan, self.plan.iterations + 1
        returns = []
        for k, seed in enumerate(plan.seeds):
            folder = self.folder(trial, seed)
            print(f"qzoo tune: trial {trial.number}, seed {seed}: {command(plan, seed, folder, params)}",
                  flush=True)  # fmt: skip

            def report(iteration, value, k=k):
                """The pruner sees each iteration's evaluation return, at step
                k x (iterations + 1) + iteration for the k-th seed."""
                if math.isnan(value):
                    return
                with deferred():  # a Ctrl-C waits for the study's database write to end
                    trial.report(value, k * steps + iteration)
                    prune = trial.should_prune()
                if prune:
                    raise optuna.TrialPruned(f"seed {plan.seeds[k]}, iteration {iteration}: "
                                             f"eval return {value:g}")  # fmt: skip

            for iteration, value in saved_rows(folder):  # a resumed trial's earlier rows
                report(iteration, value)
            try:  # on Ctrl-C, qzoo tune's own line says how to continue: no resume line
                train_command(train_argv(plan, seed, folder, params),
                              on_row=lambda row: report(row["iteration"],
                                                        float(row["eval_episode_return"])),
                              resume_line=False)  # fmt: skip
            except Diverged as e:
                raise optuna.TrialPruned(f"seed {seed} diverged: {e}") from None
            rows = saved_rows(folder)
            final = rows[-1][1] if rows else math.nan
            trial.set_user_attr(f"seed_{seed}", final)
            returns.append(final)
        return aggregate(returns, plan.aggregate)
