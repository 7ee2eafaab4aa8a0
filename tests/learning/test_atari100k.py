"""Atari 100k's parts: the der and drq_eps presets against the published values (by
hand, from Dopamine's labs/atari_100k DER.gin and DrQ_eps.gin), DrQ's random shift on
hand-made images, evaluation by whole episodes, evaluation every K iterations, noisy
layers evaluated on their mean weights, and the dueling streams' shared hidden layer."""

import math

import numpy as np
import pytest
import torch

from qzoo.configuration import build_config
from qzoo.learning.augmentation import augment, intensity_noise, random_shift, shift_images
from qzoo.networks import draws
from qzoo.networks.heads import Head
from qzoo.run.trainer import Trainer


def test_drq_eps_preset_is_dopamines_drq_eps_gin_in_frames():
    c = build_config("drq_eps", {"env": "pong"})
    # 10 iterations of 10k agent steps = 100k steps = 400k frames.
    assert (c.iterations, c.train_frames, c.action_repeats) == (10, 40_000, 4)
    assert c.iterations * c.train_frames // c.action_repeats == 100_000
    # One update of 32 per agent step, from 1,600 transitions on.
    assert (c.learn_period, c.batch_size, c.min_replay_size) == (4, 32, 1_600)
    assert (c.n_steps, c.discount, c.double_q, c.dueling, c.dueling_shared_hidden) == (
        10, 0.99, True, True, True)  # fmt: skip
    assert (c.optimizer, c.learning_rate, c.optimizer_epsilon, c.max_global_grad_norm) == (
        "adam", 1e-4, 1.5e-4, 0.0)  # fmt: skip
    assert c.grad_error_bound == 0.0  # Huber
    assert (c.distribution, c.noisy, c.prioritized) == ("none", False, False)
    assert c.target_network_update_period == 4  # re-synced after every update
    # Epsilon 1 -> 0.01 over 5,000 agent steps = 20,000 frames, from 1,600 steps on.
    assert c.exploration_decay_frames == 20_000 and c.exploration_epsilon_end_value == 0.01
    assert c.exploration_begin_frame == 1_600 * 4
    assert (c.eval_episodes, c.eval_exploration_epsilon) == (100, 0.001)
    assert (c.torso, c.init, c.augmentation) == ("dopamine_cnn", "glorot", "shift_intensity")
    assert (c.protocol, c.max_frames_per_episode) == ("dqn_zoo", 108_000)  # no sticky actions


def test_der_preset_is_dopamines_der_gin_in_frames():
    c = build_config("der", {"env": "pong"})
    assert (c.distribution, c.num_atoms, c.vmax, c.noisy, c.noisy_weight_init) == (
        "categorical", 51, 10.0, True, 0.1)  # fmt: skip
    # Priorities sqrt(loss): alpha 0.5; beta fixed at 0.5; no uniform mix.
    assert (c.prioritized, c.priority_exponent, c.uniform_sample_probability) == (True, 0.5, 0.0)
    assert c.importance_sampling_exponent_begin_value == 0.5
    assert c.importance_sampling_exponent_end_value == 0.5
    assert c.target_network_update_period == 2_000 * 4  # 2,000 updates
    assert (c.exploration_epsilon_begin_value, c.exploration_epsilon_end_value) == (0.0, 0.0)
    assert (c.eval_exploration_epsilon, c.eval_noise, c.eval_episodes) == (0.001, False, 100)
    assert (c.n_steps, c.learning_rate, c.optimizer_epsilon, c.augmentation) == (
        10, 1e-4, 1.5e-4, "none")  # fmt: skip


def _image():
    """One 1-channel 6x6 image whose pixel (i, j) holds 10 i + j."""
    return (10 * torch.arange(6)[:, None] + torch.arange(6)).to(torch.uint8)[None, None]


def test_a_shift_by_hand_repeats_the_edge():
    image = _image()
    # Offsets (row 0, column 4) with pad 2: rows move down by 2 (the top row repeated),
    # columns left by 2 (the right column repeated).
    out = shift_images(image, torch.tensor([0]), torch.tensor([4]), pad=2)[0, 0]
    expected = torch.tensor([[2, 3, 4, 5, 5, 5], [2, 3, 4, 5, 5, 5], [2, 3, 4, 5, 5, 5],
                             [12, 13, 14, 15, 15, 15], [22, 23, 24, 25, 25, 25],
                             [32, 33, 34, 35, 35, 35]], dtype=torch.uint8)  # fmt: skip
    assert torch.equal(out, expected)
    centre = shift_images(image, torch.tensor([2]), torch.tensor([2]), pad=2)
    assert torch.equal(centre, image)  # offset (pad, pad) is the identity
    assert out.dtype == torch.uint8 and torch.equal(image, _image())  # input untouched


