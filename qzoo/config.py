"""Run configuration: one dataclass, the named agent presets, and per-domain defaults.

A run's config is built in layers, later ones winning:
  1. `Config()` defaults: DQN Zoo's flags shared by all agents (dqn_zoo.md §1a).
  2. The agent preset (`PRESETS`, one per paper): DQN Zoo's per-agent values.
  3. Domain defaults for non-Atari environments (`DOMAIN_DEFAULTS`): DQN Zoo's numbers
     are for 200M Atari frames; on CartPole or MinAtar they would never start learning,
     so the domain's scale (periods, replay, exploration) replaces the preset's Atari
     scale, while the preset's algorithm (double Q, shared bias, ...) stays. This is a
     deliberate qzoo addition, documented in the README.
  4. What an environment id implies (ALE/Pong-v5: sticky actions, so --protocol machado).
  5. The user's overrides.

Presets are data: the difference between two agents is the difference of two dicts.
Every schedule is in environment frames, as in DQN Zoo.
"""

import dataclasses
import json
import os
import sys

from qzoo import options as options_lib
from qzoo.errors import UserError, closest
from qzoo.options import Bool, Choice, Int, Real, Text

GROUPS = ("env", "network", "loss", "replay", "optimizer", "schedule", "run")


def option(default, group, help, domain=None):
    """A Config field with its `--help` group, one-line meaning and accepted values."""
    if domain is None:
        domain = Bool() if isinstance(default, bool) else None
    return dataclasses.field(
        default=default, metadata={"group": group, "help": help, "domain": domain}
    )


UNIT = Real(0, 1)  # probabilities, exponents, fractions
POSITIVE = Real(0, low_open=True)
NON_NEGATIVE = Real(0)  # 0 switches a clip off
SIZE = Int(1, 10_000)  # atoms, quantiles, tau samples, hidden units


