"""An exported model folder (`qzoo export`): what it holds, and how the tools read it.

  model.safetensors  the online network's state dict, one tensor per key (any
                     safetensors reader loads it; qzoo reads it without unpickling)
  config.json        the run's Config, as a run folder holds it (run_dir left empty)
  results.csv        the run's results rows, as a run folder holds them
  model.json         what was exported: format, qzoo version, the network's iteration
  README.md          the model card; curves.png, and replay.mp4 with --video

config.json and results.csv are a run folder's, so `qzoo plot` and `compare` read an
exported folder as they read a run; `eval`, `play`, `record` and `visualize` load its
network through tools/runs.py's `load_run`, as they load a run's."""

import csv
import json
import os
import re

import torch

from qzoo.errors import UserError
from qzoo.run import checkpoint, folder_files

MODEL = "model.safetensors"
MANIFEST = folder_files.MODEL_MANIFEST
CONFIG = "config.json"
RESULTS = "results.csv"
FORMAT = "qzoo-model"
FORMAT_VERSION = 1


def is_model_folder(path) -> bool:
    """Whether `path` is an exported model folder: a manifest and no run checkpoint."""
    return folder_files.is_model_folder(path)


def manifest(iteration: int, version: str, agent: str, env: str, seed: int) -> dict:
    """model.json's content."""
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "qzoo_version": version,
            "iteration": iteration, "agent": agent, "env": env, "seed": seed}  # fmt: skip


def read(folder) -> tuple[dict, dict, int, list]:
    """(config dict, state dict, iteration, results rows) of the model folder `folder`;
    UserError naming the file and what is wrong with it."""
    where = os.path.join(folder, MANIFEST)
    saved = _json(where)
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise UserError(f"{where} is not a qzoo model's manifest (format {FORMAT!r})")
    if saved.get("format_version") != FORMAT_VERSION:
        raise UserError(
            f"{where} has format version {saved.get('format_version')!r}; this qzoo reads "
            f"version {FORMAT_VERSION}: export the run again with this qzoo"
        )
    iteration = saved.get("iteration")
    if type(iteration) is not int or iteration < 0:
        raise UserError(f"{where}: bad iteration {iteration!r}; expected an integer >= 0")
    path = os.path.join(folder, MODEL)
    if not os.path.isfile(path):
        raise UserError(f"model folder {folder!r} holds no {MODEL}; export the run again")
    try:
        weights = checkpoint.load(path)
    except UserError as e:  # run/checkpoint.py's advice is a training run's
        raise UserError(str(e).split("; qzoo leaves it")[0] + "; export the run again") from None
    if not isinstance(weights, dict) or not all(
        isinstance(v, torch.Tensor) for v in weights.values()
    ):
        raise UserError(f"{path} is not a qzoo network (a state dict of tensors)")
    config = _json(os.path.join(folder, CONFIG))
    return config, weights, iteration, read_rows(os.path.join(folder, RESULTS))


def read_rows(path) -> list:
    """results.csv's rows as dicts of numbers (integers stay integers; an empty cell, a
    column that only later rows have, is left out of its row)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; export the run again") from None
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise UserError(f"cannot read {path}: {str(e).splitlines()[0]}") from None
    parsed = [{k: _value(v) for k, v in row.items() if v not in ("", None)} for row in rows]
    if not parsed or not all(type(row.get("iteration")) is int for row in parsed):
        raise UserError(f"{path} is not a qzoo results.csv (no rows with an iteration)")
    return parsed


def _value(text):
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def _json(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise UserError(f"{path} does not exist; export the run again") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise UserError(f"cannot read {path}: {str(e).splitlines()[0]}") from None
