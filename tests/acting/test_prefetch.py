"""--prefetch-targets (qzoo/acting/prefetch.py): the learner's next batch and its
target network outputs made in another thread. The targets must be exactly those the
learner would compute, never those of a target network a copy has since replaced."""

import time
import types

import numpy as np
import pytest
import torch
from helpers import TINY

from qzoo import envs
from qzoo.acting.prefetch import Prefetcher
from qzoo.configuration import make_config
from qzoo.learning.from_config import make_objective
from qzoo.learning.precision import autocast
from qzoo.learning.prefetched import PrefetchedTargets
from qzoo.networks.network import make_network
from qzoo.run.trainer import Trainer

SMALL = {**TINY, "num_envs": 4}


@pytest.mark.parametrize("agent", ["dqn", "double_q", "prioritized", "c51", "qrdqn",
                                   "ensemble", "rem"])  # fmt: skip
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_targets_computed_ahead_give_the_same_loss_priorities_and_gradients(agent, precision):
    config = make_config(agent, "CartPole-v1", "gym", {"precision": precision})
    info = envs.describe(config)
    online = make_network(config, info, (4,))
    target = make_network(config, info, (4,))  # other weights than online's
    objective = PrefetchedTargets(make_objective(config))
    rng = np.random.default_rng(0)
    batch = types.SimpleNamespace(
        s_tm1=torch.as_tensor(rng.normal(size=(16, 4)), dtype=torch.float32),
        a_tm1=torch.as_tensor(rng.integers(0, 2, 16)),
        r_t=torch.as_tensor(rng.normal(size=16), dtype=torch.float32),
        discount_t=torch.full((16,), 0.99),
        s_t=torch.as_tensor(rng.normal(size=(16, 4)), dtype=torch.float32),
    )

    def outcome(batch):
        online.zero_grad()
        with autocast(precision, "cpu"):
            # REM draws its mixture from the generator: the same seed for both.
            out = objective(online, target, batch, torch.Generator().manual_seed(1))
        out.loss.mean().backward()
        return [out.loss, out.priorities, out.q_tm1] + [p.grad.clone() for p in online.parameters()]

    computed_here = outcome(batch)
    with torch.no_grad(), autocast(precision, "cpu"):
        target_t = target(batch.s_t)
    objective.remember(batch.s_t, target_t)
    prefetched = outcome(batch)
    assert objective.known(batch.s_t) is None  # used once
    for a, b in zip(computed_here, prefetched, strict=True):
        assert torch.equal(a, b)
    # And they are used: another network's outputs in their place change the loss; for
    # another tensor (even of the same values) they are not.
    with torch.no_grad(), autocast(precision, "cpu"):
        wrong_t = online(batch.s_t)
    objective.remember(batch.s_t, wrong_t)
    assert not torch.equal(outcome(batch)[0], computed_here[0])
    objective.remember(batch.s_t.clone(), wrong_t)
    assert torch.equal(outcome(batch)[0], computed_here[0])


def test_no_batch_comes_back_with_the_targets_of_a_replaced_target_network():
    config = make_config("dqn", "CartPole-v1", "gym",
                         {**SMALL, "acting": "async", "prefetch_targets": True})  # fmt: skip
    trainer = Trainer(config)
    trainer.train_phase(200)  # replay can be sampled
    prefetcher = Prefetcher(trainer, None)
    learner, reused, recomputed = trainer.learner, 0, 0
    try:
        for k in range(12):
            if k % 3 == 2:  # a new online network, copied to the target
                while prefetcher._ready.empty():  # the next batch is made
                    time.sleep(0.001)
                with torch.no_grad():
                    for p in learner.online.parameters():
                        p.add_(torch.randn_like(p))
                prefetcher.update_target(1.0)
            batch = prefetcher.get()
            assert batch.s_t.shape == (config.batch_size, 4)
            target_t = learner.objective.known(batch.s_t)
            if target_t is None:  # made before the last copy: left to the learner
                recomputed += 1
                continue
            reused += 1
            with torch.no_grad():
                assert torch.equal(target_t.q_values, learner.target(batch.s_t).q_values)
    finally:
        prefetcher.stop()
    # The batch waiting in the queue at each copy was made before it; the others after.
    assert (recomputed, reused) == (4, 8)


def test_an_error_in_the_prefetching_thread_is_raised_in_the_learners():
    def broken(lock):
        raise ValueError("replay is broken")

    trainer = types.SimpleNamespace(updates=types.SimpleNamespace(sample_batch=broken),
                                    learner=None, config=None)  # fmt: skip
    prefetcher = Prefetcher(trainer, None)
    with pytest.raises(ValueError, match="replay is broken"):
        prefetcher.get()
    prefetcher.stop()


def test_target_copies_racing_the_thread_never_leave_a_replaced_networks_targets():
    """Copies at any moment of the thread's work (no waiting): every batch's targets
    are the current target network's, or absent."""
    config = make_config("prioritized", "CartPole-v1", "gym",
                         {**SMALL, "acting": "async", "prefetch_targets": True})  # fmt: skip
    trainer = Trainer(config)
    trainer.train_phase(200)
    prefetcher, learner, reused = Prefetcher(trainer, None), trainer.learner, 0
    try:
        for k in range(200):
            if k % 2:
                with torch.no_grad():
                    for p in learner.online.parameters():
                        p.mul_(1.01)
                prefetcher.update_target(1.0)
            batch = prefetcher.get()
            target_t = learner.objective.known(batch.s_t)
            if target_t is not None:
                reused += 1
                with torch.no_grad():
                    assert torch.equal(target_t.q_values, learner.target(batch.s_t).q_values)
                learner.objective(learner.online, learner.target, batch.to("cpu"),
                                  torch.Generator())  # fmt: skip
    finally:
        prefetcher.stop()
    assert reused > 0
