"""RL Unplugged's Atari episodes, read without TensorFlow into qzoo's memory-mappable
layout (layout.py), so that `--offline` trains on them as on the DQN Replay Dataset.

RL Unplugged keeps each DQN run of the DQN Replay Dataset as gzip-compressed TFRecord
files `<Game>/run_<R>-<SSSSS>-of-<NNNNN>` (tfrecord.py), one tf.train.Example per
episode (tf_example.py), as tensorflow_datasets' builders read them:

  atari_episodes_ordered/  rlu_atari, rlu_atari_checkpoints_ordered: shard i holds
                           checkpoint i, its episodes in order
  atari_episodes_v2/       rlu_atari_checkpoints: 100 shards, episodes of every
                           checkpoint spread over them

Both hold, per episode: `checkpoint_idx`, `episode_idx` (int64), `observations` (one
84x84 grayscale PNG per step), `actions` (int64), `unclipped_rewards`,
`clipped_rewards` and `discounts` (float32). Step i holds o_i, the action a_i taken
there and the reward r_i after it; the last step holds only the episode's final
observation (tensorflow_datasets marks it is_last, and is_terminal when its discount
is 0). A dataset that tensorflow_datasets prepared (`steps/observation`,
`steps/action`, `steps/clipped_reward`, `checkpoint_id`, `episode_id`) is read the
same way.

Each checkpoint becomes Dopamine's rows (dopamine.py), episodes sorted by their id:
before every episode K - 1 = 3 all-zero padding rows, then (o_i, a_i, clipped r_i,
terminal) for i < T - 1, the last of them terminal (a truncated episode's too, as
Dopamine stores a time limit), the final observation never stored, as in the DQN Replay
Dataset; 3 padding rows close the checkpoint. Every checkpoint gets the capacity of the
largest plus one unused row (DatasetStorage samples checkpoints of one capacity), its
add_count its own row count (a buffer not full: batch_rl's final partial file), and the
invalid_range batch_rl's logger writes (n = 1, K = 4)."""

import io
import os
import re
import sys
from typing import Any

import numpy as np

from qzoo.errors import UserError
from qzoo.files import atomic_write
from qzoo.offline import tfrecord
from qzoo.offline.npy_file import GrowingNpy
from qzoo.offline.tf_example import parse_example

STACK = 4
_SHARD = re.compile(r"^(?P<prefix>.+)-(?P<shard>\d{5})-of-(?P<shards>\d{5})$")
_SPLIT = re.compile(r"-(train|checkpoint_\d+)\.tfrecord$")  # tensorflow_datasets' file names
# Field names: (raw files, a dataset tensorflow_datasets prepared).
_FIELDS = {"observation": ("observations", "steps/observation"),
           "action": ("actions", "steps/action"),
           "clipped_reward": ("clipped_rewards", "steps/clipped_reward"),
           "reward": ("unclipped_rewards", "steps/reward"),
           "checkpoint": ("checkpoint_idx", "checkpoint_id"),
           "episode": ("episode_idx", "episode_id")}  # fmt: skip


def conversion_hint(folder: str) -> str:
    """'; it holds RL Unplugged's files: ...' when `folder` holds TFRecord shards (for
    messages that find no DQN Replay Dataset there), else ''."""
    try:
        found = any(_SHARD.match(name) for name in os.listdir(folder))
    except OSError:
        return ""
    return (f"; it holds TFRecord shards (RL Unplugged's?): convert them first with `qzoo "
            f"dataset convert {folder} DST --from rlu` and use DST" if found else "")  # fmt: skip


