"""Defaults for environments that are not Atari: DQN Zoo's numbers are for 200M
Atari frames, and on CartPole or MinAtar they would never start learning; these give
the domain's scale (configuration/build.py's third layer). Atari runs use Config() as is."""

DOMAIN_DEFAULTS = {
    # Young & Tian 2019 (MinAtar): 5M frames, replay 100k, learning every frame,
    # target copy every 1,000 frames, epsilon 1 -> 0.1 over 100k frames after 5k.
    "minatar": {
        "iterations": 50,
        "train_frames": 100_000,
        "eval_frames": 25_000,
        "action_repeats": 1,
        "frame_stack": 1,
        "max_frames_per_episode": 0,
        "replay_capacity": 100_000,
        "min_replay_capacity_fraction": 0.05,
        "learn_period": 1,
        "target_network_update_period": 1_000,
        # Uniform random acting while the replay fills, for every agent (Rainbow
        # included: noisy nets alone can lock small tasks into one action).
        "exploration_epsilon_begin_value": 1.0,
        "optimizer_epsilon": 1e-4,  # ~= PyTorch eps 0.01 outside the square root
        "torso": "minatar_cnn",
        "protocol": "dqn_zoo",  # Atari's protocols do not apply (batch_rl presets: machado)
    },
    # Small control tasks (CartPole-v1, Acrobot-v1, ...): a few minutes on a CPU.
    "gym": {
        "iterations": 10,
        "train_frames": 10_000,
        "eval_frames": 5_000,
        "action_repeats": 1,
        "frame_stack": 1,
        "max_frames_per_episode": 0,
        "replay_capacity": 50_000,
        "min_replay_capacity_fraction": 0.02,
        "batch_size": 64,
        "learn_period": 4,
        "target_network_update_period": 500,
        "exploration_epsilon_begin_value": 1.0,  # as for MinAtar
        "optimizer": "adam",
        "learning_rate": 1e-3,
        "optimizer_epsilon": 0.01 / 32,
        "grad_error_bound": 0.0,
        "max_global_grad_norm": 10.0,
        "exploration_epsilon_decay_frame_fraction": 0.1,
        "vmax": 100.0,  # CartPole's discounted returns reach 1 / (1 - 0.99)
        "eval_exploration_epsilon": 0.0,
        "torso": "mlp",
        "protocol": "dqn_zoo",  # as for MinAtar
    },
}
