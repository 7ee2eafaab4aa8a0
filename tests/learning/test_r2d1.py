"""R2D1 (qzoo train r2d1): value rescaling, the rescaled sequence loss and priorities
worked by hand; sequences extracted from the frame storage by hand (burn-in, n-step
targets, masks at episode boundaries, stored recurrent states); the recurrent policy's
per-environment resets; bad input. The resume round trip is in test_run.py."""

import math

import numpy as np
import pytest
import torch

from qzoo.acting.recurrent_policy import RecurrentInfo, RecurrentPolicy
from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.learning import losses
from qzoo.networks.recurrent import RecurrentNetwork
from qzoo.replay.batch import Row
from qzoo.replay.frames import FIRST, LAST
from qzoo.replay.sequences import SequenceSlots, SequenceStorage, stacked_observations


def test_value_rescaling_by_hand_and_round_trip():
    h, h_inv = losses.signed_hyperbolic, losses.signed_parabolic
    x = torch.tensor([0.0, 3.0, -8.0, 99.0], dtype=torch.float64)
    # sign(x) (sqrt(|x| + 1) - 1) + 1e-3 x
    assert h(x).tolist() == pytest.approx([0.0, 1 + 0.003, -2 - 0.008, 9 + 0.099], abs=1e-12)
    assert h_inv(h(x)).tolist() == pytest.approx(x.tolist(), abs=1e-9)
    wide = torch.linspace(-1e4, 1e4, 2001, dtype=torch.float64)
    assert torch.allclose(h_inv(h(wide)), wide, atol=1e-6)
    assert torch.allclose(h(h_inv(wide / 100)), wide / 100, atol=1e-9)


def test_rescaled_double_q_td_by_hand():
    q_tm1 = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    value = torch.tensor([[1.003, 5.0]], dtype=torch.float64)  # h(3) = 1.003 for action 0
    selector = torch.tensor([[1.0, 0.0]], dtype=torch.float64)  # the online argmax: 0
    r, discount = torch.tensor([1.0], dtype=torch.float64), torch.tensor([0.9], dtype=torch.float64)
    a = torch.tensor([1])
    td = losses.transformed_n_step_q_learning(q_tm1, a, r, discount, value, selector)
    # h(1 + 0.9 h^-1(1.003)) - 2 = h(3.7) - 2
    assert td.item() == pytest.approx(math.sqrt(4.7) - 1 + 0.0037 - 2, abs=1e-9)
    # Without a selector the target's own argmax (action 1, h^-1(5) = 35.1...) is used.
    plain = losses.transformed_n_step_q_learning(q_tm1, a, r, discount, value)
    z = (math.sqrt(1 + 4e-3 * (5 + 1 + 1e-3)) - 1) / 2e-3
    y = 1 + 0.9 * (z * z - 1)
    assert plain.item() == pytest.approx(math.sqrt(y + 1) - 1 + 1e-3 * y - 2, abs=1e-9)


def test_sequence_priority_is_point_nine_max_plus_point_one_mean_of_the_valid_steps():
    abs_td = torch.tensor([[1.0, 4.0], [3.0, 0.0], [2.0, 0.0], [10.0, 0.0]])  # [T=4, B=2]
    exists = torch.tensor([[True, True], [True, False], [True, True], [False, True]])
    valid = losses.valid_until_episode_end(exists, dim=0)
    assert valid.T.tolist() == [[1, 1, 1, 0], [1, 0, 0, 0]]
    priorities = losses.sequence_priorities(abs_td, valid, eta=0.9, dim=0)
    # Column 0: max 3, mean 2 (the 10 after the episode end is masked); column 1: 4 and 4.
    assert priorities.tolist() == pytest.approx([0.9 * 3 + 0.1 * 2, 4.0])


