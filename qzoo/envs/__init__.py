"""Environments stepped as a batch, with one step record for every kind.

Every vector environment here has the same contract, which the replay relies on:
- `reset(seed)` returns an `EnvStep` whose `first` is all True.
- `step(actions)` returns the next `EnvStep`. An environment whose previous step was
  `last` ignores its action and returns the first observation of a new episode
  (`first=True`, reward 0): "next-step" autoreset, as in ale-py's vector env. The
  transition into that observation is never stored (see replay/frames.py).
- `frame` is the newest preprocessed frame only; stacking happens in the actor and
  in replay, with leading zeros at an episode start (ale-py's convention, not DQN
  Zoo's trailing zeros; see the README).
- `terminated` ends bootstrapping; truncation (`last` without `terminated`) does not.
- `life_loss` (DQN Zoo protocol only) zeros the discount without ending the episode.
"""

import collections

import gymnasium
import numpy as np

from qzoo.envs.scores import ATARI_GAMES
from qzoo.errors import UserError, closest

EnvStep = collections.namedtuple(
    "EnvStep", "frame reward first last terminated life_loss real_steps"
)
EnvInfo = collections.namedtuple("EnvInfo", "name domain num_actions frame_shape frame_dtype game")


def first_step(frame):
    """The EnvStep of a reset: every environment starts an episode."""
    n = len(frame)
    no = np.zeros(n, bool)
    return EnvStep(frame, np.zeros(n, np.float32), np.ones(n, bool), no, no, no, 0)


MINATAR_GAMES = ("asterix", "breakout", "freeway", "seaquest", "space_invaders")


def _atari_rom_ids():
    from ale_py import roms

    return tuple(roms.get_all_rom_ids())


def resolve(name):
    """Maps a user's env name to (domain, canonical name); UserError if unknown.

    Atari games use DQN Zoo's snake_case names (pong, space_invaders, ...); MinAtar
    games are `minatar/<game>`; anything else must be a registered Gymnasium id.
    """
    lowered = name.lower()
    if lowered in ATARI_GAMES or lowered in _atari_rom_ids():
        return "atari", lowered
    for prefix in ("minatar/", "minatar-"):
        if lowered.startswith(prefix):
            # Also accepts MinAtar's own Gymnasium ids, e.g. MinAtar/SpaceInvaders-v1.
            game = lowered[len(prefix) :].split("-v")[0]
            game = game.replace("spaceinvaders", "space_invaders")
            if game in MINATAR_GAMES:
                return "minatar", "minatar/" + game
            raise UserError(
                f"unknown MinAtar game {name!r}; expected one of "
                + ", ".join("minatar/" + g for g in MINATAR_GAMES)
            )
    if name in gymnasium.registry:
        return "gym", name
    known = list(ATARI_GAMES) + ["minatar/" + g for g in MINATAR_GAMES]
    known += [k for k in gymnasium.registry if "/" not in k]
    hint = closest(lowered, known)
    raise UserError(
        f"unknown environment {name!r}; expected one of the 57 Atari games by "
        "snake_case name, minatar/<game> or a Gymnasium id"
        + (f" (closest: {', '.join(hint)})" if hint else "")
    )


def make(config, num_envs, seed, eval_mode=False):
    """Builds the vector environment for `config.env` (seeded, already reset-ready)."""
    domain, name = resolve(config.env)
    if domain == "atari":
        from qzoo.envs.atari import AtariVector

        return AtariVector(name, num_envs, config)
    if domain == "minatar":
        from qzoo.envs.gym import GymVector, MinAtarEnv

        game = name.split("/", 1)[1]
        return GymVector(lambda: MinAtarEnv(game), num_envs, name, config)
    from qzoo.envs.gym import GymVector

    return GymVector(lambda: gymnasium.make(name), num_envs, name, config)


def describe(config):
    """EnvInfo for `config.env`, built from a one-environment instance."""
    env = make(config, 1, config.seed)
    try:
        return env.info
    finally:
        env.close()
