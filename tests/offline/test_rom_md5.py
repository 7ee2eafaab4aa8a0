"""The ROMs the DQN Replay Dataset was recorded on (atari-py 0.2.5's) against ale-py's,
and the warning an offline run prints for a game whose ROM differs."""

import csv
import hashlib
import json
import pathlib
import re

import ale_py

from qzoo.data import atari_py_rom_md5
from qzoo.envs.step import EnvInfo
from qzoo.offline.driver import rom_warning

ROOT = pathlib.Path(__file__).resolve().parents[2]


def table():
    with open(ROOT / "qzoo/data/roms/rom_md5.csv", newline="") as f:
        return list(csv.DictReader(f))


def info(game, domain="atari"):
    return EnvInfo(game, domain, 6, (84, 84), None, game)


def test_the_ale_py_column_is_the_installed_ale_pys_md5_list_and_its_roms():
    installed = pathlib.Path(ale_py.__file__).parent / "roms"
    listed = json.loads((installed / "md5.json").read_text())
    for row in table():
        assert listed[row["game"] + ".bin"] == row["ale_py_0_12_1_md5"], row["game"]
        rom = (installed / (row["game"] + ".bin")).read_bytes()
        assert hashlib.md5(rom).hexdigest() == row["ale_py_0_12_1_md5"], row["game"]
        assert (row["same"] == "yes") == (row["atari_py_0_2_5_md5"] == row["ale_py_0_12_1_md5"])


def test_63_atari_py_roms_31_differ_and_the_docs_name_them():
    rows = table()
    assert len(rows) == 63 and len(atari_py_rom_md5()) == 63
    differ = {row["game"] for row in rows if row["same"] == "no"}
    assert len(differ) == 31 and {"ms_pacman", "space_invaders", "road_runner"} <= differ
    assert not {"pong", "breakout", "seaquest", "qbert", "asterix"} & differ
    text = (ROOT / "docs/offline.md").read_text()
    listed = text.split("<!-- roms differ -->")[1].split("<!-- end -->")[0]
    assert set(re.findall(r"`([a-z_]+)`", listed)) == differ


def test_an_offline_evaluation_on_another_rom_gets_one_warning_line():
    line = rom_warning(info("ms_pacman"))
    assert line == ("offline: warning: ms_pacman's ROM in ale-py (md5 "
                    "87e79cd41ce136fd4f72cc6e2c161bee) is not atari-py 0.2.5's (md5 "
                    "9469d18238345d87768e8965f9f4a6b2), on which the DQN Replay Dataset was "
                    "recorded: evaluation plays another dump of the game (docs/offline.md)")  # fmt: skip
    assert "\n" not in line
    assert rom_warning(info("pong")) is None  # the same ROM
    assert rom_warning(info("minatar/breakout", "minatar")) is None


def test_the_offline_driver_prints_the_warning_once(capsys):
    import types

    from qzoo.configuration import build_config
    from qzoo.offline.driver import OfflineDriver

    for game, lines in (("ms_pacman", 1), ("pong", 0)):
        config = build_config("offline_dqn", {"env": game})
        parts = types.SimpleNamespace(
            config=config, info=info(game), learner=None, train_epsilon=lambda _: 0.0,
            streams=types.SimpleNamespace(actor=None, evaluation=None),
            updates=types.SimpleNamespace(use_replay=lambda replay: None),
        )  # fmt: skip
        OfflineDriver(parts, None, None, open_dataset=lambda suffixes: None)
        err = capsys.readouterr().err
        assert err.count(f"offline: warning: {game}'s ROM") == lines == err.count("\n")