def _filled_storage():
    """2 environments, 16 of 20 rows: env 0's episode ends (terminated) at row 5, a new one
    starts at row 6; env 1 has one episode. Frame = 10 t + b, action = t % 3, reward = t
    (0 at episode starts), state (h, c) = (t + 100 b, -t)."""
    storage = SequenceStorage(capacity=40, num_envs=2, frame_shape=(1,), frame_dtype=np.float32,
                              num_actions=3, stack=2, n_steps=2, discount=0.5, burn_in=2,
                              trained=3, interval=2, state_size=1)  # fmt: skip
    for t in range(16):
        first = np.array([t in (0, 6), t == 0])
        last = np.array([t == 5, False])
        state = torch.tensor([[[t], [-t]], [[t + 100], [-t]]], dtype=torch.float32)
        info = RecurrentInfo(state, np.full(2, 0.5, np.float32), np.full(2, 1.0, np.float32))
        reward = np.where(first, 0.0, float(t)).astype(np.float32)
        frame = np.array([[10 * t], [10 * t + 1]], np.float32)
        storage.add(Row(frame, np.full(2, t % 3), reward, first, last, last, info))
    return storage


def test_sequence_extraction_by_hand():
    storage = _filled_storage()
    assert storage.num_rows == 20 and storage.length == 2 + 3 + 2
    # Recurrent states are stored at rows 0, 2, 4, ... only: (h, c) of that row.
    assert storage.states[:8, 0, 0, 0].tolist() == list(range(0, 16, 2))
    assert storage.states[3, 1].ravel().tolist() == [106, -6]
    batch = storage.gather(np.array([2, 2]), np.array([0, 1]))  # sequences at row 2
    # Frames of rows 1..8 (stack history of row 2, then its 7 steps), each once.
    assert batch.frames[:, :, 0].T.tolist() == [[10 * t + b for t in range(1, 9)] for b in (0, 1)]
    # Row 6 starts env 0's new episode: its stack's older frame (row 5) is blank.
    assert (
        batch.frame_mask[:, 0].tolist() == [[True, True]] * 4 + [[False, True]] + [[True, True]] * 2
    )
    assert batch.frame_mask[:, 1].all()
    obs = stacked_observations(torch.as_tensor(batch.frames), torch.as_tensor(batch.frame_mask))
    assert (
        obs.shape == (7, 2, 2) and obs[4, 0].tolist() == [0, 60] and obs[4, 1].tolist() == [51, 61]
    )
    # Previous action = the action of the row before (t % 3), none (-1) at an episode start.
    assert batch.prev_action[:, 0].tolist() == [1, 2, 0, 1, -1, 0, 1]
    assert batch.prev_action[:, 1].tolist() == [1, 2, 0, 1, 2, 0, 1]
    assert batch.prev_reward[:, 0].tolist() == [2, 3, 4, 5, 0, 7, 8]
    # Trained rows 4, 5, 6 (after 2 burn-in rows). n = 2, gamma = 0.5.
    assert batch.action.T.tolist() == [[1, 2, 0], [1, 2, 0]]
    # env 0: row 4 -> reward 5 of row 5, which terminates (discount 0); row 5 is LAST (no
    # transition), so row 6 (new episode) is masked too. env 1: r_{t+1} + 0.5 r_{t+2}.
    assert batch.r_t[:, 1].tolist() == [5 + 0.5 * 6, 6 + 0.5 * 7, 7 + 0.5 * 8]
    assert batch.discount_t[:, 1].tolist() == [0.25] * 3
    assert batch.r_t[0, 0] == 5 and batch.discount_t[0, 0] == 0
    assert batch.transition.T.tolist() == [[True, False, True], [True, True, True]]
    valid = losses.valid_until_episode_end(torch.as_tensor(batch.transition), dim=0)
    assert valid.T.tolist() == [[1, 0, 0], [1, 1, 1]]
    # Bootstrap observations, as steps from the trained part's start (row 4): n rows on
    # (2, 3, 4), or the terminal row 5 (step 1) for env 0.
    assert batch.bootstrap[:, 1].tolist() == [2, 3, 4] and batch.bootstrap[0, 0] == 1
    assert batch.state[0, :, 0, 0].tolist() == [2, 102]  # the state stored at row 2
    assert batch.zero_state.tolist() == [False, False]  # no episode start in rows 3-4
    later = storage.gather(np.array([4, 4]), np.array([0, 1]))  # burn-in rows 5 and 6
    assert later.zero_state.tolist() == [True, False]


