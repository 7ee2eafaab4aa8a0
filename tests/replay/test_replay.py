"""Deduplicated frame replay, checked on small hand-made streams."""

import numpy as np
import pytest

from qzoo.replay import FrameStorage, Replay, Row, UniformSampler
from qzoo.replay.frames import FrameStacker, bytes_per_transition

GAMMA = 0.9


def make(capacity, num_envs=1, stack=2, n_steps=1, frame_shape=(2, 2), seed=0):
    storage = FrameStorage(capacity, num_envs, frame_shape, np.uint8, 6, stack, n_steps, GAMMA)
    return Replay(storage, UniformSampler(storage, np.random.default_rng(seed)))


# (frame id, action, reward on arrival, first, last, zero_discount)
STREAM = [
    (1, 0, 0.0, True, False, False),  # row 0: episode A starts
    (2, 1, 1.0, False, False, False),  # row 1
    (3, 2, 1.0, False, False, True),  # row 2: a life lost on arrival (discount 0)
    (4, 3, 0.0, False, True, False),  # row 3: A truncated at the frame cap
    (5, 0, 0.0, True, False, False),  # row 4: episode B starts
    (6, 1, 1.0, False, True, True),  # row 5: B terminated
    (7, 2, 0.0, True, False, False),  # row 6: episode C starts
    (8, 3, 1.0, False, False, False),  # row 7: C abandoned (phase ended)
    (9, 4, 0.0, True, False, False),  # row 8: episode D starts
    (10, 5, 0.5, False, False, False),  # row 9
]


def fill(replay, stream, env_offset=(0,)):
    for frame, action, reward, first, last, zero in stream:
        b = len(env_offset)
        replay.add(Row(
            np.array([np.full((2, 2), frame + off) for off in env_offset], np.uint8),
            np.full(b, action), np.full(b, reward), np.full(b, first), np.full(b, last),
            np.full(b, zero),
        ))  # fmt: skip


def ids(observations):
    """Frame ids of stacked observations [N, stack, 2, 2] -> [N, stack]."""
    return observations[:, :, 0, 0].astype(int)


def test_valid_starts_respect_episode_boundaries():
    replay = make(100)
    fill(replay, STREAM)
    t = np.arange(len(STREAM) - 1)
    valid = replay.storage.valid(t, np.zeros_like(t))
    # Row 3 and 5 end episodes; row 7 is followed by a new episode's FIRST.
    assert valid.tolist() == [True, True, True, False, True, False, True, False, True]


def test_one_step_returns_discounts_and_stacks():
    replay = make(100)
    fill(replay, STREAM)
    t = np.array([0, 1, 2, 4, 6, 8])
    b = np.zeros_like(t)
    r, d, end = replay.storage.returns(t, b)
    np.testing.assert_allclose(r, [1.0, 1.0, 0.0, 1.0, 1.0, 0.5])
    # Life loss and termination cut bootstrapping; truncation (row 2 -> 3) does not.
    np.testing.assert_allclose(d, [GAMMA, 0.0, GAMMA, 0.0, GAMMA, GAMMA])
    assert end.tolist() == [1, 2, 3, 5, 7, 9]
    # Leading zeros before an episode's first frame; no frame crosses episodes.
    assert ids(replay.storage.stacked(t, b)).tolist() == [
        [0, 1],
        [1, 2],
        [2, 3],
        [0, 5],
        [0, 7],
        [0, 9],
    ]
    assert ids(replay.storage.stacked(end, b)).tolist() == [
        [1, 2],
        [2, 3],
        [3, 4],
        [5, 6],
        [7, 8],
        [9, 10],
    ]


