"""`--capture` (qzoo/captured.py): the whole update (draw, stacks, loss, gradient,
optimizer step, priorities, statistics) as one compiled function.

On a CPU it compiles to C++ (no CUDA graphs); the function is the same one a GPU
captures, so the checks here are: compiled equals the same function run eagerly (the
same indices, parameters, priorities and statistics to float tolerance, the same
random streams), nothing in it copies to the host, its draws are uniform (or by
priority) over exactly the valid slots, and a run with it resumes exactly.
"""

import copy

import numpy as np
import pytest
import torch
from helpers import SMALL_HEADS, filled, no_host_sync, resumed_rows, rows, window_slots

from qzoo.cli.main import main
from qzoo.configuration import build_config
from qzoo.learning.captured import CapturedUpdate
from qzoo.learning.from_config import make_learner
from qzoo.replay import Replay
from qzoo.replay.device_samplers import DevicePrioritizedSampler, DeviceUniformSampler
from qzoo.run.trainer import Trainer

SMALL = {"env": "CartPole-v1", "iterations": "2", "train_frames": "300", "eval_frames": "20",
         "replay_capacity": "1000", "min_replay_capacity_fraction": "0.1", "replay_device": "cpu",
         "capture": "true", "threads": "1", **SMALL_HEADS}  # fmt: skip


def _eager(trainer):
    """`trainer` with its captured update run eagerly: the same function, not compiled."""
    trainer.updates.captured = CapturedUpdate(trainer.learner, trainer.replay,
                                              trainer.config.batch_size, compile=False)  # fmt: skip
    return trainer


def _pair(agent, extra):
    """A trainer whose captured update is compiled and one in the same state running
    the same function eagerly, replay filled."""
    compiled = Trainer(build_config(agent, {**SMALL, **extra}))
    compiled.train_phase(500)  # 100 to fill, then updates (the first one compiles)
    eager = Trainer(build_config(agent, {**SMALL, **extra}))
    eager.load_state_dict(copy.deepcopy(compiled.state_dict()))
    return compiled, _eager(eager)


@pytest.mark.parametrize("agent, extra", [
    ("dqn", {}), ("prioritized", {}), ("rainbow", {}), ("iqn", {}),
    ("dqn", {"n_steps": "3", "double_q": "true", "prioritized": "true"}),
])  # fmt: skip
def test_compiled_equals_the_same_update_run_eagerly(agent, extra):
    compiled, eager = _pair(agent, extra)
    for trainer in (compiled, eager):
        trainer.learner.pop_statistics()
    for _ in range(4):
        for trainer in (compiled, eager):
            trainer.learn_once()
        for stream in ("replay", "learner"):  # the same numbers drawn from both streams
            a, b = (getattr(t.streams, stream).torch.get_state() for t in (compiled, eager))
            assert torch.equal(a, b), stream
        for a, b in zip(compiled.learner.online.parameters(), eager.learner.online.parameters()):
            # One Adam step moves a weight by about lr: last-bit differences move it alike.
            torch.testing.assert_close(a, b, rtol=0, atol=2 * compiled.config.learning_rate)
    if compiled.config.prioritized:  # the same slots were drawn and written
        a, b = compiled.replay.sampler, eager.replay.sampler
        assert torch.equal(a.priorities > 0, b.priorities > 0)
        torch.testing.assert_close(a.priorities, b.priorities, rtol=1e-4, atol=1e-7)
        assert a.max_seen_priority == pytest.approx(b.max_seen_priority, rel=1e-4)
    s_compiled, s_eager = compiled.learner.pop_statistics(), eager.learner.pop_statistics()
    assert s_compiled["num_updates"] == s_eager["num_updates"] == 4
    assert s_compiled["loss"] == pytest.approx(s_eager["loss"], rel=1e-4)
    assert s_compiled["mean_q"] == pytest.approx(s_eager["mean_q"], rel=1e-4, abs=1e-6)
    assert compiled.updates.transitions_sampled == eager.updates.transitions_sampled