def test_sequence_slots_window_and_validity():
    storage = _filled_storage()  # 16 of 20 rows written
    slots = SequenceSlots(storage)
    # Starts at rows 0, 2, 4, 6, 8 have their 5 rows and the n-step future of the last
    # (rows up to 13 + 2 = 15): points 0..4.
    assert slots.oldest() == 0 and slots.window() == (0, 5) and slots.size == 10
    # Point 1 (row 2) trains from row 4; point 2 (row 4) from row 6, fine for both envs;
    # none trains from a LAST row except env 0 at point... row 5 is not a storage point.
    assert slots.valid(np.array([1, 2]), np.array([0, 0])).tolist() == [True, True]
    assert storage.completed() is None  # row 15 completes the sequence at row 9: no point


def test_recurrent_policy_resets_only_the_environment_whose_episode_ended():
    torch.manual_seed(0)
    from qzoo.networks.torsos import MlpTorso

    net = RecurrentNetwork(MlpTorso(3, (8, 8)), 2, 0, 4, 8, False, 1.0, lambda m: m)
    policy = RecurrentPolicy(net, 2)
    generator = torch.Generator().manual_seed(0)
    obs = np.ones((2, 3), np.float32)
    greedy = np.zeros(2, np.float32)
    policy.observe(np.array([True, True]), np.zeros(2))
    policy(obs, greedy, generator)
    assert policy.agent_info.state.abs().sum() == 0  # both acted from zeros
    policy.observe(np.array([False, False]), np.array([1.0, 1.0]))
    policy(obs, greedy, generator)
    carried = policy.agent_info.state.clone()
    assert (carried.abs().sum(-1) > 0).all()  # both carried their state
    after = policy._state[0][0].clone()
    policy.observe(np.array([False, True]), np.array([2.0, 0.0]))  # env 1's episode ends
    assert policy._prev_action.tolist()[1] == -1 and policy._prev_reward.tolist() == [2.0, 0.0]
    policy(obs, greedy, generator)
    state = policy.agent_info.state
    assert torch.equal(state[0, 0], after[0]) and state[1].abs().sum() == 0


