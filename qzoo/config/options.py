"""What every option accepts, and the relations between options.

Each Config field names its domain (`Int`, `Real`, `Bool`, `Choice`, `Text`) in its
metadata; `parse` turns a command-line string into a value of that domain, and
`validate` checks a whole config before any work starts: every field against its
domain, then the relations no single field can check (replay sizes against batch and
n-step sizes, frame counts against action repeats, ...), then, for the options a user
typed, the ones that would have no effect for the chosen agent and environment. A
value that fails raises UserError: `--name: bad value X; expected ...`.
"""

import dataclasses
import math

from qzoo.config import rules as features
from qzoo.errors import UserError, bad_value, closest, flag, shown


class Int:
    """Integers in [low, high]; `1e6` and `1_000_000` are accepted when exact."""

    metavar = "INT"

    def __init__(self, low, high, describe=None):
        self.low, self.high = low, high
        self.expected = describe or f"an integer in [{low:_}, {high:_}]"

    def parse(self, text):
        try:
            return int(text)
        except ValueError:
            number = float(text)  # ValueError for words, OverflowError never (gives inf)
            if not number.is_integer() or abs(number) >= 2**53:  # inf and nan included
                raise ValueError(text) from None
            return int(number)

    def accepts(self, value):
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and (self.low <= value <= self.high)
        )


class Real:
    """Finite numbers in an interval; `low_open` / `high_open` exclude the ends."""

    metavar = "FLOAT"

    def __init__(self, low=-math.inf, high=math.inf, low_open=False, high_open=False):
        self.low, self.high, self.low_open, self.high_open = low, high, low_open, high_open
        if high == math.inf:
            self.expected = f"a finite number {'>' if low_open else '>='} {low:g}"
        else:
            left, right = "(" if low_open else "[", ")" if high_open else "]"
            self.expected = f"a number in {left}{low:g}, {high:g}{right}"

    def parse(self, text):
        return float(text)

    def accepts(self, value):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return math.isfinite(value) and above and below


class Bool:
    metavar = "BOOL"
    expected = "true or false"

    def parse(self, text):
        words = {"true": True, "false": False, "1": True, "0": False, "yes": True, "no": False}
        if text.lower() not in words:
            raise ValueError(text)
        return words[text.lower()]

    def accepts(self, value):
        return isinstance(value, bool)


class Choice:
    def __init__(self, *choices):
        self.choices = choices
        self.metavar = "{" + ",".join(choices) + "}"
        self.expected = "one of " + ", ".join(choices)

    def parse(self, text):
        return text

    def accepts(self, value):
        return value in self.choices


class Text:
    metavar = "TEXT"

    def __init__(self, empty_ok=False, describe="a non-empty text"):
        self.empty_ok, self.expected = empty_ok, describe

    def parse(self, text):
        return text

    def accepts(self, value):
        return isinstance(value, str) and "\0" not in value and (self.empty_ok or bool(value))


class Widths:
    """Layer widths as text, comma-separated positive integers ("120,84"), or '' for
    none given; text, so that config.json and checkpoints hold it as given, in one
    spelling (parse writes "120, 084" as "120,84", so a resume compares like with like)."""

    metavar = "W,W,..."

    def __init__(self, high=10_000, most=8):
        self.high, self.most = high, most
        self.expected = f"'' or 1 to {most} comma-separated integers in [1, {high:_}]"

    def parse(self, text):
        if text == "":
            return ""
        return ",".join(str(int(part)) for part in text.split(","))  # ValueError: words

    def accepts(self, value):
        if not isinstance(value, str):
            return False
        parts = value.split(",") if value else []
        return len(parts) <= self.most and all(
            p.isascii() and p.isdigit() and str(int(p)) == p and 1 <= int(p) <= self.high
            for p in parts
        )


def parse(field, value):
    """The value of Config `field` (a dataclasses.Field) given as text or already typed."""
    domain = field.metadata["domain"]
    typed = value
    if isinstance(value, str) and not isinstance(domain, (Choice, Text)):
        try:
            typed = domain.parse(value.strip())
        except ValueError:
            raise bad_value(field.name, value, domain.expected) from None
    if not domain.accepts(typed):
        expected = domain.expected
        if isinstance(domain, Choice) and isinstance(value, str):
            hint = closest(value, domain.choices, n=1)  # --acting paralel
            expected += f" (did you mean {hint[0]}?)" if hint else ""
        raise bad_value(field.name, value, expected)
    return typed


def resolved_torso(config, domain):
    """The torso `auto` stands for on `domain` (as networks.make_network picks it)."""
    if config.torso != "auto":
        return config.torso
    return {"atari": "nature_cnn", "minatar": "minatar_cnn"}.get(domain, "mlp")


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
        (("torso",), c.torso in ("auto",) + torsos,
         f"auto or {' or '.join(torsos)} for {domain} observations"),
        # Learning starts once the replay holds its minimum fill; a run that ends first
        # would act for hours and never update.
        (("iterations", "train_frames", "min_replay_capacity_fraction", "replay_capacity"),
         bool(c.offline) or c.exploration_begin_frame < c.iterations * c.train_frames,
         (f"--iterations x --train-frames ({c.iterations} x {c.train_frames} frames) more "
          f"than the {c.exploration_begin_frame} frames it takes to fill the replay to "
          f"--min-replay-capacity-fraction {c.min_replay_capacity_fraction} of "
          f"--replay-capacity {c.replay_capacity} before learning starts")),
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
        (("offline", "log_replay"), not (c.offline and c.log_replay),
         "no --log-replay with --offline: an offline run has no experience of its own"),
        # (R2D1, prioritized too, refuses --offline itself: options_features.py.)
        (("prioritized", "offline"), not (c.offline and c.prioritized) or c.recurrent,
         "--prioritized false with --offline (a dataset is sampled uniformly: Dopamine's rules)"),
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
    ] + features.ray_relations(c)  # fmt: skip


# Options that act only together with others, and would otherwise be silently dropped:
# option -> (the value meaning "off", or None for a parameter of a feature; the
# options that can switch it off; whether it acts; what it needs to act).
_ACTS_ONLY_WITH = {
    **{name: (None, (), lambda c, d: bool(c.offline), "--offline")
       for name in ("offline_checkpoints", "offline_reload", "offline_transitions")},
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
    "log_replay_capacity": (None, (), lambda c, d: bool(c.log_replay), "--log-replay"),
    "mlp_hidden": (None, (), lambda c, d: resolved_torso(c, d) == "mlp" and not c.mlp_layers,
                   "the mlp torso (a vector environment's, or --torso mlp) and no --mlp-layers"),
    "mlp_layers": ("", (), lambda c, d: resolved_torso(c, d) == "mlp" and not c.recurrent,
                   "the mlp torso (a vector environment's, or --torso mlp) and no --recurrent"),
    "replay_compression": ("none", (), lambda c, d: not (c.offline or c.recurrent),
                           ("the frame replay, not --offline's dataset or --recurrent's "
                            "sequences")),
}  # fmt: skip
_ACTS_ONLY_WITH.update(features.ACTS_ONLY_WITH)  # R2D1's and Ray's (options_features.py)


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
    relations += features.atari100k_relations(config, domain)
    for involved, holds, expected in relations:
        if not holds:
            blamed = next((name for name in involved if name in given), involved[0])
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
        from qzoo.replay.compressed import require

        require(config.replay_compression)  # the codec's package, before any work
    if given:
        _check_acts(config, domain, given)
    features.check_acting(config, given)
    features.check_preset_recurrence(config, given)
