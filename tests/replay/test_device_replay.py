"""Replay on a torch device (qzoo/replay/device.py) against the NumPy FrameStorage.

Everything runs on CPU tensors (`--replay-device cpu`), the same tensor code a GPU
runs. The key check: for the same rows and the same indices, the device storage
assembles bit for bit the batch FrameStorage assembles."""

import numpy as np
import pytest
import torch
from helpers import GAMMA, cartpole_config, filled, pair, random_rows, replacing, rows, window_slots

from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.replay import FrameStorage, PrioritizedSampler, Replay, Row, UniformSampler
from qzoo.replay.device import DeviceFrameStorage
from qzoo.replay.device_samplers import DevicePrioritizedSampler, DeviceUniformSampler
from qzoo.run import checkpoint
from qzoo.run.state_shapes import first_mismatch


@pytest.mark.parametrize("n_steps", [1, 3])
@pytest.mark.parametrize("stack", [4, 1])
@pytest.mark.parametrize("frame_shape, dtype", [((3, 3), np.uint8), ((4,), np.float32)])
def test_same_batches_as_frame_storage_for_the_same_indices(n_steps, stack, frame_shape, dtype):
    """2 environments, 23 rows: checked before the ring is full, when it is exactly
    full, and after it wrapped twice and a half."""
    host, device = pair(46, 2, frame_shape, dtype, stack, n_steps)
    rows = list(random_rows(60, 2, frame_shape, dtype))
    checked = 0
    for i, row in enumerate(rows, 1):
        assert host.add(row) == device.add(row)
        if i not in (12, 23, 60):
            continue
        t, b = window_slots(host)
        valid = host.valid(t, b)
        assert 0 < valid.sum() < len(t)  # both kinds are compared
        tt, bb = torch.from_numpy(t), torch.from_numpy(b)
        assert device.valid(tt, bb).numpy().tolist() == valid.tolist()
        expected, got = host.gather(t, b), device.gather(tt, bb)
        for name in ("s_tm1", "a_tm1", "r_t", "discount_t", "s_t"):
            a, g = getattr(expected, name), getattr(got, name).numpy()
            assert a.dtype == g.dtype and a.shape == g.shape, name
            np.testing.assert_array_equal(a, g, err_msg=name)
        checked += len(t)
    assert host.num_adds == device.num_adds == 60 and checked > 60


def test_zero_frames_before_an_episode_start_by_hand():
    """Episode A of 2 rows, then B: a stack of 4 ending at B's second row holds two
    zero frames and B's two frames; the 3-step return from A's first row stops at A's
    terminating LAST row: 1 + 0.9 x 2 with discount 0."""
    _, device = pair(20, 1, (1,), np.uint8, 4, 3)
    episode = [(1, 0.0, True, False), (2, 1.0, False, False), (3, 2.0, False, True),
               (4, 0.0, True, False), (5, 1.0, False, False)]  # fmt: skip
    for frame, reward, first, last in episode:
        device.add(Row(np.array([[frame]]), np.array([1]), np.array([reward]),
                       np.array([first]), np.array([last]), np.array([last])))  # fmt: skip
    batch = device.gather(torch.tensor([0, 4]), torch.tensor([0, 0]))
    assert batch.s_tm1.tolist() == [[0, 0, 0, 1], [0, 0, 4, 5]]
    assert batch.r_t[0].item() == pytest.approx(1 + GAMMA * 2) and batch.discount_t[0] == 0


def test_uniform_draws_are_valid_reach_every_valid_slot_and_are_even():
    host, device = filled()
    t, b = window_slots(host)
    valid = host.valid(t, b)
    slots = set(zip(t[valid].tolist(), b[valid].tolist()))
    sampler = DeviceUniformSampler(device, torch.Generator().manual_seed(3))
    counts = {}
    for _ in range(300):
        dt, db, weights = sampler.sample(64)
        assert weights is None and dt.dtype == torch.int64
        for slot in zip(dt.tolist(), db.tolist()):
            counts[slot] = counts.get(slot, 0) + 1
    assert set(counts) == slots  # only valid slots, and every one of them
    expected = 300 * 64 / len(slots)  # ~530 draws each: 5 standard deviations is +-115
    assert all(abs(c - expected) < 0.25 * expected for c in counts.values()), counts


