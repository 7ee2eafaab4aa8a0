"""What `qzoo train`, `qzoo resume` and the Python API (qzoo.train, qzoo.resume) do
with a checked config: one path, so that the same options give the same run."""

from collections.abc import Callable, Sequence
from typing import Any


def train(config: Any, on_row: Callable | None = None, callbacks: Sequence = (),
          resume_line: bool = True) -> Any:  # fmt: skip
    """Trains `config` in its run folder, resuming it (run/run_folder.py), with the
    PyTorch threads a start of that run uses (threads.py); returns its Outcome (the
    results rows, and why a callback stopped it).
    `on_row(row)` and `callbacks` (run/callbacks.py) are called as rows are saved;
    `resume_line` False: an interrupt prints no resume command (qzoo tune says its own)."""
    if config.ray and config.address not in ("", "auto"):  # in seconds, before PyTorch loads
        from qzoo.distributed import cluster

        cluster.check_installed()
        cluster.check_reachable(config.address)
    from qzoo.configuration import default_run_dir
    from qzoo.run import run_folder, thread_record, threads
    from qzoo.run.callbacks import Callbacks

    run_dir, notes = config.run_dir or default_run_dir(config), []
    threads.apply(config, thread_record.saved_threads(run_dir), notes)  # a resume keeps its count
    hooks = Callbacks(callbacks) if callbacks else None
    return run_folder.train(config, notes=notes, on_row=on_row, callbacks=hooks,
                            resume_line=resume_line)  # fmt: skip
