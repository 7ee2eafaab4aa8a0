"""Each preset's training throughput on one game, next to dqn's, in one run.

python benchmarks/agents.py [--env pong] [--frames 4000] [--device cpu] [--agents dqn,c51,...]

Prints the `qzoo bench train` JSON lines of every agent, then one line per agent with
its agent steps per second as a ratio of dqn's measured in the same run.
"""

from harness import emit, new_parser

from qzoo.configuration import PRESETS
from qzoo.run.bench import bench_train


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--env", default="pong")
    parser.add_argument("--frames", type=int, default=4000)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--num-envs", default="1")
    parser.add_argument("--agents", default=",".join(PRESETS))
    args = parser.parse_args()
    rates = {}
    for agent in args.agents.split(","):
        result = bench_train(agent, args.env, args.frames, device=args.device,
                             num_envs=args.num_envs, progress="false", tensorboard="false")  # fmt: skip
        rates[agent] = result["steps_per_second"]
    for agent, rate in rates.items():
        emit(
            {
                "name": "steps_per_second_vs_dqn",
                "agent": agent,
                "env": args.env,
                "value": rate / rates["dqn"] if "dqn" in rates else None,
                "unit": "ratio",
                "steps_per_second": rate,
            }
        )


if __name__ == "__main__":
    main()
