"""A "did you mean" offers only what the user plausibly meant. Edit distance (swaps of two
neighbours count 1) within a third of the name's length, a table of known aliases, or
the one option whose first words were typed; never a name that merely shares a prefix
or a few letters. And the first mistake on a command line is the one named."""

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO

from qzoo.cli.main import main
from qzoo.errors import closest, edit_distance

# Options of `qzoo profile` before it took --env, and a few of `qzoo train`'s.
PROFILE = ["--game", "--agent", "--steps", "--num-envs", "--top", "--profiler", "--json"]
TRAIN = ["--learning-rate", "--ray", "--env", "--num-envs", "--learn-period", "--replay-ratio",
         "--replay-capacity", "--run-dir"]  # fmt: skip


@pytest.mark.parametrize("a, b, distance", [
    ("trian", "train", 1),       # one swap of neighbours
    ("learnig-rate", "learning-rate", 1),  # one insertion
    ("ponng", "pong", 1),        # one deletion
    ("lr", "ray", 3),            # r for l, a for r, y added: nothing kept in place but r
    ("kitten", "sitting", 3),    # the textbook case: k->s, e->i, +g
    ("env", "num-envs", 5),      # five letters added
    ("", "abc", 3),
])  # fmt: skip
def test_edit_distance_by_hand(a, b, distance):
    assert edit_distance(a, b) == distance == edit_distance(b, a)


@pytest.mark.parametrize("typed, choices, expected", [
    ("--env", PROFILE, []),                   # not --num-envs: a shared "env" is no reason
    ("--lr", TRAIN, ["--learning-rate"]),     # an alias, not --ray (two letters shared)
    ("--game", TRAIN, ["--env"]),             # an alias: what other commands call --env
    ("--lr", PROFILE, []),                    # an alias whose option is not there
    ("--evn", TRAIN, ["--env"]),              # a swap
    ("--learnig-rate", TRAIN, ["--learning-rate"]),
    ("--learning", TRAIN, ["--learning-rate"]),  # the first word of one option
    ("--replay", TRAIN, []),                  # the first word of two: no guess
    ("--run", TRAIN, ["--run-dir"]),          # --run-dir's first word; --ray is 2 edits off
    ("trian", ["train", "agents", "bench"], ["train"]),
    ("cartpole-v1", ["CartPole-v1", "Acrobot-v1"], ["CartPole-v1"]),  # case aside
    ("frobnicate", ["train", "agents", "bench"], []),
])  # fmt: skip
def test_closest_suggests_only_what_is_meant(typed, choices, expected):
    assert closest(typed, choices) == expected


def _qzoo(*argv):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "qzoo", *argv], capture_output=True,
                          text=True, env=env, check=False)  # fmt: skip


def test_an_unknown_command_is_named_before_the_words_after_it():
    """`qzoo trian dqn` said "unexpected argument 'dqn'"; `qzoo trian` alone was right."""
    for argv in (["trian", "dqn"], ["trian"], ["trian", "--env", "pong"]):
        result = _qzoo(*argv)
        assert result.returncode == 2 and result.stdout == "", argv
        assert result.stderr.startswith("qzoo: error: unknown command 'trian'; expected train, ")
        assert result.stderr.endswith(" (did you mean train?)\n") and result.stderr.count("\n") == 1


def test_profile_takes_env_as_every_command_does_and_game_still_works(capsys):
    """The issue's `qzoo profile act --env pong`, literally, in a real process (a few
    steps); --game, the option's old name, is the same option."""
    result = _qzoo("profile", "act", "--env", "pong", "--steps", "2", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["env"] == "pong"
    argv = ["profile", "env", "--game=CartPole-v1", "--steps", "2", "--top", "1", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["env"] == "CartPole-v1"
    # A wrong kind is named before a word after it.
    assert main(["profile", "trian", "--frobnicate"]) == 2
    assert "got 'trian' (did you mean train?)" in capsys.readouterr().err
