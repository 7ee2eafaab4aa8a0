"""Run configuration: one dataclass, the named agent presets, and per-domain defaults.

A run's config is built in layers, later ones winning:
  1. `Config()` defaults: DQN Zoo's flags shared by all agents (dqn_zoo.md §1a).
  2. The agent preset (`PRESETS`, one per paper): DQN Zoo's per-agent values.
  3. Domain defaults for non-Atari environments (`DOMAIN_DEFAULTS`): DQN Zoo's numbers
     are for 200M Atari frames; on CartPole or MinAtar they would never start learning,
     so the domain's scale (periods, replay, exploration) replaces the preset's Atari
     scale, while the preset's algorithm (double Q, shared bias, ...) stays. This is a
     deliberate qzoo addition, documented in the README.
  4. The user's overrides.

Presets are data: the difference between two agents is the difference of two dicts.
Every schedule is in environment frames, as in DQN Zoo.
"""

import dataclasses
import json
import math

from qzoo.errors import UserError, closest


@dataclasses.dataclass
class Config:
    agent: str = "dqn"
    env: str = "pong"
    protocol: str = "dqn_zoo"  # or "machado": sticky actions 0.25, no life-loss signal.
    seed: int = 1
    run_dir: str = ""  # default: runs/<agent>-<env>-<seed>
    device: str = "auto"  # auto | cpu | cuda
    # Run loop (DQN Zoo: iterations 0..200, iteration 0 evaluates only).
    iterations: int = 200
    train_frames: int = 1_000_000  # per iteration
    eval_frames: int = 500_000  # per iteration
    num_envs: int = 1  # environments stepped together; 1 is DQN Zoo's single stream
    max_frames_per_episode: int = 108_000  # 30 minutes; truncation bootstraps
    # Environment / preprocessing.
    action_repeats: int = 4
    frame_stack: int = 4
    max_abs_reward: float = 1.0  # clip of the summed reward over the action repeats
    # Replay.
    replay_capacity: int = 1_000_000  # transitions
    min_replay_capacity_fraction: float = 0.05  # learning starts at this fill
    batch_size: int = 32
    n_steps: int = 1
    # Learning.
    discount: float = 0.99
    learn_period: int = 16  # frames between SGD steps
    target_network_update_period: int = 40_000  # frames between hard target copies
    optimizer: str = "rmsprop_centered"  # or "adam"
    learning_rate: float = 2.5e-4
    optimizer_epsilon: float = 0.01 / 32**2  # inside the square root for RMSProp
    rmsprop_decay: float = 0.95
    grad_error_bound: float = 1.0 / 32  # TD-error gradient clip; 0 disables
    max_global_grad_norm: float = 0.0  # 0 disables
    double_q: bool = False  # greedy action at s_t from the online network
    shared_bias: bool = False  # one scalar bias for all actions in the last layer
    dueling: bool = False  # value and advantage streams (Wang et al. 2016)
    noisy: bool = False  # factorised noisy linear layers (Fortunato et al. 2018)
    noisy_weight_init: float = 0.1  # sigma starts at this / sqrt(fan_in)
    torso: str = "auto"  # auto | nature_cnn | minatar_cnn | mlp
    mlp_hidden: int = 64
    # Return distribution: none | categorical (C51) | quantile (QR-DQN) |
    # implicit_quantile (IQN).
    distribution: str = "none"
    num_atoms: int = 51
    vmax: float = 10.0  # categorical support: linspace(-vmax, vmax, num_atoms)
    num_quantiles: int = 201
    huber_param: float = 1.0  # quantile regression's Huber kappa (0: absolute error)
    tau_latent_dim: int = 64
    tau_samples_policy: int = 64  # IQN: taus per action selection (K)
    tau_samples_s_tm1: int = 64  # IQN: taus for the online distribution (N)
    tau_samples_s_t: int = 64  # IQN: taus for the target distribution (N')
    # Prioritized replay (Schaul et al. 2016), with DQN Zoo's semantics.
    prioritized: bool = False
    priority_exponent: float = 0.6
    importance_sampling_exponent_begin_value: float = 0.4
    importance_sampling_exponent_end_value: float = 1.0
    uniform_sample_probability: float = 1e-3
    normalize_weights: bool = True
    # Exploration (epsilon-greedy). Begins after min replay, decays over
    # fraction x iterations x train_frames frames.
    exploration_epsilon_begin_value: float = 1.0
    exploration_epsilon_end_value: float = 0.1
    exploration_epsilon_decay_frame_fraction: float = 0.02
    eval_exploration_epsilon: float = 0.05
    # Output.
    checkpoint_replay: bool = True  # DQN Zoo checkpoints the replay; needed for exact resume
    tensorboard: bool = True
    progress: bool = True

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    # Derived quantities (dqn_zoo.md §1, "Derived facts").
    @property
    def min_replay_size(self):
        return int(self.min_replay_capacity_fraction * self.replay_capacity)

    @property
    def exploration_begin_frame(self):
        return self.min_replay_size * self.action_repeats

    @property
    def importance_sampling_end_t(self):
        """In replay additions: iterations x train_frames / action_repeats (50M)."""
        return self.iterations * self.train_frames // self.action_repeats

    @property
    def exploration_decay_frames(self):
        return int(
            self.exploration_epsilon_decay_frame_fraction * self.iterations * self.train_frames
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
}

