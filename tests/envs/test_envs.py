"""Environment contract on real ALE games, MinAtar and Gymnasium."""

import re

import numpy as np
import pytest

from qzoo import envs
from qzoo.config import Config, build_config, make_config
from qzoo.errors import UserError


def atari_config(**overrides):
    return Config(env=overrides.pop("env", "breakout"), **overrides)


def test_resolve_names():
    assert envs.resolve("pong") == ("atari", "pong")
    assert envs.resolve("space_invaders") == ("atari", "space_invaders")
    assert envs.resolve("minatar/breakout") == ("minatar", "minatar/breakout")
    assert envs.resolve("MinAtar/SpaceInvaders-v1") == ("minatar", "minatar/space_invaders")
    assert envs.resolve("CartPole-v1") == ("gym", "CartPole-v1")
    with pytest.raises(UserError, match=r"did you mean space_invaders\?"):
        envs.resolve("space_invader")


@pytest.mark.parametrize(
    "name, game, protocol",
    [
        ("PongNoFrameskip-v4", "pong", "dqn_zoo"),
        ("Pong-v4", "pong", "dqn_zoo"),
        ("PongDeterministic-v4", "pong", "dqn_zoo"),
        ("ALE/Pong-v5", "pong", "machado"),  # v5 (and v0) ids have sticky actions
        ("Pong-v0", "pong", "machado"),
        ("SpaceInvadersNoFrameskip-v4", "space_invaders", "dqn_zoo"),
        ("ALE/MontezumaRevenge-v5", "montezuma_revenge", "machado"),
    ],
)
def test_gymnasium_atari_ids_map_to_the_game_with_a_note(name, game, protocol, capsys):
    domain, canonical, implied, note = envs.interpret(name)
    assert (domain, canonical, implied) == ("atari", game, {"protocol": protocol})
    assert name in note and f"--protocol {protocol}" in note
    config = build_config("dqn", {"env": name})
    assert (config.env, config.protocol) == (game, protocol)
    assert capsys.readouterr().err == f"qzoo: note: {note}\n"
    # The user's --protocol wins over what the id implies.
    assert build_config("dqn", {"env": name, "protocol": "dqn_zoo"}).protocol == "dqn_zoo"


@pytest.mark.parametrize(
    "name", ["pong", "Pong", "PONG", "SpaceInvaders", "space-invaders", "space invaders"]
)
def test_game_names_in_any_spelling(name):
    assert envs.interpret(name)[0] == "atari" and envs.interpret(name)[3] is None


@pytest.mark.parametrize(
    "name",
    ["ponng", "ALE/Pongg-v5", "ALE/Pong-ram-v5", "Pong-ramNoFrameskip-v4", "cartpole-v1",
     "minatar/breakot", "MountainCarContinuous-v0", "acrobot", "spaceinvader"],
)  # fmt: skip
def test_a_refused_name_suggests_one_that_works(name):
    with pytest.raises(UserError) as refused:
        envs.interpret(name)
    message = str(refused.value)
    assert message.startswith(f"--env: bad value {name}") or name in message
    suggestion = re.search(r"did you mean (\S+)\?\)$", message)[1]
    canonical = envs.interpret(suggestion)[1]
    build_config("dqn", {"env": canonical}, strict=True)


def test_pong_protocol_shapes_and_minimal_actions():
    env = envs.make(atari_config(env="pong"), 2, seed=1)
    step = env.reset(seed=1)
    assert env.info.num_actions == 6  # Pong's minimal action set
    assert step.frame.shape == (2, 84, 84) and step.frame.dtype == np.uint8
    assert step.first.all() and not step.last.any()
    step = env.step(np.array([0, 1]))
    assert not step.first.any() and step.real_steps == 2
    env.close()


def run_until(env, predicate, limit=5000, seed=0):
    rng = np.random.RandomState(seed)
    steps = [env.reset(seed=seed)]
    for _ in range(limit):
        steps.append(env.step(rng.randint(env.info.num_actions, size=env.num_envs)))
        if predicate(steps[-1]):
            break
    return steps


def test_life_loss_zeros_discount_without_ending_the_episode():
    env = envs.make(atari_config(), 1, seed=0)
    steps = run_until(env, lambda s: s.last[0])
    env.close()
    losses = [i for i, s in enumerate(steps) if s.life_loss[0]]
    assert len(losses) == 4  # Breakout: 5 lives, the fifth loss ends the game
    assert not any(steps[i].last[0] for i in losses)
    assert steps[-1].terminated[0] and steps[-1].last[0]


def test_after_last_comes_a_first_with_no_reward():
    env = envs.make(atari_config(), 1, seed=0)
    steps = run_until(env, lambda s: s.last[0])
    after = env.step(np.array([1]))
    env.close()
    assert steps[-1].last[0] and after.first[0] and after.reward[0] == 0
    assert after.real_steps == 0 and not after.life_loss[0]


def test_frame_cap_is_truncation_not_termination():
    env = envs.make(atari_config(env="pong", max_frames_per_episode=400), 1, seed=0)
    steps = run_until(env, lambda s: s.last[0], limit=200)
    env.close()
    assert steps[-1].last[0] and not steps[-1].terminated[0]
    assert len(steps) < 120  # 400 frames / 4 per step, plus no-ops


def test_machado_protocol_has_no_life_loss_signal():
    env = envs.make(atari_config(protocol="machado"), 1, seed=0)
    steps = run_until(env, lambda s: s.last[0])
    env.close()
    assert steps[-1].terminated[0] and not any(s.life_loss[0] for s in steps)


def test_same_seed_same_frames():
    def frames(seed):
        env = envs.make(atari_config(), 1, seed=seed)
        out = [s.frame.copy() for s in run_until(env, lambda s: False, limit=50, seed=seed)]
        env.close()
        return np.stack(out)

    np.testing.assert_array_equal(frames(3), frames(3))
    assert not np.array_equal(frames(3), frames(4))


def test_every_table_game_has_a_rom():
    from qzoo.envs.scores import ATARI_GAMES

    for game in ATARI_GAMES:
        assert envs.resolve(game)[0] == "atari"


@pytest.mark.parametrize("name", ["minatar/breakout", "CartPole-v1"])
def test_small_environments(name):
    domain, name = envs.resolve(name)
    config = make_config("dqn", name, domain, {})
    env = envs.make(config, 3, seed=0)
    steps = run_until(env, lambda s: s.last.any(), limit=3000)
    after = env.step(np.zeros(3, np.int64))
    env.close()
    ended = steps[-1].last
    assert (after.first == ended).all()
    if domain == "minatar":
        assert env.info.frame_shape == (4, 10, 10) and steps[0].frame.dtype == np.uint8
    else:
        assert env.info.frame_shape == (4,) and steps[0].frame.dtype == np.float32