def test_n_step_returns_stop_at_episode_end():
    replay = make(100, n_steps=3)
    fill(replay, STREAM)
    t = np.array([0, 1, 2, 4, 6])
    b = np.zeros_like(t)
    assert replay.storage.valid(t, b).tolist() == [True, True, True, True, False]
    r, d, end = replay.storage.returns(t[:4], b[:4])
    # Row 0: 1 + 0.9 * 1, then the life loss zeros everything after.
    np.testing.assert_allclose(r, [1.9, 1.0, 0.0, 1.0])
    np.testing.assert_allclose(d, [0.0, 0.0, GAMMA, 0.0])
    assert end.tolist() == [3, 3, 3, 5]


def test_n_step_return_worked_by_hand():
    replay = make(100, n_steps=3)
    stream = [(k + 1, k % 6, float(k), k == 0, False, False) for k in range(8)]
    fill(replay, stream)
    r, d, end = replay.storage.returns(np.array([1]), np.array([0]))
    assert r[0] == pytest.approx(2 + GAMMA * 3 + GAMMA**2 * 4)
    assert d[0] == pytest.approx(GAMMA**3)
    assert end[0] == 4


def test_samples_only_valid_transitions():
    replay = make(100, seed=3)
    fill(replay, STREAM)
    seen = set()
    for _ in range(200):
        batch = replay.sample(8)
        t, _ = batch.indices
        seen.update(t.tolist())
        # The next observation is always the one right after, within the episode.
        assert (ids(batch.s_t)[:, -1] == ids(batch.s_tm1)[:, -1] + 1).all()
        assert batch.s_tm1.dtype == np.uint8 and batch.a_tm1.dtype == np.int64
    assert seen == {0, 1, 2, 4, 6, 8}  # every valid start, and only those


def test_wrapped_cursor_never_straddled():
    replay = make(5, stack=2, seed=1)
    stream = [(k + 1, 0, 1.0, k == 0, False, False) for k in range(8)]
    fill(replay, stream)
    assert replay.storage.rows == 5 and replay.storage.cursor == 3 and replay.num_adds == 8
    seen = set()
    for _ in range(100):
        batch = replay.sample(4)
        seen.update(batch.indices[0].tolist())
        s_tm1, s_t = ids(batch.s_tm1), ids(batch.s_t)
        assert (s_tm1[:, 1] == s_tm1[:, 0] + 1).all()  # history not overwritten
        assert (s_t[:, 1] == s_tm1[:, 1] + 1).all()
    # Row 2 is the newest (no successor yet); row 3 is the oldest (history gone).
    assert seen == {4, 0, 1}


def test_several_environments_keep_their_own_streams():
    replay = make(100, num_envs=2, seed=2)
    fill(replay, STREAM, env_offset=(0, 100))
    assert replay.size == 2 * len(STREAM)
    for _ in range(50):
        batch = replay.sample(16)
        _, b = batch.indices
        s_tm1, s_t = ids(batch.s_tm1), ids(batch.s_t)
        newest = s_tm1[:, -1]
        assert ((newest >= 100) == (b == 1)).all()
        assert (s_t[:, -1] == newest + 1).all()


def test_state_round_trip():
    replay = make(100, seed=5)
    fill(replay, STREAM)
    other = make(100, seed=5)
    other.load_state_dict(replay.state_dict())
    a, b = replay.sample(32), other.sample(32)
    for key in ("s_tm1", "a_tm1", "r_t", "discount_t", "s_t"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key))


def test_atari_bytes_per_transition_at_most_a_quarter_of_cleanrls():
    """CleanRL allocates 28,244 bytes per Atari transition (both 4-frame observations,
    action, reward, done): a quarter is 7,061, which qzoo's 7,056-byte frame, one byte
    of action and flags, and a float32 reward make exactly. Past 32 actions the flags
    need a byte of their own."""
    per = bytes_per_transition((84, 84), np.uint8, 18)
    assert per == 7056 + 1 + 4 == 28_244 // 4
    replay = FrameStorage(1000, 4, (84, 84), np.uint8, 18, 4, 1, 0.99)
    assert replay.flags is replay.actions
    stored = replay.frames.nbytes + replay.actions.nbytes + replay.rewards.nbytes
    assert replay.nbytes == stored == sum(a.nbytes for a in (replay.frames, *replay.row_arrays))
    assert stored / 1000 == per
    wide = FrameStorage(1000, 4, (84, 84), np.uint8, 33, 4, 1, 0.99)
    assert wide.flags is not wide.actions
    assert bytes_per_transition((84, 84), np.uint8, 33) == 7056 + 1 + 4 + 1
    assert bytes_per_transition((84, 84), np.uint8, 300) == 7056 + 2 + 4 + 1
    assert wide.nbytes == sum(a.nbytes for a in (wide.frames, *wide.row_arrays)) == 1000 * 7062


