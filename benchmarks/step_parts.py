"""Where an agent step's time goes: CartPole at CleanRL dqn.py's settings or Pong at
dqn_atari.py's (as benchmarks/peers.py runs qzoo), one JSON line per part, in
microseconds of thread CPU time per agent step (one PyTorch thread).

    python benchmarks/step_parts.py [--env cartpole|pong] [--steps 10000] [--warmup 10000]
        [--mlp-hidden 120] [--compile] [--precision float32|bfloat16] [--num-envs 1]
        [--mlp-layers 120,84]

Each part is timed by wrapping the method that does it (thread CPU time before and
after: steadier than wall time on a shared machine; each wrapper adds about half a
microsecond): policy (Policy.__call__), env (the vector environment's step), stacker,
episode_stats, state_value_ewma, actor_other (the rest of Actor.step), replay_add,
schedule (updates and target copies due), learner_sample, learner_learn (amortised
over the steps), learner_target_copy, loop_other (the rest of the phase). Run it with
PYTHONPATH pointing at the source tree to time (e.g. an older commit's).
"""

import collections
import os
import sys
import time

from qzoo.acting.actor import EpisodeStats, UnbiasedEwma
from qzoo.acting.policy import Policy
from qzoo.configuration import build_config
from qzoo.replay.frames import FrameStacker
from qzoo.run import threads as qzoo_threads
from qzoo.run.trainer import Trainer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import emit, new_parser
from peers import qzoo_options  # benchmarks/ is not a package
from timing import timed


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--env", choices=("cartpole", "pong"), default="cartpole")
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--warmup", type=int, default=10_000)
    parser.add_argument("--mlp-hidden", type=int, default=120)
    parser.add_argument("--compile", action="store_true", help="qzoo's --compile")
    parser.add_argument("--precision", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--num-envs", type=int, default=1, help="environments acted on at once")
    parser.add_argument("--mlp-layers", default="", help="qzoo's --mlp-layers (CleanRL's: 120,84)")
    args = parser.parse_args()
    options = qzoo_options(args.env, args.warmup, 1, args.mlp_hidden)
    options.update(
        compile=args.compile,
        precision=args.precision,
        num_envs=args.num_envs,
        mlp_layers=args.mlp_layers,
    )
    config = build_config("dqn", options)
    qzoo_threads.apply(config)
    trainer = Trainer(config)
    trainer.train_phase(config.exploration_begin_frame + config.learn_period)

    seconds = collections.Counter()

    actor = trainer.actor
    for owner, name, part in [
        (Policy, "__call__", "policy"), (FrameStacker, "push", "stacker"),
        (EpisodeStats, "step", "episode_stats"), (UnbiasedEwma, "step", "state_value_ewma"),
        (trainer, "store", "replay_add"), (trainer.updates, "updates_due", "schedule"),
        (trainer.updates, "target_due", "schedule"), (trainer.replay, "sample", "learner_sample"),
        (trainer.learner, "learn", "learner_learn"),
        (trainer.learner, "update_target", "learner_target_copy"), (actor, "step", "actor"),
    ]:  # fmt: skip
        timed(owner, name, lambda t, part=part: seconds.update({part: t}))
    make_env = actor.make_env

    def timed_env(*args, **kwargs):
        env = make_env(*args, **kwargs)
        timed(env, "step", lambda t: seconds.update({"env": t}))
        return env

    actor.make_env = timed_env
    begin = time.thread_time()
    trainer.train_phase(args.steps * config.action_repeats)
    total = time.thread_time() - begin
    acting = ("policy", "stacker", "episode_stats", "state_value_ewma", "env")
    seconds["actor_other"] = seconds["actor"] - sum(seconds[p] for p in acting)
    learning = ("learner_sample", "learner_learn", "learner_target_copy")
    outside = ("actor", "replay_add", "schedule") + learning
    seconds["loop_other"] = total - sum(seconds[p] for p in outside)
    del seconds["actor"]
    common = {"env": args.env, "mlp_hidden": args.mlp_hidden, "compile": args.compile,
              "precision": args.precision, "num_envs": args.num_envs, "mlp_layers": args.mlp_layers,
              "steps": args.steps,
              "load_average": os.getloadavg()[0]}  # fmt: skip
    for part, value in seconds.most_common():
        emit({"name": "step_part", "part": part, "us_per_step": value / args.steps * 1e6, **common})
    emit({"name": "step_total", "us_per_step": total / args.steps * 1e6, **common})


if __name__ == "__main__":
    main()
