"""Which game a dataset holds, as its own files say (a conversion's dataset.json, the
logging run's replay_logs/logged.json, the published layout's path), so that an
--offline run on another game's data is refused instead of trained without a word."""

import json
import os

from qzoo.errors import UserError

# In a `replay_logs` folder that `qzoo train --log-replay` wrote: the run that logged it
# (its env, agent, seed), so that the dataset knows its game (writer.py).
LOGGED = "logged.json"


def replay_logs(folder):
    """`folder` itself, or its `replay_logs` subfolder when it has one."""
    inner = os.path.join(folder, "replay_logs")
    return inner if os.path.isdir(inner) else folder


def _json_dict(path):
    try:
        with open(path, "rb") as f:
            found = json.loads(f.read())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def dataset_game(folder):
    """(game, env, where) of the dataset in `folder`: the game as its source names it,
    the --env that is (None if qzoo has no such environment), and what says so; all
    None when nothing does. The sources: a conversion's dataset.json, the logging run's
    replay_logs/logged.json (`qzoo train --log-replay`), the published layout's path
    (<Game>/<run>/replay_logs)."""
    from qzoo.configuration.environments import resolve

    manifest = os.path.join(folder, "dataset.json")
    logged = os.path.join(replay_logs(folder), LOGGED)
    path = os.path.abspath(replay_logs(folder))
    run = os.path.dirname(path)
    game = where = None
    if _json_dict(manifest).get("game"):
        game, where = _json_dict(manifest)["game"], manifest
    elif _json_dict(logged).get("env"):
        game, where = _json_dict(logged)["env"], logged
    elif os.path.basename(path) == "replay_logs" and os.path.basename(run).isdigit():
        game, where = os.path.basename(os.path.dirname(run)), f"the path {path}"
    if not isinstance(game, str):
        return None, None, None
    try:
        env = resolve(game)[1]
    except UserError:
        env = None
    return game, env, where


def check_game(folder, info):
    """Refuses an --offline dataset whose source names another game than the run's
    environment (the frames and actions of MinAtar's games, or of many Atari games,
    fit each other: the training would go on without a word)."""
    game, env, where = dataset_game(folder)
    if env is not None and env != info.name:
        raise UserError(
            f"--offline {folder}: its data is of {game} (so says {where}), not of "
            f"{info.name}; pass --env {env}, or another dataset"
        )
