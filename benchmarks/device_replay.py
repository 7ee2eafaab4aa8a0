"""Replay on the host (NumPy) vs replay on a torch device, as JSON lines:

  python benchmarks/device_replay.py [--env noise] [--capacity 100000] [--n-steps 1]
      [--devices host,cpu] [--rounds 5] [--seconds 2] [--batch-size 32]

One stream of rows (`qzoo bench replay`'s: random bytes for `noise`, else frames of
play of that game) fills one replay per device with the same rows (stacks of 4); then
the sampling rates are timed in interleaved rounds (host, cpu, host, ...), since the
machine is shared and noisy. A timed batch is `replay.sample(B).to(device)`, the
learner's path: for host replay the arrays become tensors there (a copy to a GPU),
for device replay the batch is already there. Prints, per device, adds per second,
the median batches per second and its ratio to the host replay's (the median of the
per-round ratios). Add `cuda` to --devices on a machine with a GPU.
"""

import statistics
import time

import torch
from harness import emit_value as emit
from harness import new_parser

from qzoo.replay import Replay
from qzoo.replay.device import DeviceFrameStorage
from qzoo.replay.device_samplers import DeviceUniformSampler
from qzoo.run import allocator
from qzoo.run.bench import _machine, bench_storage, fill, play_rows


def make(frames, capacity, n_steps, device):
    """Host replay (FrameStorage, UniformSampler) or device replay, stacks of 4."""
    if device == "host":
        return bench_storage(frames, capacity, 1, n_steps, False, "none")
    shape, dtype, num_actions = frames
    storage = DeviceFrameStorage(capacity, 1, shape, dtype, num_actions, 4, n_steps, 0.99, device)
    generator = torch.Generator(device=device).manual_seed(0)
    return Replay(storage, DeviceUniformSampler(storage, generator))


def rate(replay, batch_size, seconds, device):
    """Batches per second of sample(...).to(device), after 3 untimed ones."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(3):
        replay.sample(batch_size).to(device)
    sync()
    batches, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        replay.sample(batch_size).to(device)
        batches += 1
    sync()
    return batches / (time.perf_counter() - start)


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--env", default="noise")
    parser.add_argument("--devices", default="host,cpu")
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--n-steps", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    allocator.keep_freed_memory()  # as a run does: batch-sized blocks stay in the heap
    devices = args.devices.split(",")
    # Batches go where the learner is: the GPU when one is benchmarked, else the CPU.
    learner = "cuda" if "cuda" in devices else "cpu"
    rows = play_rows(args.env, args.capacity, 1)
    frames = next(rows)
    replays = [make(frames, args.capacity, args.n_steps, d) for d in devices]
    add_seconds = fill(replays, rows)
    rates = {d: [] for d in devices}
    for _ in range(args.rounds):
        for device, replay in zip(devices, replays):
            rates[device].append(rate(replay, args.batch_size, args.seconds, learner))
    for device, replay, seconds in zip(devices, replays, add_seconds):
        described = {"env": args.env, "replay_device": device, "learner_device": learner,
                     "capacity": args.capacity, "n_steps": args.n_steps,
                     "batch_size": args.batch_size, "rounds": args.rounds, **_machine()}  # fmt: skip
        emit("replay_adds_per_second", replay.size / seconds, "transitions/s", **described)
        emit(
            "replay_batches_per_second",
            statistics.median(rates[device]),
            "batches/s",
            rounds_values=[round(r, 1) for r in rates[device]],
            **described,
        )
        if "host" in rates:
            ratios = [a / b for a, b in zip(rates[device], rates["host"])]
            emit(
                "replay_batches_per_second_ratio", statistics.median(ratios), "x host", **described
            )


if __name__ == "__main__":
    main()
