"""Run configuration: one dataclass, every option a field with its group, help and
value domain (the command line, its checks and the options page are made from it).
Every schedule is in environment frames, as in DQN Zoo; presets (presets.py) are data,
and a run's config is built in layers over these defaults (build.py)."""

import dataclasses
import json

from qzoo.configuration.torsos import TorsoChoice
from qzoo.configuration.values import Bool, Choice, Int, Real, Text, Widths

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
    """A run's options, one field per command-line option (`learning_rate` is
    `--learning-rate`): build it with qzoo.config, which layers a preset, the
    environment's domain and your options, and checks them."""

    # fmt: off
    agent: str = option("dqn", "run", "the preset (qzoo agents lists them)", Text())
    # Environment and preprocessing.
    env: str = option("pong", "env", "Atari game (pong, ALE/Pong-v5, PongNoFrameskip-v4), "
                      "minatar/<game>, a Gymnasium id, or your own as module:EnvId or "
                      "module:function", Text(describe="an Atari game (pong), minatar/<game>, "
                      "a Gymnasium id or module:EnvId"))
    gym_packages: str = option("", "env", "modules to import first, comma-separated: they "
                               "register your Gymnasium environments or qzoo torsos "
                               "(rl-baselines3-zoo's --gym-packages)",
                               Text(empty_ok=True, describe="module names, comma-separated"))
    protocol: str = option("dqn_zoo", "env", "Atari protocol; machado: sticky actions 0.25, "
                           "no life-loss signal", Choice("dqn_zoo", "machado"))
    num_envs: int = option(1, "env", "environments stepped together (1: DQN Zoo's single "
                           "stream)", Int(1, 1024))
    env_batch_size: int = option(0, "env", "ale-py's asynchronous mode: each agent step acts "
                                 "on the B environments ready first (Atari, --acting serial; "
                                 "0: all --num-envs together)", Int(0, 1024))
    episodic_lives: bool = option(False, "env", "R2D1: a lost life starts the agent's "
                                  "episode anew (recurrent state, frame stack, previous "
                                  "action and reward reset; trained steps after it masked) "
                                  "while the game goes on (rlpyt's episodic_lives)")
    action_repeats: int = option(4, "env", "frames per agent step (Atari only)", Int(1, 100))
    frame_stack: int = option(4, "env", "frames stacked into one observation", Int(1, 64))
    max_abs_reward: float = option(1.0, "env", "learning clips the reward summed over the "
                                   "repeats to [-x, x]", POSITIVE)
    max_frames_per_episode: int = option(108_000, "env", "episode cap in frames, a truncation "
                                         "that bootstraps (0: none)", Int(0, 10**9))
    # Network.
    torso: str = option("auto", "network", "auto: nature_cnn on Atari, minatar_cnn on "
                        "MinAtar, mlp elsewhere; dopamine_cnn: 'same' padding; or the name "
                        "of a torso registered with qzoo.register_torso", TorsoChoice())
    init: str = option("dqn_zoo", "network", "weights: dqn_zoo U(+-1/sqrt(fan_in)), "
                       "Dopamine's glorot or variance_scaling, or PQN's: he_normal "
                       "(purejaxql's flax he/lecun normal) or orthogonal (CleanRL's, gain "
                       "sqrt 2); zero biases but dqn_zoo's",
                       Choice("dqn_zoo", "glorot", "variance_scaling", "he_normal",
                              "orthogonal"))
    mlp_hidden: int = option(64, "network", "units in each of the mlp torso's two layers "
                             "and in the head's hidden layer", SIZE)
    mlp_layers: str = option("", "network", "the mlp's hidden layers instead, e.g. 120,84 "
                             "(CleanRL's dqn.py), then one linear layer to the outputs (per "
                             "dueling stream); '' is --mlp-hidden's three", Widths())
    dueling: bool = option(False, "network", "value and advantage streams (Wang et al. 2016)")
    dueling_shared_hidden: bool = option(False, "network", "the dueling streams share one "
                                         "hidden layer, their last layers with biases "
                                         "(Dopamine's Rainbow network)")
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
    layer_norm: bool = option(False, "network", "PQN: a LayerNorm before each hidden layer's "
                              "ReLU (over a convolution's channels at each position)")
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
    augmentation: str = option("none", "loss", "sampled s_tm1 and s_t augmented before the "
                               "loss: shift (DrQ's random shift of +-4 pixels) or "
                               "shift_intensity (then Dopamine DrQ(eps)'s intensity noise)",
                               Choice("none", "shift", "shift_intensity"))
    shift_offsets: str = option("image", "loss", "--augmentation's shift: an offset per image "
                                "(DrQ) or one per batch (Dopamine's DrQ code until 2022)",
                                Choice("image", "batch"))
    n_steps: int = option(1, "loss", "steps of reward before bootstrapping", Int(1, 1000))
    double_q: bool = option(False, "loss", "greedy action at s_t from the online network")
    q_lambda: float = option(0.65, "loss", "PQN: lambda of the rollout's Q(lambda) returns",
                             UNIT)
    return_loss: str = option("l2", "loss", "PQN: the loss of Q(s, a) - G: l2 = 0.5 x^2 "
                              "(purejaxql) or squared = x^2 (CleanRL)", Choice("l2", "squared"))
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
    offline_checkpoints: str = option("", "replay", "with --offline: which checkpoints, a "
                                      "slice of their sorted suffixes (40: = the last 10 of "
                                      "50; batch_rl's replay_file_start/end_index)",
                                      Text(empty_ok=True, describe="START:END"))
    offline_reload: int = option(0, "replay", "with --offline: 0 trains on all checkpoints at "
                                 "once; N loads N random ones every iteration and draws each "
                                 "batch from one of them (batch_rl: 5)", Int(0, 10_000))
    offline_transitions: int = option(0, "replay", "with --offline: 0 uses every row; N "
                                      "only the first N of each checkpoint, as a buffer of "
                                      "capacity N (batch_rl's smaller-dataset mode)",
                                      Int(0, 10**9))
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
    # Compressed replay (replay/compressed.py): frames kept compressed, the same samples.
    replay_compression: str = option("none", "replay", "keep replay frames compressed (lossless"
                                     ", 12-55x less memory on Atari, slower sampling): lz4 "
                                     "or zstd; needs pip install 'qzoo[compression]'",
                                     Choice("none", "lz4", "zstd"))
    # Replay resident on a torch device (replay/device.py; the GPU fast path).
    replay_device: str = option("host", "replay", "where replay lives: host (NumPy arrays) "
                                "or cpu/cuda (torch tensors: stacks, n-step returns and "
                                "draws computed there, batches born on the learner's "
                                "device)", Choice("host", "cpu", "cuda"))
    # Optimizer.
    optimizer: str = option("rmsprop_centered", "optimizer", "rmsprop_centered (DQN Zoo's, "
                            "eps inside the root) or adam; *_tf1: Dopamine's TF1 semantics",
                            Choice("rmsprop_centered", "rmsprop_centered_tf1", "adam",
                                   "adam_tf1", "radam"))
    learning_rate: float = option(2.5e-4, "optimizer", "step size",
                                  Real(0, 1, low_open=True))
    learning_rate_decay: str = option("none", "optimizer", "linear: the step size falls "
                                      "linearly to 0 over the run's updates (PQN's small "
                                      "domains)", Choice("none", "linear"))
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
    target_count_updates: bool = option(False, "schedule", "count the target period in "
                                        "updates (period x updates per frame) from the first "
                                        "update, as rlpyt (async and --ray always do); false: "
                                        "in frames from frame 0 (DQN Zoo)")
    # Epsilon-greedy: from min replay on, decays over fraction x iterations x train_frames.
    exploration_epsilon_begin_value: float = option(1.0, "schedule", "epsilon before the "
                                                    "decay", UNIT)
    exploration_epsilon_end_value: float = option(0.1, "schedule", "epsilon after the decay",
                                                  UNIT)
    exploration_epsilon_decay_frame_fraction: float = option(0.02, "schedule", "decay length "
                                                             "as a fraction of the run", UNIT)
    eval_exploration_epsilon: float = option(0.05, "schedule", "epsilon when evaluating", UNIT)
    eval_episodes: int = option(0, "schedule", "evaluate on this many environments at once, "
                                "one whole episode each, instead of --eval-frames frames (0: "
                                "by frames; Atari-100k's evaluation: 100)", Int(0, 10_000))
    eval_period: int = option(1, "schedule", "evaluate every this many iterations (and "
                              "after the last); others, and above 1 the untrained iteration "
                              "0, write no evaluation (1: every one, DQN Zoo)",
                              Int(1, 100_000))
    eval_finish_episodes: bool = option(False, "schedule", "evaluation plays the episodes "
                                        "under way at --eval-frames to their end and counts "
                                        "them (Dopamine; batch_rl's presets); false: they are "
                                        "dropped (DQN Zoo)")
    eval_noise: bool = option(True, "schedule", "noisy layers draw noise when evaluating "
                              "(DQN Zoo); false: their mean weights (Dopamine)")
    deep_exploration: bool = option(False, "schedule", "with --num-heads > 1, act in each "
                                    "training episode on one random head (identity) or mixture "
                                    "(stochastic) of the heads (batch_rl's online REM)")
    rollout_steps: int = option(0, "schedule", "PQN (Gallici et al. 2025): learn from rollouts "
                                "of this many steps of every environment, without replay or "
                                "target network (0: replay, as DQN)", Int(0, 100_000))
    update_epochs: int = option(2, "schedule", "PQN: passes over each rollout", Int(1, 1_000))
    num_minibatches: int = option(32, "schedule", "PQN: minibatches of each pass",
                                  Int(1, 65_536))
    # Run.
    seed: int = option(1, "run", "seed of every random stream",
                       Int(0, 2**32 - 1, "an integer in [0, 2^32)"))
    run_dir: str = option("", "run", "run folder; '' means runs/<agent>-<env>-<seed>",
                          Text(empty_ok=True, describe="a path"))
    device: str = option("auto", "run", "auto: cuda if PyTorch sees a GPU, else cpu",
                         Choice("auto", "cpu", "cuda"))
    threads: int = option(0, "run", "PyTorch CPU threads (0: auto, from the cores free at the "
                          "start; see the docs)", Int(0, 1024))
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
    # R2D1 (Kapturowski et al. 2019) in rlpyt's form: networks/recurrent.py,
    # acting/recurrent_policy.py, replay/sequences.py, learning/objectives.py's
    # R2D1SequenceLearning. Steps here are agent steps.
    recurrent: bool = option(False, "network", "R2D1: an LSTM core fed the previous action "
                             "and reward, trained on replayed sequences")
    lstm_size: int = option(512, "network", "R2D1: LSTM units", SIZE)
    burn_in_steps: int = option(40, "replay", "R2D1: steps of each sequence that only warm "
                                "the recurrent state up (rlpyt's warmup_T)", Int(0, 10_000))
    sequence_steps: int = option(80, "replay", "R2D1: trained steps of each sequence, after "
                                 "the burn-in (rlpyt's batch_T)", Int(1, 10_000))
    store_state_interval: int = option(40, "replay", "R2D1: the actor's recurrent state is "
                                       "stored every K rows; sequences start only there",
                                       Int(1, 10_000))
    priority_eta: float = option(0.9, "replay", "R2D1: a sequence's priority is eta max |TD| "
                                 "+ (1 - eta) mean |TD|", UNIT)
    input_priorities: bool = option(True, "replay", "R2D1: new sequences enter at a priority "
                                    "from the actor's Q-values (else the largest seen)")
    value_rescale_eps: float = option(1e-3, "loss", "R2D1: eps of the value rescaling "
                                      "h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x", POSITIVE)
    # Acting (rlpyt's samplers and agents; qzoo/acting/, docs: Acting modes).
    replay_ratio: float = option(0.0, "schedule", "rlpyt's replay ratio: transitions sampled "
                                 "per transition collected (0: from --learn-period; R gives "
                                 "one update per batch-size x action-repeats / R frames; "
                                 "at most 1,024, 32 updates of 32 per agent step)",
                                 Real(0, 1024))
    eps_final_min: float = option(0.0, "schedule", "rlpyt's vector epsilon: final epsilons "
                                  "log-spaced from this to --exploration-epsilon-end-value "
                                  "over all environments (0: off)", UNIT)
    apex_epsilon: float = option(0.0, "schedule", "Ape-X's fixed epsilons eps^(1 + alpha i / "
                                 "(N - 1)) per environment i (0: off)", UNIT)
    apex_alpha: float = option(7.0, "schedule", "Ape-X's alpha (with --apex-epsilon)",
                               NON_NEGATIVE)
    max_decorrelation_steps: int = option(0, "schedule", "rlpyt's decorrelated start: each "
                                          "environment first takes 1 + U x this random actions, "
                                          "not stored (0: off)", Int(0, 100_000))
    target_update_tau: float = option(1.0, "schedule", "target <- tau online + (1 - tau) "
                                      "target at each update (1: DQN Zoo's hard copy)",
                                      Real(0, 1, low_open=True))
    acting: str = option("serial", "run", "how acting runs: serial (one thread), parallel "
                         "(envs in --actor-workers processes), alternating (two halves "
                         "overlapping env steps and inference), async (actor thread beside the "
                         "learner, ratio held both ways)",
                         Choice("serial", "parallel", "alternating", "async"))
    actor_workers: int = option(1, "run", "environment worker processes (parallel, "
                                "alternating, async; 1 steps environments in the actor)",
                                Int(1, 256))
    publish_period: int = option(0, "run", "updates between copies of the learner's weights "
                                 "to actors elsewhere (--acting async, --ray; 0: 1 for async, "
                                 "100 on Ray)", Int(0, 10**6))
    replay_ratio_tolerance: float = option(0.05, "run", "async, --ray: the realised ratio "
                                           "stays within this relative distance of the target",
                                           Real(0, 1, low_open=True))
    prefetch_targets: bool = option(False, "run", "async: a thread samples the next batch and "
                                    "runs the target network on it while the learner "
                                    "updates (prioritized sampling sees priorities one "
                                    "update late)")
    pin_threads: bool = option(False, "run", "async (Linux; one PyTorch thread): the learner's "
                               "thread on the first core this process may use, the actor's "
                               "and the prefetcher's on the others")
    actor_process: bool = option(False, "run", "async: the actor in a process of its own "
                                 "(no interpreter lock shared with the learner; "
                                 "rlpyt's AsyncRl layout)")
    deterministic: bool = option(False, "run", "async: actor and learner in lockstep in one "
                                 "thread (reproducible, exact resume)")
    precision: str = option("float32", "run", "the learner's forward and backward passes: "
                            "float32, or bfloat16 autocast (weights, optimizer, losses and "
                            "targets stay float32)", Choice("float32", "bfloat16"))
    compile: bool = option(False, "run", "the learner's update as one compiled graph "
                           "(torch.compile; CUDA graphs on a GPU): seconds to compile once, "
                           "then less overhead per update")
    capture: bool = option(False, "run", "the whole update (sample, loss, gradient, optimizer "
                           "step, priorities) as one compiled graph, a CUDA graph on a GPU; "
                           "needs --replay-device on the learner's device")
    capture_updates: int = option(1, "run", "with --capture: updates per graph call when that "
                                  "many fall due at once (many environments): one host "
                                  "call for K updates, the numbers of K single calls (to "
                                  "float tolerance compiled)", Int(1, 256))
    # Ray (Ape-X's layout; qzoo/distributed/, docs: Training on Ray).
    ray: bool = option(False, "run", "train on Ray (Ape-X): --actors actor processes, "
                       "--replay-shards replay shards, this process learns")
    address: str = option("", "run", "with --ray: the Ray cluster, auto or HOST:PORT ('': "
                          "start a local Ray instance with this machine's cores)",
                          Text(empty_ok=True, describe="auto or HOST:PORT"))
    actors: int = option(1, "run", "with --ray: actor processes, each with its own Ape-X "
                         "epsilons", Int(1, 100_000))
    envs_per_actor: int = option(1, "run", "with --ray: environments each actor steps",
                                 Int(1, 1024))
    replay_shards: int = option(1, "run", "with --ray: replay shards (actor i writes to shard "
                                "i mod K; with --offline, each holds part of the dataset; "
                                "each batch comes from one shard)", Int(1, 10_000))
    # Experiment tracking (run/tracking.py, docs: Tuning and tracking).
    track: bool = option(False, "run", "log the results rows, config and run name to Weights "
                         "& Biases (pip install 'qzoo[wandb]'; WANDB_MODE=offline needs no "
                         "network)")
    wandb_project: str = option("qzoo", "run", "with --track: the W&B project",
                                Text(describe="a W&B project name"))
    wandb_entity: str = option("", "run", "with --track: the W&B entity (team or user; '': "
                               "your default)", Text(empty_ok=True, describe="a W&B entity"))
    # fmt: on

    def to_json(self):
        return json.dumps(dataclasses.asdict(self), indent=2, sort_keys=True)

    # Derived quantities (dqn_zoo.md §1, "Derived facts").
    @property
    def min_replay_size(self):
        return int(self.min_replay_capacity_fraction * self.replay_capacity)

    @property
    def exploration_begin_frame(self):
        """Where epsilon's decay starts: once the replay is full enough to learn (PQN,
        which learns from its first rollout, at 0)."""
        if self.rollout_steps:
            return 0
        return self.min_replay_size * self.action_repeats

    @property
    def importance_sampling_end_t(self):
        """In replay additions: iterations x train_frames / action_repeats (50M)."""
        return self.iterations * self.train_frames // self.action_repeats

    @property
    def exploration_decay_frames(self):
        # Rounded, not truncated: 0.009 x 100 x 4e6 is 3,599,999.9999999995 in floats.
        return round(
            self.exploration_epsilon_decay_frame_fraction * self.iterations * self.train_frames
        )


FIELDS = {f.name: f for f in dataclasses.fields(Config)}