@dataclasses.dataclass
class Config:
    # fmt: off
    agent: str = option("dqn", "run", "the preset (qzoo agents lists them)", Text())
    # Environment and preprocessing.
    env: str = option("pong", "env", "Atari game (pong, ALE/Pong-v5, PongNoFrameskip-v4), "
                      "minatar/<game> or a Gymnasium id",
                      Text(describe="an Atari game (pong), minatar/<game> or a Gymnasium id"))
    protocol: str = option("dqn_zoo", "env", "Atari protocol; machado: sticky actions 0.25, "
                           "no life-loss signal", Choice("dqn_zoo", "machado"))
    num_envs: int = option(1, "env", "environments stepped together (1: DQN Zoo's single "
                           "stream)", Int(1, 1024))
    action_repeats: int = option(4, "env", "frames per agent step (Atari only)", Int(1, 100))
    frame_stack: int = option(4, "env", "frames stacked into one observation", Int(1, 64))
    max_abs_reward: float = option(1.0, "env", "learning clips the reward summed over the "
                                   "repeats to [-x, x]", POSITIVE)
    max_frames_per_episode: int = option(108_000, "env", "episode cap in frames, a truncation "
                                         "that bootstraps (0: none)", Int(0, 10**9))
    # Network.
    torso: str = option("auto", "network", "auto: nature_cnn on Atari, minatar_cnn on "
                        "MinAtar, mlp elsewhere; dopamine_cnn: 'same' padding",
                        Choice("auto", "nature_cnn", "dopamine_cnn", "minatar_cnn", "mlp"))
    init: str = option("dqn_zoo", "network", "weights: dqn_zoo U(+-1/sqrt(fan_in)), or "
                       "Dopamine's glorot or variance_scaling (zero biases)",
                       Choice("dqn_zoo", "glorot", "variance_scaling"))
    mlp_hidden: int = option(64, "network", "units in each of the mlp torso's two layers", SIZE)
    dueling: bool = option(False, "network", "value and advantage streams (Wang et al. 2016)")
    noisy: bool = option(False, "network", "factorised noisy linear layers in the head "
                         "(Fortunato et al. 2018)")
    noisy_weight_init: float = option(0.1, "network", "noisy sigma starts at this / "
                                      "sqrt(fan_in)", POSITIVE)
    shared_bias: bool = option(False, "network", "one scalar bias for all actions in the last "
                               "layer (tuned Double DQN)")
    tau_latent_dim: int = option(64, "network", "IQN: cosine features of each tau", SIZE)
    num_heads: int = option(1, "network", "Q-value heads (ensemble, REM: Agarwal et al. 2020); "
                            "acting and evaluation use their plain mean", SIZE)
    separate_networks: bool = option(False, "network", "each head a whole network of its own "
                                     "(batch_rl's multi-network REM) instead of one shared torso")
    # Loss: the TD target and the return distribution.
    distribution: str = option("none", "loss", "none (Q-values), categorical (C51), quantile "
                               "(QR-DQN) or implicit_quantile (IQN)",
                               Choice("none", "categorical", "quantile", "implicit_quantile"))
    head_mixing: str = option("identity", "loss", "with --num-heads > 1: identity (each head "
                              "its own target: ensemble) or stochastic (a random convex "
                              "combination per batch: REM)", Choice("identity", "stochastic"))
    cql_alpha: float = option(0.0, "loss", "CQL's weight on logsumexp_a Q(s, a) - Q(s, a_data) "
                              "(Kumar et al. 2020; 0: off)", NON_NEGATIVE)
    discount: float = option(0.99, "loss", "per-step discount gamma", UNIT)
    n_steps: int = option(1, "loss", "steps of reward before bootstrapping", Int(1, 1000))
    double_q: bool = option(False, "loss", "greedy action at s_t from the online network")
    grad_error_bound: float = option(1.0 / 32, "loss", "TD-error gradient clip of "
                                     "--distribution none (0: Huber loss instead)", NON_NEGATIVE)
    num_atoms: int = option(51, "loss", "C51: atoms of the categorical support", Int(2, 10_000))
    vmax: float = option(10.0, "loss", "C51: support is linspace(-vmax, vmax, num_atoms)",
                         POSITIVE)
    num_quantiles: int = option(201, "loss", "QR-DQN: quantiles per action", SIZE)
    huber_param: float = option(1.0, "loss", "quantile regression's Huber kappa (0: absolute "
                                "error)", NON_NEGATIVE)
    tau_samples_policy: int = option(64, "loss", "IQN: taus per action selection (K)", SIZE)
    tau_samples_s_tm1: int = option(64, "loss", "IQN: taus of the online distribution (N)",
                                    SIZE)
    tau_samples_s_t: int = option(64, "loss", "IQN: taus of the target distribution (N')", SIZE)
    # Replay; prioritized replay (Schaul et al. 2016) with DQN Zoo's semantics.
    replay_capacity: int = option(1_000_000, "replay", "transitions kept", Int(1, 10**9))
    min_replay_capacity_fraction: float = option(0.05, "replay", "learning starts once the "
                                                 "replay is this full",
                                                 Real(0, 1, low_open=True))
    batch_size: int = option(32, "replay", "transitions per SGD step", Int(1, 65_536))
    offline: str = option("", "replay", "train on this DQN Replay Dataset folder (replay_logs, "
                          "or `qzoo dataset convert`'s layout) without acting; '' = online",
                          Text(empty_ok=True, describe="a dataset folder"))
    log_replay: str = option("", "replay", "log the experience to DIR/replay_logs in the DQN "
                             "Replay Dataset's format; '' = off",
                             Text(empty_ok=True, describe="a folder"))
    log_replay_capacity: int = option(1_000_000, "replay", "rows of the logged buffer (a "
                                      "snapshot each time it wraps)", Int(8, 10**9))
    prioritized: bool = option(False, "replay", "proportional prioritized replay")
    priority_exponent: float = option(0.6, "replay", "alpha: priorities are |TD|^alpha", UNIT)
    importance_sampling_exponent_begin_value: float = option(0.4, "replay", "beta at the "
                                                             "start, annealed over the run", UNIT)
    importance_sampling_exponent_end_value: float = option(1.0, "replay", "beta at the end of "
                                                           "the run", UNIT)
    uniform_sample_probability: float = option(1e-3, "replay", "mix of uniform sampling into "
                                               "the priorities", UNIT)
    normalize_weights: bool = option(True, "replay", "divide importance weights by their max")
    # Optimizer.
    optimizer: str = option("rmsprop_centered", "optimizer", "rmsprop_centered (DQN Zoo's, "
                            "eps inside the root) or adam; *_tf1: Dopamine's TF1 semantics",
                            Choice("rmsprop_centered", "rmsprop_centered_tf1", "adam",
                                   "adam_tf1"))
    learning_rate: float = option(2.5e-4, "optimizer", "step size",
                                  Real(0, 1, low_open=True))
    optimizer_epsilon: float = option(0.01 / 32**2, "optimizer", "epsilon (inside the square "
                                      "root for RMSProp)", Real(0, 1, low_open=True))
    rmsprop_decay: float = option(0.95, "optimizer", "RMSProp's moving-average decay",
                                  Real(0, 1, low_open=True))
    max_global_grad_norm: float = option(0.0, "optimizer", "clip the gradient's global norm "
                                         "(0: off)", NON_NEGATIVE)
    # Schedule, in environment frames (DQN Zoo: iterations 0..200, 0 evaluates only).
    iterations: int = option(200, "schedule", "train-then-evaluate iterations after "
                             "iteration 0", Int(1, 100_000))
    train_frames: int = option(1_000_000, "schedule", "training frames per iteration",
                               Int(1, 10**10))
    eval_frames: int = option(500_000, "schedule", "evaluation frames per iteration",
                              Int(1, 10**10))
    learn_period: int = option(16, "schedule", "frames between SGD steps", Int(1, 10**9))
    target_network_update_period: int = option(40_000, "schedule", "frames between target "
                                               "network copies", Int(1, 10**10))
    # Epsilon-greedy: from min replay on, decays over fraction x iterations x train_frames.
    exploration_epsilon_begin_value: float = option(1.0, "schedule", "epsilon before the "
                                                    "decay", UNIT)
    exploration_epsilon_end_value: float = option(0.1, "schedule", "epsilon after the decay",
                                                  UNIT)
    exploration_epsilon_decay_frame_fraction: float = option(0.02, "schedule", "decay length "
                                                             "as a fraction of the run", UNIT)
    eval_exploration_epsilon: float = option(0.05, "schedule", "epsilon when evaluating", UNIT)
    # Run.
    seed: int = option(1, "run", "seed of every random stream",
                       Int(0, 2**32 - 1, "an integer in [0, 2^32)"))
    run_dir: str = option("", "run", "run folder; '' means runs/<agent>-<env>-<seed>",
                          Text(empty_ok=True, describe="a path"))
    device: str = option("auto", "run", "auto: cuda if PyTorch sees a GPU, else cpu",
                         Choice("auto", "cpu", "cuda"))
    threads: int = option(0, "run", "PyTorch CPU threads (0: auto, see README)", Int(0, 1024))
    checkpoint_replay: bool = option(True, "run", "checkpoint the replay (needed for an exact "
                                     "resume)")
    tensorboard: bool = option(True, "run", "write TensorBoard events")
    progress: bool = option(True, "run", "show a progress bar")
    snapshot_interval: int = option(1, "run", "keep the online network of every K-th "
                                    "iteration in checkpoints/networks/ for qzoo eval (0: "
                                    "none)", Int(0, 100_000))
    accept_changes: str = option("", "run", "on a resume, options that may differ from the "
                                 "saved run (comma-separated; only: iterations)",
                                 Text(empty_ok=True, describe="a comma-separated list"))
    # fmt: on

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


