"""A network body of your own under qzoo's heads: a two-layer CNN registered as a torso,
trained as Rainbow (dueling, noisy, C51 heads on top) on MinAtar's breakout.

    python examples/custom_torso.py          # about ten minutes on a laptop CPU

For the command line, put the register_torso call in a module and name it:
`qzoo train rainbow --env minatar/breakout --gym-packages my_nets --torso two_convs`.
QZOO_QUICK=1 runs a few seconds' version (the test suite's)."""

import os

from torch import nn

import qzoo

QUICK = os.environ.get("QZOO_QUICK") == "1"
SIZE = {"iterations": 1, "train_frames": 800, "eval_frames": 200,
        "replay_capacity": 4_000} if QUICK else {"iterations": 5}  # fmt: skip


def two_convs(shape):
    """MinAtar's observations are [channels, 10, 10]: two 3x3 convolutions, flattened."""
    return nn.Sequential(nn.Conv2d(shape[0], 16, 3), nn.ReLU(),
                         nn.Conv2d(16, 16, 3), nn.ReLU(), nn.Flatten())  # fmt: skip


def main():
    qzoo.register_torso("two_convs", two_convs, head_hidden=64)
    result = qzoo.train("rainbow", env="minatar/breakout", torso="two_convs",
                        run_dir="runs/example-two-convs", progress=False, tensorboard=False,
                        **SIZE)  # fmt: skip
    agent = result.load()
    print(agent.network.torso)
    values, probabilities = agent.distribution(agent.make_env(seed=0).reset()[0])
    print(
        f"return distribution per action: {tuple(values.shape)} atoms; Q = "
        f"{(values * probabilities).sum(-1)}; final return {result.final_return:.2f}"
    )


if __name__ == "__main__":
    main()
