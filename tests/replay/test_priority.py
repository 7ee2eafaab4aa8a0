"""Sum tree and prioritized replay with DQN Zoo's semantics."""

import numpy as np
import pytest

from qzoo.replay import FrameStorage, PrioritizedSampler, Replay, Row
from qzoo.replay.sumtree import SumTree


def test_sum_tree_query_table():
    tree = SumTree(4)
    tree.set([0, 1, 2, 3], [3.0, 1.0, 2.0, 5.0])
    assert tree.total() == 11.0
    targets = [0, 2.99, 3, 3.5, 4, 5.99, 6, 10.9]
    assert tree.query(targets).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_sum_tree_never_returns_a_zero_leaf_and_rejects_bad_values():
    tree = SumTree(5)
    assert tree.capacity == 8
    tree.set([0, 1, 2, 3], [0.0, 1.0, 0.0, 2.0])
    assert tree.query([0.0, 0.999, 1.0, 2.9]).tolist() == [1, 1, 3, 3]
    for bad in (-1.0, np.nan, np.inf):
        with pytest.raises(ValueError, match="finite and non-negative"):
            tree.set([0], [bad])
    tree.set([3, 3], [7.0, 4.0])  # the last value wins
    assert tree.total() == 5.0


def test_sum_tree_single_and_batched_writes_give_the_same_sums():
    """One-leaf writes take a scalar path; every internal node must still be the sum
    of its children, as if the final leaves were written in one batch."""
    rng = np.random.RandomState(0)
    tree, reference = SumTree(100), SumTree(100)
    for _ in range(300):
        k = rng.randint(1, 4)
        tree.set(rng.randint(0, 100, k), rng.rand(k))
    leaves = tree.nodes[tree.capacity :].copy()
    reference.set(np.arange(tree.capacity), leaves)
    np.testing.assert_allclose(tree.nodes[1:], reference.nodes[1:], rtol=1e-12)
    assert tree.total() == pytest.approx(leaves.sum())


def make(capacity=20, alpha=0.6, uniform=0.0, seed=0):
    storage = FrameStorage(capacity, 1, (2, 2), np.uint8, 4, 1, 1, 0.9)
    sampler = PrioritizedSampler(
        storage, np.random.default_rng(seed), priority_exponent=alpha,
        uniform_sample_probability=uniform,
    )  # fmt: skip
    return Replay(storage, sampler)


def fill(replay, rows):
    for k in range(rows):
        replay.add(Row(np.full((1, 2, 2), k, np.uint8), [0], [0.0], [k == 0], [False], [False]))


def test_new_transitions_enter_at_the_max_seen_priority():
    replay = make()
    fill(replay, 3)
    assert replay.sampler.tree.get([0, 1, 2]).tolist() == [1.0, 1.0, 1.0]
    replay.update_priorities((np.array([0]), np.array([0])), [4.0])
    assert replay.sampler.max_seen_priority == 4.0
    fill(replay, 1)
    assert replay.sampler.tree.get([3])[0] == pytest.approx(4.0**0.6)
    assert replay.sampler.tree.get([0])[0] == pytest.approx(4.0**0.6)


def test_zero_priority_is_never_sampled_and_last_rows_get_zero():
    replay = make(alpha=0.0)  # 0^0 must be 0, not 1
    fill(replay, 10)
    replay.update_priorities((np.arange(4), np.zeros(4, int)), [0.0, 0.0, 0.0, 0.0])
    assert replay.sampler.tree.get(np.arange(4)).tolist() == [0.0] * 4
    for _ in range(50):
        t, _ = replay.sampler.sample_indices(16)
        assert (t >= 4).all()
    replay.add(Row(np.zeros((1, 2, 2), np.uint8), [0], [0.0], [False], [True], [True]))
    assert replay.sampler.tree.get([10])[0] == 0.0


def test_empirical_distribution_matches_theory():
    u = 0.1
    replay = make(capacity=20, alpha=0.5, uniform=u, seed=1)
    fill(replay, 12)  # rows 0..10 can start a transition
    rows = np.arange(11)
    priorities = np.arange(1.0, 12.0)
    replay.update_priorities((rows, np.zeros(11, int)), priorities)
    draws = np.concatenate([replay.sampler.sample_indices(500)[0] for _ in range(100)])
    empirical = np.bincount(draws, minlength=12)[:11] / len(draws)
    p = priorities**0.5
    # Row 11 has max priority but no successor yet: rejected and redrawn, so the
    # proportional part renormalizes over rows 0..10.
    expected = (1 - u) * p / p.sum() + u / 11
    np.testing.assert_allclose(empirical, expected, rtol=0.05)


def test_importance_weights_normalized_by_batch_max():
    replay = make(capacity=20, alpha=1.0, seed=2)
    fill(replay, 6)
    replay.update_priorities((np.arange(5), np.zeros(5, int)), [1.0, 2.0, 3.0, 4.0, 5.0])
    replay.sampler.importance_sampling_exponent = 0.5
    batch = replay.sample(64)
    t, _ = batch.indices
    probabilities = replay.sampler.tree.get(t) / replay.sampler.tree.total()
    expected = (1 / replay.size / probabilities) ** 0.5
    np.testing.assert_allclose(batch.weights, expected / expected.max(), rtol=1e-6)
    assert batch.weights.max() == pytest.approx(1.0)


def test_state_round_trip():
    replay = make(seed=3)
    fill(replay, 8)
    replay.update_priorities((np.arange(3), np.zeros(3, int)), [5.0, 0.5, 2.0])
    other = make(seed=3)
    other.load_state_dict(replay.state_dict())
    assert other.sampler.max_seen_priority == 5.0
    np.testing.assert_array_equal(other.sampler.tree.nodes, replay.sampler.tree.nodes)
    np.testing.assert_array_equal(replay.sample(16).weights, other.sample(16).weights)
