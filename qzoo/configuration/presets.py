"""The agent presets, one per paper, and the defaults of each non-Atari domain: data.

Each preset names its paper and lists how it differs from `Config()`'s defaults (DQN
Zoo's dqn). A preset's optional "online" entry applies only to a run without
--offline (batch_rl's rem.gin is offline; the paper's online REM differs). See
build.py for how the layers combine.
"""

# batch_rl's fixed-replay agents (Agarwal, Schuurmans & Norouzi 2020): the values of
# batch_rl/fixed_replay/configs/*.gin and Dopamine's runner (batch_rl_dopamine.md §2.2)
# in frames, 4 per agent step: 250,000 training steps = train_frames 1,000,000 (offline:
# the frames the replayed transitions stand for); update_period 4 = learn_period 16
# (62,500 updates per iteration); target_update_period 8,000 = 32,000 frames (2,000
# updates); 125,000 evaluation steps = 500,000 frames, the episode that crosses them
# played to its end and counted (Dopamine's _run_one_phase); 27,000 steps per episode = 108,000
# frames; 200 iterations; gamma 0.99, 1-step, replay 1M, batch 32, rewards clipped to
# [-1, 1], no gradient-norm clip: Config()'s defaults, so only differences are listed.
# Dopamine's Huber loss (no TD-error clip); no double Q. Sticky actions (machado): the
# protocol the dataset was collected with. The online values (min_replay_history 20,000
# steps = 2% of the replay; epsilon 1 -> 0.01 over 250,000 steps = 0.5% of 200M frames)
# act only online. Optimizers have TF1's semantics (learning/optim.py); networks are Dopamine's
# ('same' padding; batch_rl's variance-scaling initialization, §2.4).
_BATCH_RL = {
    "torso": "dopamine_cnn", "init": "variance_scaling",
    "protocol": "machado", "grad_error_bound": 0.0, "target_network_update_period": 32_000,
    "min_replay_capacity_fraction": 0.02, "exploration_epsilon_end_value": 0.01,
    "exploration_epsilon_decay_frame_fraction": 0.005, "eval_exploration_epsilon": 0.001,
    "eval_finish_episodes": True,
}  # fmt: skip
# batch_rl's quantile, multi_head_dqn and rem gins: Adam lr 5e-5, eps 3.125e-4.
_BATCH_RL_ADAM = {"optimizer": "adam_tf1", "learning_rate": 5e-5, "optimizer_epsilon": 3.125e-4}
_BATCH_RL_PAPER = (
    "Agarwal, Schuurmans & Norouzi 2020, An Optimistic Perspective on Offline "
    "Reinforcement Learning, ICML, arXiv:1907.04543"
)