def _eager_pair(agent, updates, compile):
    """Two trainers in one state, replay filled: one with single eager calls, one with
    `updates` per call (compiled or not)."""
    base = Trainer(build_config(agent, SMALL))
    base.updates.captured = CapturedUpdate(base.learner, base.replay, base.config.batch_size,
                                           compile=False)  # fmt: skip
    base.train_phase(200)  # 100 to fill, then a few updates
    pair = []
    for n, compiled in ((1, False), (updates, compile)):
        trainer = Trainer(build_config(agent, SMALL))
        trainer.load_state_dict(copy.deepcopy(base.state_dict()))
        trainer.updates.captured = CapturedUpdate(trainer.learner, trainer.replay,
                                                  trainer.config.batch_size, compile=compiled,
                                                  updates=n)  # fmt: skip
        trainer.learner.pop_statistics()
        pair.append(trainer)
    return pair


@pytest.mark.parametrize("agent, compile", [
    ("prioritized", False), ("iqn", False), ("prioritized", True),
])  # fmt: skip
def test_k_updates_in_one_call_are_k_single_calls(agent, compile):
    """--capture-updates: one call of K updates draws what K single calls draw, in the
    same order, so it ends in the same weights, priorities and statistics (eagerly the
    very same numbers; compiled, to float tolerance)."""
    k = 2 if compile else 3  # each update of a call is unrolled in the compiled graph
    single, many = _eager_pair(agent, k, compile)
    for _ in range(2):
        for _ in range(k):
            single.updates.captured.update(1)
        many.updates.captured.update(k)
    for stream in ("replay", "learner"):
        a, b = (getattr(t.streams, stream).torch.get_state() for t in (single, many))
        assert torch.equal(a, b), stream
    exact = {"rtol": 0, "atol": 0} if not compile else {"rtol": 0, "atol": 1e-3}
    for a, b in zip(single.learner.online.parameters(), many.learner.online.parameters()):
        torch.testing.assert_close(a, b, **exact)
    if agent == "prioritized":
        torch.testing.assert_close(single.replay.sampler.priorities,
                                   many.replay.sampler.priorities, **exact)  # fmt: skip
    a, b = (t.learner.pop_statistics() for t in (single, many))
    assert a["num_updates"] == b["num_updates"] == 2 * k, (a, b)
    assert a["loss"] == pytest.approx(b["loss"], rel=0 if not compile else 1e-3), (a, b)


def test_a_run_with_k_updates_per_call_trains_as_single_calls():
    """--capture-updates through the run loop: 6 environments at one update per 4 agent
    steps make 1 or 2 updates due per step (6/4), so calls of 2 and single calls mix;
    the training phase ends in the weights, counts and rows of one with single calls
    (the captured function run eagerly: the same numbers exactly)."""
    options = {**SMALL, "num_envs": "6", "learn_period": "4", "iterations": "1",
               "train_frames": "600"}  # fmt: skip
    trainers = []
    for k in ("1", "2"):
        trainer = Trainer(build_config("prioritized", {**options, "capture_updates": k}))
        assert trainer.updates.captured.updates == int(k)  # wired from the option
        trainer.updates.captured = CapturedUpdate(trainer.learner, trainer.replay,
                                                  trainer.config.batch_size, compile=False,
                                                  updates=int(k))  # fmt: skip
        trainers.append(trainer)
    single, many = trainers
    calls, update = [], many.updates.captured.update
    many.updates.captured.update = lambda n=1: (calls.append(n), update(n))
    rows_of = [rows(t, 2) for t in trainers]
    assert calls.count(2) > 10 and calls.count(1) > 10  # both kinds of call were made
    assert rows_of[0] == rows_of[1]
    assert single.updates.transitions_sampled == many.updates.transitions_sampled > 0
    for a, b in zip(single.learner.online.parameters(), many.learner.online.parameters()):
        assert torch.equal(a, b)


