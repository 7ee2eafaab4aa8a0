"""Reference data shipped inside the package, read with importlib.resources (so that it
is found wherever qzoo is installed, editable or not).

  atari100k/published_scores.csv  game, agent, score, source: per-game published means
  atari100k/published_runs.csv    game, agent, run, score: per-run published scores
  atari100k/README.md             where each number comes from
  roms/rom_md5.csv                game, MD5 of atari-py 0.2.5's ROM and of ale-py's
  roms/README.md                  where each checksum comes from

Atari 100k (Kaiser et al. 2020's 26 games, 100k agent steps): `der` is van Hasselt et
al. 2019's per-game table, `drq_eps` the rliable release's 100 runs per game (Agarwal
et al. 2021) and their means; see atari100k/README.md.
"""

import csv
import functools
import io
from importlib import resources


def _rows(name):
    text = resources.files(__name__).joinpath("atari100k", name).read_text(encoding="utf-8")
    return list(csv.DictReader(io.StringIO(text)))


@functools.cache
def published_scores():
    """{agent: {game: (published mean score, source)}} of Atari 100k."""
    table = {}
    for row in _rows("published_scores.csv"):
        table.setdefault(row["agent"], {})[row["game"]] = (float(row["score"]), row["source"])
    return table


@functools.cache
def published_runs():
    """{agent: {game: tuple of run scores}}, for the agents whose per-run scores were
    published (drq_eps: 100 runs per game)."""
    table = {}
    for row in _rows("published_runs.csv"):
        table.setdefault(row["agent"], {}).setdefault(row["game"], []).append(float(row["score"]))
    return {a: {g: tuple(s) for g, s in games.items()} for a, games in table.items()}


@functools.cache
def atari100k_games():
    """The 26 games of Atari 100k, as qzoo names them (`--env amidar`), sorted."""
    return tuple(sorted({row["game"] for row in _rows("published_scores.csv")}))


@functools.cache
def atari_py_rom_md5():
    """{game: MD5 of atari-py 0.2.5's ROM}, the ROMs the DQN Replay Dataset was recorded
    on (roms/README.md)."""
    text = resources.files(__name__).joinpath("roms", "rom_md5.csv").read_text(encoding="utf-8")
    return {row["game"]: row["atari_py_0_2_5_md5"] for row in csv.DictReader(io.StringIO(text))}