PRESETS = {
    "dqn": {
        "paper": "Mnih et al. 2015, Human-level control through deep reinforcement "
        "learning, Nature 518",
        "overrides": {},
    },
    "double_q": {
        "paper": "van Hasselt, Guez & Silver 2016, Deep Reinforcement Learning with "
        "Double Q-learning, AAAI (tuned version), arXiv:1509.06461",
        "overrides": {
            "double_q": True,
            "shared_bias": True,
            "target_network_update_period": 120_000,
            "exploration_epsilon_end_value": 0.01,
            "eval_exploration_epsilon": 0.01,
        },
    },
    "prioritized": {
        "paper": "Schaul, Quan, Antonoglou & Silver 2016, Prioritized Experience Replay, "
        "ICLR, arXiv:1511.05952 (proportional variant, on tuned Double DQN)",
        "overrides": {
            "double_q": True,
            "shared_bias": True,
            "prioritized": True,
            "priority_exponent": 0.6,
            # lr / sqrt(eps) kept equal to Double DQN's (DQN Zoo's docstring).
            "learning_rate": 2.5e-4 / 4,
            "optimizer_epsilon": 0.01 / 32**2 / 16,
            "target_network_update_period": 120_000,
            "exploration_epsilon_end_value": 0.01,
            "eval_exploration_epsilon": 0.01,
        },
    },
    "c51": {
        "paper": "Bellemare, Dabney & Munos 2017, A Distributional Perspective on "
        "Reinforcement Learning, ICML, arXiv:1707.06887",
        "overrides": {
            "distribution": "categorical",
            "optimizer": "adam",
            "learning_rate": 2.5e-4,
            "optimizer_epsilon": 0.01 / 32,
            "grad_error_bound": 0.0,
            "max_global_grad_norm": 10.0,
            "exploration_epsilon_end_value": 0.01,
            "eval_exploration_epsilon": 0.001,
        },
    },
    "qrdqn": {
        "paper": "Dabney, Rowland, Bellemare & Munos 2018, Distributional Reinforcement "
        "Learning with Quantile Regression, AAAI, arXiv:1710.10044",
        "overrides": {
            "distribution": "quantile",
            "num_quantiles": 201,
            "huber_param": 1.0,
            "optimizer": "adam",
            "learning_rate": 5e-5,
            "optimizer_epsilon": 0.01 / 32,
            "grad_error_bound": 0.0,
            "max_global_grad_norm": 10.0,
            "exploration_epsilon_end_value": 0.01,
            "eval_exploration_epsilon": 0.001,
        },
    },
    "rainbow": {
        "paper": "Hessel et al. 2018, Rainbow: Combining Improvements in Deep "
        "Reinforcement Learning, AAAI, arXiv:1710.02298",
        "overrides": {
            "distribution": "categorical",
            "double_q": True,
            "dueling": True,
            "noisy": True,
            "n_steps": 3,
            "prioritized": True,
            "priority_exponent": 0.5,
            "optimizer": "adam",
            "learning_rate": 2.5e-4 / 4,
            "optimizer_epsilon": 0.005 / 32,
            "grad_error_bound": 0.0,
            "max_global_grad_norm": 10.0,
            "min_replay_capacity_fraction": 0.02,
            "target_network_update_period": 32_000,
            # No epsilon-greedy: noisy nets explore; evaluation is greedy.
            "exploration_epsilon_begin_value": 0.0,
            "exploration_epsilon_end_value": 0.0,
            "eval_exploration_epsilon": 0.0,
        },
    },
    "iqn": {
        "paper": "Dabney, Ostrovski, Silver & Munos 2018, Implicit Quantile Networks for "
        "Distributional Reinforcement Learning, ICML, arXiv:1806.06923",
        "overrides": {
            "distribution": "implicit_quantile",
            "huber_param": 1.0,
            "optimizer": "adam",
            "learning_rate": 5e-5,
            "optimizer_epsilon": 0.01 / 32,
            "grad_error_bound": 0.0,
            "max_global_grad_norm": 0.0,
            "min_replay_capacity_fraction": 0.02,
            "exploration_epsilon_end_value": 0.01,
            "eval_exploration_epsilon": 0.001,
        },
    },
    "offline_dqn": {
        "paper": f"DQN (Mnih et al. 2015) on fixed replay: {_BATCH_RL_PAPER} (dqn.gin)",
        # TF1's centered RMSProp has its epsilon inside the square root too, so
        # Dopamine's 1e-5 is qzoo's 1e-5; it starts the mean square at 1 (learning/optim.py).
        # Dopamine's NatureDQNNetwork has Keras's default (Glorot) initialization.
        "overrides": {
            **_BATCH_RL,
            "init": "glorot",
            "optimizer": "rmsprop_centered_tf1",
            "learning_rate": 2.5e-4,
            "rmsprop_decay": 0.95,
            "optimizer_epsilon": 1e-5,
        },
    },
    "offline_c51": {
        "paper": f"C51 (Bellemare et al. 2017, arXiv:1707.06887) on fixed replay: "
        f"{_BATCH_RL_PAPER} (c51.gin: Dopamine's Rainbow agent as C51)",
        "overrides": {
            **_BATCH_RL,
            "distribution": "categorical",
            "num_atoms": 51,
            "vmax": 10.0,
            "optimizer": "adam_tf1",
            "learning_rate": 2.5e-4,
            "optimizer_epsilon": 3.125e-4,
        },
    },
    "offline_qrdqn": {
        "paper": f"QR-DQN (Dabney et al. 2018, arXiv:1710.10044) on fixed replay: "
        f"{_BATCH_RL_PAPER} (quantile.gin)",
        "overrides": {
            **_BATCH_RL,
            **_BATCH_RL_ADAM,
            "distribution": "quantile",
            "num_quantiles": 200,
            "huber_param": 1.0,
        },
    },
    "ensemble": {
        "paper": f"Ensemble-DQN, {_BATCH_RL_PAPER} (multi_head_dqn.gin: 200 heads, IDENTITY)",
        "overrides": {**_BATCH_RL, **_BATCH_RL_ADAM, "num_heads": 200, "head_mixing": "identity"},
    },
    "rem": {
        "paper": f"Random Ensemble Mixture (REM), {_BATCH_RL_PAPER} (rem.gin: 200 heads, "
        "STOCHASTIC; online, online/configs/rem.gin: 4 networks)",
        "overrides": {**_BATCH_RL, **_BATCH_RL_ADAM, "num_heads": 200, "head_mixing": "stochastic"},
        # The paper's online REM (online/configs/rem.gin): 4 separate networks (batch_rl's
        # NatureDQNNetworks: Glorot), an Adam epsilon 10x smaller and deep exploration
        # (use_deep_exploration: each training episode acts on a new random mixture of
        # the 4 networks, epsilon-greedily; evaluation on their mean).
        "online": {
            "num_heads": 4,
            "separate_networks": True,
            "deep_exploration": True,
            "init": "glorot",
            "optimizer_epsilon": 3.125e-5,
        },
    },
}