def find_files(src: str) -> list[str]:
    """The TFRecord shards of one run that `src` names (a file, a folder holding one run's
    shards, or a prefix such as `Pong/run_1`), in shard order."""
    if os.path.isfile(src):
        return [src]
    folder, prefix = (src, None) if os.path.isdir(src) else os.path.split(src)
    try:
        names = os.listdir(folder or ".")
    except OSError:
        raise UserError(f"convert --from rlu: {src}: no such file, folder or shard prefix; "
                        "expected RL Unplugged's <Game>/run_<R>-*-of-* files") from None  # fmt: skip
    runs: dict[str, list] = {}
    for name in names:
        match = _SHARD.match(name)
        if match is None:
            continue
        run = _SPLIT.sub("", match["prefix"])  # a prepared dataset's splits: one run
        if prefix is None or run == prefix:
            runs.setdefault(run, []).append((match["prefix"], int(match["shard"]), name))
    if not runs and prefix is not None:
        raise UserError(f"convert --from rlu: {src}: no such file or folder, nor shards "
                        f"{prefix}-*-of-* in {folder or '.'}; expected RL Unplugged's Atari "
                        "files of one run")  # fmt: skip
    if not runs:
        raise UserError(f"convert --from rlu: {src} holds no TFRecord shard "
                        "(<prefix>-00000-of-00050 ...); expected RL Unplugged's Atari files")  # fmt: skip
    if len(runs) > 1:
        found = ", ".join(sorted(runs))
        raise UserError(f"convert --from rlu: {src} holds the shards of {len(runs)} runs "
                        f"({found}); expected one: pass {os.path.join(folder, min(runs))}")  # fmt: skip
    return [os.path.join(folder, shard[-1]) for shard in sorted(runs.popitem()[1])]


def episode(record: bytes, where: str) -> dict:
    """One episode's fields from a serialized tf.train.Example (`where` names it in
    messages): observation (PNG bytes per step), action, clipped_reward, checkpoint,
    episode."""
    from google.protobuf.message import DecodeError

    try:
        features = parse_example(record)
    except DecodeError:
        raise UserError(f"{where}: not a tf.train.Example; expected an RL Unplugged "
                        "Atari episode") from None  # fmt: skip
    if "o_t" in features:
        raise UserError(f"{where}: a shuffled SARSA transition (o_t, a_t, ...: RL Unplugged's "
                        "atari/ files), which keeps no episode order; expected an episode of "
                        "atari_episodes_ordered/ or atari_episodes_v2/")  # fmt: skip
    prepared = int(any(name.startswith("steps/") for name in features))
    out: dict[str, Any] = {}
    for key, names in _FIELDS.items():
        out[key] = features.get(names[prepared])
    if out["clipped_reward"] is None and out["reward"] is not None:
        out["clipped_reward"] = np.clip(out["reward"], -1, 1)  # what Dopamine stores
    missing = [_FIELDS[k][prepared] for k in ("observation", "action", "clipped_reward",
               "checkpoint", "episode") if out[k] is None or len(out[k]) == 0]  # fmt: skip
    if missing:
        raise UserError(f"{where}: no {' / '.join(missing)} feature; expected an RL Unplugged "
                        f"Atari episode (it holds {', '.join(sorted(features)) or 'nothing'})")  # fmt: skip
    steps = {len(out[k]) for k in ("observation", "action", "clipped_reward")}
    if len(steps) != 1:
        raise UserError(f"{where}: observations, actions and rewards of different lengths "
                        f"{sorted(steps)}; expected one per step")  # fmt: skip
    if out["action"].min() < 0 or out["action"].max() >= 2**31:
        raise UserError(f"{where}: action {out['action'].min()} .. {out['action'].max()}; "
                        "expected indices of the game's actions")  # fmt: skip
    out["checkpoint"], out["episode"] = int(out["checkpoint"][0]), int(out["episode"][0])
    # Ended in a terminal state (its last discount 0, or tensorflow_datasets' is_terminal),
    # for the summary only: the last row is terminal either way.
    if prepared:
        last = features.get("steps/is_terminal")
        out["ended"] = last is not None and len(last) > 0 and bool(last[-1])
    else:
        last = features.get("discounts")
        out["ended"] = last is not None and len(last) > 0 and bool(last[-1] == 0)
    return out


