"""What a resumed run may change: the options that change nothing (RESUMABLE), those
that change the run once the user says so (--accept-changes), the differences between
a saved config and the command's, and the command that resumes a run."""

import json
import os
import shlex

import qzoo.configuration as config_lib
from qzoo.errors import UserError

# Options a resumed run may change without changing its results. (`accept_changes` is
# a per-command option; it is not part of a run.)
RESUMABLE = ("device", "threads", "progress", "tensorboard", "run_dir", "accept_changes",
             "snapshot_interval", "address", "pin_threads", "actor_process",
             "track", "wandb_project", "wandb_entity", "gym_packages")  # fmt: skip

# Options a resume may change when the user says so with --accept-changes, and what it
# does to the run: a resumed run then differs from one started with the new value.
ACCEPTABLE = {
    "iterations": "epsilon's decay length and prioritized replay's beta annealing are "
    "fractions of the whole run (as in DQN Zoo), so from the next frame on they follow "
    "the new length, and the run differs from one started with it",
}

# What a differing option means for the checkpoint, for the refusal message.
WHAT_DIFFERS = dict.fromkeys(
    ("torso", "mlp_hidden", "mlp_layers", "dueling", "noisy", "shared_bias", "distribution",
     "num_atoms", "num_quantiles", "tau_latent_dim", "frame_stack"), "network shape",
) | {"replay_capacity": "replay size", "num_envs": "replay size"}  # fmt: skip


def parse_accept(text):
    """'iterations,x' -> ('iterations', 'x'), each checked against ACCEPTABLE."""
    names = tuple(n.strip().replace("-", "_") for n in str(text or "").split(",") if n.strip())
    for name in names:
        if name not in ACCEPTABLE:
            raise UserError(
                f"--accept-changes: {name!r} cannot be accepted on a resume; accepted: "
                + ", ".join(ACCEPTABLE)
            )
    return names


def plain(value):
    """Config values as JSON gives them back (tuples become lists), for comparisons."""
    return json.loads(json.dumps(value))


def differences(saved, current, ignore):
    """[(key, saved value, current value)] over the keys of `saved` and `current`. A key
    that a newer qzoo added to Config (absent from `saved`) has the value the saved run
    ran with: the option's default for that run's agent and environment."""
    saved, current = plain(saved), plain(current)
    missing = [k for k in current if k not in saved]
    if missing:
        defaults = plain(config_lib.default_values(saved))
        saved = {**saved, **{k: defaults[k] for k in missing if k in defaults}}
    return [
        (k, saved[k], current.get(k))
        for k in saved
        if k not in ignore and saved[k] != current.get(k)
    ]


def resume_command(run_dir):
    """The command that resumes the run in `run_dir`: `qzoo resume RUN`, which reads
    the run's options from its config.json (cli/resume.py), so that it holds however
    the run was started (`python -m qzoo`, tests calling cli.main, qzoo suite)."""
    return shlex.join(["qzoo", "resume", os.fspath(run_dir)])