# R2D1 (Kapturowski et al. 2019) in rlpyt's form: rlpyt's algorithm defaults (B3.1) under
# its experiment configs "r2d1" and "r2d1_long" (experiments/configs/atari/dqn/
# atari_r2d1.py), converted to environment frames (4 per agent step). rlpyt updates once
# per sampler batch: "r2d1" samples 30 steps x 32 envs = 960 steps and trains 32
# sequences of 40 + 80 steps at replay ratio 4 (round(4 x 960 / 3,840) = 1 update), so
# learn_period = 960 x 4 = 3,840 frames; the target copies every 2,500 updates (9.6M
# frames' worth, counted in updates from the first, as rlpyt's update_counter);
# min_steps_learn 1e5 steps = 10% of the 1M replay; epsilon 1 -> 0.01 over
# eps_steps 1e6 - 1e5 steps = 3.6M frames of the run's 100e6 steps (100 iterations of
# rlpyt's 1e6-step log interval); evaluation 161e3 steps, epsilon 0.001. Rewards are
# not clipped (max_abs_reward 1e9). Adam's eps 1e-3 is PyTorch's, as rlpyt's.
# A lost life ends the agent's episode (rlpyt's episodic_lives: recurrent state, frame
# stack, previous action and reward reset, the rest of a trained sequence masked) while
# the game goes on. Deviations: the network has qzoo's torso on 84x84 frames
# (networks/recurrent.py); IS weights are qzoo's PER weights with no uniform mix, equal
# to rlpyt's (1/p)^beta / max.
_R2D1 = {
    "recurrent": True, "dueling": True, "double_q": True, "prioritized": True,
    "discount": 0.997, "n_steps": 5, "burn_in_steps": 40, "sequence_steps": 80,
    "store_state_interval": 40, "lstm_size": 512, "batch_size": 32, "num_envs": 32,
    "priority_exponent": 0.9, "importance_sampling_exponent_begin_value": 0.6,
    "importance_sampling_exponent_end_value": 0.6, "uniform_sample_probability": 0.0,
    "priority_eta": 0.9, "input_priorities": True, "value_rescale_eps": 1e-3,
    "optimizer": "adam", "learning_rate": 1e-4, "optimizer_epsilon": 1e-3,
    "max_global_grad_norm": 80.0, "grad_error_bound": 0.0, "max_abs_reward": 1e9,
    "replay_capacity": 1_000_000, "min_replay_capacity_fraction": 0.1,
    "learn_period": 3_840, "target_network_update_period": 9_600_000,
    "target_count_updates": True, "episodic_lives": True,
    "iterations": 100, "train_frames": 4_000_000, "eval_frames": 644_000,
    "exploration_epsilon_end_value": 0.01, "exploration_epsilon_decay_frame_fraction": 0.009,
    "eval_exploration_epsilon": 0.001,
}  # fmt: skip
# Small control tasks (CartPole, qzoo/StatelessCartPole-v1) and MinAtar: short sequences,
# a small LSTM and updates often enough to learn in minutes (qzoo's choice, not rlpyt's).
_R2D1_DOMAINS = {
    "gym": {
        "burn_in_steps": 10, "sequence_steps": 20, "store_state_interval": 10,
        "lstm_size": 64, "batch_size": 16, "num_envs": 4, "n_steps": 3, "discount": 0.99,
        "learn_period": 16, "target_network_update_period": 1_000,
        "min_replay_capacity_fraction": 0.02, "max_global_grad_norm": 80.0,
        "learning_rate": 1e-3, "optimizer_epsilon": 1e-3, "episodic_lives": False,
    },
    # MinAtar: the same short sequences (its domain default, a learning step every frame,
    # would replay 32 sequences of 125 steps per frame). Runs; not tuned or benchmarked.
    "minatar": {
        "burn_in_steps": 10, "sequence_steps": 20, "store_state_interval": 10,
        "lstm_size": 128, "batch_size": 16, "num_envs": 4, "n_steps": 3, "discount": 0.99,
        "learn_period": 16, "target_network_update_period": 4_000, "episodic_lives": False,
    },
}  # fmt: skip

