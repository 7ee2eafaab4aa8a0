"""The acting side of a run from its config: how its actors act, the environments they
step (in this process, in worker processes, or ale-py's ready batches), the training
actor and the evaluator. The one module of acting/ that the serial driver's parts are
made by: the actor and the serial driver take typed arguments."""

import copy
import functools
from typing import Any

from qzoo import envs
from qzoo.acting.actor import Acting, Actor, MakeEnv
from qzoo.acting.lockstep import Lockstep
from qzoo.acting.policy import Policy


def acting_of(config: Any) -> Acting:
    """The Acting of `config`."""
    return Acting(
        num_envs=config.num_envs, frame_stack=config.frame_stack,
        action_repeats=config.action_repeats, max_abs_reward=config.max_abs_reward,
        episodic_lives=config.episodic_lives,
        max_decorrelation_steps=config.max_decorrelation_steps,
    )  # fmt: skip


def env_maker(config: Any, info: Any, batches: bool = False) -> MakeEnv:
    """make_env(num_envs, eval_mode) for `config`'s environment: in --actor-workers
    processes (parallel, alternating), as ale-py's ready batches (`batches`:
    --env-batch-size), or in this process. Every environment is seeded at reset."""
    if batches:
        from qzoo.envs.atari_batches import make_batches

        return lambda n, eval_mode: make_batches(config, n, config.seed, eval_mode=eval_mode)
    if config.acting in ("parallel", "alternating") or config.actor_workers > 1:
        from qzoo.acting.workers import ProcessVectorEnv

        workers = functools.partial(ProcessVectorEnv, info=info, workers=config.actor_workers)
        return lambda n, eval_mode: workers(config, n, config.seed, eval_mode=eval_mode)
    return in_process(config)


def in_process(config: Any) -> MakeEnv:
    """make_env(num_envs, eval_mode) stepping `config`'s environment in this process."""
    return lambda n, eval_mode: envs.make(config, n, config.seed, eval_mode=eval_mode)


def serial_parts(parts: Any, policy: Any, evaluation: Any, actor_class: type = Actor,
                 batches: bool = False) -> dict:  # fmt: skip
    """The keyword arguments of SerialDriver (serial.py) for the run's `parts`: the
    training actor (an `actor_class`) acting with `policy`, the evaluator with
    `evaluation`, and the evaluation's settings. `batches`: the training actor steps
    ale-py's ready batches (--env-batch-size)."""
    config, info, streams = parts.config, parts.info, parts.streams
    acting = acting_of(config)
    actor = actor_class(acting, info, policy, streams.actor, parts.train_epsilon,
                        env_maker(config, info, batches))  # fmt: skip
    evaluator = Actor(acting, info, evaluation, streams.evaluation,
                      lambda _: config.eval_exploration_epsilon, env_maker(config, info),
                      eval_mode=True, episodes=config.eval_episodes)  # fmt: skip
    return {"updates": parts.updates, "actor": actor, "evaluator": evaluator,
            "train_epsilon": parts.train_epsilon, "eval_episodes": config.eval_episodes,
            "eval_finish_episodes": config.eval_finish_episodes}  # fmt: skip


def lockstep_parts(parts: Any, policy: Any, evaluation: Any) -> dict:
    """SerialDriver's arguments for --acting async --deterministic (lockstep.py): the
    training actor acts as `policy` does, on a copy of the online network that the
    learner republishes every --publish-period updates."""
    config, learner = parts.config, parts.learner
    network = copy.deepcopy(learner.online).requires_grad_(False)
    actor_policy = Policy(network, **policy.settings())
    lockstep = Lockstep(learner, actor_policy, config.publish_period,
                        config.replay_ratio_tolerance, config.target_update_tau)  # fmt: skip
    return {**serial_parts(parts, actor_policy, evaluation), "lockstep": lockstep}


def evaluation_policy(network: Any, config, num_envs: int):
    """The policy that evaluates `network` of a run of `config` over `num_envs`
    environments: R2D1's recurrent one, else epsilon-greedy over the heads' mean with
    noisy layers as --eval-noise says (the tools and qzoo.load's agents act with it)."""
    if config.recurrent:
        from qzoo.acting.recurrent_policy import RecurrentPolicy

        return RecurrentPolicy(network, num_envs)
    return Policy(network, config.tau_samples_policy, noise=config.eval_noise)
