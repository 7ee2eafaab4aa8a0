"""The relations of the options of features built on the core (options.py): R2D1's
sequences, training on Ray, and the acting modes. Each function returns or raises as
its counterpart in options.py does: (involved options, holds, accepted) triples, or a
UserError naming the bad value. ACTS_ONLY_WITH joins options.py's table of options
that act only with others."""

from qzoo.errors import UserError, bad_value, flag, shown

ACTS_ONLY_WITH = {}


# ---- R2D1 (--recurrent): what sequences need, and what has no recurrent version ----
def recurrent_relations(config, domain):
    c = config
    if not c.recurrent:
        return []
    capacity, envs, where = c.replay_capacity, c.num_envs, f"--num-envs {c.num_envs}"
    if c.ray:  # each actor's slot in its shard (distributed/shards.py)
        capacity, envs = c.replay_capacity // c.actors, c.envs_per_actor
        where = f"--actors {c.actors} / --envs-per-actor {envs}"
    rows = -(-capacity // envs)
    rows = -(-rows // c.store_state_interval) * c.store_state_interval  # as sequences.py
    need = c.burn_in_steps + c.sequence_steps + c.n_steps + c.frame_stack + c.store_state_interval
    feed_forward_only = (  # (option, holds, its accepted value and why)
        ("distribution", c.distribution == "none", "none (R2D1's network has plain Q-values)"),
        ("num_heads", c.num_heads == 1, "1 (R2D1's network has one Q head)"),
        ("noisy", not c.noisy, "false (R2D1's network has no noisy layers)"),
        ("shared_bias", not c.shared_bias, "false (R2D1's heads are rlpyt's)"),
        ("cql_alpha", c.cql_alpha == 0, "0 (R2D1's objective has no CQL term)"),
        ("deep_exploration", not c.deep_exploration, "false (R2D1's network has one head)"),
        ("grad_error_bound", c.grad_error_bound == 0,
         "0 (R2D1's loss is 1/2 delta^2: rlpyt's delta_clip None)"),
        ("offline", not c.offline, "'' (R2D1 needs the recurrent states its actor stores)"),
        ("log_replay", not c.log_replay, "'' (the DQN Replay Dataset has no recurrent states)"),
        ("compile", not c.compile, "false (torch.compile does not trace R2D1's LSTM)"),
        ("precision", c.precision == "float32", "float32 (R2D1's LSTM has no bfloat16 path)"),
    )  # fmt: skip
    return [
        (("burn_in_steps", "sequence_steps", "n_steps", "frame_stack", "store_state_interval",
          "replay_capacity", "num_envs", "actors", "envs_per_actor"), need <= rows,
         (f"--burn-in-steps + --sequence-steps + --n-steps + --frame-stack + "
          f"--store-state-interval ({c.burn_in_steps} + {c.sequence_steps} + {c.n_steps} + "
          f"{c.frame_stack} + {c.store_state_interval} = {need}) at most the replay's rows per "
          f"environment (--replay-capacity {c.replay_capacity} / {where}, in multiples of "
          f"--store-state-interval: {rows}), so that one sequence fits")),
    ] + [((name, "recurrent"), holds, f"{flag(name)} {expected} with --recurrent (R2D1)")
         for name, holds, expected in feed_forward_only]  # fmt: skip


def check_preset_recurrence(config, given):
    """Refuses --no-recurrent on a preset made for R2D1's sequences: its --learn-period
    counts sequences of --sequence-steps steps, and its value rescaling stands in for
    reward clipping (--max-abs-reward 1e9), so a feed-forward learner with its values
    would update about 80 times less often than DQN, on unclipped rewards."""
    from qzoo.config.presets import PRESETS

    preset = PRESETS[config.agent]["overrides"]
    if "recurrent" in given and not config.recurrent and preset.get("recurrent"):
        raise bad_value(
            "recurrent", False, f"true for {config.agent}, whose values are R2D1's "
            "(its --learn-period counts sequences; value rescaling replaces reward "
            "clipping): for a feed-forward agent with its options, use e.g. `qzoo "
            "train dqn --double-q --dueling --prioritized --n-steps 5`",
        )  # fmt: skip


ACTS_ONLY_WITH.update({
    **{name: (None, (), lambda c, d: c.recurrent, "--recurrent (R2D1)")
       for name in ("lstm_size", "burn_in_steps", "sequence_steps", "store_state_interval",
                    "value_rescale_eps")},
    **{name: (None, (), lambda c, d: c.recurrent and c.prioritized,
              "--recurrent and --prioritized (R2D1's prioritized sequences)")
       for name in ("priority_eta", "input_priorities")},
})  # fmt: skip


# Training on Ray (issue 14, qzoo/distributed/): options that only act with --ray, and
# the relations of a --ray run. Whether Ray is installed, the address reachable and
# the cluster big enough for --actors is checked on connecting (distributed/cluster.py).
_RAY_ONLY = ("address", "actors", "envs_per_actor", "replay_shards")
# Ape-X's fixed per-environment epsilons replace the decaying schedule on Ray.
_NOT_ON_RAY = ("exploration_epsilon_begin_value", "exploration_epsilon_end_value",
               "exploration_epsilon_decay_frame_fraction", "eps_final_min")  # fmt: skip
ACTS_ONLY_WITH.update({name: (None, (), lambda c, d: c.ray, "--ray") for name in _RAY_ONLY})
ACTS_ONLY_WITH.update(
    {
        name: (None, (), lambda c, d: not c.ray,
               "a run without --ray (on Ray, actors keep Ape-X's fixed epsilons)")
        for name in _NOT_ON_RAY
    }
)  # fmt: skip


def valid_address(text):
    """'' (start a local Ray instance), 'auto' or HOST:PORT with a port in 1..65535."""
    if text in ("", "auto"):
        return True
    host, sep, port = text.rpartition(":")
    return bool(sep and host and port.isdigit() and 1 <= int(port) <= 65535)


def ray_relations(c):
    if not c.ray:
        return []
    envs = c.actors * c.envs_per_actor
    rows = c.replay_capacity // envs  # each actor's part of the replay, per environment
    return [
        (("address",), valid_address(c.address),
         "auto or HOST:PORT (a Ray cluster's address; leave it out for a local instance)"),
        # An actor's environments are --envs-per-actor; --num-envs is the serial loop's.
        (("num_envs",), c.num_envs == 1,
         "1 with --ray: use --envs-per-actor for the environments of each actor"),
        (("replay_shards", "actors"), c.offline or c.replay_shards <= c.actors,
         f"at most --actors {c.actors} (actor i writes to shard i mod K: more would stay empty)"),
        *_offline_ray_relations(c),
        (("log_replay",), not c.log_replay,
         "no --log-replay with --ray: the experience is spread over replay shards"),
        (("replay_capacity", "actors", "envs_per_actor", "n_steps", "frame_stack"),
         c.offline or c.n_steps + c.frame_stack <= rows,
         (f"--n-steps + --frame-stack ({c.n_steps} + {c.frame_stack}) at most the replay's "
          f"rows per environment (--replay-capacity {c.replay_capacity} / (--actors "
          f"{c.actors} x --envs-per-actor {c.envs_per_actor}): {rows})")),
    ]  # fmt: skip


def _offline_ray_relations(c):
    """--offline --ray (distributed/offline.py): the dataset's shards and a learner, no
    training actors."""
    if not c.offline:
        return []
    return [
        (("actors", "offline"), c.actors == 1,
         "1 with --offline: an offline run on Ray has no training actors"),
        (("envs_per_actor", "offline"), c.envs_per_actor == 1,
         "1 with --offline: an offline run on Ray has no training actors"),
        (("publish_period", "offline"), c.publish_period == 0,
         "0 with --offline --ray: the weights go only to the evaluator, each evaluation"),
        # No actors, so no ratio to hold: the learner's updates are counted, not gated.
        (("replay_ratio_tolerance", "offline"),
         c.replay_ratio_tolerance == type(c).replay_ratio_tolerance,
         (f"{shown(type(c).replay_ratio_tolerance)} (the default) with --offline --ray: "
          "there are no actors whose pace a ratio would hold")),
    ]  # fmt: skip


# Acting (qzoo/acting/, issue 11): how the environments and the learner run together.
_ACTING_ONLY_WITH = {
    "publish_period": ("async",), "replay_ratio_tolerance": ("async",),
    "deterministic": ("async",), "actor_workers": ("parallel", "alternating", "async"),
}  # fmt: skip
_ALSO_ON_RAY = ("publish_period", "replay_ratio_tolerance")  # one meaning in both


def check_acting(config, given):
    """Refuses acting options that conflict or would have no effect."""
    c = config
    if "replay_ratio" in given and "learn_period" in given:
        raise UserError(
            f"--replay-ratio {shown(c.replay_ratio)} and --learn-period {c.learn_period} both "
            "set how often the learner updates; give one (R = batch size x action repeats "
            "/ learn period)"
        )
    for name, modes in _ACTING_ONLY_WITH.items():
        if name in given and c.acting not in modes and not (c.ray and name in _ALSO_ON_RAY):
            also = " or --ray" if name in _ALSO_ON_RAY else ""
            raise bad_value(name, getattr(c, name), f"no {flag(name)} here: it only acts "
                            f"with --acting {' or '.join(modes)}{also}")  # fmt: skip
    if c.ray and c.acting != "serial":
        raise bad_value("acting", c.acting, "serial with --ray: Ray's actors already act "
                        "beside the learner (Ape-X)")  # fmt: skip
    if "apex_alpha" in given and c.apex_epsilon == 0:
        raise bad_value(
            "apex_alpha", c.apex_alpha, "no --apex-alpha here: it only acts with --apex-epsilon"
        )
    if c.apex_epsilon > 0 and c.eps_final_min > 0:
        raise bad_value(
            "apex_epsilon",
            c.apex_epsilon,
            "no --apex-epsilon with --eps-final-min: they are two ways to set the final epsilons",
        )
    if c.acting in ("alternating", "async") and c.recurrent:
        raise bad_value("acting", c.acting, "serial or parallel with --recurrent: R2D1's "
                        "recurrent states are not yet carried by halves or an actor copy")  # fmt: skip
    if c.acting == "alternating" and c.deep_exploration:
        raise bad_value("acting", c.acting, "serial, parallel or async with "
                        "--deep-exploration: its per-episode heads are kept for all "
                        "environments at once, not per half")  # fmt: skip
    if c.acting != "serial" and c.offline:
        raise bad_value("acting", c.acting, "serial with --offline: an offline run does not act")
    if c.acting in ("parallel", "alternating", "async") and c.actor_workers > c.num_envs:
        raise bad_value(
            "actor_workers",
            c.actor_workers,
            f"at most --num-envs {c.num_envs}: each worker steps at least one environment",
        )
    if c.acting == "alternating" and (c.actor_workers < 2 or c.actor_workers % 2):
        raise bad_value(
            "actor_workers",
            c.actor_workers,
            "an even number >= 2 with --acting alternating: the workers form two halves (rlpyt)",
        )


def _async_threads_relations(name, c, why):
    """`name` works on --acting async's threads: none with another --acting, nor with
    --deterministic, which runs async's schedule in one thread."""
    return [
        ((name, "acting"), c.acting == "async", f"false with --acting {c.acting}: {why}"),
        (
            (name, "deterministic"),
            not c.deterministic,
            "false with --deterministic (lockstep runs in one thread)",
        ),
    ]


# --prefetch-targets (acting/prefetch.py, issue 13): targets computed in another thread.
def prefetch_relations(c):
    if not c.prefetch_targets:
        return []
    draws = "false with {}: its target network draws from the learner's random stream"
    return _async_threads_relations("prefetch_targets", c, "it only acts with --acting async") + [
        (("prefetch_targets", "compile"), not c.compile,
         "false with --compile (the compiled update computes its own targets)"),
        (("prefetch_targets", "noisy"), not c.noisy, draws.format("--noisy")),
        (("prefetch_targets", "distribution"), c.distribution != "implicit_quantile",
         draws.format("--distribution implicit_quantile (IQN's taus)")),
        # A soft update every few updates would make nearly every prefetched target stale.
        (("prefetch_targets", "target_update_tau"), c.target_update_tau == 1,
         ("false with --target-update-tau below 1 (targets prefetched before a soft "
          "update would be recomputed)")),
    ]  # fmt: skip


# --pin-threads (threads.py, issue 13): the learner's thread on a core of its own.
def pin_relations(c):
    if not c.pin_threads:
        return []
    return _async_threads_relations("pin_threads", c, "it pins the threads of --acting async") + [
        # PyTorch's pool threads, made before a phase starts, would keep every core.
        (("pin_threads", "threads"), c.threads <= 1,
         "false with --threads above 1: it pins one PyTorch thread per Python thread"),
    ]  # fmt: skip


# --actor-process (acting/process.py, issue 13): the async actor forked each phase.
def actor_process_relations(c):
    if not c.actor_process:
        return []
    return _async_threads_relations("actor_process", c, "it runs --acting async's actor") + [
        (("actor_process", "threads"), c.threads <= 1,
         "false with --threads above 1 (OpenMP's threads do not survive a fork)"),
        (("actor_process", "device"), c.device != "cuda",
         "false with --device cuda (a forked actor cannot use CUDA)"),
        (("actor_process", "actor_workers"), c.actor_workers == 1,
         "false with --actor-workers above 1 (the actor process steps its environments)"),
        (("actor_process", "env_batch_size"), not c.env_batch_size,
         "false with --env-batch-size (ale-py's asynchronous mode has a driver of its own)"),
    ]  # fmt: skip


# Replay on a torch device (replay/device.py, issue 13): what it does not take yet.
def device_replay_relations(c):
    if c.replay_device == "host":
        return []
    not_built = "host with {}: not built for replay on a torch device yet"
    return [
        (("replay_device", "replay_compression"), c.replay_compression == "none",
         "host with --replay-compression (frames on a device are kept uncompressed)"),
        (("replay_device", "recurrent"), not c.recurrent, not_built.format("--recurrent")),
        (("replay_device", "offline"), not c.offline,
         "host with --offline (a dataset is read on the host)"),
        (("replay_device", "ray"), not c.ray, not_built.format("--ray")),
        # Replay on the GPU and a learner on the CPU would copy every batch back.
        (("replay_device", "device"), not (c.replay_device == "cuda" and c.device == "cpu"),
         "host or cpu with --device cpu (replay on the GPU would send every batch back)"),
    ]  # fmt: skip


# --capture (captured.py): the whole update in one graph, over a replay on the device.
def capture_relations(c):
    if not c.capture:
        return []
    return [
        (("capture", "replay_device"), c.replay_device != "host",
         ("false with --replay-device host (the draw is captured with the update: use "
          "--replay-device cpu or cuda, the learner's device)")),
        (("capture", "compile"), not c.compile,
         "false with --compile (--capture compiles the whole update, the draw included)"),
        (("capture", "prefetch_targets"), not c.prefetch_targets,
         "false with --prefetch-targets (the captured update computes its own targets)"),
        (("capture", "recurrent"), not c.recurrent,
         "false with --recurrent (torch.compile does not trace R2D1's LSTM)"),
    ]  # fmt: skip


# Atari 100k's parts (augmentation.py, --eval-episodes): what they do not take.
def atari100k_relations(c, domain):
    relations = []
    if c.augmentation != "none":
        relations += [
            (("augmentation", "env"), domain in ("atari", "minatar"),
             f"none for {domain} environments (it shifts images: Atari or MinAtar frames)"),
            (("augmentation", "recurrent"), not c.recurrent,
             "none with --recurrent (R2D1's sequences are not augmented)"),
            (("augmentation", "prefetch_targets"), not c.prefetch_targets,
             "none with --prefetch-targets (its targets would see unshifted frames)"),
        ]  # fmt: skip
    if c.eval_episodes:
        not_built = "0 with {}: episodes are counted by the local evaluator only"
        relations += [
            (("eval_episodes", "recurrent"), not c.recurrent,
             "0 with --recurrent (R2D1's evaluator keeps --num-envs recurrent states)"),
            (("eval_episodes", "ray"), not c.ray, not_built.format("--ray")),
            (("eval_episodes", "actor_workers"), c.actor_workers == 1,
             not_built.format("--actor-workers above 1")),
        ]  # fmt: skip
    return relations


# ale-py's asynchronous mode (--env-batch-size, issue 13; qzoo/acting/batches.py).
def batch_relations(c, domain):
    if not c.env_batch_size:
        return []
    b = c.env_batch_size
    what = "0 (all environments together) with {}: {}"
    return [
        (("env_batch_size", "env"), domain == "atari",
         what.format(f"{domain} environments", "only ale-py's Atari vector environment has "
                     "an asynchronous mode")),
        (("env_batch_size", "num_envs"), b <= c.num_envs,
         f"at most --num-envs {c.num_envs} (the environments a batch is drawn from; 0: all)"),
        (("env_batch_size", "acting"), c.acting == "serial",
         what.format(f"--acting {c.acting}", "batches of ready environments are acted on in "
                     "the learner's thread (--acting serial)")),
        (("env_batch_size", "actor_workers"), c.actor_workers == 1,
         what.format(f"--actor-workers {c.actor_workers}", "ale-py's threads step the games")),
        (("env_batch_size", "recurrent"), not c.recurrent,
         what.format("--recurrent", "R2D1's recurrent states are kept for all environments "
                     "at once")),
        (("env_batch_size", "deep_exploration"), not c.deep_exploration,
         what.format("--deep-exploration", "its per-episode heads are kept for all "
                     "environments at once")),
        (("env_batch_size", "max_decorrelation_steps"), c.max_decorrelation_steps == 0,
         what.format("--max-decorrelation-steps", "the decorrelated start steps all "
                     "environments together")),
        (("env_batch_size", "ray"), not c.ray,
         what.format("--ray", "Ray's actors step their own environments")),
        (("env_batch_size", "offline"), not c.offline,
         what.format("--offline", "an offline run does not act")),
    ]  # fmt: skip
