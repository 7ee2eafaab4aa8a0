"""Compressed vs uncompressed replay on real Atari frames, as JSON lines:

  python benchmarks/replay_compression.py [--games pong,breakout,seaquest,space_invaders]
      [--capacity 100000] [--rounds 5] [--seconds 2] [--codecs none,lz4,zstd]

For each game, one stream of play (random actions, qzoo's Atari environment and
protocol) fills one replay per codec with the same rows; then the codecs' sampling
rates are timed in interleaved rounds (none, lz4, zstd, none, ...), since the machine
is shared and noisy. Prints, per game and codec, bytes per transition, adds per
second, the median batches per second and its ratio to the uncompressed replay's
(the median of the per-round ratios). Uses qzoo.run.bench's pieces, as `qzoo bench replay
--env GAME --replay-compression CODEC` does for one codec.

On a shared machine a rate over seconds counts the time other processes hold the
core; the median time of one batch does not (most batches run unpreempted). So, in the
same rounds: `replay_batch_us` (median over 200 batches, each timed alone) and its
ratio `replay_batch_us_ratio` (uncompressed / codec: read as batches/s), and per
codec `replay_decode_us_per_batch`, the median time of decoding alone (`decode_rows`:
the groups a batch reads, into an emptied pool) over 200 batches drawn by the
sampler; `replay_ratio_bound_if_decode_only` is the ratio the codec would reach if
decoding were its only cost above the uncompressed batch's (none / (none + decode)).
"""

import statistics
import time

import numpy as np
from harness import emit_value as emit
from harness import new_parser

from qzoo.run import allocator
from qzoo.run.bench import (
    _machine,
    batches_per_second,
    bench_storage,
    fill,
    play_rows,
    replay_bytes,
)  # fmt: skip


def batch_seconds(replay, batch_size, batches=200):
    """Median seconds of one `replay.sample(batch_size)`, each timed alone."""
    seconds = []
    for _ in range(batches):
        start = time.perf_counter()
        replay.sample(batch_size)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def decode_seconds(replay, batch_size, batches=200):
    """Median seconds to decode the groups of one batch (the batches' indices drawn
    first, then each batch's groups decoded into an emptied pool, timed alone)."""
    storage, draws = replay.storage, []
    for _ in range(batches):
        t, b, _ = replay.sampler.sample(batch_size)
        rows = (t[:, None] + np.arange(1 - storage.stack, storage.n_steps + 1)) % storage.num_rows
        draws.append((rows, np.broadcast_to(b[:, None], rows.shape)))
    seconds = []
    for rows, columns in draws:
        start = time.perf_counter()
        storage.frames.decode_rows(rows, columns)
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main():
    parser = new_parser(__doc__)
    parser.add_argument("--games", default="pong,breakout,seaquest,space_invaders")
    parser.add_argument("--codecs", default="none,lz4,zstd")
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    allocator.keep_freed_memory()  # as a training run and `qzoo bench` (qzoo/run/allocator.py)
    codecs = args.codecs.split(",")
    for game in args.games.split(","):
        rows = play_rows(game, args.capacity, 1)
        frames = next(rows)
        replays = [bench_storage(frames, args.capacity, 1, 1, False, c) for c in codecs]
        add_seconds = fill(replays, rows)
        rates = {c: [] for c in codecs}
        decode = {c: [] for c in codecs if c != "none"}
        batch = {c: [] for c in codecs}
        for _ in range(args.rounds):
            for codec, replay in zip(codecs, replays):
                rates[codec].append(batches_per_second(replay, args.batch_size, args.seconds))
                batch[codec].append(batch_seconds(replay, args.batch_size))
                if codec != "none":
                    decode[codec].append(decode_seconds(replay, args.batch_size))
        for codec, replay, seconds in zip(codecs, replays, add_seconds):
            described = {"env": game, "replay_compression": codec, "capacity": args.capacity,
                         "batch_size": args.batch_size, "rounds": args.rounds, **_machine()}  # fmt: skip
            emit(
                "replay_bytes_per_transition",
                replay_bytes(replay) / replay.size,
                "bytes",
                **described,
            )
            emit("replay_adds_per_second", replay.size / seconds, "transitions/s", **described)
            emit(
                "replay_batches_per_second",
                statistics.median(rates[codec]),
                "batches/s",
                rounds_values=[round(r, 1) for r in rates[codec]],
                **described,
            )
            if "none" in rates:
                ratios = [a / b for a, b in zip(rates[codec], rates["none"])]
                emit(
                    "replay_batches_per_second_ratio",
                    statistics.median(ratios),
                    "x uncompressed",
                    **described,
                )
            emit(
                "replay_batch_us",
                1e6 * statistics.median(batch[codec]),
                "us",
                rounds_values=[round(1e6 * d, 1) for d in batch[codec]],
                **described,
            )
            if "none" in batch:
                ratios = [b / a for a, b in zip(batch[codec], batch["none"])]
                emit(
                    "replay_batch_us_ratio",
                    statistics.median(ratios),
                    "x uncompressed",
                    **described,
                )
            if codec in decode:
                emit(
                    "replay_decode_us_per_batch",
                    1e6 * statistics.median(decode[codec]),
                    "us",
                    rounds_values=[round(1e6 * d, 1) for d in decode[codec]],
                    **described,
                )
            if codec in decode and "none" in batch:
                bounds = [b / (b + d) for d, b in zip(decode[codec], batch["none"])]
                emit(
                    "replay_ratio_bound_if_decode_only",
                    statistics.median(bounds),
                    "x uncompressed",
                    **described,
                )


if __name__ == "__main__":
    main()
