"""Reads back what an offline W&B run logged: its run-<id>.wandb file, records in
LevelDB's log framing (wandb's transaction log: a 7-byte file header, 32 KiB blocks of
chunks each with a 7-byte header) holding wandb's own protobuf `Record`s. wandb 0.17+
has no Python reader of its own (its core, in Go, writes the file)."""

import glob
import json
import os
import struct

BLOCK = 32 * 1024
HEADER = 7  # crc32 (4), length (2, little-endian), type (1): 1 full, 2 first, 3 middle, 4 last


def records(path):
    """wandb's Record messages in the file, in order."""
    from wandb.proto import wandb_internal_pb2

    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b":W&B", "not a W&B transaction log"
    position, pending, out = 7, b"", []
    while position + HEADER <= len(data):
        left = BLOCK - position % BLOCK
        if left < HEADER:  # a block's tail too short for a header is padding
            position += left
            continue
        _, length, kind = struct.unpack("<IHB", data[position : position + HEADER])
        chunk = data[position + HEADER : position + HEADER + length]
        position += HEADER + length
        if kind == 0 and length == 0:
            continue
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            out.append(record)
            pending = b""
    return out


def offline_runs(wandb_dir):
    """The .wandb files of the offline runs under WANDB_DIR, in the order written."""
    paths = glob.glob(os.path.join(wandb_dir, "wandb", "offline-run-*", "run-*.wandb"))
    return sorted(paths, key=os.path.getmtime)


def logged(path):
    """(history rows as dicts, the run's config dict, the run's name, its id)."""
    history, config, name, run_id = [], {}, None, None
    for record in records(path):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            history.append({_key(i): json.loads(i.value_json) for i in record.history.item})
        elif kind == "run":
            name, run_id = record.run.display_name, record.run.run_id
            config.update({_key(i): json.loads(i.value_json) for i in record.run.config.update})
        elif kind == "config":
            config.update({_key(i): json.loads(i.value_json) for i in record.config.update})
    return history, config, name, run_id


def _key(item):
    return item.key or ".".join(item.nested_key)
