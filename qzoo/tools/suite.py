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
import json
import os
import shlex
import signal
import subprocess
import sys
import time

from qzoo.config.options import Bool, Int, Real, Text
from qzoo.config.schema import option
from qzoo.errors import UserError, shown

DONE = "DONE"  # written in a run folder when its `qzoo train` ended well (runs/lane.sh's too)
ATARI100K = "atari100k"
BIG = ("nature_cnn", "dopamine_cnn")  # torsos whose auto thread count is above 1 (threads.py)
MOST_THREADS = 4  # threads.py's largest auto count


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


@dataclasses.dataclass(eq=False)  # a key of the running runs: by identity
class Run:
    """One run of the suite: what it is, where, and the command that trains it."""

    index: int
    agent: str
    game: str  # the env as qzoo names it (config.env)
    seed: int
    folder: str
    config: object
    command: list
    threads: int = 1  # PyTorch threads it will use
    env: dict = dataclasses.field(default_factory=dict)  # variables set for it

    @property
    def name(self):
        return f"{self.agent} {os.path.basename(self.folder)}"

    @property
    def log(self):
        return self.folder + ".log"


def main(argv):
    """`qzoo suite ...` or `qzoo suite report ...`; returns the exit status."""
    if argv and argv[0] == "report":
        from qzoo.tools import suite_report

        return suite_report.main(argv[1:])
    own, extra = split_argv(argv)
    from qzoo.tools.args import parse_tool

    _, options, _ = parse_tool(
        SuiteOptions, own, "qzoo suite", USAGE, __doc__.split("\n\n", 2)[2], shown=SHOWN
    )
    runs = plan(options, extra)
    todo = [r for r in runs if state(r)[0] != "complete"]
    jobs, why = choose_jobs(todo, options.jobs)
    share_threads(todo, jobs)
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


def _names(text, what):
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise UserError(f"--{what}: bad value {shown(text)}; expected names, comma-separated")
    return list(dict.fromkeys(names))


def parse_seeds(text):
    """'1,2,5-7' -> [1, 2, 5, 6, 7] (duplicates dropped, order kept)."""
    expected = "integers in [0, 2^32), comma-separated, or ranges such as 1-3"
    seeds = []
    for part in text.split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        try:
            numbers = [int(low)] if not dash else list(range(int(low), int(high) + 1))
        except ValueError:
            numbers = []
        if not numbers or not all(0 <= s < 2**32 for s in numbers):
            raise UserError(f"--seeds: bad value {shown(text)}; expected {expected}")
        seeds += numbers
    return list(dict.fromkeys(seeds))


def expand_games(text):
    """The games named in --games, `atari100k` standing for Atari 100k's 26."""
    from qzoo import data

    games = []
    for name in _names(text, "games"):
        games += list(data.atari100k_games()) if name.lower() == ATARI100K else [name]
    return list(dict.fromkeys(games))


def check_extra(extra):
    """Refuses train options the suite sets itself (one line naming the right option)."""
    for token in extra:
        name = token.partition("=")[0]
        if name in OWN_TRAIN_OPTIONS:
            raise UserError(f"{name} after --: {OWN_TRAIN_OPTIONS[name]}")


def train_config(agent, game, seed, folder, extra):
    """The Config `qzoo train` would build from the run's command, checked as it checks
    it (UserError, one line, before any run starts)."""
    from qzoo.cli import main as cli
    from qzoo.config.schema import build_config

    argv = [agent, "--env", game, "--seed", str(seed), "--run-dir", folder, *extra]
    options = cli.parse(cli.train_parser(agent, argv), argv)
    options.pop("agent", None)
    return build_config(agent, options, strict=True)


def plan(options, extra):
    """The suite's runs, in order (seed, then agent, then game: one seed of every game
    comes first), each with its checked config and command. UserError on bad input."""
    from qzoo import envs
    from qzoo.config import schema as config_lib

    if options.agents is None:
        raise UserError("suite needs --agents, e.g. --agents drq_eps (qzoo agents lists them)")
    if options.games is None:
        raise UserError("suite needs --games, e.g. --games pong,breakout or --games atari100k")
    agents = _names(options.agents, "agents")
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