def test_actor_stores_zero_states_exactly_at_episode_starts():
    """A short run on CartPole: the states stored with FIRST rows are zeros; the others
    (carried within episodes) are not."""
    from qzoo.run.trainer import Trainer

    config = build_config("r2d1", {"env": "CartPole-v1", "iterations": "1", "train_frames": "600",
                                   "eval_frames": "40", "replay_capacity": "4000"})  # fmt: skip
    trainer = Trainer(config)
    trainer.run_iteration(), trainer.run_iteration()
    storage = trainer.replay.storage
    points = np.arange(storage.rows // storage.interval) * storage.interval
    first = (storage.flags[points] & FIRST) != 0  # [P, B]
    norms = np.abs(storage.states[: len(points)]).sum((-1, -2))
    assert first.any() and (~first).any()
    assert (norms[first] == 0).all() and (norms[~first] > 0).all()
    assert (storage.flags & LAST).any()
    assert trainer.learner.pop_statistics()["num_updates"] == 0  # popped by run_iteration


@pytest.mark.parametrize("argv, fragment", [
    (["--sequence-steps", "1000", "--replay-capacity", "4000"],
     "--sequence-steps: bad value 1000; expected --burn-in-steps"),
    (["--replay-capacity", "160", "--min-replay-capacity-fraction", "0.5"],
     "--replay-capacity: bad value 160; expected --burn-in-steps"),
    (["--distribution", "categorical"], "--distribution: bad value categorical; expected --dis"),
    (["--noisy"], "--noisy: bad value true; expected --noisy false"),
    (["--offline", "x"], "--offline: bad value x; expected --offline ''"),
    (["--store-state-interval", "0"], "--store-state-interval: bad value 0; expected"),
])  # fmt: skip
def test_bad_r2d1_input_is_one_line_exit_2(argv, fragment, tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main(["train", "r2d1", "--env", "CartPole-v1", *argv, "--run-dir", str(run_dir)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("qzoo: error: ") and fragment in err, err
    assert not run_dir.exists()


def test_feed_forward_agents_refuse_r2d1_options(tmp_path, capsys):
    assert main(["train", "dqn", "--burn-in-steps", "5", "--run-dir", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "--burn-in-steps: bad value 5; expected no --burn-in-steps here" in err
    assert err.count("\n") == 1


def test_input_priorities_from_the_actors_q_values_by_hand():
    """A new sequence's priority (rlpyt B3.4): delta_t = q(a_t) - h(r + gamma h^-1(max_a q
    at the bootstrap row)) over its trained steps, 0.9 max + 0.1 mean."""
    storage = SequenceStorage(capacity=20, num_envs=1, frame_shape=(1,), frame_dtype=np.float32,
                              num_actions=2, stack=1, n_steps=1, discount=0.5, burn_in=0,
                              trained=2, interval=2, state_size=1)  # fmt: skip
    h2 = losses.signed_hyperbolic(torch.tensor(2.0, dtype=torch.float64)).item()
    for t, q_taken in enumerate([1.0, 3.0, 0.0]):
        info = RecurrentInfo(torch.zeros(1, 2, 1), np.array([q_taken], np.float32),
                             np.array([h2], np.float32))  # fmt: skip
        storage.add(Row(np.zeros((1, 1), np.float32), np.zeros(1, np.int64), np.zeros(1),
                        np.array([t == 0]), np.zeros(1, bool), np.zeros(1, bool), info))  # fmt: skip
    assert storage.completed() == 0  # rows 0..2: the sequence at row 0 is complete
    target = math.sqrt(2) - 1 + 1e-3  # h(0 + 0.5 h^-1(h(2))) = h(1)
    td = [1 - target, 3 - target]
    expected = 0.9 * max(td) + 0.1 * sum(td) / 2
    assert storage.input_priorities(0, eta=0.9, eps=1e-3).tolist() == pytest.approx(
        [expected], rel=1e-5
    )


def test_r2d1_long_explores_with_rlpyts_log_spaced_epsilons():
    """rlpyt's r2d1_long config: eps_final 0.1, eps_final_min 0.0005 over all its 192
    environments (B5); r2d1 keeps one final epsilon, 0.01."""
    from qzoo.acting.exploration import final_epsilons
    from qzoo.configuration import make_config

    long = make_config("r2d1_long", "pong", "atari", {})
    finals = final_epsilons(long)
    assert len(finals) == 192 and finals[0] == 0.0005 and abs(finals[-1] - 0.1) < 1e-12
    short = make_config("r2d1", "pong", "atari", {})
    assert short.eps_final_min == 0.0 and short.exploration_epsilon_end_value == 0.01


def test_r2d1_epsilon_decays_over_rlpyts_steps_in_frames():
    """rlpyt decays epsilon from min_steps_learn (1e5 agent steps) to eps_steps (1e6):
    9e5 steps, 3,600,000 frames for both configs (the float fraction of r2d1's run,
    0.009 x 100 x 4e6, is 3,599,999.9999999995: rounded, not truncated)."""
    from qzoo.configuration import make_config

    for name in ("r2d1", "r2d1_long"):
        config = make_config(name, "pong", "atari", {})
        assert config.exploration_decay_frames == 3_600_000, name
    # qzoo's MinAtar domain: 0.9% of 50 x 100,000 frames (44,999.99999999999 in floats)
    assert make_config("r2d1", "minatar/breakout", "minatar", {}).exploration_decay_frames == 45_000
