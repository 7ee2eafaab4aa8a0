"""Acting (qzoo/acting/): how the environments and the learner run together: the
acting modes, async acting's prefetching, pinning and actor process, and ale-py's
asynchronous mode."""

from qzoo.errors import UserError, bad_value, flag, shown

# The --acting modes each option acts with.
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


# --prefetch-targets (acting/prefetch.py): targets computed in another thread.
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


# --pin-threads (acting/pinning.py): the learner's thread on a core of its own.
def pin_relations(c):
    if not c.pin_threads:
        return []
    return _async_threads_relations("pin_threads", c, "it pins the threads of --acting async") + [
        # PyTorch's pool threads, made before a phase starts, would keep every core.
        (("pin_threads", "threads"), c.threads <= 1,
         "false with --threads above 1: it pins one PyTorch thread per Python thread"),
    ]  # fmt: skip


# --actor-process (acting/process.py): the async actor in a process started each phase.
def actor_process_relations(c):
    if not c.actor_process:
        return []
    return _async_threads_relations("actor_process", c, "it runs --acting async's actor") + [
        (("actor_process", "threads"), c.threads <= 1,
         "false with --threads above 1 (OpenMP's threads do not survive a fork)"),
        (("actor_process", "actor_workers"), c.actor_workers == 1,
         "false with --actor-workers above 1 (the actor process steps its environments)"),
    ]  # fmt: skip


# ale-py's asynchronous mode (--env-batch-size; acting/batches.py).
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
        (("env_batch_size", "acting"), c.acting == "serial" or c.actor_process,
         what.format(f"--acting {c.acting}", "batches of ready environments are acted on in "
                     "the learner's thread (--acting serial) or in the actor process "
                     "(--acting async --actor-process)")),
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