def test_prioritized_probabilities_and_draws_follow_the_host_semantics():
    """The same priorities written to the host's sum tree and the device's flat vector
    give the same probabilities and weights; draws land in proportion to priority, never
    on a zero priority (u = 0 here) or an invalid slot."""
    host, device = filled()
    options = {"priority_exponent": 0.6, "uniform_sample_probability": 0.0}
    ours = DevicePrioritizedSampler(device, torch.Generator().manual_seed(1), **options)
    theirs = PrioritizedSampler(host, np.random.default_rng(1), **options)
    for t in range(device.rows):
        ours.added(t)
        theirs.added(t)
    t, b = window_slots(host)
    valid = host.valid(t, b)
    t, b = t[valid], b[valid]
    priorities = np.random.default_rng(2).choice([0.0, 0.5, 1.0, 3.0], len(t))
    theirs.update((t, b), priorities)
    ours.update((torch.from_numpy(t), torch.from_numpy(b)), priorities)
    assert ours.max_seen_priority == theirs.max_seen_priority == 3.0
    np.testing.assert_allclose(ours.probabilities(torch.from_numpy(t), torch.from_numpy(b)),
                               theirs.probabilities(t, b), rtol=1e-12)  # fmt: skip
    counts = np.zeros((device.num_rows, 2))
    for _ in range(200):
        dt, db, weights = ours.sample(64)
        assert weights.dtype == torch.float32 and weights.max() == 1.0
        np.add.at(counts, (dt.numpy(), db.numpy()), 1)
    drawn = counts[t, b]
    assert drawn.sum() == counts.sum() == 200 * 64  # only these slots
    assert np.all(drawn[priorities == 0] == 0) and np.all(drawn[priorities > 0] > 0)
    # Slots of priority 3 against those of 0.5: (3 / 0.5)^0.6 = 2.93 times as often.
    ratio = drawn[priorities == 3].mean() / drawn[priorities == 0.5].mean()
    assert 2.5 < ratio < 3.4, ratio


def test_state_restores_into_either_storage_through_a_checkpoint(tmp_path):
    """FrameStorage's keys and dtypes: a device replay's checkpoint restores into a host
    replay and back, the batches equal for the same indices."""
    host, device = filled()
    path = tmp_path / "replay.safetensors"
    checkpoint.save(path, {"replay": device.state_dict()})
    back_host, back_device = pair(46, 2, (2,), np.uint8, 4, 3)
    back_host.load_state_dict(checkpoint.load(path)["replay"])
    checkpoint.save(path, {"replay": back_host.state_dict()})
    back_device.load_state_dict(checkpoint.load(path)["replay"])
    t, b = window_slots(host)
    for storage in (back_host, back_device):
        assert (storage.cursor, storage.rows, storage.num_adds) == (device.cursor, 23, 60)
        batch = storage.gather(*(torch.from_numpy(x) if storage is back_device else x
                                 for x in (t, b)))  # fmt: skip
        np.testing.assert_array_equal(np.asarray(batch.s_t), host.gather(t, b).s_t)
        np.testing.assert_array_equal(np.asarray(batch.r_t), host.gather(t, b).r_t)


def test_with_the_hosts_draws_a_device_replay_run_trains_to_the_same_bits():
    """Sampling draws from a torch generator instead of NumPy's, so the indices differ
    by construction. Given the host sampler's draws (from a shadow FrameStorage fed the
    same rows), the device path (rows written as tensors, batches gathered there, no
    copy into the learner) gives the results rows of a host-replay run exactly."""
    from qzoo.run.trainer import Trainer

    expected = rows(Trainer(cartpole_config("host")), 3)
    trainer = Trainer(cartpole_config("cpu"))
    storage = trainer.replay.storage
    assert isinstance(storage, DeviceFrameStorage)
    shadow = FrameStorage(500, 1, storage.frame_shape, storage.frames.numpy().dtype, 2,
                          storage.stack, storage.n_steps, storage.discount)  # fmt: skip
    draws = UniformSampler(shadow, trainer.streams.replay.numpy)

    class HostDraws(DeviceUniformSampler):
        def sample(self, batch_size):
            t, b, _ = draws.sample(batch_size)
            batch = storage.gather(torch.from_numpy(t), torch.from_numpy(b))
            assert batch.to("cpu").s_tm1 is batch.s_tm1  # the learner copies nothing
            return torch.from_numpy(t), torch.from_numpy(b), None

    class Mirrored(Replay):
        def add(self, row):
            shadow.add(row)
            super().add(row)

    trainer.updates.use_replay(Mirrored(storage, HostDraws(storage, None)))
    got = rows(trainer, 3)
    assert got == expected and float(got[2]["train_num_updates"]) > 0


