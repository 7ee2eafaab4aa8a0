"""PQN (Gallici et al. 2025): the Q(lambda) returns worked out by hand, the preset's
published values, the options it refuses, and its driver in the run loop (exact resume,
no replay, the learning-rate schedule)."""

import pytest
import torch
from helpers import resumed_rows, rows

from qzoo.acting.schedule import LinearSchedule
from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.learning.losses import lambda_returns
from qzoo.run.trainer import Trainer, run

# One environment, T = 3, gamma 0.9, lambda 0.5, rewards [1, 2, 3]; the states each
# step reaches are worth max_a Q = [20, 30, 40] (the first state's value is never used).
R_T, V_T = [1.0, 2.0, 3.0], [20.0, 30.0, 40.0]


def returns(discount, lam, r=R_T, v=V_T):
    as_tensor = lambda x: torch.as_tensor(x, dtype=torch.float32)
    return lambda_returns(as_tensor(r), as_tensor(discount), as_tensor(v), lam).tolist()


@pytest.mark.parametrize("discount, lam, expected", [
    # No episode end: G_2 = 3 + .9 x 40 = 39; G_1 = 2 + .9 (.5 x 39 + .5 x 30) = 33.05;
    # G_0 = 1 + .9 (.5 x 33.05 + .5 x 20) = 24.8725.
    ([0.9, 0.9, 0.9], 0.5, [24.8725, 33.05, 39.0]),
    # The second transition terminates: G_1 = 2; G_0 = 1 + .9 (.5 x 2 + .5 x 20) = 10.9.
    ([0.9, 0.0, 0.9], 0.5, [10.9, 2.0, 39.0]),
    # The rollout's last transition terminates: G_2 = 3; G_1 = 2 + .9 (.5 x 3 + .5 x 30)
    # = 16.85; G_0 = 1 + .9 (.5 x 16.85 + .5 x 20) = 17.5825.
    ([0.9, 0.9, 0.0], 0.5, [17.5825, 16.85, 3.0]),
    # lambda 0 is one-step Q-learning's target, lambda 1 the discounted sum to the end.
    ([0.9, 0.9, 0.9], 0.0, [19.0, 29.0, 39.0]),
    ([0.9, 0.9, 0.9], 1.0, [34.39, 37.1, 39.0]),
    # The second transition reaches a truncation (lambda 0 there): bootstrap from its
    # state's 30, the trace stopped: G_1 = 2 + .9 x 30 = 29; G_0 = 1 + .9 (.5 x 29 +
    # .5 x 20) = 23.05.
    ([0.9, 0.9, 0.9], [0.5, 0.0, 0.5], [23.05, 29.0, 39.0]),
])  # fmt: skip
def test_lambda_returns_match_the_hand_worked_values(discount, lam, expected):
    assert returns(discount, lam) == pytest.approx(expected, abs=1e-4)


def test_lambda_returns_keep_environments_apart():
    """[T, N]: each column is its own environment's returns (two of the cases above)."""
    r = torch.tensor([R_T, R_T]).T
    v = torch.tensor([V_T, V_T]).T
    discount = torch.tensor([[0.9, 0.9, 0.9], [0.9, 0.0, 0.9]]).T
    got = lambda_returns(r, discount, v, 0.5)
    assert got.shape == (3, 2)
    assert got[:, 0].tolist() == pytest.approx([24.8725, 33.05, 39.0])
    assert got[:, 1].tolist() == pytest.approx([10.9, 2.0, 39.0])


def test_the_preset_holds_the_published_values():
    atari = build_config("pqn", {"env": "pong"})  # purejaxql's pqn_atari.yaml
    assert (atari.num_envs, atari.rollout_steps, atari.update_epochs, atari.num_minibatches) \
        == (128, 32, 2, 32)  # fmt: skip
    assert (atari.q_lambda, atari.discount, atari.optimizer, atari.learning_rate) \
        == (0.65, 0.99, "radam", 2.5e-4)  # fmt: skip
    assert atari.optimizer_epsilon == 1e-8  # optax.radam's default
    assert (atari.max_global_grad_norm, atari.exploration_epsilon_end_value) == (10.0, 0.001)
    assert atari.exploration_decay_frames == 0.1 * atari.iterations * atari.train_frames
    assert atari.layer_norm and atari.init == "he_normal" and atari.return_loss == "l2"
    assert atari.learning_rate_decay == "none" and atari.eval_exploration_epsilon == 0.0
    gym = build_config("pqn", {"env": "CartPole-v1"})  # CleanRL's pqn.py
    assert (gym.num_envs, gym.rollout_steps, gym.update_epochs, gym.num_minibatches) \
        == (4, 128, 4, 4)  # fmt: skip
    assert gym.iterations * gym.train_frames == 500_000 and gym.mlp_layers == "120,84"
    assert (gym.learning_rate, gym.learning_rate_decay, gym.exploration_epsilon_end_value) \
        == (2.5e-4, "linear", 0.05)  # fmt: skip
    assert gym.exploration_decay_frames == 250_000
    # torch.optim.RAdam with its default eps, not the Gymnasium domain's Adam (eps 0.01/32)
    assert (gym.optimizer, gym.optimizer_epsilon, gym.max_global_grad_norm) == ("radam", 1e-8, 10.0)
    assert gym.init == "orthogonal" and gym.return_loss == "squared"
    minatar = build_config("pqn", {"env": "minatar/breakout"})  # purejaxql's pqn_minatar
    assert (minatar.num_envs, minatar.rollout_steps, minatar.learning_rate) == (128, 32, 5e-4)
    assert minatar.iterations * minatar.train_frames == 10_000_000
    # optax.radam's default eps, not the MinAtar domain's 1e-4 (made for RMSprop-style Adam)
    assert (minatar.optimizer, minatar.optimizer_epsilon, minatar.max_global_grad_norm) \
        == ("radam", 1e-8, 10.0)  # fmt: skip


