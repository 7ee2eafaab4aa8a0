"""Compressed vs uncompressed replay on real Atari frames, as JSON lines:

  python benchmarks/replay_compression.py [--games pong,breakout,seaquest,space_invaders]
      [--capacity 100000] [--rounds 5] [--seconds 2] [--codecs none,lz4,zstd]

For each game, one stream of play (random actions, qzoo's Atari environment and
protocol) fills one replay per codec with the same rows; then the codecs' sampling
rates are timed in interleaved rounds (none, lz4, zstd, none, ...), since the machine
is shared and noisy. Prints, per game and codec, bytes per transition, adds per
second, the median batches per second and its ratio to the uncompressed replay's
(the median of the per-round ratios). Uses qzoo.bench's pieces, as `qzoo bench replay
--env GAME --replay-compression CODEC` does for one codec.
"""

import argparse
import statistics

from qzoo.bench import (
    _machine,
    batches_per_second,
    bench_storage,
    emit,
    fill,
    play_rows,
    replay_bytes,
)  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", default="pong,breakout,seaquest,space_invaders")
    parser.add_argument("--codecs", default="none,lz4,zstd")
    parser.add_argument("--capacity", type=int, default=100_000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    codecs = args.codecs.split(",")
    for game in args.games.split(","):
        rows = play_rows(game, args.capacity, 1)
        frames = next(rows)
        replays = [bench_storage(frames, args.capacity, 1, 1, False, c) for c in codecs]
        add_seconds = fill(replays, rows)
        rates = {c: [] for c in codecs}
        for _ in range(args.rounds):
            for codec, replay in zip(codecs, replays):
                rates[codec].append(batches_per_second(replay, args.batch_size, args.seconds))
        for codec, replay, seconds in zip(codecs, replays, add_seconds):
            described = {"env": game, "replay_compression": codec, "capacity": args.capacity,
                         "batch_size": args.batch_size, "rounds": args.rounds, **_machine()}  # fmt: skip
            emit("replay_bytes_per_transition", replay_bytes(replay) / replay.size, "bytes",
                 **described)  # fmt: skip
            emit("replay_adds_per_second", replay.size / seconds, "transitions/s", **described)
            emit("replay_batches_per_second", statistics.median(rates[codec]), "batches/s",
                 rounds_values=[round(r, 1) for r in rates[codec]], **described)  # fmt: skip
            if "none" in rates:
                ratios = [a / b for a, b in zip(rates[codec], rates["none"])]
                emit("replay_batches_per_second_ratio", statistics.median(ratios),
                     "x uncompressed", **described)  # fmt: skip


if __name__ == "__main__":
    main()
