"""A config checked whole before a run starts: every value against its domain, then
the relations between options (the core ones here, each feature's in configuration/rules/),
and, for the options a user typed, whether they act at all."""

import dataclasses
import os

from qzoo.configuration import rules as features
from qzoo.configuration import user_envs
from qzoo.configuration.torsos import registered as registered_torso
from qzoo.errors import UserError, bad_value, flag, shown


def resolved_torso(config, domain):
    """The torso `auto` stands for on `domain` (as networks.make_network picks it)."""
    if config.torso != "auto":
        return config.torso
    return {"atari": "nature_cnn", "minatar": "minatar_cnn"}.get(domain, "mlp")


def _fill_fixes(c):
    """The values that would let the replay fill before the run ends (learning starts
    once min_replay_size x action_repeats frames are in, fewer than the run's frames),
    each alone: more frames, or a smaller replay or fraction where a batch still fits."""
    fill = c.min_replay_size * c.action_repeats
    fixes = (f"any one of these would do: --train-frames {fill // c.iterations + 1} or "
             f"--iterations {fill // c.train_frames + 1} (or more)")  # fmt: skip
    most = (c.iterations * c.train_frames - 1) // c.action_repeats  # the largest fill that fits
    if most < c.batch_size:
        return fixes
    for digits in range(2, 18):  # the shortest fraction whose fill holds a batch and fits
        fraction = float(f"{(most + 0.5) / c.replay_capacity:.{digits}g}")
        if c.batch_size <= int(fraction * c.replay_capacity) <= most:
            break
    capacity = int((most + 1) / c.min_replay_capacity_fraction)
    while int(c.min_replay_capacity_fraction * capacity) > most:
        capacity -= 1  # int() of a product rounds either way: step down to fit
    return (
        f"{fixes}; --replay-capacity {capacity} or --min-replay-capacity-fraction "
        f"{shown(fraction)} (or less)"
    )


