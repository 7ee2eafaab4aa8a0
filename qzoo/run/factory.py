"""One factory for every run: the parts a config asks for, wired together. `qzoo train`,
`qzoo bench` and the tools all build their runs here (through run/trainer.py's Trainer).

  streams   one root seed, a random stream per part (qzoo/streams.py)
  learner   networks, optimizer, objective (learning/learner.py)
  replay    frames on the host, compressed, or on a device (replay/); none offline
            (the driver opens the dataset) or on Ray (the shards hold it)
  updates   the update bookkeeping drivers are given (updates.py)
  driver    how a phase acts or trains: serial, parallel, alternating, async (thread
            or process), ale-py batches (acting/), offline (offline/), Ray (distributed/)
"""

import math
from dataclasses import dataclass
from typing import Any

import torch

from qzoo import envs
from qzoo.acting import recurrent_policy
from qzoo.acting.driver import Driver, Parts
from qzoo.acting.exploration import training_epsilon
from qzoo.acting.policy import Policy
from qzoo.acting.ratio import UpdateSchedule, updates_per_frame
from qzoo.acting.schedule import LinearSchedule, importance_sampling_schedule
from qzoo.learning.from_config import make_learner
from qzoo.learning.learner import Learner
from qzoo.replay import make_replay
from qzoo.replay.frames import observation_shape
from qzoo.run import allocator
from qzoo.run.checks import check_peak_memory, resolve_device
from qzoo.run.updates import Updates
from qzoo.streams import Streams


@dataclass
class Run:
    """What `build` makes (see the module docstring); `updates` is None on Ray."""

    config: Any
    info: Any
    obs_shape: tuple
    streams: Streams
    learner: Learner
    updates: Updates | None
    driver: Driver


def build(config, info=None) -> Run:
    """The parts of a run of `config` (`info`: the environment's description, made here
    when not given)."""
    info = info or envs.describe(config)
    if config.ray:  # connected first: Ray's start reports its own errors
        from qzoo.distributed.cluster import connect

        connect(config)
    else:
        check_peak_memory(config, info)
        allocator.keep_freed_memory()  # also for runs made without the CLI
    device = resolve_device(config.device)
    replay_device = {"replay": "cpu" if config.replay_device == "host" else config.replay_device}
    streams = Streams(config.seed, device, replay_device)
    torch.manual_seed(config.seed)  # network initialization only
    obs_shape = observation_shape(info.frame_shape, config.frame_stack)
    learner = make_learner(config, info, obs_shape, device, streams.learner.torch)
    if config.ray and not config.offline:
        from qzoo.distributed.driver import RayDriver

        driver = RayDriver(config, info, streams, learner)
        return Run(config, info, obs_shape, streams, learner, None, driver)
    if config.ray:  # the local offline driver over a dataset sharded on Ray
        from qzoo.distributed.offline import OfflineRayDriver

        updates = make_updates(config, learner, None)
        parts = Parts(config, info, streams, learner, updates, lambda _: math.nan)
        evaluation = Policy(learner.online, config.tau_samples_policy)
        driver = OfflineRayDriver(parts, evaluation, evaluation)
        return Run(config, info, obs_shape, streams, learner, updates, driver)
    if config.rollout_steps:  # PQN: rollouts, no replay (acting/pqn.py)
        from qzoo.acting.pqn import PQNDriver

        epsilon = LinearSchedule(0, config.exploration_decay_frames,
                                 config.exploration_epsilon_begin_value,
                                 config.exploration_epsilon_end_value)  # fmt: skip
        parts = Parts(config, info, streams, learner, None, training_epsilon(config, epsilon))
        evaluation = Policy(learner.online, config.tau_samples_policy, noise=config.eval_noise)
        return Run(config, info, obs_shape, streams, learner, None, PQNDriver(parts, evaluation))
    updates = _updates(config, info, streams, learner)
    epsilon = LinearSchedule(
        config.exploration_begin_frame, config.exploration_decay_frames,
        config.exploration_epsilon_begin_value, config.exploration_epsilon_end_value,
    )  # fmt: skip
    parts = Parts(config, info, streams, learner, updates, training_epsilon(config, epsilon))
    driver = make_driver(parts, *_policies(config, learner))
    return Run(config, info, obs_shape, streams, learner, updates, driver)


