"""The run folder: one run per folder, resumed by `qzoo resume RUN` or by re-running its
command, never lost, mixed or half-written.

  <run>/checkpoints/latest.safetensors  everything that changes, and every results row
  <run>/checkpoints/networks/           iteration-<K>.safetensors: the online network only
  <run>/checkpoints/threads.json        the PyTorch threads of the last start (threads.py)
  <run>/config.json                     the run's config, rewritten from the checkpoint's
  <run>/results.csv                     rebuilt from the checkpoint's rows, never appended to
  <run>/tensorboard/                    optional
  <run>/.lock                           flock()ed for the whole run; says by which pid, host

A start, in order: refuse a folder that is not a run; take the lock; remove temporary files left by
a kill; refuse files qzoo did not write; load the checkpoint and check it against the command (a
resume must be the same run); rebuild results.csv; then one iteration at a time: check the row is
finite, save the checkpoint, rebuild results.csv. Every refusal happens before anything is written,
and a save replaces the previous checkpoint only once the new one is complete on disk."""

import contextlib
import dataclasses
import math
import numbers
import os
import shutil
import sys

import torch

import qzoo.configuration as config_lib
from qzoo import envs
from qzoo.errors import Diverged, UserError, WorkerDied
from qzoo.files import atomic_write
from qzoo.run import checkpoint, logs, state_shapes, tracking
from qzoo.run import folder_files as folder
from qzoo.run.callbacks import Outcome, StopTraining
from qzoo.run.changes import (
    ACCEPTABLE,
    RESUMABLE,
    WHAT_DIFFERS,
    differences,
    parse_accept,
    plain,
    resume_command,
)
from qzoo.run.lock import RunLock
from qzoo.run.thread_record import record_threads

CHECKPOINT = folder.CHECKPOINT
# The online network alone, per iteration (--snapshot-interval): what `qzoo eval
# --checkpoint K` loads. A few MB each, next to the replay's GB in latest.safetensors.
NETWORKS = folder.NETWORKS
OLD_CHECKPOINT = os.path.join("checkpoints", "latest.pt")  # pickles, before format 1


# {"threads": N, "device": "cpu" or "cuda"}: the count a start ran with, which an auto
# resume keeps (threads.py). Not in config.json, whose `threads` is what the user asked.
def train(config, accept_changes=None, notes=(), on_row=None, callbacks=None, resume_line=True):
    """Trains `config` in its run folder (config.run_dir, or runs/<agent>-<env>-<seed>),
    resuming it when it holds a checkpoint; see the module docstring. Returns its
    Outcome: the results rows, and why a callback stopped it (None: it ran to its
    end). `notes` are printed to stderr once the run has passed every check
    (threads.apply's). `on_row(row)` is called after each iteration's row is saved (qzoo
    tune reports it to its pruner; an exception it raises stops the run at that saved
    checkpoint); `callbacks` (run/callbacks.py's Callbacks) too, and every N frames.
    A StopTraining from them ends the run as Ctrl-C does (raised again when no row was
    saved yet). `resume_line` False: an interrupt prints no resume command (qzoo tune
    says its own).

    `accept_changes`: names of ACCEPTABLE options that may differ from the saved run
    (default: config.accept_changes when Config has that field). Raises UserError for
    bad input and OS errors, Diverged for a non-finite loss or Q-value, and lets
    KeyboardInterrupt through after printing the command that resumes."""
    if accept_changes is None:
        accept_changes = parse_accept(config.accept_changes)
    run_dir = config.run_dir or config_lib.default_run_dir(config)
    from qzoo.run.checks import check_run

    # Before anything is written: a run the machine cannot hold, or whose options the
    # environment rules out, is refused at once.
    info = envs.describe(config)
    check_run(config, info)
    tracking.check(config)  # --track: wandb installed
    if config.ray:  # Ray installed, the address reachable, a CPU per actor
        from qzoo.distributed.cluster import connect

        connect(config)
    folder.check_is_a_run_folder(run_dir)
    with folder.os_errors("create run folder", run_dir):
        if os.path.exists(run_dir) and not os.path.isdir(run_dir):
            raise UserError(f"run folder {run_dir} is a file, not a folder; pass another --run-dir")
        created = not os.path.exists(run_dir)
        os.makedirs(run_dir, exist_ok=True)
    run = None
    try:
        with RunLock(os.path.join(run_dir, ".lock")):
            run = _Run(config, run_dir, accept_changes, info, notes, on_row, callbacks)
            try:
                run.start()
            except KeyboardInterrupt as e:
                run.write_results_after_interrupt()
                why = (
                    f"stopped by a callback: {e}" if isinstance(e, StopTraining) else "interrupted"
                )
                if not resume_line:  # the caller says how to continue (qzoo tune)
                    pass
                elif run.rows:
                    command = resume_command(run_dir)
                    print(f"qzoo: {why}; resume with: {command}", file=sys.stderr)
                else:
                    print(f"qzoo: {why} before the first checkpoint; nothing was saved",
                          file=sys.stderr)  # fmt: skip
                if not (isinstance(e, StopTraining) and run.rows):
                    raise
                return Outcome(run.rows, str(e))  # a stop asked for is not an error
            return Outcome(run.rows, None)
    except KeyboardInterrupt:
        if created and not (run and run.rows):  # this command's folder, no run in it yet
            shutil.rmtree(run_dir, ignore_errors=True)
        elif run and not run.rows:  # a user's folder: what this start wrote goes
            folder.remove_added(run_dir, run.found)
        raise
    except UserError:
        if run and not run.rows:  # no checkpoint saved: what this start wrote goes
            folder.remove_added(run_dir, run.found)
        if created:  # a refused new run leaves no empty folder behind (rmdir: if empty)
            with contextlib.suppress(OSError):
                os.rmdir(run_dir)
        raise


