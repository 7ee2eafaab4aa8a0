"""R2D1 under rlpyt's "r2d1" config (--episodic-lives): a lost life ends the agent's
episode while the game goes on. Sequences extracted by hand, and the actor's resets."""

import dataclasses
import types

import numpy as np
import torch

from qzoo.acting.actor import Actor
from qzoo.acting.from_config import acting_of
from qzoo.acting.recurrent_policy import RecurrentInfo
from qzoo.configuration import build_config, make_config
from qzoo.envs import EnvStep, first_step
from qzoo.envs.step import EnvInfo
from qzoo.learning import losses
from qzoo.replay.batch import Row
from qzoo.replay.sequences import SequenceStorage


def _storage(episodic_lives):
    """2 environments, 16 rows, one episode each; env 0 loses a life arriving at row 6
    (ZERO_DISCOUNT, not LAST). Frame = 10 t + b, action = t % 3, reward = t (0 at row 0)."""
    storage = SequenceStorage(capacity=40, num_envs=2, frame_shape=(1,), frame_dtype=np.float32,
                              num_actions=3, stack=2, n_steps=2, discount=0.5, burn_in=2,
                              trained=3, interval=2, state_size=1,
                              episodic_lives=episodic_lives)  # fmt: skip
    for t in range(16):
        first = np.array([t == 0, t == 0])
        no = np.zeros(2, bool)
        lost = np.array([t == 6, False])
        state = torch.tensor([[[t], [-t]], [[t + 100], [-t]]], dtype=torch.float32)
        info = RecurrentInfo(state, np.full(2, 0.5, np.float32), np.full(2, 1.0, np.float32))
        reward = np.where(first, 0.0, float(t)).astype(np.float32)
        frame = np.array([[10 * t], [10 * t + 1]], np.float32)
        storage.add(Row(frame, np.full(2, t % 3), reward, first, no, lost, info))
    return storage


def test_a_lost_life_starts_the_agents_episode_in_replayed_sequences():
    batch = _storage(True).gather(np.array([2, 2]), np.array([0, 1]))  # rows 2..8
    # Row 6 starts env 0's new life: its stack's older frame (row 5) is blank, and it
    # has no previous action or reward (as the actor, which reset there).
    assert (
        batch.frame_mask[:, 0].tolist() == [[True, True]] * 4 + [[False, True]] + [[True, True]] * 2
    )
    assert batch.prev_action[:, 0].tolist() == [1, 2, 0, 1, -1, 0, 1]
    assert batch.prev_reward[:, 0].tolist() == [2, 3, 4, 5, 0, 7, 8]
    # Trained rows 4, 5, 6 (n = 2, gamma 0.5): row 4's return 5 + 0.5 x 6 stops at the
    # lost life (discount 0), row 5's is 6 (discount 0): both trained (rlpyt: valid up to
    # and including the done); row 6, the new life's, masked with the rest.
    assert batch.r_t[:2, 0].tolist() == [8.0, 6.0] and batch.discount_t[:2, 0].tolist() == [0, 0]
    assert batch.transition.T.tolist() == [[True, True, False], [True, True, True]]
    valid = losses.valid_until_episode_end(torch.as_tensor(batch.transition), dim=0)
    assert valid.T.tolist() == [[1, 1, 0], [1, 1, 1]]
    assert batch.zero_state.tolist() == [False, False]
    # A sequence whose burn-in (rows 5, 6) holds the new life zeroes its burned-in state.
    later = _storage(True).gather(np.array([4, 4]), np.array([0, 1]))
    assert later.zero_state.tolist() == [True, False]
    assert later.transition[:, 0].tolist() == [True, True, True]  # row 6 first: trained

    # Without episodic lives (DQN Zoo's protocol alone): the discount is zeroed, nothing else.
    plain = _storage(False).gather(np.array([2, 2]), np.array([0, 1]))
    assert plain.frame_mask.all() and (plain.prev_action[:, 0] >= 0).all()
    assert plain.prev_reward[4, 0] == 6 and plain.transition.all()
    assert not _storage(False).gather(np.array([4, 4]), np.array([0, 1])).zero_state.any()


class Lives:
    """One environment: frame t at step t; a life lost arriving at step 3."""

    num_envs = 1

    def reset(self, seed):
        self.t = 0
        return first_step(np.zeros((1, 1), np.float32))

    def step(self, actions):
        self.t += 1
        no = np.zeros(1, bool)
        lost = np.array([self.t == 3])
        return EnvStep(np.full((1, 1), self.t, np.float32), np.ones(1, np.float32), no, no, no,
                       lost, 1)  # fmt: skip

    def close(self):
        pass


class Recording:
    def __init__(self):
        self.starts, self.observations = [], []

    def observe(self, first, reward):
        self.starts.append(bool(first[0]))

    def __call__(self, observation, epsilon, generator):
        self.observations.append(observation[0].tolist())
        return np.zeros(1, np.int64), 0.0


def _acted(config, eval_mode):
    info = EnvInfo("lives", "gym", 2, (1,), np.float32, None)
    policy = Recording()
    stream = types.SimpleNamespace(numpy=np.random.default_rng(0), torch=None)
    actor = Actor(acting_of(config), info, policy, stream, lambda _: 0.0,
                  make_env=lambda *args: Lives(), eval_mode=eval_mode)  # fmt: skip
    actor.start()
    for _ in range(5):
        actor.step()
    return policy


def test_the_training_actor_starts_anew_after_a_lost_life_and_evaluation_does_not():
    config = make_config("dqn", "CartPole-v1", "gym", {"frame_stack": 2})
    lives = dataclasses.replace(config, episodic_lives=True)
    policy = _acted(lives, eval_mode=False)
    # Stacks (older, newer) of frames 0..4; at frame 3 (the lost life) the older is blank
    # and the policy is told an episode starts (its recurrent state resets).
    assert policy.observations == [[0, 0], [0, 1], [1, 2], [0, 3], [3, 4]]
    assert policy.starts == [True, False, False, True, False]
    # rlpyt's evaluation environment has episodic_lives=False: nothing resets there.
    policy = _acted(lives, eval_mode=True)
    assert policy.observations == [[0, 0], [0, 1], [1, 2], [2, 3], [3, 4]]
    assert policy.starts == [True, False, False, False, False]


def test_presets_follow_rlpyts_configs():
    assert build_config("r2d1", {"env": "pong"}).episodic_lives  # env episodic_lives=True
    assert not build_config("r2d1_long", {"env": "pong"}).episodic_lives  # False there
    assert not build_config("r2d1", {"env": "CartPole-v1"}).episodic_lives  # no lives


def test_episodic_lives_where_no_life_is_signalled_is_one_line_exit_2(tmp_path, capsys):
    from qzoo.cli.main import main

    run_dir = tmp_path / "run"
    argv = ["train", "r2d1", "--env", "pong", "--protocol", "machado", "--run-dir", str(run_dir)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("qzoo: error: --protocol machado: r2d1's ")
    assert "--no-episodic-lives" in err and not run_dir.exists()
    assert main(["train", "dqn", "--episodic-lives", "--run-dir", str(run_dir)]) == 2
    assert "--episodic-lives: bad value true; expected false here" in capsys.readouterr().err
