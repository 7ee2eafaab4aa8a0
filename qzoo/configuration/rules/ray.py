"""Training on Ray (qzoo/distributed/): the options that act only with --ray, those
that do not act on Ray, and the relations of a --ray run (--offline included). Whether
Ray is installed, the address reachable and the cluster big enough for --actors is
checked on connecting (distributed/cluster.py)."""

from qzoo.errors import shown

ACTS_ONLY_WITH = {}  # options that act only with others (configuration/validate.py joins them)


# Options that only act with --ray.
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
