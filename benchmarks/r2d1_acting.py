"""R2D1's acting step on a CPU: the recurrent network's one step (torso, FC, LSTM, head;
RecurrentPolicy's call) with the LSTM as torch.lstm_cell (qzoo's path for one step on
a CPU, recurrent.py) against nn.LSTM (oneDNN, which reorders the LSTM's weights at
every call), in interleaved rounds, as JSON lines.

    OMP_NUM_THREADS=1 PYTHONPATH=$PWD python benchmarks/r2d1_acting.py --env pong \
        --num-envs 1 4 32 --rounds 3 --seconds 2

Each line: env, environments, path, round, steps per second (one step = all the
environments' actions).
"""

import platform
import time

import numpy as np
import torch
from harness import emit, new_parser

from qzoo import envs
from qzoo.acting.recurrent_policy import RecurrentPolicy
from qzoo.configuration import build_config
from qzoo.networks.recurrent import RecurrentNetwork


def _nn_lstm(self, lstm_in, state):
    """The one step through nn.LSTM (qzoo's path before lstm_cell)."""
    return self.lstm(lstm_in, state)


def steps_per_second(policy, obs, seconds):
    n = obs.shape[0]
    first, reward, epsilon = np.zeros(n, bool), np.zeros(n, np.float32), np.zeros(n, np.float32)
    generator = torch.Generator().manual_seed(0)
    policy.observe(np.ones(n, bool), reward)
    policy(obs, epsilon, generator)  # warm-up
    steps, started = 0, time.perf_counter()
    while time.perf_counter() - started < seconds:
        policy.observe(first, reward)
        policy(obs, epsilon, generator)
        steps += 1
    return steps / (time.perf_counter() - started)


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--env", default="pong")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 4, 32])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    config = build_config("r2d1", {"env": args.env})
    info = envs.describe(config)
    from qzoo.networks.network import make_network
    from qzoo.replay.frames import observation_shape

    shape = observation_shape(info.frame_shape, config.frame_stack)
    network = make_network(config, info, shape)
    cell = RecurrentNetwork._cell
    for n in args.num_envs:
        obs = np.zeros((n,) + shape, info.frame_dtype)
        for round_ in range(args.rounds):
            for path, method in (("lstm_cell", cell), ("nn.LSTM", _nn_lstm)):
                RecurrentNetwork._cell = method
                rate = steps_per_second(RecurrentPolicy(network, n), obs, args.seconds)
                emit(
                    {
                        "name": "r2d1_acting_steps_per_second",
                        "env": args.env,
                        "num_envs": n,
                        "path": path,
                        "round": round_,
                        "value": rate,
                        "lstm_size": config.lstm_size,
                        "torch": torch.__version__,
                        "machine": platform.node(),
                    }
                )
    RecurrentNetwork._cell = cell


if __name__ == "__main__":
    main()
