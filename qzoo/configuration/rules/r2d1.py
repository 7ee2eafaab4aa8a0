"""R2D1 (--recurrent): what its sequences need, what has no recurrent version yet,
and the options that act only with it."""

from qzoo.errors import bad_value, flag

# Options that act only with others (configuration/validate.py joins them).
ACTS_ONLY_WITH = {
    "episodic_lives": (False, ("protocol", "recurrent", "env"),
                       lambda c, d: c.recurrent and d == "atari" and c.protocol == "dqn_zoo",
                       ("--recurrent (R2D1) on Atari under --protocol dqn_zoo (the only "
                        "one with a life-loss signal)")),
}  # fmt: skip


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
    rows = -(-rows // c.store_state_interval) * c.store_state_interval  # as replay/sequences.py
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
    from qzoo.configuration.presets import PRESETS

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
