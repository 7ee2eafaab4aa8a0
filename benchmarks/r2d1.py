"""R2D1's throughput and memory at Atari's shape (84x84 uint8 frames, stack 4, rlpyt's
sequences: 40 burn-in + 80 trained + 5 n-step steps, states every 40 rows, LSTM 512):

- `r2d1_replay_bytes_per_transition`: the sequence replay's arrays over the transitions
  they hold (frames once, plus one (h, c) state per 40 rows), next to the frame
  storage's own figure and rlpyt's frame-by-frame rebuild of one training batch;
- `r2d1_sample_per_second`: sequence batches gathered from replay per second;
- `r2d1_updates_per_second`: learner updates (sample, burn-in, loss, backward, Adam) per
  second at --batch-size sequences, on --device.

    PYTHONPATH=$PWD python benchmarks/r2d1.py --batch-size 32 --updates 3 --device cpu
"""

import platform
import time

import numpy as np
import torch
from harness import emit_value as emit
from harness import new_parser

from qzoo.acting.recurrent_policy import RecurrentInfo
from qzoo.configuration import make_config
from qzoo.envs import EnvInfo
from qzoo.learning.from_config import make_learner
from qzoo.replay.batch import Row
from qzoo.replay.factory import make_sequence_replay
from qzoo.replay.frames import bytes_per_transition, observation_shape


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--capacity", type=int, default=50_000)
    parser.add_argument("--num-envs", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    info = EnvInfo("pong", "atari", 6, (84, 84), np.uint8, "pong")
    config = make_config("r2d1", "pong", "atari", {
        "replay_capacity": args.capacity, "num_envs": args.num_envs,
        "batch_size": args.batch_size, "min_replay_capacity_fraction": 0.5,
    })  # fmt: skip
    context = {"capacity": args.capacity, "num_envs": args.num_envs,
               "batch_size": args.batch_size, "device": args.device,
               "threads": args.threads, "machine": platform.node()}  # fmt: skip
    replay = make_sequence_replay(config, info, np.random.default_rng(0))
    storage, n = replay.storage, args.num_envs
    rng = np.random.default_rng(1)
    pool = rng.integers(0, 256, (64, n, 84, 84), dtype=np.uint8)
    no = np.zeros(n, bool)
    state = torch.from_numpy(rng.standard_normal((n, 2, config.lstm_size), np.float32))
    q = np.zeros(n, np.float32)
    started = time.perf_counter()
    for t in range(storage.num_rows):
        first = no | (t % 1000 == 0)
        info_t = RecurrentInfo(state, q, q + rng.random(n, np.float32))
        replay.add(Row(pool[t % 64], rng.integers(0, 6, n), q, first, no | (t % 1000 == 999),
                       no | (t % 1000 == 999), info_t))  # fmt: skip
    add_seconds = time.perf_counter() - started
    arrays = (storage.frames, *storage.row_arrays, storage.states)
    held = storage.num_rows * n
    emit(
        "r2d1_replay_bytes_per_transition",
        sum(a.nbytes for a in arrays) / held,
        "bytes",
        formula=storage.bytes_per_transition,
        frame_storage=bytes_per_transition((84, 84), np.uint8, 6),
        **context,
    )
    steps = config.burn_in_steps + config.sequence_steps + config.n_steps
    rebuilt = steps * int(np.prod(observation_shape((84, 84), 4)))
    emit(
        "rlpyt_batch_observation_bytes_per_sequence",
        rebuilt,
        "bytes",
        qzoo=(steps + 3) * 84 * 84,
        **context,
    )
    emit("r2d1_replay_adds_per_second", held / add_seconds, "transitions/s", **context)
    started, batches = time.perf_counter(), 0
    while time.perf_counter() - started < 3 or batches < 2:
        replay.sample(args.batch_size)
        batches += 1
    emit(
        "r2d1_sample_per_second", batches / (time.perf_counter() - started), "batches/s", **context
    )
    learner = make_learner(config, info, observation_shape((84, 84), 4), args.device,
                      torch.Generator(args.device).manual_seed(0))  # fmt: skip
    learner.learn(replay.sample(args.batch_size))  # warm-up (allocations, cuDNN)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    started, cpu = time.perf_counter(), time.process_time()
    for _ in range(args.updates):
        batch = replay.sample(args.batch_size)
        replay.update_priorities(batch.indices, learner.learn(batch))
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    emit(
        "r2d1_updates_per_second",
        args.updates / seconds,
        "updates/s",
        transitions_per_second=args.updates * args.batch_size * steps / seconds,
        updates_per_cpu_second=args.updates / cpu,
        **context,
    )


if __name__ == "__main__":
    main()
