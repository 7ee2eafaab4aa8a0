"""--acting async --actor-process (qzoo/acting/process.py): rows through the shared
ring in order, weights through the sequence counter, a whole phase's schedule, and
failures on either side reported without a process left behind."""

import math
import multiprocessing
import os

import numpy as np
import pytest
import torch

from qzoo import envs
from qzoo.acting import process, process_channels
from qzoo.configuration import make_config
from qzoo.errors import WorkerDied
from qzoo.networks.network import make_network
from qzoo.replay.batch import Row
from qzoo.run.trainer import Trainer

CARTPOLE = {"acting": "async", "actor_process": True, "train_frames": 2000,
            "eval_frames": 100, "replay_capacity": 2000, "min_replay_capacity_fraction": 0.1}  # fmt: skip


def row(i, n=2):
    return Row(frame=np.full((n, 4), i, np.float32), action=np.full(n, i % 5),
               reward=np.full(n, i / 2, np.float32), first=np.full(n, i % 3 == 0),
               last=np.full(n, i % 7 == 0), zero_discount=np.full(n, i % 2 == 0))  # fmt: skip


def test_the_ring_delivers_every_row_in_order_across_wraparounds():
    ctx = multiprocessing.get_context("fork")
    ring = process_channels.Ring(ctx, 2, (4,), np.float32)
    ring.reset()
    total = 3 * ring.slots + 5

    def produce():
        for i in range(total):
            ring.put(row(i), 4 + i, [float(i)] * (i % 3))
        os._exit(0)

    child = ctx.Process(target=produce)
    child.start()
    got = []
    while len(got) < total:
        got += ring.take()
    child.join()
    assert child.exitcode == 0
    for i, (r, new_frames, ended) in enumerate(got):
        expected = row(i)
        for name in ("frame", "action", "reward", "first", "last", "zero_discount"):
            np.testing.assert_array_equal(getattr(r, name), getattr(expected, name))
        assert new_frames == 4 + i and ended.tolist() == [float(i)] * (i % 3)


def test_the_actor_waits_while_the_learner_says_so_and_stops_when_told():
    ctx = multiprocessing.get_context("fork")
    ring = process_channels.Ring(ctx, 2, (4,), np.float32)
    ring.reset()
    ring.may_go.value = 0

    def produce():
        try:
            ring.put(row(0), 4, [])
        except SystemExit:
            os._exit(3)
        os._exit(0)

    child = ctx.Process(target=produce)
    child.start()
    child.join(0.5)
    assert child.is_alive() and ring.take() == []  # held by the gate
    ring.stop.value = 1
    child.join(600)  # returns as soon as it exits: the bound only ends a broken test
    assert child.exitcode == 3


def published():
    """A learner's network with an update published, and an actor's policy."""
    config = make_config("dqn", "CartPole-v1", "gym", {})
    online = make_network(config, envs.describe(config), (4,))
    actor = make_network(config, envs.describe(config), (4,)).requires_grad_(False)
    weights = process_channels.SharedWeights(multiprocessing.get_context("fork"), online)
    policy = process_channels.ProcessPolicy(actor, {"tau_samples": 1}, weights)
    with torch.no_grad():
        for p in online.parameters():
            p.add_(1.0)
    weights.write()
    return online, actor, weights, policy


def test_weights_are_taken_whole_and_only_when_newer():
    online, actor, weights, policy = published()
    assert weights.sequence.value == 2
    assert policy.weights.read_into(policy, -1) == 2
    assert all(torch.equal(v, online.state_dict()[k]) for k, v in actor.state_dict().items())
    weights.sequence.value = 3  # a write under way: nothing is taken
    with torch.no_grad():
        for p in actor.parameters():
            p.zero_()
    assert weights.read_into(policy, 2) == 2
    assert all(float(p.abs().sum()) == 0 for p in actor.parameters())