def last_iteration(folder):
    """The last iteration in the folder's results.csv, None where there is none."""
    import csv

    try:
        with open(os.path.join(folder, "results.csv"), newline="", encoding="utf-8") as f:
            rows = [r for r in csv.reader(f) if r]
        column = rows[0].index("iteration")
        return int(float(rows[-1][column])) if len(rows) > 1 else None
    except (OSError, ValueError, IndexError, UnicodeDecodeError, csv.Error):
        return None


def saved_iterations(folder):
    """The run's own number of iterations, from its config.json (None if unreadable)."""
    try:
        with open(os.path.join(folder, "config.json"), "rb") as f:
            value = json.loads(f.read().decode("utf-8")).get("iterations")
        return value if type(value) is int else None
    except (OSError, ValueError, AttributeError):
        return None


def is_complete(folder, wanted=None):
    """A run that needs nothing more: the suite's DONE file, or a results.csv that
    reached its config's last iteration; and, given `wanted` (the iterations the
    command asks for), no fewer iterations than that (a longer run is for `qzoo train`
    to refuse or, with --accept-changes iterations, to extend)."""
    total = saved_iterations(folder)
    if wanted is not None and total is not None and total < wanted:
        return False
    if os.path.exists(os.path.join(folder, DONE)):
        return True
    last = last_iteration(folder)
    return last is not None and total is not None and last >= total


def state(run):
    """(complete | resume | new, a few words on it)."""
    total = run.config.iterations
    if is_complete(run.folder, total):
        return "complete", f"complete ({saved_iterations(run.folder) or total} iterations)"
    last = last_iteration(run.folder)
    if last is not None:
        return "resume", f"resumes after iteration {last} of {total}"
    return "new", f"new ({total} iterations)"


def run_threads(config):
    """(PyTorch threads the run uses, whether the suite may choose them): --threads N,
    OMP_NUM_THREADS where set, 1 where auto picks 1 (small networks, a GPU, pinned or
    forking runs), else auto's count, which the suite sets."""
    from qzoo import envs
    from qzoo.config.options import resolved_torso
    from qzoo.run import threads

    if config.threads:
        return config.threads, False
    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        return max(1, int(os.environ["OMP_NUM_THREADS"])), False
    if threads.one_thread(config) or _on_gpu(config):
        return 1, False
    if resolved_torso(config, envs.resolve(config.env)[0]) not in BIG:
        return 1, False
    return 1, True


def _on_gpu(config):
    if config.device == "cuda":
        return True
    if config.device != "auto":
        return False
    import torch

    return torch.cuda.is_available()


def peak_memory(config):
    """qzoo's estimate of the run's peak memory in bytes (loop.check_peak_memory), None
    where the run does not fit even alone (its own start then says so)."""
    from qzoo import envs
    from qzoo.run.trainer import check_peak_memory

    try:
        return check_peak_memory(config, envs.describe(config))
    except UserError:
        return None