PRESETS["r2d1"] = {
    "paper": "Kapturowski, Ostrovski, Quan, Munos & Dabney 2019, Recurrent Experience "
    "Replay in Distributed Reinforcement Learning, ICLR (R2D1 in rlpyt's form, config r2d1)",
    "overrides": _R2D1,
    "domains": _R2D1_DOMAINS,
}
# rlpyt's "r2d1_long": replay 4e6, 64 sequences at replay ratio 1 from 40 x 192 sampler
# batches (one update per 7,680 steps = 30,720 frames; target every 2,500 updates =
# 76.8M frames), epsilon 1 -> 0.1 with rlpyt's per-environment finals log-spaced
# down to eps_final_min 0.0005 (--eps-final-min), 20e9 steps logged every 10e6 (2,000 iterations of
# 40M frames), evaluation 168e3 steps. rlpyt also turns episodic lives off (so here);
# qzoo's dqn_zoo protocol keeps the life-loss discount (machado would add sticky actions).
PRESETS["r2d1_long"] = {
    "paper": PRESETS["r2d1"]["paper"].replace("config r2d1", "config r2d1_long"),
    "overrides": {
        **_R2D1, "replay_capacity": 4_000_000, "min_replay_capacity_fraction": 0.025,
        "batch_size": 64, "num_envs": 192, "learn_period": 30_720,
        "target_network_update_period": 76_800_000, "iterations": 2_000,
        "train_frames": 40_000_000, "eval_frames": 672_000,
        "exploration_epsilon_end_value": 0.1, "eps_final_min": 0.0005,
        "exploration_epsilon_decay_frame_fraction": 3.6e6 / 8e10, "episodic_lives": False,
    },
    "domains": _R2D1_DOMAINS,
}  # fmt: skip