def _relations(config, domain):
    """(the options involved, whether the relation holds, what it expects)."""
    c = config
    rows = -(-c.replay_capacity // c.num_envs)  # replay rows per environment
    step = c.action_repeats * c.num_envs  # frames of one batched step
    torsos = {"atari": ("nature_cnn", "dopamine_cnn", "minatar_cnn", "mlp"),
              "minatar": ("minatar_cnn", "mlp")}  # fmt: skip
    torsos = torsos.get(domain, ("mlp",))
    return [
        # A replay too short for one stack and its n-step return can never sample, and
        # the agent would never learn.
        (("n_steps", "frame_stack", "replay_capacity", "num_envs"),
         c.n_steps + c.frame_stack <= rows,
         (f"--n-steps + --frame-stack ({c.n_steps} + {c.frame_stack}) at most the replay's "
          f"rows per environment (--replay-capacity {c.replay_capacity} / --num-envs "
          f"{c.num_envs}: {rows})")),
        (("min_replay_capacity_fraction", "replay_capacity", "batch_size"),
         c.min_replay_size >= c.batch_size,
         (f"--min-replay-capacity-fraction x --replay-capacity ({c.min_replay_capacity_fraction}"
          f" x {c.replay_capacity} = {c.min_replay_size} transitions) at least --batch-size "
          f"{c.batch_size}")),
        # One batched step is the shortest phase there is.
        (("train_frames", "action_repeats", "num_envs"), c.train_frames >= step,
         (f"--train-frames at least one step of every environment (--action-repeats "
          f"{c.action_repeats} x --num-envs {c.num_envs} = {step} frames)")),
        (("eval_frames", "action_repeats", "num_envs"), c.eval_frames >= step,
         (f"--eval-frames at least one step of every environment (--action-repeats "
          f"{c.action_repeats} x --num-envs {c.num_envs} = {step} frames)")),
        (("max_frames_per_episode", "action_repeats"),
         not 0 < c.max_frames_per_episode < c.action_repeats,
         f"--max-frames-per-episode 0 (no cap) or at least --action-repeats {c.action_repeats}"),
        # Gymnasium and MinAtar environments take one frame per step: a repeat count
        # there would only multiply the frame counter.
        (("action_repeats",), domain == "atari" or c.action_repeats == 1,
         f"1 for {domain} environments (only Atari repeats actions)"),
        (("torso",), c.torso in ("auto",) + torsos or registered_torso(c.torso) is not None,
         (f"auto or {' or '.join(torsos)} for {domain} observations, or a torso registered "
          "with qzoo.register_torso")),
        # Learning starts once the replay holds its minimum fill; a run that ends first
        # would act for hours and never update.
        (("iterations", "train_frames", "min_replay_capacity_fraction", "replay_capacity"),
         bool(c.offline) or c.exploration_begin_frame < c.iterations * c.train_frames,
         (f"--iterations x --train-frames ({c.iterations} x {c.train_frames} frames) more "
          f"than the {c.exploration_begin_frame} frames it takes to fill the replay to "
          f"--min-replay-capacity-fraction {c.min_replay_capacity_fraction} of "
          f"--replay-capacity {c.replay_capacity} before learning starts; {_fill_fixes(c)}")),
        # A ratio so low that no update falls due in the whole run would train nothing.
        (("replay_ratio", "iterations", "train_frames"),
         c.offline or c.replay_ratio == 0 or (c.iterations * c.train_frames
         - c.exploration_begin_frame) * c.replay_ratio >= c.batch_size * c.action_repeats,
         (f"one high enough for an update in the run: {shown(c.replay_ratio)} gives one per "
          f"{c.batch_size * c.action_repeats / max(c.replay_ratio, 1e-300):,.0f} frames "
          f"(--batch-size x action repeats / R), and the run learns over "
          f"{max(0, c.iterations * c.train_frames - c.exploration_begin_frame):,} frames")),
        # Heads are plain Q-values (batch_rl's multi-head networks): a distribution per
        # head would need its own objective, which qzoo does not have.
        (("distribution", "num_heads"), c.num_heads == 1 or c.distribution == "none",
         (f"--num-heads 1 or --distribution none (several heads are plain Q-values; here "
          f"--num-heads {c.num_heads}, --distribution {c.distribution})")),
        # Without noisy layers and with epsilon 0 throughout, nothing explores.
        # rlpyt's make_vec_eps spaces the finals from eps_final_min up to eps_final.
        (("eps_final_min", "exploration_epsilon_end_value"),
         c.eps_final_min <= c.exploration_epsilon_end_value,
         (f"0 (off) or at most --exploration-epsilon-end-value "
          f"({shown(c.exploration_epsilon_end_value)}): the smallest of the finals")),
        (("noisy", "exploration_epsilon_begin_value", "exploration_epsilon_end_value"),
         c.noisy or c.exploration_epsilon_begin_value > 0 or c.exploration_epsilon_end_value > 0,
         ("some exploration: --noisy, or a positive --exploration-epsilon-begin-value or "
          "--exploration-epsilon-end-value")),
    ] + features.offline_relations(c) + features.ray_relations(c) + user_envs.relations(c)  # fmt: skip


# Options that act only together with others, and would otherwise be silently dropped:
# option -> (the value meaning "off", or None for a parameter of a feature; the
# options that can switch it off; whether it acts; what it needs to act).
_ACTS_ONLY_WITH = {
    "grad_error_bound": (0.0, ("distribution",), lambda c, d: c.distribution == "none",
                         ("--distribution none; distributional losses are clipped by "
                          "--max-global-grad-norm")),
    "shared_bias": (False, ("dueling", "noisy"), lambda c, d: not (c.dueling or c.noisy),
                    "a plain head, neither --dueling nor --noisy"),
    "protocol": ("dqn_zoo", ("env",), lambda c, d: d == "atari", "Atari games"),
    "num_atoms": (None, (), lambda c, d: c.distribution == "categorical",
                  "--distribution categorical"),
    "vmax": (None, (), lambda c, d: c.distribution == "categorical",
             "--distribution categorical"),
    "num_quantiles": (None, (), lambda c, d: c.distribution == "quantile",
                      "--distribution quantile"),
    "huber_param": (None, (), lambda c, d: c.distribution in ("quantile", "implicit_quantile"),
                    "--distribution quantile or implicit_quantile"),
    **{name: (None, (), lambda c, d: c.distribution == "implicit_quantile",
              "--distribution implicit_quantile")
       for name in ("tau_latent_dim", "tau_samples_policy", "tau_samples_s_tm1",
                    "tau_samples_s_t")},
    "noisy_weight_init": (None, (), lambda c, d: c.noisy, "--noisy"),
    **{name: (None, (), lambda c, d: c.prioritized, "--prioritized")
       for name in ("priority_exponent", "importance_sampling_exponent_begin_value",
                    "importance_sampling_exponent_end_value", "uniform_sample_probability",
                    "normalize_weights")},
    "rmsprop_decay": (None, (), lambda c, d: c.optimizer.startswith("rmsprop"),
                      "--optimizer rmsprop_centered or rmsprop_centered_tf1"),
    "head_mixing": (None, (), lambda c, d: c.num_heads > 1, "--num-heads above 1"),
    "separate_networks": (False, ("num_heads",), lambda c, d: c.num_heads > 1,
                          "--num-heads above 1"),
    "deep_exploration": (False, ("num_heads", "offline"),
                         lambda c, d: c.num_heads > 1 and not c.offline,
                         "--num-heads above 1, online"),
    "mlp_hidden": (None, (), lambda c, d: resolved_torso(c, d) == "mlp" and not c.mlp_layers,
                   "the mlp torso (a vector environment's, or --torso mlp) and no --mlp-layers"),
    "mlp_layers": ("", (), lambda c, d: resolved_torso(c, d) == "mlp" and not c.recurrent,
                   "the mlp torso (a vector environment's, or --torso mlp) and no --recurrent"),
    "replay_compression": ("none", (), lambda c, d: not (c.offline or c.recurrent),
                           ("the frame replay, not --offline's dataset or --recurrent's "
                            "sequences")),
}  # fmt: skip
_ACTS_ONLY_WITH.update(features.ACTS_ONLY_WITH)  # the features' (configuration/rules/)


def _check_acts(config, domain, given):
    """Refuses options in `given` (typed by the user) that would have no effect, and
    preset values that options in `given` would silently switch off."""
    for name, (off, causes, acts, needs) in _ACTS_ONLY_WITH.items():
        value = getattr(config, name)
        if acts(config, domain) or value == off:
            continue
        if name in given:
            expected = f"no {flag(name)}" if off is None else shown(off)
            raise bad_value(name, value, f"{expected} here: it only acts with {needs}")
        cause = next((c for c in causes if c in given), None)
        if cause is not None and off is not None:
            fix = flag("no_" + name) if off is False else f"{flag(name)} {shown(off)}"
            raise UserError(
                f"{flag(cause)} {shown(getattr(config, cause))}: {config.agent}'s "
                f"{flag(name)} {shown(value)} would have no effect: it only acts with {needs}."
                f" Also pass {fix}"
            )


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _check_threads(threads: int) -> None:
    """Refuses more PyTorch threads than cores: OpenMP's threads then wait for each other
    at every operation, and a run of seconds takes minutes."""
    cores = usable_cores()
    if threads > cores:
        raise bad_value("threads", threads, f"0 (auto) or an integer in [1, {cores}]: at most "
                        f"the {cores} cores this process may use")  # fmt: skip


def validate(config, domain, given=None):
    """Raises UserError for the first bad value in `config` for an environment of
    `domain` (atari, minatar, gym): every field against its domain, then the relations
    between fields. With `given`, the names of the options the user typed, also
    refuses those that would have no effect (see _ACTS_ONLY_WITH)."""
    for field in dataclasses.fields(config):
        domain_of_field = field.metadata["domain"]
        if not domain_of_field.accepts(getattr(config, field.name)):
            raise bad_value(field.name, getattr(config, field.name), domain_of_field.expected)
    given = set(given or ())
    relations = _relations(config, domain) + features.recurrent_relations(config, domain)
    relations += features.batch_relations(config, domain) + features.prefetch_relations(config)
    relations += features.pin_relations(config) + features.actor_process_relations(config)
    relations += features.device_replay_relations(config) + features.capture_relations(config)
    relations += features.atari100k_relations(config, domain) + features.pqn_relations(config)
    for involved, holds, expected in relations:
        if not holds:
            blamed = next((name for name in involved if name in given), involved[0])
            if isinstance(expected, dict):  # worded for whichever option is blamed
                expected = expected[blamed]
            raise bad_value(blamed, getattr(config, blamed), expected)
    if config.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise bad_value("device", "cuda", "auto or cpu: PyTorch finds no CUDA GPU here")
    if config.replay_device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise bad_value("replay_device", "cuda", "host or cpu: PyTorch finds no CUDA GPU here")
    if config.replay_compression != "none":
        from qzoo.configuration.rules.compression import require

        require(config.replay_compression)  # the codec's package, before any work
    if "threads" in given:  # typed here, for this machine (a saved run may have had more)
        _check_threads(config.threads)
    if given:
        _check_acts(config, domain, given)
    features.check_acting(config, given)
    features.check_preset_recurrence(config, given)