def decode_png(data: bytes, where: str) -> np.ndarray:
    """A grayscale PNG as a [H, W] uint8 array (as tf.image.decode_png(channels=1) gives
    RL Unplugged's frames, without the channel)."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format != "PNG" or image.mode != "L":
                raise UserError(f"{where}: a {image.format} image of mode {image.mode}; "
                                "expected a grayscale (mode L) PNG frame")  # fmt: skip
            return np.asarray(image, np.uint8)
    except (UnidentifiedImageError, OSError, SyntaxError) as e:
        raise UserError(f"{where}: not a readable PNG frame ({e})") from None


class _Checkpoint:
    """One checkpoint's rows as they arrive: frames streamed into a growing NPY file,
    the small arrays kept per episode, and where each episode's rows start."""

    def __init__(self, path: str, frame_shape: tuple):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.path, self.frames = path, GrowingNpy(path + ".tmp", frame_shape)
        self.episodes: list[tuple[int, int, int]] = []  # (episode id, first row, rows)
        self.small: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.rows, self.sorted, self.ended = 0, True, 0

    def add(self, ep: dict, frames: np.ndarray, ended: bool):
        """Appends an episode's rows (its frames [T, H, W] decoded)."""
        if self.episodes and ep["episode"] < self.episodes[-1][0]:
            self.sorted = False
        n = len(frames) - 1  # the final observation is not stored
        self.frames.append(np.zeros((STACK - 1,) + frames.shape[1:], np.uint8))
        self.frames.append(frames[:n])
        terminal = np.zeros(STACK - 1 + n, np.uint8)
        terminal[-1] = 1
        pad = np.zeros(STACK - 1)
        self.small.append((np.concatenate([pad, ep["action"][:n]]).astype(np.int32),
                           np.concatenate([pad, ep["clipped_reward"][:n]]).astype(np.float32),
                           terminal))  # fmt: skip
        self.episodes.append((ep["episode"], self.rows, STACK - 1 + n))
        self.rows += STACK - 1 + n
        self.ended += ended

    def finish(self, capacity: int) -> dict:
        """Writes the six arrays at `capacity` rows, episodes in id order; the summary."""
        order = sorted(range(len(self.episodes)), key=lambda j: self.episodes[j][0])
        if not self.sorted:  # rows copied into id order (v2 files spread checkpoints)
            self.frames = self.frames.reordered([self.episodes[j][1:] for j in order])
        padding = np.zeros((STACK - 1,) + self.frames.frame_shape, np.uint8)
        self.frames.append(padding)  # 3 rows closing the checkpoint
        self.frames.finish(capacity, os.path.join(os.path.dirname(self.path), "observation.npy"))
        folder = os.path.dirname(self.path)
        add_count = self.rows + STACK - 1
        arrays = {}
        for k, name in enumerate(("action", "reward", "terminal")):
            column = np.zeros(capacity, self.small[0][k].dtype)
            column[: self.rows] = np.concatenate([self.small[j][k] for j in order])
            arrays[name] = column
        arrays["add_count"] = np.array(add_count, np.int64)
        arrays["invalid_range"] = np.array(
            [(add_count - 1 + j) % capacity for j in range(1 + STACK)], np.int64
        )  # batch_rl's logger: cursor - n .. cursor + K - 1, with n = 1
        for name, array in arrays.items():
            atomic_write(os.path.join(folder, f"{name}.npy"),
                         lambda f, a=array: np.lib.format.write_array(f, a, allow_pickle=False))  # fmt: skip
        ids = [e[0] for e in self.episodes]
        return {"episodes": len(ids), "first_episode": min(ids), "last_episode": max(ids),
                "ended_terminal": self.ended, "rows": add_count,
                "transitions": self.rows - (STACK - 1) * len(ids)}  # fmt: skip


def decoded(job: tuple[bytes, str]) -> dict:
    """episode() of a (record, where) job, its PNG frames decoded into `frames`
    [T, H, W] (run in worker processes)."""
    record, where = job
    ep = episode(record, where)
    ep["frames"] = np.stack([decode_png(png, f"{where}, step {i}")
                             for i, png in enumerate(ep.pop("observation"))])  # fmt: skip
    ep["where"] = where
    return ep


