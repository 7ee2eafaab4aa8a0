"""PQN's options (--rollout-steps > 0: acting/pqn.py): what they take, and the options
of replay-based training that would have no effect beside them."""

from qzoo.errors import flag, shown

PQN = "--rollout-steps 0 (PQN learns from its rollouts: no replay, no target network)"
NEEDS_PQN = "--rollout-steps above 0 (PQN)"

# Options of replay-based training that PQN has no use for (validate.py's table):
# option -> (the value meaning "off", or None for a parameter; causes; acts; needs).
ACTS_ONLY_WITH = {
    **{name: (None, (), lambda c, d: not c.rollout_steps, PQN)
       for name in ("replay_capacity", "min_replay_capacity_fraction", "batch_size",
                    "learn_period", "target_network_update_period", "replay_ratio",
                    "target_update_tau", "checkpoint_replay")},
    **{name: (None, (), lambda c, d: bool(c.rollout_steps), NEEDS_PQN)
       for name in ("q_lambda", "update_epochs", "num_minibatches", "return_loss")},
}  # fmt: skip


def pqn_relations(c):
    """What PQN's driver takes: serial acting over its environments, the feed-forward
    Q-values network, one-step transitions from the rollout (its returns are
    Q(lambda)'s), minibatches that divide a rollout."""
    if not c.rollout_steps:
        return []
    rollout = c.num_envs * c.rollout_steps
    step = c.num_envs * c.action_repeats
    return [
        (("num_minibatches", "rollout_steps", "num_envs"), rollout % c.num_minibatches == 0,
         (f"a divisor of a rollout's {rollout} transitions (--num-envs {c.num_envs} x "
          f"--rollout-steps {c.rollout_steps})")),
        (("train_frames", "rollout_steps", "num_envs"), c.train_frames >= step * c.rollout_steps,
         (f"--train-frames at least one rollout: --rollout-steps {c.rollout_steps} x "
          f"--num-envs {c.num_envs} x --action-repeats {c.action_repeats} = "
          f"{step * c.rollout_steps} frames")),
    ] + [
        (("rollout_steps", name), holds, {
            "rollout_steps": f"0 with {flag(name)} {shown(getattr(c, name))} ({why})",
            name: f"{off} with --rollout-steps {c.rollout_steps} (PQN: {why})",
        })
        for name, holds, off, why in (
            ("prioritized", not c.prioritized, "false", "no replay to prioritize"),
            ("n_steps", c.n_steps == 1, "1", "its returns are Q(lambda)'s: --q-lambda"),
            ("double_q", not c.double_q, "false", "no target network"),
            ("distribution", c.distribution == "none", "none", "it learns Q-values"),
            ("num_heads", c.num_heads == 1, "1", "one head"),
            ("recurrent", not c.recurrent, "false", "a feed-forward network"),
            ("offline", not c.offline, "false", "it acts to learn"),
            ("ray", not c.ray, "false", "it steps its environments in this process"),
            ("acting", c.acting == "serial", "serial",
             "it steps its environments itself, in this process"),
            ("actor_workers", c.actor_workers == 1, "1",
             "it steps its environments itself, in this process"),
            ("env_batch_size", not c.env_batch_size, "0", "every environment steps each time"),
            ("replay_device", c.replay_device == "host", "host", "no replay"),
            ("replay_compression", c.replay_compression == "none", "none", "no replay"),
            ("capture", not c.capture, "false", "the captured update draws from a replay"),
            ("compile", not c.compile, "false", "not compiled yet"),
            ("augmentation", c.augmentation == "none", "none", "not in its references"),
            ("log_replay", not c.log_replay, "false", "no replay to log"),
            ("cql_alpha", c.cql_alpha == 0, "0", "an offline loss"),
        )
    ]  # fmt: skip
