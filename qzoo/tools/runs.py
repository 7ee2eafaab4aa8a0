"""A run folder as the tools read it: its config, its results rows and its online
network, loaded without unpickling (checkpoint.py) and without touching the replay
(the checkpoint's big arrays are memory-mapped, so they are never read)."""

import dataclasses
import os
from typing import NamedTuple

import torch

from qzoo import checkpoint, envs
from qzoo.config import Config
from qzoo.errors import UserError
from qzoo.networks import make_network
from qzoo.replay.frames import observation_shape

CHECKPOINT = os.path.join("checkpoints", "latest.safetensors")


class Run(NamedTuple):
    """What a tool needs of a run: `config` (Config), `info` (EnvInfo), the online
    `network` (eval mode, on the CPU), the `iteration` its weights are from (the
    number of iterations trained), and the results `rows`."""

    config: Config
    info: envs.EnvInfo
    network: torch.nn.Module
    iteration: int
    rows: list


def load_run(run_dir, device="cpu"):
    """Loads the latest checkpoint of the run in `run_dir`; UserError when there is
    none or it is not a qzoo run."""
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isdir(run_dir):
        raise UserError(
            f"run folder {run_dir!r} does not exist; expected a folder `qzoo train` wrote"
        )
    if not os.path.exists(path):
        raise UserError(f"{run_dir!r} holds no checkpoint ({CHECKPOINT}); train it first")
    state = checkpoint.load(path)
    if not isinstance(state, dict) or not {"config", "trainer", "rows"} <= set(state):
        raise UserError(f"{path} is not a qzoo run's checkpoint")
    config = config_from_dict(state["config"], path)
    info = envs.describe(config)
    network = make_network(config, info, observation_shape(info.frame_shape, config.frame_stack))
    try:
        network.load_state_dict(state["trainer"]["learner"]["online"])
    except (KeyError, RuntimeError) as e:
        raise UserError(f"{path}: its network does not match its config ({e})") from None
    network.to(device).eval()
    return Run(config, info, network, int(state["trainer"]["iteration"]) - 1, state["rows"])


def config_from_dict(saved, where):
    """A Config from a saved dict; UserError naming `where` if it is not one."""
    fields = {f.name for f in dataclasses.fields(Config)}
    if not isinstance(saved, dict) or not set(saved) <= fields:
        raise UserError(f"{where} holds no qzoo config")
    return Config(**saved)
