"""Offline training (--offline DIR, qzoo/offline/) and replay logging (--log-replay):
the options that act only with them, and what an offline run does not take."""

ACTS_ONLY_WITH = {
    **{name: (None, (), lambda c, d: bool(c.offline), "--offline")
       for name in ("offline_checkpoints", "offline_reload", "offline_transitions")},
    "log_replay_capacity": (None, (), lambda c, d: bool(c.log_replay), "--log-replay"),
}  # fmt: skip


def offline_relations(c):
    """(involved options, holds, accepted) of an offline run."""
    return [
        (("offline", "log_replay"), not (c.offline and c.log_replay),
         "no --log-replay with --offline: an offline run has no experience of its own"),
        # (R2D1, prioritized too, refuses --offline itself: configuration/rules/r2d1.py.)
        (("prioritized", "offline"), not (c.offline and c.prioritized) or c.recurrent,
         "--prioritized false with --offline (a dataset is sampled uniformly: Dopamine's rules)"),
    ]  # fmt: skip