def _updates(config, info, streams, learner):
    """The replay (none offline: the driver opens the dataset), the replay log, and the
    way updates are made: captured whole (--capture), with the next batch drawn ahead
    (uniform host replay, compressed or feeding a GPU: exact, replay/ahead.py), or
    plainly."""
    replay = replay_log = None
    if not config.offline:
        replay = make_replay(config, info, streams.replay.numpy, streams.replay.torch)
    if config.log_replay:
        from qzoo.offline.writer import open_replay_log

        replay_log = open_replay_log(config, info)
    if config.capture:
        from qzoo.learning.captured import CapturedUpdate
        from qzoo.run.fast_updates import CapturedUpdates

        captured = CapturedUpdate(learner, replay, config.batch_size,
                                  updates=config.capture_updates)  # fmt: skip
        return make_updates(config, learner, replay, replay_log, CapturedUpdates,
                            captured=captured)  # fmt: skip
    host = config.replay_device == "host" and not config.prioritized and not config.offline
    if host and (config.replay_compression != "none" or learner.device.type == "cuda"):
        from qzoo.run.fast_updates import AheadUpdates

        return make_updates(config, learner, replay, replay_log, AheadUpdates)
    return make_updates(config, learner, replay, replay_log)


def make_updates(config, learner, replay, replay_log=None, kind=Updates, **fast):
    """The update bookkeeping of `config` (`kind`: Updates or one of its fast paths,
    run/fast_updates.py, with their own arguments `fast`)."""
    return kind(
        learner, replay, UpdateSchedule(updates_per_frame(config),
                                        config.target_network_update_period),
        batch_size=config.batch_size,
        min_replay_size=0 if config.offline else config.min_replay_size,
        action_repeats=config.action_repeats, target_update_tau=config.target_update_tau,
        target_count_updates=config.target_count_updates,
        importance_sampling=importance_sampling_schedule(config) if config.prioritized else None,
        checkpoint_replay=config.checkpoint_replay, replay_log=replay_log, **fast,
    )  # fmt: skip


def _policies(config, learner):
    """The training and the evaluation policy: the learner's online network, by
    reference (R2D1: each with its own recurrent states)."""
    if config.recurrent:
        return recurrent_policy.pair(learner.online, config.num_envs)
    deep = config.head_mixing if config.deep_exploration else None
    policy = Policy(learner.online, config.tau_samples_policy, deep)
    evaluation = Policy(learner.online, config.tau_samples_policy,  # heads' mean
                        noise=config.eval_noise)  # fmt: skip
    return policy, evaluation


def make_driver(parts, policy, evaluation):
    """The driver the config names (--offline, --env-batch-size, --acting)."""
    config = parts.config
    if config.offline:
        from qzoo.offline.driver import OfflineDriver

        return OfflineDriver(parts, policy, evaluation)
    if config.acting == "async" and config.actor_process:  # acting on all or ready envs
        from qzoo.acting.process import ProcessDriver

        return ProcessDriver(parts, policy, evaluation)
    if config.env_batch_size:  # ale-py's asynchronous mode
        from qzoo.acting.batches import BatchDriver

        return BatchDriver(parts, policy, evaluation)
    from qzoo.acting.from_config import lockstep_parts, serial_parts
    from qzoo.acting.serial import SerialDriver

    if config.acting == "async" and config.deterministic:  # async's schedule, one thread
        return SerialDriver(**lockstep_parts(parts, policy, evaluation))
    if config.acting == "async":
        from qzoo.acting.asynchronous import AsyncDriver

        return AsyncDriver(parts, policy, evaluation)
    if config.acting == "alternating":
        from qzoo.acting.alternating import AlternatingActor

        return SerialDriver(**serial_parts(parts, policy, evaluation, AlternatingActor))
    return SerialDriver(**serial_parts(parts, policy, evaluation))  # serial, or parallel