def test_frame_stacker_matches_replay_padding():
    stacker = FrameStacker(1, (2, 2), np.uint8, 2)
    replay = make(100)
    fill(replay, STREAM)
    for row, (frame, *_rest) in enumerate(STREAM):
        first = np.array([STREAM[row][3]])
        acting = stacker.push(np.full((1, 2, 2), frame, np.uint8), first)
        stored = replay.storage.stacked(np.array([row]), np.array([0]))
        np.testing.assert_array_equal(acting, stored)


def old_layout_state():
    """STREAM's storage state as written before the flags moved into the action byte:
    actions as taken, flags 1 (FIRST) | 2 (LAST) | 4 (ZERO_DISCOUNT) in their own
    array, worked out by hand from STREAM's columns."""
    return {
        "frames": np.array([np.full((1, 2, 2), f) for f, *_ in STREAM], np.uint8),
        "actions": np.array([[0], [1], [2], [3], [0], [1], [2], [3], [4], [5]], np.uint8),
        "rewards": np.array([[0], [1], [1], [0], [0], [1], [0], [1], [0], [0.5]], np.float32),
        "flags": np.array([[1], [0], [4], [2], [1], [6], [1], [0], [1], [0]], np.uint8),
        "cursor": 10, "rows": 10, "num_adds": 10,
    }  # fmt: skip


@pytest.mark.parametrize("num_actions", [6, 40])
def test_a_checkpoint_of_the_old_layout_loads_and_new_ones_keep_it(tmp_path, num_actions):
    """A checkpoint file holding the separate flag array (the layout before packing)
    loads into the packed storage (6 actions) and the wide one (40): the same batches
    as the storage filled with the stream. A storage's own state is that layout."""
    from qzoo.replay.device import DeviceFrameStorage
    from qzoo.run import checkpoint

    checkpoint.save(tmp_path / "old.safetensors", {"storage": old_layout_state()})
    saved = checkpoint.load(tmp_path / "old.safetensors")["storage"]
    args = (100, 1, (2, 2), np.uint8, num_actions, 2, 3, GAMMA)
    filled = FrameStorage(*args)
    fill(Replay(filled, UniformSampler(filled, np.random.default_rng(0))), STREAM)
    for key, value in old_layout_state().items():
        np.testing.assert_array_equal(filled.state_dict()[key], value, err_msg=key)
    t, b = np.array([0, 1, 2, 4, 6]), np.zeros(5, np.int64)
    expected = filled.gather(t, b)
    assert expected.a_tm1.tolist() == [0, 1, 2, 0, 2]
    for storage in (FrameStorage(*args), DeviceFrameStorage(*args, "cpu")):
        storage.load_state_dict(saved)
        assert (storage.flags is storage.actions) == (num_actions <= 32)
        got = storage.gather(t, b)
        for key in ("s_tm1", "a_tm1", "r_t", "discount_t", "s_t"):
            np.testing.assert_array_equal(np.asarray(getattr(got, key)),
                                          getattr(expected, key), err_msg=key)  # fmt: skip


def test_actions_that_do_not_fit_the_byte_are_refused_on_load():
    state = old_layout_state()
    state["actions"][3] = 40
    with pytest.raises(ValueError, match="replay actions 0..40 do not fit this run's 32"):
        FrameStorage(100, 1, (2, 2), np.uint8, 6, 2, 1, GAMMA).load_state_dict(state)
