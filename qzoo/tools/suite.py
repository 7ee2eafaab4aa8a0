"""`qzoo suite`: agents x games x seeds, each an ordinary run folder, some at once.

  qzoo suite --agents A[,B] --games G[,G...]|atari100k [--seeds 1,2|1-3] [--out DIR]
             [--jobs N] [--status-period S] [--dry-run] [-- TRAIN OPTION ...]
  qzoo suite report [--out DIR] [--agents A,B] [--games ...] [--reps N]  (suite_report.py)

Each run is the folder DIR/<agent>/<game>-<seed>, trained by a child process `python -m
qzoo train AGENT --env GAME --seed S --run-dir DIR/<agent>/<game>-<seed> [TRAIN OPTION
...]` (the options after `--`, the same for every run), whose output is appended to
DIR/<agent>/<game>-<seed>.log. --jobs runs go at once; by default as many as the usable
cores allow at the runs' thread count (--threads N, else 1 each) and as the available
memory allows at qzoo's estimate of a run's peak (replay, checkpoint save, 1 GiB).
Runs whose networks want several threads (Nature and Dopamine CNNs on the CPU, with
--threads auto) get the cores shared out between them (OMP_NUM_THREADS), not each all
of them. --games atari100k stands for the 26 games of Atari 100k.

Resumable: Ctrl-C (or SIGTERM) stops the running children with a SIGINT, each saving
its run as `qzoo train` does on Ctrl-C (a second Ctrl-C kills them: a run folder
survives that too, at its last checkpoint); on Linux the runs of a suite killed
outright get that SIGINT too. The same command then carries on: a
complete run (a DONE file, which the suite writes when a run ends well, or a
results.csv that reached the run's last iteration) is skipped, an interrupted one is
resumed by the same `qzoo train` command in its folder, and the rest start. One line
per run as it starts, ends or fails (with its log), a status line per running run
every --status-period seconds, and exit status 1 when a run failed.
"""

import dataclasses
import os
import shlex
import sys

from qzoo.configuration import option
from qzoo.configuration.values import Bool, Int, Real, Text
from qzoo.errors import UserError, closest
from qzoo.run.folder_files import os_errors
from qzoo.tools.suite_jobs import choose_jobs, share_threads
from qzoo.tools.suite_runs import Run, expand_games, names, parse_seeds, state
from qzoo.tools.suite_scheduler import Scheduler


@dataclasses.dataclass
class SuiteOptions:
    # fmt: off
    agents: str = option(None, "suite", "presets, comma-separated (qzoo agents lists them)",
                         Text())
    games: str = option(None, "suite", "environments, comma-separated, as --env takes them; "
                        "atari100k: Atari 100k's 26 games", Text())
    seeds: str = option("1", "suite", "seeds, comma-separated, or ranges such as 1-3", Text())
    out: str = option("runs/suite", "suite", "the suite's folder: runs go to "
                      "OUT/<agent>/<game>-<seed>, their output to <that>.log", Text())
    jobs: int = option(None, "suite", "runs at once", Int(1, 1024))
    status_period: float = option(60.0, "suite", "seconds between status lines (0: none)",
                                  Real(0))
    dry_run: bool = option(False, "suite", "list the runs, their state and commands; run nothing",
                           Bool())
    # fmt: on


SHOWN = {"agents": "none", "games": "none", "jobs": "what the cores and memory allow"}
USAGE = ("qzoo suite --agents A[,B] --games G[,G...]|atari100k [--seeds 1,2] [--out DIR] "
         "[--jobs N] [-- TRAIN OPTION ...]\n       qzoo suite report [--out DIR] ...")  # fmt: skip
# Train options the suite gives each run itself.
OWN_TRAIN_OPTIONS = {
    "--env": "give the games with --games",
    "--seed": "give the seeds with --seeds",
    "--run-dir": "the suite names each run's folder OUT/<agent>/<game>-<seed> (see --out)",
    "--help": "see qzoo train AGENT --help",
    "-h": "see qzoo train AGENT --help",
}


