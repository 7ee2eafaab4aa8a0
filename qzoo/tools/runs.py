"""A run folder as the tools read it: its config, its results rows and its online
network, loaded without unpickling (run/checkpoint.py) and without touching the replay
(the checkpoint's big arrays are memory-mapped, so they are never read). A model folder
that `qzoo export` wrote (tools/model_folder.py) is read as the run it came from."""

import dataclasses
import os
import re
from typing import NamedTuple

import torch

from qzoo import envs
from qzoo.configuration import Config
from qzoo.errors import UserError
from qzoo.networks.network import make_network
from qzoo.replay.frames import observation_shape
from qzoo.run import checkpoint
from qzoo.run.folder_files import first_non_finite
from qzoo.run.run_folder import CHECKPOINT, NETWORKS, network_path
from qzoo.tools import model_folder


class Run(NamedTuple):
    """What a tool needs of a run: `config` (Config), `info` (EnvInfo), the online
    `network` (eval mode, on the CPU), the `iteration` its weights are from (the
    number of iterations trained), and the results `rows`."""

    config: Config
    info: envs.EnvInfo
    network: torch.nn.Module
    iteration: int
    rows: list


def load_run(run_dir, iteration=None, device="cpu"):
    """Loads the run in `run_dir`: its config and rows from the latest checkpoint, and
    the online network of `iteration` (checkpoints/networks/, see --snapshot-interval)
    or, when None, the latest one. UserError when there is no checkpoint, it is not a
    qzoo run's, or no network of `iteration` was kept (naming those that were). A model
    folder (`qzoo export`) holds one network: that of the iteration it was exported at."""
    path = os.path.join(run_dir, CHECKPOINT)
    if not os.path.isdir(run_dir):
        what = "is a file, not a folder" if os.path.exists(run_dir) else "does not exist"
        raise UserError(f"run folder {run_dir!r} {what}; expected a folder `qzoo train` wrote")
    if model_folder.is_model_folder(run_dir):
        return _load_model_folder(run_dir, iteration, device)
    if not os.path.exists(path):
        raise UserError(f"{run_dir!r} holds no checkpoint ({CHECKPOINT}); train it first")
    state = checkpoint.load(path)
    if not isinstance(state, dict) or not {"config", "trainer", "rows"} <= set(state):
        raise UserError(f"{path} is not a qzoo run's checkpoint")
    config = config_from_dict(state["config"], path)
    info = envs.describe(config)
    network = make_network(config, info, observation_shape(info.frame_shape, config.frame_stack))
    latest = int(state["trainer"]["iteration"]) - 1
    if iteration is None or iteration == latest and not iteration_kept(run_dir, latest):
        # The latest network is in the checkpoint even when no snapshot of it was kept;
        # a kept one named by --checkpoint K is read (and checked): it may be copied away.
        weights, iteration = state["trainer"]["learner"]["online"], latest
    else:
        weights, path = _network_of(run_dir, iteration), network_path(run_dir, iteration)
    bad = first_non_finite(weights)
    if bad:
        raise UserError(f"{path} is damaged: array {bad[0]!r} holds {bad[1]} NaN or infinite "
                        "values, which training never saves")  # fmt: skip
    try:
        network.load_state_dict(weights)
    except (KeyError, RuntimeError, TypeError, AttributeError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UserError(f"{path}: its network does not match the run's config ({reason})") from None
    network.to(device).eval()
    return Run(config, info, network, iteration, state["rows"])


def _load_model_folder(folder, iteration, device):
    """load_run for a folder `qzoo export` wrote."""
    saved, weights, kept, rows = model_folder.read(folder)
    if iteration is not None and iteration != kept:
        raise UserError(
            f"--checkpoint: bad value {iteration}; model folder {folder!r} holds the network "
            f"of iteration {kept} only (latest)"
        )
    config = config_from_dict(saved, os.path.join(folder, model_folder.CONFIG))
    info = envs.describe(config)
    network = make_network(config, info, observation_shape(info.frame_shape, config.frame_stack))
    try:
        network.load_state_dict(weights)
    except (KeyError, RuntimeError, TypeError, AttributeError) as e:
        reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        where = os.path.join(folder, model_folder.MODEL)
        raise UserError(f"{where}: its network does not match config.json ({reason})") from None
    network.to(device).eval()
    return Run(config, info, network, kept, rows)


def iteration_kept(run_dir, iteration):
    return os.path.lexists(network_path(run_dir, iteration))


def iterations_kept(run_dir):
    """The iterations whose online network is in checkpoints/networks/, sorted."""
    try:
        names = os.listdir(os.path.join(run_dir, NETWORKS))
    except OSError:
        return []
    found = (re.fullmatch(r"iteration-(\d+)\.safetensors", name) for name in names)
    return sorted(int(match[1]) for match in found if match)


def _network_of(run_dir, iteration):
    """The state dict kept for `iteration`; UserError naming the iterations there are."""
    path = network_path(run_dir, iteration)
    if not os.path.exists(path):
        kept = iterations_kept(run_dir)
        listed = _ranges(kept) if kept else "none (see --snapshot-interval)"
        raise UserError(
            f"--checkpoint: bad value {iteration}; {run_dir!r} keeps the networks of "
            f"iterations {listed}, and latest"
        )
    try:
        weights = checkpoint.load(path)
    except UserError as e:
        # run/checkpoint.py's advice is a training run's (start it over); a tool reading one
        # iteration's network can read another instead.
        reason = str(e).split("; qzoo leaves it")[0]
        raise UserError(f"{reason}; choose another --checkpoint, or latest") from None
    if not isinstance(weights, dict) or not all(
        isinstance(v, torch.Tensor) for v in weights.values()
    ):
        raise UserError(f"{path} is not a qzoo network snapshot (a state dict of tensors)")
    return weights


def _ranges(numbers):
    """[0, 1, 2, 5, 10, 11] -> '0-2, 5, 10-11': a long run keeps hundreds."""
    parts, start = [], None
    for i, n in enumerate(numbers):
        start = n if start is None else start
        if i + 1 == len(numbers) or numbers[i + 1] != n + 1:
            parts.append(str(n) if start == n else f"{start}-{n}")
            start = None
    return ", ".join(parts)


def config_from_dict(saved, where):
    """A Config from a saved dict; UserError naming `where` if it is not one."""
    fields = {f.name for f in dataclasses.fields(Config)}
    if not isinstance(saved, dict) or not set(saved) <= fields:
        raise UserError(f"{where} holds no qzoo config")
    return Config(**saved)


def acting_config(run, protocol=None, epsilon=None):
    """How a tool acts in `run`'s environment: (its config with `protocol` in place,
    the protocol's name, None outside Atari, and the epsilon). By default the run's own
    protocol and evaluation epsilon; noop30 (Mnih et al. 2015) evaluates at 0.05
    unless `epsilon` says otherwise. UserError for a protocol outside Atari."""
    config = run.config
    if run.info.domain != "atari":
        if protocol is not None:
            raise UserError(
                f"--protocol: bad value {protocol}; expected no --protocol here: protocols "
                f"are Atari's, and {config.env} is a {run.info.domain} environment"
            )
        return config, None, config.eval_exploration_epsilon if epsilon is None else epsilon
    protocol = protocol or config.protocol
    if epsilon is None:
        epsilon = 0.05 if protocol == "noop30" else config.eval_exploration_epsilon
    return dataclasses.replace(config, protocol=protocol), protocol, epsilon