# Atari 100k (Kaiser et al. 2020): 100k agent steps (400k frames) per run, the protocol
# and values of Dopamine's labs/atari_100k configs (DER.gin, DrQ_eps.gin), which produced
# the DrQ(eps) scores of Agarwal et al. 2021 and rliable's DER runs: no sticky actions, a
# life loss terminal for learning, 27k-step episodes, one Adam update of 32 per agent step
# from 1,600 transitions on, 10-step double-Q targets, a dueling Dopamine CNN (one 512
# hidden layer shared by the streams, Glorot weights), 10 iterations of 10k steps, each
# evaluated on 100 episodes (100 games at once) at epsilon 0.001. Deviations, in the
# docs: a life loss zeroes the discount but not the frame stack (Dopamine zeroes it),
# no-ops are 1-30 raw frames at episode starts as DQN Zoo's (Dopamine's 2021 runner: raw
# frames too), and the replay holds all 100k transitions (Dopamine's 1M, a proxy for
# unbounded, likewise never fills).
_ATARI_100K = {
    "protocol": "dqn_zoo", "iterations": 10, "train_frames": 40_000,
    "max_frames_per_episode": 108_000, "replay_capacity": 100_000,
    "min_replay_capacity_fraction": 0.016, "batch_size": 32, "learn_period": 4,
    "discount": 0.99, "n_steps": 10, "double_q": True, "dueling": True,
    "dueling_shared_hidden": True, "optimizer": "adam", "learning_rate": 1e-4,
    "optimizer_epsilon": 1.5e-4, "max_global_grad_norm": 0.0, "torso": "dopamine_cnn",
    "init": "glorot", "grad_error_bound": 0.0, "eval_episodes": 100,
    "eval_exploration_epsilon": 0.001,
}  # fmt: skip
# Elsewhere (CartPole, MinAtar) the domain's evaluation by frames, and no image shifts.
_ATARI_100K_DOMAINS = {"gym": {"eval_episodes": 0, "augmentation": "none"},
                       "minatar": {"eval_episodes": 0, "augmentation": "none"}}  # fmt: skip
PRESETS["der"] = {
    "paper": "van Hasselt, Hessel & Aslanides 2019, When to use parametric models in "
    "reinforcement learning?, NeurIPS, arXiv:1906.05243 (Data-Efficient Rainbow), as "
    "Dopamine's labs/atari_100k/configs/DER.gin runs it",
    # C51 noisy Rainbow; priorities sqrt(loss) with a fixed beta 0.5 and no uniform mix;
    # the target copied every 2,000 updates (DER.gin since 2021-11; 8,000 before); no
    # epsilon in training (noisy nets), 0.001 with the noise off in evaluation.
    "overrides": {
        **_ATARI_100K, "distribution": "categorical", "num_atoms": 51, "vmax": 10.0,
        "noisy": True, "noisy_weight_init": 0.1, "prioritized": True,
        "priority_exponent": 0.5, "importance_sampling_exponent_begin_value": 0.5,
        "importance_sampling_exponent_end_value": 0.5, "uniform_sample_probability": 0.0,
        "normalize_weights": True, "target_network_update_period": 8_000,
        "exploration_epsilon_begin_value": 0.0, "exploration_epsilon_end_value": 0.0,
        "eval_noise": False,
    },
    "domains": _ATARI_100K_DOMAINS,
}  # fmt: skip
PRESETS["drq_eps"] = {
    "paper": "Agarwal, Schwarzer, Castro, Courville & Bellemare 2021, Deep Reinforcement "
    "Learning at the Edge of the Statistical Precipice, NeurIPS, arXiv:2108.13264 (DrQ(eps): "
    "DrQ, Kostrikov, Yarats & Fergus 2020, arXiv:2004.13649, with DQN's epsilons), as "
    "Dopamine's labs/atari_100k/configs/DrQ_eps.gin runs it",
    # A dueling double DQN (Huber loss, uniform replay) on random-shifted batches with
    # Dopamine's intensity noise; the target copied after every update; epsilon 1 ->
    # 0.01 over 5,000 steps from the start of learning.
    "overrides": {
        **_ATARI_100K, "augmentation": "shift_intensity", "target_network_update_period": 4,
        "exploration_epsilon_end_value": 0.01,
        "exploration_epsilon_decay_frame_fraction": 20_000 / 400_000,
    },
    "domains": _ATARI_100K_DOMAINS,
}  # fmt: skip