def test_weights_written_during_the_copy_are_not_loaded():
    _, actor, weights, policy = published()
    before = {k: v.clone() for k, v in actor.state_dict().items()}

    class Overlapped(dict):  # the learner publishes while the actor copies
        def items(self):
            weights.sequence.value += 2
            return super().items()

    weights.tensors = Overlapped(weights.tensors)
    assert weights.read_into(policy, -1) == -1
    assert all(torch.equal(v, before[k]) for k, v in actor.state_dict().items())


def test_a_phase_stores_every_row_and_holds_the_replay_ratio():
    trainer = Trainer(make_config("dqn", "CartPole-v1", "gym", CARTPOLE))
    before = trainer.streams.actor.state_dict()["numpy"]
    rows = [trainer.run_iteration() for _ in range(3)]
    # Every frame the actor took is stored: one transition per agent step.
    assert trainer.updates.transitions_collected == trainer.frame_t // trainer.config.action_repeats
    assert trainer.frame_t >= 2 * CARTPOLE["train_frames"]
    # ... and each episode's final observation as a row of its own (but for an
    # episode ending on a phase's last step).
    ended = sum(r["train_num_episodes"] for r in rows)
    assert abs(trainer.replay.num_adds - trainer.frame_t - ended) <= 2  # one per phase
    # The actor's random stream came back from its process, advanced.
    assert trainer.streams.actor.state_dict()["numpy"] != before
    per_frame = trainer.updates.schedule.updates_per_frame
    learnable = trainer.frame_t - trainer.config.min_replay_size * trainer.config.action_repeats
    done = sum(r["train_num_updates"] for r in rows)
    # At least the updates due at the end of each phase, at most the tolerance above.
    assert math.floor(learnable * per_frame) - 2 <= done <= learnable * per_frame * 1.05 + 2
    assert math.isfinite(rows[2]["train_loss"]) and 0 <= rows[2]["learner_wait_fraction"] < 1
    assert multiprocessing.active_children() == []


def test_an_error_in_the_actor_is_raised_in_the_learner(monkeypatch):
    from qzoo.acting.actor import Actor

    trainer = Trainer(make_config("dqn", "CartPole-v1", "gym", CARTPOLE))
    trainer.run_iteration()

    def broken(self, frame_t=0):
        raise ValueError("the environment broke")

    monkeypatch.setattr(Actor, "step", broken)  # the forked actor inherits it
    with pytest.raises(RuntimeError, match="ValueError: the environment broke"):
        trainer.run_iteration()
    assert multiprocessing.active_children() == []


def test_an_actor_that_dies_without_a_word_is_reported_with_its_exit_code(monkeypatch):
    from qzoo.acting.actor import Actor

    trainer = Trainer(make_config("dqn", "CartPole-v1", "gym", CARTPOLE))
    trainer.run_iteration()
    monkeypatch.setattr(Actor, "step", lambda self, frame_t=0: os._exit(7))  # as if killed
    with pytest.raises(
        WorkerDied, match=r"the actor process \(--actor-process\) ended with exit code 7"
    ):
        trainer.run_iteration()
    assert multiprocessing.active_children() == []


def test_an_error_in_the_learner_stops_the_actor(monkeypatch):
    trainer = Trainer(make_config("dqn", "CartPole-v1", "gym", CARTPOLE))
    trainer.run_iteration()

    def broken(*args, **kwargs):
        raise ValueError("the learner broke")

    monkeypatch.setattr(trainer.updates, "learn_once", broken)
    with pytest.raises(ValueError, match="the learner broke"):
        trainer.run_iteration()
    assert multiprocessing.active_children() == []


