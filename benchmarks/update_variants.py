"""One learner update, plain float32 eager against a variant, per agent: JSON lines.

    python benchmarks/update_variants.py [--agents dqn,prioritized,c51,qrdqn,iqn,rainbow]
        [--variant compile|bfloat16|bfloat16_compiled] [--env CartPole-v1] [--device cpu]
        [--updates 200] [--rounds 2] [--batch-size N] [--mlp-hidden N]

Variants: compile (`--compile`), bfloat16 (`--precision bfloat16`), both. For each
agent, a plain trainer and the variant's start from the same state with the same
replay (filled by the plain one's acting); each round times `--updates` calls of
`Learner.learn` on one fixed batch, plain then variant (wall-clock microseconds per
update, after 5 untimed updates; on a GPU synchronized at the ends of the window).
`first_update_seconds` is the variant's first update (compiled: tracing and compiling,
or loading PyTorch's on-disk kernel cache). `update_ratio` is plain / variant; the
mean losses of both over the timed updates are printed too.
"""

import copy
import os
import time

import torch
from harness import emit, new_parser

from qzoo.configuration import build_config
from qzoo.run import threads as qzoo_threads
from qzoo.run.trainer import Trainer

VARIANTS = {"compile": {"compile": True}, "bfloat16": {"precision": "bfloat16"},
            "bfloat16_compiled": {"precision": "bfloat16", "compile": True}}  # fmt: skip


def trainers(agent, args):
    options = {"env": args.env, "device": args.device, "replay_capacity": 2000,
               "min_replay_capacity_fraction": 0.5, "progress": False, "tensorboard": False,
               "threads": args.threads}  # fmt: skip
    if args.batch_size:
        options["batch_size"] = args.batch_size
    if args.mlp_hidden:
        options["mlp_hidden"] = args.mlp_hidden
    eager = Trainer(build_config(agent, options))
    qzoo_threads.apply(eager.config)
    eager.train_phase(eager.config.min_replay_size * eager.config.action_repeats)
    compiled = Trainer(build_config(agent, {**options, **VARIANTS[args.variant]}))
    compiled.load_state_dict(copy.deepcopy(eager.state_dict()))
    return eager, compiled


def per_update(learner, batch, updates, device):
    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    for _ in range(5):
        learner.learn(batch)
    sync()
    begin = time.perf_counter()
    for _ in range(updates):
        learner.learn(batch)
    sync()
    return (time.perf_counter() - begin) / updates * 1e6


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--agents", default="dqn,prioritized,c51,qrdqn,iqn,rainbow")
    parser.add_argument("--variant", choices=tuple(VARIANTS), default="compile")
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--updates", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=0, help="0: the preset's")
    parser.add_argument("--mlp-hidden", type=int, default=0, help="0: the preset's")
    args = parser.parse_args()
    for agent in args.agents.split(","):
        eager, compiled = trainers(agent, args)
        batch = eager.replay.sample(eager.config.batch_size)
        begin = time.perf_counter()
        compiled.learner.learn(batch)
        if args.device == "cuda":
            torch.cuda.synchronize()
        compile_seconds = time.perf_counter() - begin
        for round_ in range(1, args.rounds + 1):
            eager.learner.pop_statistics(), compiled.learner.pop_statistics()
            us_eager = per_update(eager.learner, batch, args.updates, args.device)
            us_compiled = per_update(compiled.learner, batch, args.updates, args.device)
            emit(
                {
                    "name": "update_variant",
                    "agent": agent,
                    "variant": args.variant,
                    "env": args.env,
                    "device": args.device,
                    "round": round_,
                    "batch_size": eager.config.batch_size,
                    "plain_us": us_eager,
                    "variant_us": us_compiled,
                    "update_ratio": us_eager / us_compiled,
                    "plain_loss": eager.learner.pop_statistics()["loss"],
                    "variant_loss": compiled.learner.pop_statistics()["loss"],
                    "first_update_seconds": compile_seconds,
                    "threads": args.threads,
                    "load_average": os.getloadavg()[0],
                }
            )


if __name__ == "__main__":
    main()