# PQN (Gallici, Fellows, Ellis, Pou, Masmitja, Foerster & Martin 2025): the authors'
# purejaxql config/alg/pqn_atari.yaml on Atari: 128 environments x 32 steps per rollout,
# 2 epochs of 32 minibatches, Q(lambda) with lambda 0.65, gamma 0.99, RAdam (eps 1e-8)
# at a constant 2.5e-4, a global-norm clip of 10, epsilon 1 -> 0.001 over the first 10%
# of 50M steps (200M frames: 200 iterations of 1M frames), 0.5 x squared error, the
# Nature CNN with flax's LayerNorm (each position's channels) before every ReLU and
# he_normal weights (lecun_normal outputs). Its envpool Atari is DQN Zoo's protocol up to
# the deviations docs/agents.md lists (no fire reset; a truncation bootstraps). Greedy
# evaluation, as its test environments: 8 episodes, one per environment.
_PQN = {
    "rollout_steps": 32, "num_envs": 128, "update_epochs": 2, "num_minibatches": 32,
    "q_lambda": 0.65, "discount": 0.99, "optimizer": "radam", "learning_rate": 2.5e-4,
    "optimizer_epsilon": 1e-8, "learning_rate_decay": "none", "max_global_grad_norm": 10.0,
    "exploration_epsilon_end_value": 0.001, "exploration_epsilon_decay_frame_fraction": 0.1,
    "eval_exploration_epsilon": 0.0, "eval_episodes": 8, "layer_norm": True,
    "init": "he_normal", "return_loss": "l2",
}  # fmt: skip
# CartPole and other small control tasks: CleanRL's pqn.py (its other reference): 4
# environments x 128 steps, 4 epochs of 4 minibatches, lambda 0.65, RAdam 2.5e-4 falling
# linearly to 0, epsilon 1 -> 0.05 over half of 500,000 steps, the 120-84 MLP with
# LayerNorms, orthogonal weights (gain sqrt 2), squared error (torch's mse_loss). Both
# domains keep RAdam at eps 1e-8 (torch's and optax's default) against the domain
# defaults' Adam (Gymnasium) and eps 1e-4 (MinAtar), which are DQN's.
# MinAtar: purejaxql's pqn_minatar.yaml: 128 x 32, 2 epochs of 32 minibatches, lambda
# 0.65, 5e-4 falling linearly, epsilon 1 -> 0.05 over 10% of 10M steps, MinAtar's CNN
# (conv 16, a 128 hidden layer) with LayerNorms, he_normal weights; evaluation by frames
# (MinAtar's episodes have no cap): 1,000 on each of the 128 environments.
_PQN_DOMAINS = {
    "gym": {
        "num_envs": 4, "rollout_steps": 128, "update_epochs": 4, "num_minibatches": 4,
        "learning_rate": 2.5e-4, "learning_rate_decay": "linear",
        "exploration_epsilon_end_value": 0.05, "exploration_epsilon_decay_frame_fraction": 0.5,
        "iterations": 10, "train_frames": 50_000, "mlp_layers": "120,84",
        "optimizer": "radam", "optimizer_epsilon": 1e-8,
        "init": "orthogonal", "return_loss": "squared", "eval_episodes": 0,
    },
    "minatar": {
        "learning_rate": 5e-4, "learning_rate_decay": "linear", "optimizer_epsilon": 1e-8,
        "exploration_epsilon_end_value": 0.05, "iterations": 50, "train_frames": 200_000,
        "eval_frames": 128_000, "eval_episodes": 0,
    },
}  # fmt: skip
PRESETS["pqn"] = {
    "paper": "Gallici, Fellows, Ellis, Pou, Masmitja, Foerster & Martin 2025, Simplifying "
    "Deep Temporal Difference Learning, ICLR, arXiv:2407.04811 (PQN, as purejaxql's "
    "pqn_atari.yaml and pqn_minatar.yaml and CleanRL's pqn.py run it)",
    "overrides": _PQN,
    "domains": _PQN_DOMAINS,
}