def choose_jobs(todo, jobs):
    """(runs at once, why): --jobs, else the least of the runs to do, the usable cores
    over each run's threads, and the available memory over the largest run's peak."""
    if jobs is not None:
        return jobs, "--jobs"
    if not todo:
        return 1, "nothing to run"
    from qzoo import envs
    from qzoo.run import threads
    from qzoo.run.trainer import _available_memory

    cores = threads.usable_cores()
    per_run = max(run_threads(r.config)[0] for r in todo)
    by_cores = max(1, cores // per_run)
    why = f"{cores} usable cores, {per_run} thread{'s' if per_run > 1 else ''} a run"
    by_memory, available = None, _available_memory()
    if available is not None:
        peaks = {}
        for run in todo:  # one estimate per replay: an agent's, in one domain, one size
            key = (run.agent, envs.resolve(run.config.env)[0], run.config.replay_capacity,
                   run.config.num_envs)  # fmt: skip
            if key not in peaks:
                peaks[key] = peak_memory(run.config)
        if None in peaks.values():
            by_memory = 1
        else:
            by_memory = max(1, available // max(peaks.values()))
        why += f"; memory for {by_memory}"
    jobs = max(1, min(len(todo), by_cores, by_memory or by_cores))
    return jobs, why


def share_threads(todo, jobs):
    """Sets each run's thread count; where auto's would exceed 1, the usable cores
    shared out between the runs at once (OMP_NUM_THREADS, which --threads auto follows)."""
    from qzoo.run import threads

    cores = threads.usable_cores()
    for run in todo:
        count, choose = run_threads(run.config)
        if choose:
            count = max(1, min(MOST_THREADS, cores // jobs))
            run.env = {"OMP_NUM_THREADS": str(count)}
        run.threads = count


def summary(runs, todo, out, jobs, why):
    kinds = [state(r)[0] for r in todo]
    agents = ",".join(dict.fromkeys(r.agent for r in runs))
    games = list(dict.fromkeys(r.game for r in runs))
    seeds = ",".join(str(s) for s in dict.fromkeys(r.seed for r in runs))
    shown_games = ",".join(games) if len(games) <= 4 else f"{len(games)} games"
    return (f"qzoo suite: {len(runs)} runs in {out} ({agents} x {shown_games} x seeds {seeds}): "
            f"{len(runs) - len(todo)} complete, {kinds.count('resume')} to resume, "
            f"{kinds.count('new')} to start; {jobs} at a time ({why})")  # fmt: skip


def _duration(seconds):
    seconds = int(seconds)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"


def _last_line(path):
    """The last non-empty line of a log (what a failed `qzoo train` said last)."""
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.path.getsize(path) - 8192))
            lines = [s for s in f.read().decode("utf-8", "replace").splitlines() if s.strip()]
        return lines[-1].strip() if lines else "(empty log)"
    except OSError as e:
        return f"(cannot read the log: {e.strerror})"


def _final_score(folder):
    """'eval return X (N episodes)' from the last row of results.csv, or ''."""
    import csv

    try:
        with open(os.path.join(folder, "results.csv"), newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        score = float(rows[-1]["eval_episode_return"])
        episodes = rows[-1].get("eval_num_episodes")
        shown_episodes = f" ({int(float(episodes))} episodes)" if episodes else ""
        return f": eval return {score:.4g}{shown_episodes}"
    except (OSError, ValueError, KeyError, IndexError, TypeError, csv.Error):
        return ""


# Runs the command with a SIGINT due when the suite dies, however it dies (Linux's
# PR_SET_PDEATHSIG, kept across exec): a killed suite leaves no run training unseen,
# each saves and stops. A launcher rather than Popen's preexec_fn, which is unsafe in a
# process with threads. It checks the suite is still there after setting the signal.
_LAUNCHER = """import ctypes, os, signal, sys
try:
    ctypes.CDLL(None).prctl(1, signal.SIGINT)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(130)
os.execv(sys.argv[2], sys.argv[2:])
"""


def _with_parent_death_signal(command):
    """`command`, started through _LAUNCHER on Linux (as is elsewhere)."""
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-c", _LAUNCHER, str(os.getpid()), *command]


class Scheduler:
    """Starts the runs that are not complete, `jobs` at once, and follows them."""

    def __init__(self, runs, jobs, status_period):
        self.runs, self.jobs, self.status_period = runs, jobs, status_period
        self.running = {}  # Run -> (Popen, start time)
        self.failed, self.finished, self.stopped = [], [], []
        self.signals = []

    def say(self, text):
        print(text, flush=True)

    def run(self):
        total = len(self.runs)
        pending = []
        for run in self.runs:
            kind, detail = state(run)
            if kind == "complete":
                self.say(f"[{run.index}/{total}] skip     {run.name}: {detail}")
            else:
                pending.append(run)
        handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            next_status = time.monotonic() + self.status_period
            while (pending or self.running) and not self.signals:
                while pending and len(self.running) < self.jobs:
                    self.start(pending.pop(0))
                self.poll()
                if self.status_period and time.monotonic() >= next_status and self.running:
                    self.status()
                    next_status = time.monotonic() + self.status_period
                time.sleep(0.2)
            if self.signals:
                self.stop()
        finally:
            for s, handler in handlers.items():
                signal.signal(s, handler)
        return self.conclude(pending)

    def _on_signal(self, signum, frame):
        self.signals.append(signum)
        if len(self.signals) == 2:  # a second Ctrl-C: the children are killed
            for proc, _ in self.running.values():
                _send(proc, signal.SIGKILL)

    def start(self, run):
        kind, detail = state(run)
        os.makedirs(os.path.dirname(run.folder) or ".", exist_ok=True)
        shown_env = " ".join(f"{k}={v}" for k, v in run.env.items())
        header = (f"\n=== qzoo suite {time.strftime('%Y-%m-%d %H:%M:%S')}: {shown_env}"
                  f"{' ' if shown_env else ''}{shlex.join(run.command)}\n")  # fmt: skip
        try:
            with open(run.log, "ab") as log:
                log.write(header.encode())
        except OSError as e:
            raise UserError(f"cannot write {run.log}: {e.strerror or e}") from None
        with open(run.log, "ab") as log:
            proc = subprocess.Popen(
                _with_parent_death_signal(run.command), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1", **run.env},
                start_new_session=True,  # a terminal's Ctrl-C reaches the suite alone
            )  # fmt: skip
        self.running[run] = (proc, time.monotonic())
        what = "start   " if kind == "new" else "resume  "
        self.say(f"[{run.index}/{len(self.runs)}] {what} {run.name}: {detail}; log {run.log}")

    def poll(self):
        for run, (proc, started) in list(self.running.items()):
            code = proc.poll()
            if code is None:
                continue
            del self.running[run]
            took = _duration(time.monotonic() - started)
            head = f"[{run.index}/{len(self.runs)}]"
            if code == 0:  # `qzoo train` exits 0 once every iteration is done
                _write_done(run)
                self.finished.append(run)
                self.say(f"{head} done     {run.name} in {took}{_final_score(run.folder)}")
            elif self.signals and code in (130, -signal.SIGINT, -signal.SIGKILL):
                self.stopped.append(run)
                self.say(f"{head} stopped  {run.name} after {took}")
            else:
                self.failed.append(run)
                self.say(f"{head} FAILED   {run.name} (exit {code}) after {took}: "
                         f"{_last_line(run.log)}; log {run.log}")  # fmt: skip

    def status(self):
        for run, (_, started) in self.running.items():
            last = last_iteration(run.folder)
            where = "starting" if last is None else f"iteration {last} of {run.config.iterations}"
            took = _duration(time.monotonic() - started)
            self.say(f"  running  {run.name}: {where}, {took}")

    def stop(self):
        """SIGINT to every child (each saves its run), then waits for them all."""
        if self.running:
            self.say(f"qzoo suite: stopping {len(self.running)} run"
                     f"{'s' if len(self.running) > 1 else ''}; each saves its folder "
                     "(Ctrl-C again: kill them now)")  # fmt: skip
        for proc, _ in self.running.values():
            _send(proc, signal.SIGINT)
        while self.running:
            time.sleep(0.1)
            self.poll()

    def conclude(self, pending):
        """The last line; the exit status (130 when stopped by a signal, via
        KeyboardInterrupt; 1 when a run failed; else 0)."""
        complete = sum(is_complete(r.folder, r.config.iterations) for r in self.runs)
        text = f"qzoo suite: {complete} of {len(self.runs)} runs complete"
        if self.failed:
            text += (f", {len(self.failed)} failed ("
                     + ", ".join(r.name for r in self.failed) + "; their logs say why)")  # fmt: skip
        if self.signals:
            left = len(self.runs) - complete
            self.say(f"{text}; interrupted: the same command resumes the {left} other"
                     f"{'s' if left != 1 else ''}")  # fmt: skip
            raise KeyboardInterrupt
        if self.failed:
            self.say(f"{text}; the same command retries them")
            return 1
        out = os.path.dirname(os.path.dirname(self.runs[0].folder)) if self.runs else "."
        self.say(f"{text}; the report: qzoo suite report --out {shlex.quote(out or '.')}")
        return 0


def _write_done(run):
    """The DONE file: the run ended well, with this command."""
    try:
        with open(os.path.join(run.folder, DONE), "w", encoding="utf-8") as f:
            f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(run.command)}\n")
    except OSError:
        pass  # results.csv says it too


def _send(proc, signum):
    try:
        proc.send_signal(signum)
    except ProcessLookupError:
        pass