@pytest.mark.parametrize("prioritized", [False, True])
def test_a_device_replay_run_resumes_exactly(tmp_path, prioritized):
    """Saved after iteration 1 and resumed in a new trainer: iteration 2 as without the
    stop (the replay stream's torch generator is in the checkpoint)."""
    from qzoo.run.trainer import Trainer

    expected = rows(Trainer(cartpole_config("cpu", prioritized)), 3)
    first = Trainer(cartpole_config("cpu", prioritized))
    got = rows(first, 2)
    path = tmp_path / "latest.safetensors"
    checkpoint.save(path, first.state_dict())
    second = Trainer(cartpole_config("cpu", prioritized))
    state = checkpoint.load(path)
    assert first_mismatch(state, second.state_dict()) is None
    second.load_state_dict(state)
    got += rows(second, 1)
    assert got == expected and float(got[2]["train_num_updates"]) > 0


@pytest.mark.parametrize("options, blamed", [
    (["--replay-compression", "lz4"],
     "--replay-device: bad value cpu; expected host with --replay-compression"),
    (["--recurrent"], "--replay-device: bad value cpu; expected host with --recurrent"),
    (["--ray"], "--replay-device: bad value cpu; expected host with --ray"),
    (["--replay-device", "cuda", "--device", "cpu"],
     "--replay-device: bad value cuda; expected host or cpu with --device cpu"),
])  # fmt: skip
def test_what_it_does_not_take_is_refused_in_one_line(options, blamed, tmp_path, monkeypatch,
                                                      capsys):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    argv = ["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "run"),
            *replacing(["--replay-device", "cpu"], options)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("qzoo: error: " + blamed), err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_run_with_device_sampling_learns_cartpole_config():
    """With its own (torch) draws, 8,000 frames take the greedy return from about 9
    past 100 (measured on seeds 1, 2, 3: 252, 153, 267). About 6 s on 2 cores."""
    from qzoo.run.trainer import Trainer, run

    options = {"env": "CartPole-v1", "iterations": "1", "train_frames": "8000",
               "eval_frames": "1000", "seed": "1", "threads": "1", "replay_device": "cpu"}  # fmt: skip
    returns = [row["eval_episode_return"] for row in run(Trainer(build_config("dqn", options)))]
    assert returns[0] < 40 and returns[1] > 100, returns


def test_a_gpu_replay_that_does_not_fit_is_refused_before_the_run(monkeypatch):
    """By hand: 1,000 Atari transitions take 1,000 x 7,061 bytes (frames.py); with
    7,000,000 bytes free the check refuses, with exactly 7,061,000 it passes and counts
    no host memory. (No GPU here: the free memory is a patched answer.)"""
    from qzoo import envs
    from qzoo.errors import UserError
    from qzoo.replay import replay_bytes_needed

    config = build_config("dqn", {"env": "pong", "replay_capacity": "1000"})
    config.replay_device = "cuda"  # past validation, which wants a GPU
    info = envs.describe(config)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *device: (7_000_000, 8 * 2**30))
    with pytest.raises(
        UserError,
        match="needs 7,061,000 bytes .0.01 GiB. of GPU memory and 7,000,000 bytes are free",
    ):
        replay_bytes_needed(config, info)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda *device: (7_061_000, 8 * 2**30))
    assert replay_bytes_needed(config, info) == 0