@pytest.mark.parametrize("agent, extra", [
    ("dqn", {}), ("dqn", {"n_steps": "3", "double_q": "true", "prioritized": "true"}),
    ("iqn", {"prioritized": "true"}),
])  # fmt: skip
def test_nothing_in_the_update_copies_to_the_host(agent, extra):
    """Run eagerly, every tensor operation of the update (and the call around it, the
    same code compiled) runs in Python, so a host copy anywhere would raise here. (The
    compiled CPU graph itself reads 0-dim CPU tensors as numbers, by design of the
    CPU backend: on a GPU those tensors live on the device.)"""
    eager = _eager(Trainer(build_config(agent, {**SMALL, **extra})))
    eager.train_phase(500)  # filled and trained eagerly: compiling would add nothing here
    with no_host_sync():
        for _ in range(3):
            eager.learn_once()
    eager.replay.sampler.check()  # no position went without a valid transition


def _captured_over(storage, prioritized, options=None):
    """A captured update (eager) over `storage`, for its draws alone."""
    config = build_config("dqn", {"env": "CartPole-v1", "mlp_hidden": "8", "threads": "1"})
    learner = make_learner(config, _Info(), (storage.stack, 2), "cpu", torch.Generator())
    generator = torch.Generator().manual_seed(4)
    sampler = (DevicePrioritizedSampler(storage, generator, **options) if prioritized
               else DeviceUniformSampler(storage, generator))  # fmt: skip
    captured = CapturedUpdate(learner, Replay(storage, sampler), 64, compile=False)
    return captured, sampler


class _Info:
    num_actions, frame_shape, frame_dtype, name, domain, game = 6, (2,), np.uint8, "t", "gym", None


def _draw(captured):
    """One draw of the captured function, its window written as `update` writes it."""
    storage = captured.storage
    low, high = storage.window()
    captured._window.copy_(torch.tensor([storage.oldest(), low, high, storage.size]))
    torch.rand(captured._uniforms.shape, generator=captured.sampler.generator,
               dtype=torch.float64, out=captured._uniforms)  # fmt: skip
    return captured._sample(0)


def test_uniform_draws_are_valid_reach_every_valid_slot_and_are_even():
    host, device = filled()  # a wrapped ring of 2 columns: episodes of every kind
    t, b = window_slots(host)
    valid = host.valid(t, b)
    slots = set(zip(t[valid].tolist(), b[valid].tolist()))
    captured, sampler = _captured_over(device, prioritized=False)
    counts = {}
    for _ in range(300):
        dt, db, weights = _draw(captured)
        assert weights is None
        for slot in zip(dt.tolist(), db.tolist()):
            counts[slot] = counts.get(slot, 0) + 1
    assert set(counts) == slots  # only valid slots, and every one of them
    expected = 300 * 64 / len(slots)  # ~530 each: 5 standard deviations is +-115
    assert all(abs(c - expected) < 0.25 * expected for c in counts.values()), counts
    sampler.check()


def test_prioritized_draws_follow_priority_and_weights_are_the_samplers():
    """Written priorities 0, 0.5, 1 and 3 (alpha 0.6, u = 0): a zero is never drawn,
    3 against 0.5 comes (3 / 0.5)^0.6 = 2.93 times as often, and the importance weights
    equal DevicePrioritizedSampler's formula for the drawn slots."""
    host, device = filled()
    options = {"priority_exponent": 0.6, "uniform_sample_probability": 0.0}
    captured, sampler = _captured_over(device, prioritized=True, options=options)
    for t in range(device.rows):
        sampler.added(t)
    t, b = window_slots(host)
    valid = host.valid(t, b)
    t, b = t[valid], b[valid]
    priorities = np.random.default_rng(2).choice([0.0, 0.5, 1.0, 3.0], len(t))
    sampler.update((torch.from_numpy(t), torch.from_numpy(b)), priorities)
    captured.set_beta(0.5)
    sampler.importance_sampling_exponent = 0.5
    counts = np.zeros((device.num_rows, 2))
    for _ in range(200):
        dt, db, weights = _draw(captured)
        expected = (1.0 / device.size / sampler.probabilities(dt, db)).pow(0.5)
        torch.testing.assert_close(weights, (expected / expected.max()).float())
        np.add.at(counts, (dt.numpy(), db.numpy()), 1)
    drawn = counts[t, b]
    assert drawn.sum() == counts.sum() == 200 * 64  # only the valid slots written
    assert np.all(drawn[priorities == 0] == 0) and np.all(drawn[priorities > 0] > 0)
    ratio = drawn[priorities == 3].mean() / drawn[priorities == 0.5].mean()
    assert 2.5 < ratio < 3.4, ratio


