"""`qzoo agents`: each preset's paper, its values against dqn's, and the values it
takes on Gymnasium tasks and MinAtar as they result (domain defaults included)."""

import dataclasses
import re

from qzoo.cli.main import main
from qzoo.configuration import PRESETS, build_config


def _listing(capsys):
    assert main(["agents"]) == 0
    blocks, name = {}, None
    for line in capsys.readouterr().out.splitlines():
        if not line.startswith(" "):
            name = line.split()[0]
        blocks.setdefault(name, []).append(line.strip())
    return blocks


def _values(block, domain):
    line = next(x for x in block if x.startswith(f"on {domain} "))
    return dict(item.split("=", 1) for item in re.split(r", (?=\w+=)", line.split("instead: ")[1]))


def test_every_preset_is_listed_with_the_values_it_runs_with_off_atari(capsys):
    blocks = _listing(capsys)
    assert list(blocks) == list(PRESETS)
    for name, block in blocks.items():
        for domain, env in (("Gymnasium tasks", "CartPole-v1"), ("MinAtar", "minatar/breakout")):
            shown, config, atari = _values(block, domain), build_config(name, {"env": env}), \
                build_config(name, {"env": "pong"})  # fmt: skip
            for key, value in shown.items():
                assert str(getattr(config, key)) == value, (name, env, key)
            # ... and every value that differs from the preset's on Atari is shown
            differ = {f.name for f in dataclasses.fields(config) if f.name != "env"
                      and getattr(config, f.name) != getattr(atari, f.name)}  # fmt: skip
            assert set(shown) == differ, (name, env)
    # DQN on CartPole trains with the domain's Adam (which the preset itself never names)
    dqn = _values(blocks["dqn"], "Gymnasium tasks")
    assert (dqn["optimizer"], dqn["learning_rate"], dqn["batch_size"]) == ("adam", "0.001", "64")
    # PQN keeps its RAdam at eps 1e-8 everywhere: nothing to list off Atari
    for domain in ("Gymnasium tasks", "MinAtar"):
        assert "optimizer" not in _values(blocks["pqn"], domain)
        assert "optimizer_epsilon" not in _values(blocks["pqn"], domain)