def _episodes(files: list[str], workers: int):
    """decoded() of every record of `files`, in file order: by `workers` processes, at
    most `workers` + 2 episodes ahead of the one being written, so memory stays bounded
    (a long Atari episode decodes to a few hundred MB)."""
    jobs = ((record, f"{path}: record {i}")
            for path in files for i, record in enumerate(tfrecord.records(path)))  # fmt: skip
    if workers <= 1:
        yield from map(decoded, jobs)
        return
    import collections
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pending: collections.deque = collections.deque()
        for job in jobs:
            pending.append(pool.apply_async(decoded, (job,)))
            if len(pending) >= workers + 2:
                yield pending.popleft().get()
        while pending:
            yield pending.popleft().get()


def default_workers(files: list[str]) -> int:
    """Processes decoding frames by default: the usable cores less one, at most 8; one
    for files under 32 MB in all, which starting processes would only slow."""
    if sum(os.path.getsize(f) for f in files) < 32 << 20:
        return 1
    return max(1, min(8, len(os.sched_getaffinity(0)) - 1))


def convert(src: str, dst: str, quiet: bool = False, workers: int | None = None) -> dict:
    """Converts the RL Unplugged run `src` (find_files) into the qzoo layout in `dst`
    (a new or empty folder), decoding frames in `workers` processes (default_workers);
    returns the manifest written last."""
    from qzoo.terminal import progress_bar

    files = find_files(src)
    workers = default_workers(files) if workers is None else workers
    os.makedirs(dst, exist_ok=True)
    checkpoints: dict[int, _Checkpoint] = {}
    seen: dict[tuple[int, int], str] = {}
    frame_shape = None
    bar = progress_bar(len(files), "converting", "file")
    done = None  # the file of the last episode read
    for ep in _episodes(files, workers):
        where, frames = ep["where"], ep["frames"]
        path = where.rsplit(": record ", 1)[0]
        if path != done and done is not None:
            _read(bar, done, quiet)
        done = path
        key = (ep["checkpoint"], ep["episode"])
        if key in seen:
            raise UserError(f"{where}: episode {key[1]} of checkpoint {key[0]} again "
                            f"(first in {seen[key]}); expected each episode once")  # fmt: skip
        seen[key] = where
        if ep["checkpoint"] < 0:
            raise UserError(f"{where}: checkpoint {ep['checkpoint']}; expected >= 0")
        if frame_shape is None:
            frame_shape = frames.shape[1:]
        elif frames.shape[1:] != frame_shape:
            raise UserError(f"{where}: frames of shape {frames.shape[1:]}, earlier ones "
                            f"{frame_shape}; expected one shape")  # fmt: skip
        if len(frames) < 2:
            continue  # a single observation: no transition
        suffix = ep["checkpoint"]
        if suffix not in checkpoints:
            path = os.path.join(dst, f"ckpt.{suffix}", "frames")
            checkpoints[suffix] = _Checkpoint(path, frames.shape[1:])
        checkpoints[suffix].add(ep, frames, ep["ended"])
    if done is not None:
        _read(bar, done, quiet)
    if bar is not None:
        bar.close()
    if not checkpoints:
        raise UserError(f"convert --from rlu: {src} holds no episode of two steps or more")
    capacity = max(c.rows for c in checkpoints.values()) + STACK  # 3 padding, 1 unused
    summary = {str(s): checkpoints[s].finish(capacity) for s in sorted(checkpoints)}
    return {"checkpoints": sorted(checkpoints), "rlu": {
        "files": [os.path.basename(f) for f in files], "capacity": capacity,
        "checkpoints": summary}}  # fmt: skip


def _read(bar, path, quiet):
    if bar is not None:
        bar.update(1)
    elif not quiet:
        print(f"{path}: read", file=sys.stderr)
