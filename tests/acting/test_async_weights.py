"""How --acting async gets the learner's weights to its actor (`_LockedPolicy`), and
--pin-threads' cores (qzoo/threads.py)."""

import os
import threading

import numpy as np
import pytest
import torch

from qzoo import envs
from qzoo.acting import pinning
from qzoo.acting.asynchronous import AsyncDriver, _LockedPolicy
from qzoo.acting.policy import Policy
from qzoo.configuration import make_config
from qzoo.networks.network import make_network
from qzoo.run import threads

OBS, EPS = np.ones((1, 4), np.float32), np.zeros(1)


def networks():
    config = make_config("dqn", "CartPole-v1", "gym", {})
    online = make_network(config, envs.describe(config), (4,))
    actor = make_network(config, envs.describe(config), (4,)).requires_grad_(False)
    return online, actor


def act(policy):
    return policy(OBS, EPS, torch.Generator().manual_seed(0))


def same(a, b):
    return all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())


def step(online, by=1.0):
    """What an optimizer step does to the weights: writes them in place."""
    with torch.no_grad():
        for p in online.parameters():
            p.add_(by)


def test_staged_the_actor_takes_the_published_weights_at_its_next_action_and_only_those():
    online, actor = networks()
    policy = _LockedPolicy(actor, {"tau_samples": 1})
    policy.publish(online)
    published = {k: v.clone() for k, v in online.state_dict().items()}
    step(online)  # the learner's next update, not published
    # Not taken yet: the actor's network changes only in its own thread, at an action.
    assert any(not torch.equal(v, published[k]) for k, v in actor.state_dict().items())
    act(policy)
    for name, value in actor.state_dict().items():
        assert torch.equal(value, published[name]), name


class _AskedLock:
    """A lock that tells (`asked`) when a thread has asked for it."""

    def __init__(self):
        self.lock, self.asked = threading.Lock(), threading.Event()

    def acquire(self):
        self.asked.set()
        return self.lock.acquire()

    def release(self):
        self.lock.release()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def test_pulled_the_actor_copies_the_newest_weights_and_never_during_a_step():
    online, actor = networks()
    step_lock = _AskedLock()
    policy = _LockedPolicy(actor, {"tau_samples": 1}, source=(online, step_lock))
    policy.publish(online)  # only a flag: nothing copied in the learner's thread
    assert not same(actor, online)
    step(online)  # a later update than the published one: the actor gets it too
    act(policy)
    assert same(actor, online)
    act(policy)  # nothing published since: nothing copied
    step(online)
    assert not same(actor, online)

    # A publish while the learner is inside an optimizer step (it holds step_lock):
    # the actor's copy waits for the step to end, then takes its result.
    policy.publish(online)
    step_lock.acquire()
    step_lock.asked.clear()  # the learner's own acquire: from here on, the actor's
    step(online, 0.5)  # the first half of a step
    acting = threading.Thread(target=act, args=(policy,))
    acting.start()
    assert step_lock.asked.wait(120)  # the actor asked for the lock (a bound on a broken test)
    assert acting.is_alive() and not same(actor, online)  # waiting, not copying half a step
    step(online, 0.5)
    step_lock.release()
    acting.join(timeout=120)  # a bound on a broken test
    assert not acting.is_alive() and same(actor, online)


@pytest.mark.parametrize("options, pulled", [
    ({"acting": "async"}, True),
    ({"acting": "async", "compile": True}, False),  # the step is inside the graph
])  # fmt: skip
def test_async_pulls_weights_from_an_eager_learner_and_stages_them_otherwise(options, pulled):
    from qzoo.run.trainer import Trainer

    config = make_config("dqn", "CartPole-v1", "gym", {"replay_capacity": 10_000, **options})
    trainer = Trainer(config)
    policy = trainer.driver.actor_policy
    assert isinstance(trainer.driver, AsyncDriver)
    assert (policy._source is not None) == pulled
    if pulled:
        assert policy._source == (trainer.learner.online, trainer.learner.step_lock)


@pytest.mark.skipif(pinning.pinned_cores() is None, reason="one usable core, or no affinity")
def test_pinned_runs_the_calling_thread_on_the_cores_given_and_restores_its_own():
    before = os.sched_getaffinity(0)
    learner_cores, other_cores = pinning.pinned_cores()
    assert learner_cores == {min(before)} and other_cores == before - learner_cores
    seen = {}

    def other():
        with pinning.pinned(other_cores):
            seen["other"] = os.sched_getaffinity(0)

    with pinning.pinned(learner_cores):
        assert os.sched_getaffinity(0) == learner_cores
        thread = threading.Thread(target=other)  # pins itself, not the calling thread
        thread.start()
        thread.join()
        assert os.sched_getaffinity(0) == learner_cores
    assert seen["other"] == other_cores
    assert os.sched_getaffinity(0) == before
    with pinning.pinned(None):
        assert os.sched_getaffinity(0) == before


