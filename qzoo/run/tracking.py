"""Experiment tracking on Weights & Biases (`qzoo train ... --track`).

A tracked run logs what TensorBoard and results.csv get (every numeric column of each
results row, against the `frame` column as its x-axis), its resolved config, and its
run folder's name as the W&B run's name. The W&B run's id is kept in the run folder
(wandb.json), so that a resume, and `qzoo record` on the folder, reattach to the same
W&B run. wandb is imported only here and only for a tracked run; WANDB_MODE=offline
keeps everything on disk (`wandb sync` uploads it later).
"""

import dataclasses
import json
import os

from qzoo.errors import UserError
from qzoo.files import atomic_write

ID_FILE = "wandb.json"  # {"id", "project", "entity"} of the run's W&B run


def wandb_module():
    """wandb, or UserError naming the extra that installs it."""
    try:
        import wandb
    except ImportError as e:
        raise UserError(f"--track needs wandb ({e}); pip install 'qzoo[wandb]'") from None
    return wandb


def check(config) -> None:
    """Before anything is written: a tracked run needs wandb installed."""
    if config.track:
        wandb_module()


def saved_run(run_dir: str) -> dict | None:
    """The W&B run this folder is tracked by ({"id", "project", "entity"}), or None."""
    try:
        with open(os.path.join(run_dir, ID_FILE), "rb") as f:
            saved = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {os.path.join(run_dir, ID_FILE)}: {e}") from None
    if not isinstance(saved, dict) or not isinstance(saved.get("id"), str):
        raise UserError(f"{os.path.join(run_dir, ID_FILE)} does not name a W&B run")
    return saved


def attach(run_dir: str, config: dict | None = None, project: str = "qzoo", entity: str = ""):
    """Starts (or resumes) the folder's W&B run; a new one's id is saved first, so that
    a kill right after still leaves the folder pointing at it."""
    wandb = wandb_module()
    saved = saved_run(run_dir)
    if saved is None:
        saved = {"id": _new_id(wandb), "project": project, "entity": entity}
        data = json.dumps(saved, indent=2).encode()
        atomic_write(os.path.join(run_dir, ID_FILE), lambda f: f.write(data))
    try:
        return wandb.init(
            id=saved["id"], project=saved["project"], entity=saved["entity"] or None,
            name=os.path.basename(os.path.abspath(run_dir)), config=config, resume="allow",
        )  # fmt: skip
    except wandb.errors.Error as e:  # not logged in, no network, a bad project or entity
        raise UserError(
            f"--track: W&B could not start ({str(e).strip().splitlines()[0]}); `wandb login`, "
            "or WANDB_MODE=offline to keep the run on disk"
        ) from None


def _new_id(wandb) -> str:
    """A new W&B run id, by wandb's own generator (where it lives moved in 0.17)."""
    try:
        from wandb.sdk.lib.runid import generate_id
    except ImportError:
        generate_id = wandb.util.generate_id
    return generate_id()


class WandbLog:
    """A run's results rows on W&B, beside TensorBoardLog (logs.py)."""

    def __init__(self, config, run_dir: str) -> None:
        self.run = attach(
            run_dir, dataclasses.asdict(config), config.wandb_project, config.wandb_entity
        )
        self.run.define_metric("frame")
        self.run.define_metric("*", step_metric="frame")

    def write(self, row: dict) -> None:
        numbers = {k: v for k, v in row.items() if isinstance(v, (int, float))}
        self.run.log(numbers)

    def close(self) -> None:
        self.run.finish()


def log_video(run_dir: str, path: str, iteration: int) -> str | None:
    """Logs the MP4 at `path` to the folder's W&B run, if it is tracked; returns the
    W&B run's id, or None for an untracked folder."""
    if saved_run(run_dir) is None:
        return None
    wandb = wandb_module()
    run = attach(run_dir)
    try:
        run.log({"video": wandb.Video(path, format="mp4"), "video_iteration": iteration})
    finally:
        run.finish()
    return run.id