@pytest.mark.parametrize("agent", ["dqn", "prioritized"])
def test_a_captured_run_resumes_exactly(tmp_path, agent):
    """Saved after iteration 1 and resumed in a new trainer: iteration 2 as without the
    stop (both streams are in the checkpoint; the graph holds no state of its own)."""
    expected = rows(Trainer(build_config(agent, SMALL)), 3)
    got = resumed_rows(lambda: Trainer(build_config(agent, SMALL)), tmp_path, 2, 1)
    assert got == expected and float(got[2]["train_num_updates"]) > 0


@pytest.mark.parametrize("options, blamed", [
    ([], "--capture: bad value true; expected false with --replay-device host"),
    (["--replay-device", "cpu", "--compile"],
     "--capture: bad value true; expected false with --compile (--capture compiles"),
    (["--replay-device", "cpu", "--recurrent"],
     "--replay-device: bad value cpu; expected host with --recurrent"),
    (["--replay-device", "cpu", "--capture-updates", "4", "--target-count-updates"],
     "--capture-updates: bad value 4; expected 1 with --target-count-updates"),
    (["--replay-device", "cpu", "--capture-updates", "4", "--acting", "async"],
     "--capture-updates: bad value 4; expected 1 with --acting async"),
])  # fmt: skip
def test_what_it_does_not_take_is_refused_in_one_line(options, blamed, tmp_path, monkeypatch,
                                                      capsys):  # fmt: skip
    monkeypatch.chdir(tmp_path)
    argv = ["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "run"),
            "--capture", *options]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("qzoo: error: " + blamed), err
    assert list(tmp_path.iterdir()) == []


def test_capture_updates_without_capture_is_refused(tmp_path, capsys):
    argv = ["train", "dqn", "--env", "CartPole-v1", "--run-dir", str(tmp_path / "run"),
            "--capture-updates", "4"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    expected = (
        "qzoo: error: --capture-updates: bad value 4; expected no "
        "--capture-updates here: it only acts with --capture"
    )
    assert err == [expected], err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("agent", ["dqn", "rainbow"])
def test_on_a_gpu_the_update_is_one_cuda_graph_and_equals_the_eager_one(agent):
    """On a GPU: the captured update (CUDA graphs) equals the same function run eagerly
    on the GPU, and the graphs were not skipped (inductor counts a skip per reason)."""
    from torch._dynamo.utils import counters

    extra = {"device": "cuda", "replay_device": "cuda"}
    compiled = Trainer(build_config(agent, {**SMALL, **extra}))
    compiled.train_phase(500)
    eager = Trainer(build_config(agent, {**SMALL, **extra}))
    eager.load_state_dict(copy.deepcopy(compiled.state_dict()))
    eager.updates.captured = CapturedUpdate(eager.learner, eager.replay, eager.config.batch_size,
                                    compile=False)  # fmt: skip
    for _ in range(4):
        compiled.learn_once()
        eager.learn_once()
    for a, b in zip(compiled.learner.online.parameters(), eager.learner.online.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=2 * compiled.config.learning_rate)
    assert not counters["inductor"].get("cudagraph_skips"), dict(counters["inductor"])