def test_pin_threads_on_one_usable_core_says_so_and_runs_unpinned(monkeypatch, capsys):
    from qzoo.acting import asynchronous
    from qzoo.run.trainer import Trainer

    monkeypatch.setattr(asynchronous, "pinned_cores", lambda: None)  # as under taskset -c 1
    options = {"acting": "async", "threads": 1, "pin_threads": True, "replay_capacity": 1000,
               "min_replay_capacity_fraction": 0.1, "train_frames": 1000, "eval_frames": 100}  # fmt: skip
    trainer = Trainer(make_config("dqn", "CartPole-v1", "gym", options))
    assert "--pin-threads: this process may run on one core only" in capsys.readouterr().err
    cores = os.sched_getaffinity(0)
    rows = [trainer.run_iteration() for _ in range(2)]  # the first only evaluates
    assert rows[1]["train_num_updates"] > 0
    assert os.sched_getaffinity(0) == cores


def test_a_resume_may_pin_threads_or_not(tmp_path):
    """Pinning changes where threads run, not what the run computes (async runs differ
    run to run anyway), so a resume may add or drop it, as it may change --threads."""
    from qzoo.cli.main import main

    run = ["train", "dqn", "--env", "CartPole-v1", "--acting", "async", "--threads", "1",
           "--train-frames", "600", "--eval-frames", "100", "--replay-capacity", "1000",
           "--min-replay-capacity-fraction", "0.2", "--run-dir", str(tmp_path / "run")]  # fmt: skip
    assert main([*run, "--iterations", "1"]) == 0
    more = ["--accept-changes", "iterations", "--pin-threads"]
    assert main([*run, "--iterations", "2", *more]) == 0
    rows = (tmp_path / "run" / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + 3  # the header, iterations 0 (evaluation only), 1 and 2


@pytest.mark.skipif(pinning.pinned_cores() is None, reason="one usable core, or no affinity")
def test_environment_workers_forked_by_a_pinned_thread_run_on_its_cores():
    """--pin-threads pins --actor-workers processes by forking them from the pinned
    actor thread (Actor.start, each phase): a forked child keeps that thread's cores."""
    from qzoo.acting.workers import ProcessVectorEnv
    from qzoo.envs import describe

    config = make_config("dqn", "CartPole-v1", "gym", {"num_envs": 2, "actor_workers": 2})
    _, other_cores = pinning.pinned_cores()
    seen = {}

    def actor():
        with pinning.pinned(other_cores):
            env = ProcessVectorEnv(config, 2, 0, info=describe(config), workers=2)
        try:
            seen["workers"] = [os.sched_getaffinity(p.pid) for p in env._processes]
        finally:
            env.close()

    thread = threading.Thread(target=actor)
    thread.start()
    thread.join()
    assert seen["workers"] == [other_cores, other_cores]


def test_pin_threads_means_one_pytorch_thread_whatever_the_machine(monkeypatch):
    """Auto threads (--threads 0) would be 4 for Pong on 16 cores; pinned, it is 1."""
    monkeypatch.setattr(threads, "usable_cores", lambda: 16)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    pong = {"acting": "async"}
    assert threads.auto_threads(make_config("dqn", "pong", "atari", pong), "atari", False) == 4
    pinned = make_config("dqn", "pong", "atari", {**pong, "pin_threads": True})
    assert pinned.threads == 0 and threads.auto_threads(pinned, "atari", False) == 1


@pytest.mark.parametrize("agent, options", [
    ("rem", {"deep_exploration": True}),  # each episode on a random mixture of heads
    ("iqn", {"tau_samples_policy": 7}),  # acts on the mean over 7 sampled taus
])  # fmt: skip
@pytest.mark.parametrize("process", [False, True])
def test_async_actors_act_as_the_policy_the_factory_built_on_a_copy_of_the_network(
    agent, options, process, monkeypatch
):
    from qzoo.run import factory
    from qzoo.run.trainer import Trainer

    made = factory._policies

    def noiseless(config, learner):  # a choice that only the factory's policy holds
        policy, evaluation = made(config, learner)
        policy.noise = False
        return policy, evaluation

    monkeypatch.setattr(factory, "_policies", noiseless)

    base = {"replay_capacity": 10_000, "threads": 1, **options}
    serial = Trainer(make_config(agent, "CartPole-v1", "gym", base))
    built = serial.driver.actor.policy  # the factory's policy, acting on the online network
    assert built.network is serial.learner.online
    asynchronous = Trainer(make_config(agent, "CartPole-v1", "gym",
                                       {**base, "acting": "async", "actor_process": process}))  # fmt: skip
    actor = asynchronous.driver.actor.policy
    assert actor.settings() == built.settings() != Policy(built.network, 0).settings()
    assert actor.noise is False
    assert actor.network is not asynchronous.learner.online
    assert type(actor).__name__ == ("ProcessPolicy" if process else "_LockedPolicy")
