"""Your own Gymnasium environment (corridor.py, beside this file) trained by qzoo: by
Gymnasium's `module:EnvId` name, as the command line takes it, and as a class from
Python. The run's config.json keeps the name, so `qzoo resume`, `qzoo eval` and the
other tools find the environment again (run them where corridor.py can be imported).

    python examples/custom_env.py           # about a minute on a laptop CPU

QZOO_QUICK=1 runs a few seconds' version (the test suite's)."""

import os

import corridor

import qzoo

QUICK = os.environ.get("QZOO_QUICK") == "1"
SIZE = {"iterations": 2, "train_frames": 1_000, "eval_frames": 300} if QUICK else {
    "iterations": 5, "train_frames": 2_000, "eval_frames": 500}  # fmt: skip


def main():
    # The same as `qzoo train dqn --env corridor:Corridor-v0 --iterations 5 ...`.
    result = qzoo.train(
        "dqn",
        env="corridor:Corridor-v0",
        run_dir="runs/example-corridor",
        progress=False,
        tensorboard=False,
        **SIZE,
    )
    print(
        f"corridor:Corridor-v0: final return {result.final_return:.2f} (best "
        f"{1 - 0.01 * (corridor.LENGTH - 2):.2f})"
    )

    # A class (or any function returning an environment) works too.
    result = qzoo.train(
        "double_q",
        env=corridor.Corridor,
        run_dir="runs/example-corridor-class",
        progress=False,
        tensorboard=False,
        **SIZE,
    )
    agent = result.load()
    obs, _ = agent.make_env(seed=1).reset()
    print(
        f"{agent.config.env}: Q-values at the start {agent.q_values(obs)}, action "
        f"{agent.act(obs)} (1 is right)"
    )


if __name__ == "__main__":
    main()