def test_random_shifts_stay_within_four_pixels_one_per_image_across_its_frames():
    """Each image of a batch of stacks of 4 frames of random pixels is one shift (the
    same for its 4 frames) of within 4 pixels in each axis; 600 images draw every one
    of the 9 x 9 offsets; a seeded stream repeats its output."""
    rng = np.random.default_rng(0)
    frames = torch.from_numpy(rng.integers(0, 256, (600, 4, 20, 20), dtype=np.uint8))
    out = random_shift(frames, torch.Generator().manual_seed(1))
    offsets = [(r, c) for r in range(9) for c in range(9)]
    candidates = torch.stack([shift_images(frames, torch.full((600,), r), torch.full((600,), c))
                              for r, c in offsets])  # [81, 600, 4, 20, 20]  # fmt: skip
    matches = (candidates == out[None]).flatten(2).all(2)  # [81, 600]: all 4 frames agree
    assert torch.equal(matches.sum(0), torch.ones(600, dtype=torch.int64))  # one shift each
    assert len(set(matches.int().argmax(0).tolist())) == 81
    assert torch.equal(out, random_shift(frames, torch.Generator().manual_seed(1)))


def test_shift_offsets_per_batch_shift_every_image_alike():
    """--shift-offsets batch (Dopamine's DrQ code until 2022): one offset for the whole
    batch, from two uniforms of the stream; the learner's objective draws so."""
    rng = np.random.default_rng(2)
    frames = torch.from_numpy(rng.integers(0, 256, (50, 4, 20, 20), dtype=np.uint8))
    out = random_shift(frames, torch.Generator().manual_seed(5), per="batch")
    u = torch.rand((2, 1), generator=torch.Generator().manual_seed(5))
    row, column = (u * 9).to(torch.int64)[:, 0].tolist()
    assert torch.equal(out, shift_images(frames, torch.full((50,), row), torch.full((50,), column)))
    varied = {tuple(random_shift(frames[:1], torch.Generator().manual_seed(k), per="batch")
                    .flatten().tolist()) for k in range(40)}  # fmt: skip
    assert len(varied) > 20  # the offset itself is random: one of 81
    from qzoo import envs
    from qzoo.learning.from_config import make_learner

    config = build_config("drq_eps", {"env": "pong", "shift_offsets": "batch"})
    learner = make_learner(config, envs.describe(config), (4, 84, 84), torch.device("cpu"),
                      torch.Generator())  # fmt: skip
    assert (learner.objective.kind, learner.objective.per) == ("shift_intensity", "batch")


def test_intensity_noise_scales_each_image_by_at_most_ten_percent():
    frames = torch.full((500, 4, 3, 3), 100, dtype=torch.uint8)
    out = intensity_noise(frames, torch.Generator().manual_seed(0))
    scale = out[:, 0, 0, 0] / 100
    assert out.dtype == torch.float32
    assert torch.all(out == out[:, :1, :1, :1])  # one factor per image
    assert scale.min() >= 0.9 - 1e-6 and scale.max() <= 1.1 + 1e-6  # clip(N, -2, 2) x 0.05
    assert abs(float(scale.std()) - 0.05) < 0.006  # nearly N(0, 1) x 0.05 (clipped tails)


@pytest.mark.parametrize("per", ["image", "batch"])
def test_augmentation_draws_through_a_tape_as_a_compiled_update_takes_them(per):
    frames = torch.from_numpy(np.random.default_rng(1).integers(0, 256, (8, 4, 12, 12),
                                                                dtype=np.uint8))  # fmt: skip
    recorder = draws.Recorder(torch.Generator().manual_seed(3))
    direct = augment("shift_intensity", frames, recorder, per)
    taped = augment("shift_intensity", frames, draws.Tape(
        draws.draw(recorder.draws, torch.Generator().manual_seed(3), "cpu")), per)  # fmt: skip
    assert recorder.draws[0] == ("uniform", (2, 8 if per == "image" else 1))
    assert [kind for kind, _ in recorder.draws] == ["uniform", "normal"]
    assert torch.equal(direct, taped)


def test_drq_eps_learns_on_shifted_batches_and_the_update_sees_them():
    """The learner hands the objective shifted s_tm1 and s_t (a stub objective records
    what it got): not the replay's frames, each a shift of them."""
    trainer = Trainer(build_config("drq_eps", {
        "env": "minatar/breakout", "augmentation": "shift", "replay_capacity": "2000",
        "min_replay_capacity_fraction": "0.1", "threads": "1"}))  # fmt: skip
    trainer.train_phase(400)
    seen = []
    inner = trainer.learner.objective.objective
    trainer.learner.objective.objective = lambda o, t, b, g: seen.append(b) or inner(o, t, b, g)
    batch = trainer.replay.sample(32)
    trainer.learner.learn(batch)
    s_tm1 = seen[0].s_tm1
    assert not torch.equal(torch.as_tensor(s_tm1), torch.as_tensor(batch.s_tm1))
    shifted = 0
    for got, frame in zip(s_tm1, torch.as_tensor(batch.s_tm1), strict=True):
        candidates = [shift_images(frame[None], torch.tensor([r]), torch.tensor([c]))[0]
                      for r in range(9) for c in range(9)]  # fmt: skip
        assert any(torch.equal(got, x) for x in candidates)
        shifted += not torch.equal(got, frame)
    assert shifted > 16