# batch_rl's fixed-replay agents (Agarwal, Schuurmans & Norouzi 2020): the values of
# batch_rl/fixed_replay/configs/*.gin and Dopamine's runner (batch_rl_dopamine.md §2.2)
# in frames, 4 per agent step: 250,000 training steps = train_frames 1,000,000 (offline:
# the frames the replayed transitions stand for); update_period 4 = learn_period 16
# (62,500 updates per iteration); target_update_period 8,000 = 32,000 frames (2,000
# updates); 125,000 evaluation steps = 500,000 frames; 27,000 steps per episode = 108,000
# frames; 200 iterations; gamma 0.99, 1-step, replay 1M, batch 32, rewards clipped to
# [-1, 1], no gradient-norm clip: Config()'s defaults, so only differences are listed.
# Dopamine's Huber loss (no TD-error clip); no double Q. Sticky actions (machado): the
# protocol the dataset was collected with. The online values (min_replay_history 20,000
# steps = 2% of the replay; epsilon 1 -> 0.01 over 250,000 steps = 0.5% of 200M frames)
# act only online. Optimizers have TF1's semantics (optim.py); networks are Dopamine's
# ('same' padding; batch_rl's variance-scaling initialization, §2.4).
_BATCH_RL = {
    "torso": "dopamine_cnn", "init": "variance_scaling",
    "protocol": "machado", "grad_error_bound": 0.0, "target_network_update_period": 32_000,
    "min_replay_capacity_fraction": 0.02, "exploration_epsilon_end_value": 0.01,
    "exploration_epsilon_decay_frame_fraction": 0.005, "eval_exploration_epsilon": 0.001,
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
        # Dopamine's 1e-5 is qzoo's 1e-5; it starts the mean square at 1 (optim.py).
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
        # NatureDQNNetworks: Glorot) and an Adam epsilon 10x smaller. Its deep
        # exploration (a new mixture per training episode) is not in qzoo yet: online
        # REM explores epsilon-greedily.
        "online": {
            "num_heads": 4,
            "separate_networks": True,
            "init": "glorot",
            "optimizer_epsilon": 3.125e-5,
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

FIELDS = {f.name: f for f in dataclasses.fields(Config)}


def check_agent(agent):
    """Raises UserError unless `agent` names a preset."""
    if agent not in PRESETS:
        hint = closest(agent, PRESETS)
        raise UserError(
            f"unknown agent {agent!r}; expected one of {', '.join(PRESETS)}"
            + (f" (did you mean {hint[0]}?)" if hint else "")
        )


def build_config(agent, options, strict=False):
    """The Config of `agent` with `options` ({field name: text or value}) over the
    preset and the environment's domain defaults, checked before any work starts.

    `options["env"]` may be any name envs.interpret accepts (PongNoFrameskip-v4,
    ALE/Pong-v5, ...); a one-line note on stderr says how such a name is mapped. With
    `strict` (the command line), options that would have no effect for this agent and
    environment are refused; without it (scripts), one options dict may serve several
    agents, and those options are merely unused.
    """
    from qzoo import envs

    check_agent(agent)
    options = {name: value for name, value in options.items() if name != "agent"}
    given = list(options) if strict else None
    for name in options:
        if name not in FIELDS:
            hint = closest(name, FIELDS)
            raise UserError(
                f"unknown option {options_lib.flag(name)}"
                + (f"; did you mean {options_lib.flag(hint[0])}?" if hint else "")
            )
    env = options_lib.parse(FIELDS["env"], options.pop("env", Config.env))
    domain, env, implied, note = envs.interpret(env)
    parsed = {name: options_lib.parse(FIELDS[name], value) for name, value in options.items()}
    config = make_config(agent, env, domain, {**implied, **parsed}, given)
    if note:  # only for a config that will run: a refusal stays one line
        print(f"qzoo: note: {note}", file=sys.stderr)
    return config


def preset_values(agent, offline):
    """The preset's overrides; training online (not `offline`), also its "online" ones
    (REM's online variant differs from its fixed-replay one)."""
    preset = PRESETS[agent]
    return {**preset["overrides"], **({} if offline else preset.get("online", {}))}


def make_config(agent, env, domain, overrides, given=None):
    """The layers of the module docstring for `agent` on canonical `env` of `domain`,
    with `overrides` (typed values) on top; validated (options.validate, with `given`)."""
    check_agent(agent)
    # A run is offline when it names a dataset (--offline DIR).
    preset = preset_values(agent, offline=bool(overrides.get("offline")))
    values = {**preset, **DOMAIN_DEFAULTS.get(domain, {}), **overrides}
    config = Config(agent=agent, env=env, **values)
    options_lib.validate(config, domain, given)
    return config


def default_run_dir(config):
    """runs/<agent>-<env>-<seed>, with the env's slashes (minatar/breakout) made safe."""
    return os.path.join("runs", f"{config.agent}-{config.env.replace('/', '_')}-{config.seed}")