class _Run:
    """One start of `qzoo train` in a locked run folder."""

    def __init__(self, config, run_dir, accept, info, notes=(), on_row=None, callbacks=None):
        self.config, self.run_dir, self.accept, self.info = config, run_dir, accept, info
        self.on_row, self.callbacks = on_row, callbacks
        self.notes = [f"qzoo: note: {note}" for note in notes]
        self.ckpt_path = os.path.join(run_dir, CHECKPOINT)
        self.config_path = os.path.join(run_dir, "config.json")
        self.csv = logs.CsvLog(os.path.join(run_dir, "results.csv"))
        self.rows = []  # the rows of the checkpoint on disk: results.csv is made of them
        self.accepted = []  # messages on the changes --accept-changes let through
        self.pending = None  # (rows, inode of the checkpoint before) during a save
        self.checked = False  # whether the folder passed every check: it may be written
        self.found = set(os.listdir(run_dir))  # what a start that saves nothing leaves

    def write_results_after_interrupt(self):
        """results.csv from the checkpoint's rows, after a Ctrl-C that may have fallen
        between a save and the line after it (the new file has another inode)."""
        if self.pending and folder.inode(self.ckpt_path) != self.pending[1]:
            self.rows = self.pending[0]
        if self.checked and self.rows:
            with contextlib.suppress(OSError):
                self.csv.write(self.rows)

    def kept(self, previous="previous"):
        """What a failure leaves, for its message."""
        if not self.rows:
            return "no checkpoint had been saved yet"
        return f"the {previous} checkpoint (iteration {self.rows[-1]['iteration']}) is intact"

    def start(self):
        with folder.os_errors("read run folder", self.run_dir):
            folder.remove_temporary_files(self.run_dir)
            state = self.load()
        self.checked = True
        config, complete = self.config, self.next_iteration > self.config.iterations
        try:
            # The trainer is built (and can fail: memory, a missing ROM) before anything
            # is written, so that a failed start leaves no config.json to trip over.
            trainer = None if complete else self.make_trainer(state)
            del state  # drops the memory maps of the checkpoint's replay
            if trainer is not None:  # a disk too small for its checkpoints: refused now
                from qzoo.run.checks import check_checkpoint_space

                state = {"learner": trainer.learner.state_dict(),  # not a Ray run's shards
                         "streams": trainer.streams.state_dict()}  # fmt: skip
                check_checkpoint_space(config, self.info, state, self.run_dir)
                del state
            with folder.os_errors("write", self.config_path, "; " + self.kept()):
                atomic_write(self.config_path, lambda f: f.write(config.to_json().encode()))
            if self.rows:
                with folder.os_errors("write", self.csv.path, "; " + self.kept()):
                    self.csv.write(self.rows)  # repairs a deleted, cut or garbled file
            if complete:
                print(f"{self.run_dir} is complete ({config.iterations} iterations); results "
                      f"in {os.path.abspath(self.csv.path)}", file=sys.stderr)  # fmt: skip
                return
            record_threads(self.run_dir, config, "; " + self.kept())
            if self.notes:
                print(*self.notes, sep="\n", file=sys.stderr)
            if self.rows:
                print(*self.accepted, f"resuming {self.run_dir} at iteration {trainer.iteration}",
                      sep="\n", file=sys.stderr)  # fmt: skip
            print(f"run folder: {os.path.abspath(self.run_dir)}", file=sys.stderr, flush=True)
            self.train(trainer)
            print(f"results: {os.path.abspath(self.csv.path)}", file=sys.stderr)
        except Diverged as e:
            raise Diverged(f"{e}; the run stopped and {self.kept('last good')}") from None
        except WorkerDied as e:
            raise UserError(f"{e}; {self.kept('last')}; the same command resumes") from None
        except (MemoryError, torch.OutOfMemoryError) as e:
            raise UserError(
                f"out of memory ({folder.first_line(e)}); {self.kept('last')}; lower "
                "--replay-capacity or --batch-size"
            ) from None
        except OSError as e:
            raise UserError(folder.os_message("run in", self.run_dir, e, "; " + self.kept("last")))

    @property
    def next_iteration(self):
        return self.rows[-1]["iteration"] + 1 if self.rows else 0

    def load(self):
        """Checks the folder's files against the command; returns the checkpoint's
        trainer state (None for a new run). Raises UserError, changing nothing."""
        if os.path.lexists(os.path.join(self.run_dir, OLD_CHECKPOINT)):
            raise UserError(
                f"{os.path.join(self.run_dir, OLD_CHECKPOINT)} is an old pickle-based "
                "checkpoint, which qzoo no longer loads (unpickling a file can run code); "
                "delete it (the run starts over) or use another --run-dir"
            )
        saved_json = folder.read_config_json(self.config_path)
        state = checkpoint.load(self.ckpt_path) if os.path.lexists(self.ckpt_path) else None
        current = plain(dataclasses.asdict(self.config))
        if state is not None:
            if not folder.holds_a_run(state):
                raise UserError(f"checkpoint {self.ckpt_path} does not hold a qzoo run")
            folder.check_config_dict(state["config"], f"checkpoint {self.ckpt_path}")
            self.rows = state["rows"]
            trainer_state = state["trainer"] if isinstance(state["trainer"], dict) else {}
            bad = folder.first_non_finite(trainer_state.get("learner"), "trainer/learner")
            if bad:
                raise UserError(
                    f"checkpoint {self.ckpt_path} is damaged: array {bad[0]!r} holds {bad[1]} "
                    "NaN or infinite values, which training never saves (a run that diverges "
                    "stops before its save), so the file changed on disk; " + checkpoint.LEFT_AS_IS
                )
        if state is None and self.config.log_replay:
            from qzoo.offline.writer import check_new_folder

            check_new_folder(self.config.log_replay)
        saved = state["config"] if state is not None else saved_json
        accepted = self.check_same_run(saved, current, state is not None) if saved else []
        if self.rows and self.config.iterations < self.rows[-1]["iteration"]:  # never undone
            raise UserError(
                f"--iterations: bad value {self.config.iterations}; expected at least the "
                f"{self.rows[-1]['iteration']} iterations the run in {self.run_dir} has trained"
            )
        if state is not None and saved_json is not None:
            # config.json may differ from the checkpoint in what a resume may change: a
            # start writes it before its first save (an accepted change that a kill cut
            # short leaves config.json ahead of the checkpoint).
            edited = differences(state["config"], saved_json, RESUMABLE + self.accept)
            if edited:
                raise UserError(
                    f"{self.config_path} was edited ("
                    + ", ".join(f"{k}: {b!r} instead of {a!r}" for k, a, b in edited)
                    + "); a run's config is the one in its checkpoint, so an edit would "
                    "have no effect: undo it, or delete config.json to have it rewritten"
                )
        self.csv.check(self.rows)  # before anything is written
        self.accepted = [
            f"accepting --{k.replace('_', '-')} {new!r} (was {old!r}): {ACCEPTABLE[k]}"
            for k, old, new in accepted
        ]
        return state["trainer"] if state is not None else None

    def check_same_run(self, saved, current, has_checkpoint):
        """Refuses a command that is not the saved run's; returns the accepted changes."""
        where = self.ckpt_path if has_checkpoint else self.config_path
        if (saved["agent"], saved["env"]) != (current["agent"], current["env"]):
            raise UserError(
                f"{where} belongs to a {saved['agent']} run on {saved['env']}, not "
                f"{current['agent']} on {current['env']}: resume it with `qzoo train "
                f"{saved['agent']} --env {saved['env']} ...`, or use another --run-dir"
            )
        found = differences(saved, current, RESUMABLE)
        refused = [d for d in found if d[0] not in self.accept]
        if refused:
            listed = ", ".join(
                f"--{k.replace('_', '-')} {b!r} differs from {a!r}"
                + (f" ({WHAT_DIFFERS[k]})" if k in WHAT_DIFFERS else "")
                for k, a, b in refused
            )
            hint = "pass the run's values or another --run-dir"
            if not has_checkpoint:
                hint += ", or delete its config.json (no checkpoint yet: nothing is lost)"
            if all(k in ACCEPTABLE for k, _, _ in refused):
                names = ",".join(k for k, _, _ in refused)
                hint += f", or add --accept-changes {names} to change the run: " + "; ".join(
                    ACCEPTABLE[k] for k, _, _ in refused
                )
            raise UserError(f"{listed} used by the run in {self.run_dir}; {hint}")
        return found

    def make_trainer(self, state):
        """A Trainer for the config, with the checkpoint's state when there is one."""
        from qzoo.run.trainer import Trainer

        trainer = Trainer(self.config, self.info)
        if state is not None:
            mismatch = state_shapes.first_mismatch(state, trainer.state_dict())
            if mismatch:
                what = "replay size" if "replay" in mismatch else "network shape"
                raise UserError(
                    f"checkpoint {self.ckpt_path} does not fit this config: {mismatch} ({what} "
                    "differs); use the options of the run that wrote it, or another --run-dir"
                )
            try:
                trainer.load_state_dict(state)
            except (RuntimeError, ValueError, KeyError, TypeError, IndexError) as e:
                if isinstance(e, torch.OutOfMemoryError):
                    raise
                raise UserError(
                    f"checkpoint {self.ckpt_path} does not fit this config ({folder.first_line(e)}); "
                    "use the options of the run that wrote it, or another --run-dir"
                ) from None
        return trainer

    def train(self, trainer):
        """Runs the remaining iterations; after each, saves the checkpoint, then
        rebuilds results.csv from it; the TensorBoard and W&B logs follow the rows."""
        config, tb_log, tracker = self.config, None, None
        if config.tensorboard:
            tb_log = logs.TensorBoardLog(
                os.path.join(self.run_dir, "tensorboard"), trainer.iteration * config.train_frames
            )
        if config.track:  # Weights & Biases (run/tracking.py)
            tracker = tracking.WandbLog(config, self.run_dir)
        try:
            self.train_rows(trainer, tb_log, tracker)
        finally:
            for log in (tb_log, tracker):
                if log:
                    log.close()

    def train_rows(self, trainer, tb_log, tracker):
        from qzoo.run.trainer import run

        config = self.config
        if self.rows:  # a kill between the last checkpoint and its network: write it now
            self.save_network(trainer, self.rows[-1]["iteration"], missing_only=True)
        progress = logs.Progress(config, config.progress)
        if self.callbacks:
            self.callbacks.start(self.run_dir, list(self.rows), trainer.frame_t)
            if self.callbacks.frame_callbacks:
                progress = self.callbacks.counting(progress, lambda: trainer.frame_t)
        for row in run(trainer, progress):
            _check_finite(row)
            rows = [*self.rows, row]
            self.pending = rows, folder.inode(self.ckpt_path)
            with folder.os_errors("save checkpoint", self.ckpt_path, "; " + self.kept()):
                state = {"config": dataclasses.asdict(config), "trainer": trainer.state_dict(),
                         "rows": rows}  # fmt: skip
                checkpoint.save(self.ckpt_path, state)
            self.rows, self.pending, state = rows, None, None
            rebuild = "; the checkpoint was saved: run the command again to rebuild it"
            with folder.os_errors("write", self.csv.path, rebuild):
                self.csv.write(self.rows)
            self.save_network(trainer, row["iteration"])
            for log in (tb_log, tracker):
                if log:
                    log.write(row)
            print(logs.console_line(row), flush=True)
            if self.on_row:
                self.on_row(row)
            if self.callbacks:
                self.callbacks.row(row)

    def save_network(self, trainer, iteration, missing_only=False):
        """Saves the online network of `iteration` on its own when --snapshot-interval
        keeps it, after the checkpoint (a failure leaves the run's state saved); a kill
        in between leaves it to the next start (`missing_only`), whose trainer holds
        that network."""
        interval = self.config.snapshot_interval
        path = network_path(self.run_dir, iteration)
        if interval and iteration % interval == 0 and not (missing_only and os.path.exists(path)):
            with folder.os_errors("save network", path, "; " + self.kept("last")):
                checkpoint.save(path, trainer.learner.online.state_dict())


def network_path(run_dir, iteration):
    """Where the online network of `iteration` is kept (see NETWORKS)."""
    return os.path.join(run_dir, NETWORKS, f"iteration-{iteration}.safetensors")


def _check_finite(row):
    """Raises Diverged when the iteration's loss or mean Q is NaN or infinite: such a
    state must never replace the last good checkpoint."""
    if not row.get("train_num_updates"):
        return  # no SGD step (iteration 0, or replay still filling): NaN means "none"
    bad = {k: row.get(k) for k in ("train_loss", "train_mean_q")}
    bad = {k: v for k, v in bad.items() if isinstance(v, numbers.Real) and not math.isfinite(v)}
    if bad:
        raise Diverged(
            f"iteration {row['iteration']}: "
            + " and ".join(f"{k} is {v}" for k, v in bad.items())
            + " (the run diverged: try a lower --learning-rate or a gradient clip, in "
            "another --run-dir)"
        )