def test_a_run_may_add_or_drop_the_actor_process_on_resume(tmp_path):
    """Where the actor runs changes how fast, not what an async run is (two async runs
    differ anyway), so a resume may change it, as --pin-threads."""
    from qzoo.cli.main import main

    run = ["train", "dqn", "--env", "CartPole-v1", "--acting", "async", "--train-frames",
           "600", "--eval-frames", "100", "--replay-capacity", "1000",
           "--min-replay-capacity-fraction", "0.2", "--run-dir", str(tmp_path / "run")]  # fmt: skip
    assert main([*run, "--iterations", "1", "--actor-process"]) == 0
    assert main([*run, "--iterations", "2", "--accept-changes", "iterations"]) == 0
    rows = (tmp_path / "run" / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 and multiprocessing.active_children() == []


def _children(pid):
    """Pids of the processes whose parent is `pid` (Linux's /proc)."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
        except OSError:
            continue
        if int(data[data.rindex(b")") + 2 :].split()[1]) == pid:
            found.append(int(name))
    return found


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return None


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the actor in /proc")
def test_a_killed_actor_stops_the_run_in_one_line_keeping_its_checkpoint(tmp_path):
    """SIGKILL (the kernel's out-of-memory killer) to the actor alone, mid-phase."""
    import signal
    import subprocess
    import sys
    import time

    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "qzoo", "train", "dqn", "--env", "CartPole-v1", "--acting",
            "async", "--actor-process", "--iterations", "3", "--train-frames", "200000",
            "--eval-frames", "100", "--replay-capacity", "5000", "--no-progress",
            "--run-dir", str(run_dir)]  # fmt: skip
    child = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600  # a bound on a broken test: minutes under load
        actor = None
        while actor is None and time.monotonic() < deadline:  # iteration 1's actor
            time.sleep(0.2)
            # A fork shares the run's command line; a passing helper (a shell command a
            # library runs) does not, and may be gone by the time it would be killed.
            actor = next((pid for pid in _children(child.pid)
                          if _cmdline(pid) == _cmdline(child.pid)), None)  # fmt: skip
        assert actor is not None, "no actor process appeared"
        time.sleep(1.0)
        os.kill(actor, signal.SIGKILL)
        _, err = child.communicate(timeout=600)
    finally:
        if child.poll() is None:
            child.kill()
    lines = [line for line in err.splitlines() if line.startswith("qzoo: ")]
    assert child.returncode == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert "ended with signal SIGKILL: killed, e.g. for memory" in lines[0], err
    assert "checkpoint (iteration 0) is intact; the same command resumes" in lines[0], err


def test_the_actor_reports_in_json_the_stream_state_and_counts_the_learner_restores():
    """Its result crosses as JSON (nothing to unpickle): the stream's torch state comes
    back byte for byte, and counts stay integers (results.csv prints 12, not 12.0)."""
    trainer = Trainer(make_config("dqn", "CartPole-v1", "gym", CARTPOLE))
    before = trainer.streams.actor.state_dict()["torch"].clone()
    rows = [trainer.run_iteration() for _ in range(2)]
    assert isinstance(rows[1]["train_num_episodes"], int) and rows[1]["train_num_episodes"] > 0
    state = trainer.streams.actor.state_dict()
    assert state["torch"].dtype == torch.uint8 and state["torch"].numel() > 1000
    # The process drew from the stream while acting, and its state came back: the
    # learner's copy is no longer the one it started with.
    assert not torch.equal(state["torch"], before)
    draw = torch.rand(3, generator=trainer.streams.actor.torch)
    trainer.streams.actor.load_state_dict(state)
    assert torch.equal(torch.rand(3, generator=trainer.streams.actor.torch), draw)


def test_an_actor_started_from_the_forkserver_acts_as_a_forked_one(monkeypatch):
    """A GPU learner's actor is started from the forkserver (a fork cannot use CUDA),
    built from a pickled spec over the same shared memory: here on the CPU. It is a
    clean process: the learner's patched actor policy, which a fork would inherit, is
    not its. Every row arrives, the ratio holds and its random stream comes back."""
    monkeypatch.setattr(process, "start_context", lambda device: _forkserver())
    trainer = Trainer(make_config("dqn", "CartPole-v1", "gym", CARTPOLE))
    monkeypatch.setattr(process_channels.ProcessPolicy, "__call__", lambda *a, **k: os._exit(7))
    before = trainer.streams.actor.state_dict()["numpy"]
    rows = [trainer.run_iteration() for _ in range(3)]
    assert trainer.updates.transitions_collected == trainer.frame_t // trainer.config.action_repeats
    assert trainer.frame_t >= 2 * CARTPOLE["train_frames"]
    ended = sum(r["train_num_episodes"] for r in rows)
    assert abs(trainer.replay.num_adds - trainer.frame_t - ended) <= 2
    assert trainer.streams.actor.state_dict()["numpy"] != before
    per_frame = trainer.updates.schedule.updates_per_frame
    learnable = trainer.frame_t - trainer.config.min_replay_size * trainer.config.action_repeats
    done = sum(r["train_num_updates"] for r in rows)
    assert math.floor(learnable * per_frame) - 2 <= done <= learnable * per_frame * 1.05 + 2
    # The actor loaded the weights published at the last phase's start.
    assert trainer.driver.weights.taken.value >= 2
    assert multiprocessing.active_children() == []


def _forkserver():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([process.__name__])
    return ctx


class _Event:
    def __init__(self):
        self.done = False

    def query(self):
        return self.done


class _Staging:
    """process_channels._GpuStaging's interface on CPU tensors, its events set by hand."""

    stream = None

    def __init__(self, values):
        self.values, self.snapshot, self.taken = [v.clone() for v in values], None, 0

    def take(self, values):
        for mine, value in zip(self.values, values, strict=True):
            mine.copy_(value)
        self.snapshot, self.taken = _Event(), self.taken + 1

    def finished(self):
        self.snapshot = None
        return self.values


def test_a_gpu_learners_weights_reach_the_host_at_the_actors_pace_without_waiting():
    """A GPU learner's publish snapshots the weights (queued on its stream), copies a
    finished snapshot to the host at a later publish (never waiting for an unfinished
    one), and takes the next snapshot only once the actor loaded the last; at a phase
    start (wait) they are whole on return."""
    online, _, weights, policy = published()
    weights._gpu = staging = _Staging([v for _, v in weights._pairs])
    step = weights.sequence.value  # 2: the CPU write of published()
    policy.seen = weights.read_into(policy, -1)
    assert weights.taken.value == step
    weights.write()  # the actor has the last: a snapshot is taken, nothing copied yet
    assert staging.taken == 1 and weights.sequence.value == step
    snapshot = {k: v.clone() for k, v in online.state_dict().items()}
    with torch.no_grad():
        for p in online.parameters():
            p.add_(1.0)  # a later update: the snapshot holds the one before it
    weights.write()  # the snapshot is not finished: no copy, no new snapshot
    assert staging.taken == 1 and weights.sequence.value == step
    staging.snapshot.done = True
    weights.write()  # copied, whole; the actor has not taken it: no new snapshot
    assert weights.sequence.value == step + 2 and staging.taken == 1
    assert all(torch.equal(v, snapshot[k]) for k, v in weights.tensors.items())
    weights.write()
    assert staging.taken == 1
    assert weights.read_into(policy, policy.seen) == step + 2 == weights.taken.value
    weights.write()  # taken: the next snapshot
    assert staging.taken == 2
    staging.snapshot.done = True
    weights.advance()  # between publishes: the finished snapshot is copied, no new one
    assert weights.sequence.value == step + 4 and staging.taken == 2
    weights.taken.value = weights.sequence.value  # the actor took it
    weights.write()
    assert staging.taken == 3
    weights.write(wait=True)  # the unfinished snapshot, then a fresh one, both copied
    assert weights.sequence.value == step + 8 and staging.snapshot is None
    assert staging.taken == 4
    assert all(torch.equal(v, online.state_dict()[k]) for k, v in weights.tensors.items())