# Defaults for environments that are not Atari. Atari runs use Config() as is.
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
    },
}

FIELDS = {f.name: f for f in dataclasses.fields(Config)}
CHOICES = {
    "protocol": ("dqn_zoo", "machado"),
    "optimizer": ("rmsprop_centered", "adam"),
    "torso": ("auto", "nature_cnn", "minatar_cnn", "mlp"),
    "distribution": ("none", "categorical", "quantile", "implicit_quantile"),
    "device": ("auto", "cpu", "cuda"),
}
POSITIVE_INTS = (
    "iterations", "train_frames", "eval_frames", "num_envs", "action_repeats",
    "frame_stack", "replay_capacity", "batch_size", "n_steps", "learn_period",
    "target_network_update_period", "mlp_hidden", "num_atoms", "num_quantiles",
    "tau_latent_dim", "tau_samples_policy", "tau_samples_s_tm1", "tau_samples_s_t",
)  # fmt: skip


def parse_value(name, text):
    """Parses a command-line string into the type of Config field `name`."""
    if name not in FIELDS:
        hint = closest(name, FIELDS)
        raise UserError(
            f"unknown option --{name.replace('_', '-')}"
            + (f"; did you mean --{hint[0].replace('_', '-')}?" if hint else "")
        )
    kind = type(FIELDS[name].default)
    try:
        if kind is bool:
            lowered = str(text).lower()
            if lowered not in ("true", "false", "1", "0", "yes", "no"):
                raise ValueError
            return lowered in ("true", "1", "yes")
        value = kind(text) if kind is not int else int(float(text))
        if kind is int and float(text) != value:
            raise ValueError
        return value
    except ValueError:
        raise UserError(
            f"--{name.replace('_', '-')}: bad value {text!r}; expected {kind.__name__}"
        ) from None


def validate(config):
    """Raises UserError naming the first bad value in `config`."""
    for name, allowed in CHOICES.items():
        if getattr(config, name) not in allowed:
            raise UserError(
                f"--{name.replace('_', '-')}: bad value {getattr(config, name)!r}; "
                f"expected one of {', '.join(allowed)}"
            )
    for name in POSITIVE_INTS:
        if getattr(config, name) < 1:
            raise UserError(
                f"--{name.replace('_', '-')}: bad value {getattr(config, name)}; "
                "expected a positive integer"
            )
    unit_interval = "a number in [0, 1]"
    # name -> (whether the value is acceptable, what is accepted)
    checks = {
        "discount": (0 <= config.discount <= 1, unit_interval),
        "learning_rate": (
            config.learning_rate > 0 and math.isfinite(config.learning_rate),
            "a finite number > 0",
        ),
        "min_replay_capacity_fraction": (
            0 < config.min_replay_capacity_fraction <= 1,
            "a number in (0, 1]",
        ),
        "exploration_epsilon_end_value": (
            0 <= config.exploration_epsilon_end_value <= 1,
            unit_interval,
        ),
        "eval_exploration_epsilon": (0 <= config.eval_exploration_epsilon <= 1, unit_interval),
        "max_frames_per_episode": (config.max_frames_per_episode >= 0, "an integer >= 0"),
        "grad_error_bound": (config.grad_error_bound >= 0, "a number >= 0 (0: off)"),
        "max_global_grad_norm": (config.max_global_grad_norm >= 0, "a number >= 0 (0: off)"),
        "vmax": (config.vmax > 0, "a number > 0"),
        "num_atoms": (config.num_atoms >= 2, "an integer >= 2"),
        "huber_param": (config.huber_param >= 0, "a number >= 0"),
        "priority_exponent": (config.priority_exponent >= 0, "a number >= 0"),
        "importance_sampling_exponent_begin_value": (
            0 <= config.importance_sampling_exponent_begin_value <= 1,
            unit_interval,
        ),
        "importance_sampling_exponent_end_value": (
            0 <= config.importance_sampling_exponent_end_value <= 1,
            unit_interval,
        ),
        "uniform_sample_probability": (0 <= config.uniform_sample_probability <= 1, unit_interval),
        "noisy_weight_init": (config.noisy_weight_init > 0, "a number > 0"),
    }
    for name, (ok, accepted) in checks.items():
        if not ok:
            raise UserError(
                f"--{name.replace('_', '-')}: bad value {getattr(config, name)}; "
                f"expected {accepted}"
            )
    if config.min_replay_size < config.batch_size:
        raise UserError(
            f"--min-replay-capacity-fraction: {config.min_replay_capacity_fraction} of "
            f"{config.replay_capacity} is fewer transitions than --batch-size "
            f"{config.batch_size}"
        )


def make_config(agent, env, domain, overrides):
    """Builds the Config for `agent` on `env` (whose domain is given), plus overrides.

    `overrides` maps field names to already-parsed values.
    """
    if agent not in PRESETS:
        hint = closest(agent, PRESETS)
        raise UserError(
            f"unknown agent {agent!r}; expected one of {', '.join(PRESETS)}"
            + (f" (did you mean {hint[0]!r}?)" if hint else "")
        )
    values = dict(PRESETS[agent]["overrides"])
    values.update(DOMAIN_DEFAULTS.get(domain, {}))
    values.update(overrides)
    config = Config(agent=agent, env=env, **values)
    validate(config)
    return config