@pytest.mark.parametrize("options, blamed", [
    (["--prioritized"], ("--prioritized: bad value true; expected false with --rollout-steps "
                         "32 (PQN: no replay to prioritize)")),
    (["--rollout-steps", "32", "--prioritized"], ("--rollout-steps: bad value 32; expected 0 "
                                                  "with --prioritized true")),
    (["--replay-capacity", "1000"], "--replay-capacity"),
    (["--target-network-update-period", "100"], "--target-network-update-period"),
    (["--acting", "async"], "--acting: bad value async; expected serial with --rollout-steps"),
    (["--num-minibatches", "7"], ("--num-minibatches: bad value 7; expected a divisor of a "
                                  "rollout's 4096 transitions")),
])  # fmt: skip
def test_what_pqn_cannot_use_is_refused_in_one_line(options, blamed, capsys, tmp_path):
    argv = ["train", "pqn", "--env", "pong", "--run-dir", str(tmp_path / "run"), *options]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and blamed in err, err
    assert not (tmp_path / "run").exists()


def test_q_lambda_without_pqn_is_refused(capsys):
    assert main(["train", "dqn", "--env", "CartPole-v1", "--q-lambda", "0.9"]) == 2
    assert "--q-lambda" in capsys.readouterr().err


# CleanRL's CartPole settings with rollouts of 4 x 32 steps.
SMALL = {"env": "CartPole-v1", "iterations": "3", "train_frames": "600", "eval_frames": "200",
         "eval_episodes": "0", "threads": "1", "rollout_steps": "32"}  # fmt: skip


def test_a_pqn_run_resumes_exactly(tmp_path):
    """Saved after iteration 1 and resumed in a new trainer: iteration 2 as without the
    stop (the network, RAdam's moments, the minibatch shuffles and the schedules)."""
    expected = rows(Trainer(build_config("pqn", SMALL)), 3)
    got = resumed_rows(lambda: Trainer(build_config("pqn", SMALL)), tmp_path, 2, 1)
    assert got == expected
    # 600 frames are at least five rollouts of 4 x 32 steps (an environment's reset is
    # a step without a frame); each rollout 4 epochs of 4 minibatches.
    updates = [float(row["train_num_updates"]) for row in got]
    assert updates[0] == 0 and all(n >= 80 and n % 16 == 0 for n in updates[1:]), updates


def test_the_learning_rate_falls_linearly_per_rollout():
    """CleanRL's pqn.py: lr_0 (1 - (i - 1) / iterations) before rollout i; 0 at the end."""
    annealed = LinearSchedule(0, 6144, 2.5e-4, 0.0)  # the driver's, for 3 x 2048 frames
    assert annealed(0) == 2.5e-4
    assert annealed(1536) == pytest.approx(1.875e-4)
    assert annealed(6144) == annealed(7000) == 0.0
    trainer = Trainer(build_config("pqn", SMALL))
    trainer.run_iteration()
    trainer.run_iteration()  # the phase's last rollout started in frames [472, 600)
    lr = trainer.learner.optimizer.param_groups[0]["lr"]
    in_run = LinearSchedule(0, 1800, 2.5e-4, 0.0)
    assert in_run(600) < lr <= in_run(600 - 4 * 32)


@pytest.mark.slow
def test_pqn_learns_cartpole():
    """CleanRL's CartPole settings on a fifth of its 500,000 steps (8 iterations of
    12,500 frames: epsilon reaches 0.05 at 50,000): the untrained greedy network scores
    about 10; PQN passes 60 within four iterations (seeds 1-3: 69.9, 150.4 and 99.8 at
    iterations 2, 2 and 3), and the test stops there. Budget 60 s (58 CPU s on the
    2-core dev machine beside two Atari runs, 2026-11-29)."""
    options = {"env": "CartPole-v1", "iterations": "8", "train_frames": "12500",
               "eval_frames": "2000", "seed": "1", "threads": "1"}  # fmt: skip
    returns = []
    for row in run(Trainer(build_config("pqn", options))):
        returns.append(row["eval_episode_return"])
        if len(returns) > 4 or returns[-1] > 60:
            break
    assert returns[0] < 40, returns
    assert returns[-1] > 60, returns


@pytest.mark.slow
def test_pqn_learns_minatar_breakout():
    """The authors' MinAtar settings (128 environments x 32 steps) for 100,000 frames:
    the untrained greedy network scores about 0.5, PQN passes 2 (seed 1 over 3 x 100,000
    frames: 3.2, 4.9 and 4.7). Budget 90 s (about 45 s on the 2-core
    dev machine unloaded)."""
    options = {"env": "minatar/breakout", "iterations": "1", "train_frames": "100000",
               "eval_frames": "10000", "seed": "1", "threads": "1"}  # fmt: skip
    returns = [row["eval_episode_return"] for row in run(Trainer(build_config("pqn", options)))]
    assert returns[0] < 1, returns
    assert returns[1] > 2, returns
