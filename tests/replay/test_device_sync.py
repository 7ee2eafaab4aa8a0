"""A sampled update on a replay on the device waits for the device nowhere (issue 13:
the GPU fast path needs sample -> loss -> backward -> optimizer step -> priority
update without host synchronisation, to queue work ahead of the GPU and to capture
the update as one CUDA graph; replay/device_samplers.py).

On a CPU nothing waits, so the check is structural: while a trainer runs `learn_once`
on `--replay-device cpu` (the tensor code a GPU runs), every Tensor method that would
copy a value to the host raises."""

import numpy as np
import pytest
import torch
from helpers import filled, no_host_sync, random_rows, window_slots

from qzoo.configuration import build_config
from qzoo.replay.device import DeviceFrameStorage
from qzoo.replay.device_samplers import ROUNDS, DevicePrioritizedSampler, DeviceUniformSampler
from qzoo.run.trainer import Trainer


def test_the_guard_catches_a_sync():
    with pytest.raises(AssertionError, match="Tensor.__bool__"), no_host_sync():
        bool(torch.ones(()) > 0)
    assert bool(torch.ones(()) > 0)  # restored


# C51 and Rainbow are left out: on a CPU their projection checks the support's spacing
# on the host (losses.py takes a sync-free path on a GPU).
@pytest.mark.parametrize("agent, options", [
    ("dqn", {}),
    ("dqn", {"prioritized": "true", "n_steps": "3", "double_q": "true"}),
    ("iqn", {"prioritized": "true"}),
    ("qrdqn", {}),
])  # fmt: skip
def test_a_sampled_update_never_copies_to_the_host(agent, options):
    config = build_config(agent, {
        "env": "CartPole-v1", "replay_device": "cpu", "replay_capacity": "1000",
        "min_replay_capacity_fraction": "0.15", "threads": "1", **options,
    })  # fmt: skip
    trainer = Trainer(config)
    trainer.train_phase(200)  # 150 to fill, then a few updates
    before = trainer.learner.pop_statistics()["num_updates"]
    sampler = trainer.replay.sampler
    priorities = getattr(sampler, "priorities", torch.zeros(0)).clone()
    with no_host_sync():
        for _ in range(2):
            trainer.learn_once()
    assert before > 0 and trainer.learner.pop_statistics()["num_updates"] == 2
    if config.prioritized:  # new priorities written, never above the max seen
        assert not torch.equal(sampler.priorities, priorities)
        top = sampler.max_seen_priority**config.priority_exponent
        assert float(sampler.priorities.max()) <= top * (1 + 1e-12)
    sampler.check()  # no position went without a valid transition


def test_a_position_without_a_valid_candidate_is_counted_and_stops_the_run():
    """Episodes of one row (each row FIRST and LAST) start no transition: every
    position misses; `check` raises once, then starts counting again."""
    storage = DeviceFrameStorage(40, 2, (2,), np.uint8, 6, 1, 1, 0.9, "cpu")
    for row in random_rows(30, 2, (2,), np.uint8):
        ones = np.ones(2, bool)
        storage.add(row._replace(first=ones, last=ones))
    sampler = DeviceUniformSampler(storage, torch.Generator().manual_seed(0))
    sampler.sample(8)
    sampler.sample(8)
    with pytest.raises(RuntimeError, match=f"16 sampled position.*among {ROUNDS} candidates"):
        sampler.check()
    sampler.check()  # reset


def test_priorities_from_the_device_equal_priorities_from_the_host():
    _, device = filled()
    options = {"priority_exponent": 0.6, "uniform_sample_probability": 0.0}
    a = DevicePrioritizedSampler(device, torch.Generator(), **options)
    b = DevicePrioritizedSampler(device, torch.Generator(), **options)
    t, b_ = (torch.from_numpy(x) for x in window_slots(device))
    p = np.random.default_rng(0).choice([0.0, 0.25, 2.0, 5.0], len(t))
    a.update((t, b_), p)
    b.update((t, b_), torch.from_numpy(p).float())  # a float32 tensor, as the learner's
    assert torch.equal(a.priorities, b.priorities) and a.max_seen_priority == 5.0
    with pytest.raises(RuntimeError, match="finite and non-negative"):
        a.update((t[:1], b_[:1]), np.array([np.nan]))