def test_augmentation_refused_where_there_are_no_images(tmp_path, capsys):
    from qzoo.cli.main import main

    argv = ["train", "dqn", "--env", "CartPole-v1", "--augmentation", "shift", "--run-dir",
            str(tmp_path / "run")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    expected = (
        "qzoo: error: --augmentation: bad value shift; expected none for gym "
        "environments (it shifts images: Atari or MinAtar frames)"
    )
    assert err == [expected]


def _cartpole(**options):
    values = {
        "env": "CartPole-v1",
        "iterations": "3",
        "train_frames": "300",
        "eval_frames": "100",
        "threads": "1",
        "replay_capacity": "4000",
        **options,
    }
    return Trainer(build_config("dqn", values))


def test_evaluation_by_episodes_plays_one_whole_episode_per_environment():
    trainer = _cartpole(eval_episodes="7")
    assert trainer.evaluator.num_envs == 7
    row = trainer.run_iteration()
    assert row["eval_num_episodes"] == 7
    # Each of the 7 first episodes, whole: CartPole pays 1 per step, so the mean return
    # is the mean number of steps; at least 8 steps each (the pole falls no sooner).
    assert row["eval_episode_return"] >= 8
    assert trainer.evaluator.episodes.finished.all()


def test_eval_period_skips_the_evaluations_between_and_keeps_the_last():
    trainer = _cartpole(eval_period="2")
    rows = [trainer.run_iteration() for _ in range(4)]
    evaluated = [not math.isnan(r["eval_episode_return"]) for r in rows]
    # 2 and the last (3); not the untrained iteration 0, as Dopamine's runner.
    assert evaluated == [False, False, True, True]
    assert rows[1]["eval_num_episodes"] == 0 and rows[1]["train_num_updates"] > 0
    every = _cartpole()  # evaluating changes no training number
    rows_every = [every.run_iteration() for _ in range(4)]
    assert not math.isnan(rows_every[0]["eval_episode_return"])
    for column in ("train_loss", "train_mean_q", "train_episode_return"):
        assert [r[column] for r in rows[1:]] == [r[column] for r in rows_every[1:]], column


def test_evaluation_with_the_noise_off_acts_on_the_mean_weights():
    """The evaluator's policy with --eval-noise false: its state value and greedy actions
    are the mean weights' (mu(x) in every noisy layer, by hand for the first); with
    --eval-noise true the same network acts on noisy weights and its values differ."""
    policy = Trainer(build_config("rainbow", {"env": "CartPole-v1", "eval_noise": "false",
                                              "threads": "1"})).evaluator.policy  # fmt: skip
    noisy = Trainer(build_config("rainbow", {"env": "CartPole-v1", "eval_noise": "true",
                                             "threads": "1"})).evaluator.policy  # fmt: skip
    noisy.network.load_state_dict(policy.network.state_dict())
    assert not policy.noise and noisy.noise
    obs = np.random.default_rng(0).normal(scale=3.0, size=(256, 4)).astype(np.float32)
    with torch.no_grad():
        mean_q = policy.network(torch.from_numpy(obs), generator=draws.MEAN).q_values
    greedy = np.zeros(256, np.float32)
    for _ in range(2):  # the same every call: no draw reaches the weights
        actions, value = policy(obs, greedy, torch.Generator().manual_seed(1))
        assert np.array_equal(actions, mean_q.argmax(1).numpy())
        assert value == pytest.approx(mean_q.max(1).values.mean().item(), rel=1e-6)
    _, noisy_value = noisy(obs, greedy, torch.Generator().manual_seed(1))
    assert noisy_value != pytest.approx(value, rel=1e-6)  # the control: noise changes values
    # The mean weights alone, by hand for the first noisy layer: mu(x).
    layer = policy.network.head.advantage[0]
    x = torch.randn(3, layer.weight_mu.shape[1])
    expected = torch.nn.functional.linear(x, layer.weight_mu, layer.bias_mu)
    assert torch.equal(layer(x, draws.MEAN), expected)


def test_shared_hidden_dueling_head_has_one_hidden_layer_and_biased_streams():
    head = Head(10, 8, num_actions=3, width=2, dueling=True, shared_hidden=True)
    separate = Head(10, 8, num_actions=3, width=2, dueling=True)
    count = lambda m: sum(p.numel() for p in m.parameters())
    # Shared: 10x8+8, then 8x6+6 and 8x2+2; separate: two hidden layers of 10x8+8.
    assert count(head) == 88 + 54 + 18 and count(separate) == 2 * 88 + 54 + 18
    x = torch.randn(4, 10)
    hidden = torch.relu(head.hidden[0](x))
    advantage = head.advantage[0](hidden).view(4, 3, 2)
    value = head.value[0](hidden).view(4, 1, 2)
    expected = value + advantage - advantage.mean(1, keepdim=True)
    torch.testing.assert_close(head(x), expected)


@pytest.mark.parametrize("agent", ["der", "drq_eps"])
def test_the_presets_run_on_cartpole_without_images(agent):
    """On CartPole the domain's evaluation by frames and no shifts replace Atari's."""
    config = build_config(agent, {"env": "CartPole-v1"})
    assert (config.eval_episodes, config.augmentation) == (0, "none")
