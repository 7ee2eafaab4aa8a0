"""Environment contract on real ALE games, MinAtar and Gymnasium."""

import re

import numpy as np
import pytest

from qzoo import envs
from qzoo.configuration import Config, build_config, make_config
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
    noops = int(env.start_noops[0])
    env.close()
    assert steps[-1].last[0] and not steps[-1].terminated[0]
    # The cap counts the frames after the no-ops (as DQN Zoo's run loop): 400 / 4 = 100
    # agent steps after the first observation, however many no-op frames came before.
    assert noops >= 1 and len(steps) == 1 + 100


@pytest.mark.parametrize("protocol, expected", [
    ("dqn_zoo", set(range(1, 31))),  # DQN Zoo's RandomNoopsEnvironmentWrapper(1, 30)
    ("machado", {0}),  # none (Machado et al. 2018)
])  # fmt: skip
def test_no_op_starts_per_protocol(protocol, expected):
    """Uniform on the protocol's range, inclusive: every value seen in 8 + 320 starts
    (40 ten-step episodes in each of 8 games), no other."""
    config = atari_config(env="pong", protocol=protocol, max_frames_per_episode=40)
    env = envs.make(config, 8, seed=0)
    env.reset(seed=1)
    counts = env.start_noops.tolist()
    for _ in range(40 * 11):  # 10 steps per episode, then the reset step
        step = env.step(np.zeros(8, np.int64))
        counts.extend(env.start_noops[step.first].tolist())
    env.close()
    assert len(counts) == 8 + 320 and set(counts) == expected


def test_a_start_drawn_with_no_no_op_is_drawn_again_and_frames_are_real_no_ops():
    """ale-py (noop_max 31) draws 0 no-op frames for its environment seeded 9; qzoo resets
    that environment again, and its first frame is the screen after exactly the no-op
    frames it reports, as one ALE stepped by hand shows."""
    from ale_py.vector_env import AtariVectorEnv

    from qzoo.tools.screen import AtariGame

    raw = AtariVectorEnv("pong", 1, noop_max=31, stack_num=1, autoreset_mode="NextStep",
                         reward_clipping=False, use_fire_reset=False)  # fmt: skip
    _, info = raw.reset(seed=9)
    raw.close()
    assert info["episode_frame_number"][0] == 0
    config = atari_config(env="pong")
    env = envs.make(config, 1, seed=9)
    frames = [env.reset(seed=9).frame[0]]
    k = int(env.start_noops[0])
    frames += [env.step(np.zeros(1, np.int64)).frame[0] for _ in range(30)]
    env.close()
    assert 1 <= k <= 30

    def by_hand(noops):
        game = AtariGame(config, "pong", seed=9)
        game.noop_min = game.noop_max = noops
        frame, pictures = game.reset()
        assert len(pictures) == 1 + noops
        return [frame] + [game.step(0)[0] for _ in range(30)]

    same = [(a == b).all() for a, b in zip(frames, by_hand(k))]
    one_fewer = [(a == b).all() for a, b in zip(frames, by_hand(k - 1))]
    assert all(same) and not all(one_fewer)  # Pong's ball moves a frame earlier


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
    assert ended.any()  # an episode ended within the limit, and the next step starts anew
    assert (after.first == ended).all()
    if domain == "minatar":
        assert env.info.frame_shape == (4, 10, 10) and steps[0].frame.dtype == np.uint8
    else:
        assert env.info.frame_shape == (4,) and steps[0].frame.dtype == np.float32


def test_ctrl_c_while_minatar_imports_matplotlib_is_not_swallowed(monkeypatch):
    """minatar imports matplotlib and seaborn inside a bare `except:`: a Ctrl-C or
    SIGTERM that came then was swallowed (a warning "Cannot import matplotlib" instead),
    and the command went on as if never stopped. Found by the fault pass of issue 34."""
    import builtins
    import os
    import signal
    import sys

    from qzoo.envs.gym import minatar_environment

    for name in [n for n in sys.modules if n == "minatar" or n.startswith("minatar.")]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh, restored after
    real_import = builtins.__import__

    def import_(name, *args, **kwargs):
        if name == "seaborn":  # as a Ctrl-C would, in the middle of minatar's import
            os.kill(os.getpid(), signal.SIGINT)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", import_)
    with pytest.raises(KeyboardInterrupt):
        minatar_environment()