def main(argv):
    """`qzoo suite ...` or `qzoo suite report ...`; returns the exit status."""
    if argv and argv[0] == "report":
        from qzoo.tools import suite_report

        return suite_report.main(argv[1:])
    if argv and not argv[0].startswith("-"):  # a misspelt report, before its options
        hint = closest(argv[0], ["report"])
        raise UserError(f"suite takes options or report first, got {argv[0]!r}"
                        + (f" (did you mean {hint[0]}?)" if hint else ""))  # fmt: skip
    own, extra = split_argv(argv)
    from qzoo.tools.args import parse_tool

    _, options, _ = parse_tool(
        SuiteOptions, own, "qzoo suite", USAGE, __doc__.split("\n\n", 2)[2], shown=SHOWN
    )
    runs = plan(options, extra)
    todo = [r for r in runs if state(r)[0] != "complete"]
    jobs, why = choose_jobs(todo, options.jobs)
    share_threads(todo, jobs)
    if not options.dry_run:  # a file there, a read-only disk: one line, before any run
        if os.path.exists(options.out) and not os.path.isdir(options.out):
            raise UserError(f"--out {options.out}: a file; expected a folder")
        with os_errors("create", options.out):
            os.makedirs(options.out, exist_ok=True)
    print(summary(runs, todo, options.out, jobs, why), flush=True)
    if options.dry_run:
        for run in runs:
            kind, detail = state(run)
            print(f"[{run.index}/{len(runs)}] {kind:8s} {run.name}: {detail}\n    "
                  + " ".join(f"{k}={v}" for k, v in run.env.items())
                  + (" " if run.env else "") + shlex.join(run.command))  # fmt: skip
        return 0
    return Scheduler(runs, jobs, options.status_period).run()


def split_argv(argv):
    """(the suite's own arguments, the train options after the first `--`)."""
    if "--" not in argv:
        return list(argv), []
    i = argv.index("--")
    return list(argv[:i]), list(argv[i + 1 :])


def check_extra(extra):
    """Refuses train options the suite sets itself (one line naming the right option)."""
    for token in extra:
        name = token.partition("=")[0]
        if name in OWN_TRAIN_OPTIONS:
            raise UserError(f"{name} after --: {OWN_TRAIN_OPTIONS[name]}")


def train_config(agent, game, seed, folder, extra):
    """The Config `qzoo train` would build from the run's command, checked as it checks
    it (UserError, one line, before any run starts)."""
    from qzoo.cli import parser as cli
    from qzoo.configuration import build_config

    argv = [agent, "--env", game, "--seed", str(seed), "--run-dir", folder, *extra]
    options = cli.parse(cli.train_parser(agent, argv), argv)
    options.pop("agent", None)
    return build_config(agent, options, strict=True)


def plan(options, extra):
    """The suite's runs, in order (seed, then agent, then game: one seed of every game
    comes first), each with its checked config and command. UserError on bad input."""
    import qzoo.configuration as config_lib
    from qzoo import envs

    if options.agents is None:
        raise UserError("suite needs --agents, e.g. --agents drq_eps (qzoo agents lists them)")
    if options.games is None:
        raise UserError("suite needs --games, e.g. --games pong,breakout or --games atari100k")
    agents = names(options.agents, "agents")
    for agent in agents:
        config_lib.check_agent(agent)
    games = expand_games(options.games)
    for game in games:
        try:
            envs.interpret(game)
        except UserError as e:
            raise UserError(str(e).replace("--env:", "--games:", 1)) from None
    seeds = parse_seeds(options.seeds)
    check_extra(extra)
    configs = {}
    for agent in agents:
        for game in games:
            try:
                config = train_config(agent, game, seeds[0], options.out, extra)
            except UserError as e:
                raise UserError(f"{agent} on {game}: {e}") from None
            configs[agent, game] = config
    runs, seen = [], {}
    for seed in seeds:
        for agent in agents:
            for game in games:
                config = configs[agent, game]
                folder = os.path.join(options.out, agent, f"{config.env.replace('/', '_')}-{seed}")
                if folder in seen:  # two spellings of one game (pong, Pong)
                    raise UserError(f"--games: {seen[folder]!r} and {game!r} are the same game")
                seen[folder] = game
                config = dataclasses.replace(config, seed=seed, run_dir=folder)
                command = [sys.executable, "-m", "qzoo", "train", agent, "--env", config.env,
                           "--seed", str(seed), "--run-dir", folder, *extra]  # fmt: skip
                runs.append(Run(len(runs) + 1, agent, config.env, seed, folder, config, command))
    return runs


def summary(runs, todo, out, jobs, why):
    kinds = [state(r)[0] for r in todo]
    agents = ",".join(dict.fromkeys(r.agent for r in runs))
    games = list(dict.fromkeys(r.game for r in runs))
    seeds = ",".join(str(s) for s in dict.fromkeys(r.seed for r in runs))
    shown_games = ",".join(games) if len(games) <= 4 else f"{len(games)} games"
    return (f"qzoo suite: {len(runs)} runs in {out} ({agents} x {shown_games} x seeds {seeds}): "
            f"{len(runs) - len(todo)} complete, {kinds.count('resume')} to resume, "
            f"{kinds.count('new')} to start; {jobs} at a time ({why})")  # fmt: skip
