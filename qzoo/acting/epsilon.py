"""Training epsilons per environment: rlpyt's log-spaced finals and Ape-X's, and
rlpyt's decorrelated start.

Every environment decays linearly from --exploration-epsilon-begin-value to its own
final value over DQN Zoo's schedule (explore.LinearSchedule). The finals are:
  - one value for all (DQN Zoo; the default),
  - rlpyt's `make_vec_eps` with --eps-final-min: log-spaced from eps_final_min to
    --exploration-epsilon-end-value over every environment (explore.log_spaced_epsilons),
  - Ape-X's with --apex-epsilon e and --apex-alpha a: e ** (1 + a i / (N - 1))
    (explore.apex_epsilons). Ape-X's actors hold them from the start; here they are the
    ends of the same decay (a deliberate difference: the replay then starts from the
    same random play as every other agent; --exploration-epsilon-decay-frame-fraction
    0 gives Ape-X's constant values).
Evaluation keeps one scalar epsilon (rlpyt and Ape-X alike).

Environments are ranked 0..N-1 globally, whatever worker steps them, so a run's
epsilons do not depend on --acting or --actor-workers. (rlpyt's alternating sampler
gives pairs of environments one value; qzoo does not: every environment has its own.)
"""

import sys

import numpy as np

from qzoo.acting.explore import LinearSchedule, apex_epsilons, log_spaced_epsilons


def final_epsilons(config):
    """The final training epsilon of each of the `config.num_envs` environments, or
    None when all share --exploration-epsilon-end-value."""
    n = config.num_envs
    if config.apex_epsilon > 0:
        return apex_epsilons(n, config.apex_epsilon, config.apex_alpha)
    if config.eps_final_min > 0 and config.eps_final_min != config.exploration_epsilon_end_value:
        return log_spaced_epsilons(config.eps_final_min, config.exploration_epsilon_end_value, n)
    return None  # rlpyt too: eps_final_min equal to eps_final means a scalar


def training_epsilon(config, schedule):
    """frame_t -> the training epsilon: `schedule` itself (a scalar for every
    environment, DQN Zoo) or a schedule of the same shape with a vector of finals."""
    finals = final_epsilons(config)
    if finals is None:
        return schedule
    shown = ", ".join(f"{e:.4g}" for e in finals)
    which = f"the {len(finals)} environments" if len(finals) > 1 else "the environment"
    print(f"qzoo: note: final epsilons of {which}: {shown}", file=sys.stderr)
    return LinearSchedule(schedule.begin_t, schedule.decay_steps, schedule.begin_value, finals)


def decorrelate(env, step, num_actions, max_steps, rng):
    """rlpyt's decorrelated start (B7): environment i takes 1 + floor(U_i x max_steps)
    random actions, not stored and not counted as training frames. A vector
    environment steps all its environments together, so one that has taken its random
    actions repeats action 0 (a no-op in Atari's minimal sets) until the slowest is done
    (a documented difference: rlpyt steps each environment alone). Returns the last
    EnvStep, marked as the first of an episode: the phase's first observation."""
    n = env.num_envs
    counts = 1 + np.floor(rng.random(n) * max_steps).astype(np.int64)
    for k in range(int(counts.max())):
        step = env.step(np.where(k < counts, rng.integers(num_actions, size=n), 0))
    while step.last.any():  # let ended episodes restart (next-step autoreset)
        step = env.step(np.zeros(n, np.int64))
    # The stored trajectory starts here: replay must neither stack these frames onto
    # the previous phase's nor store a transition into them.
    no = np.zeros(n, bool)
    return step._replace(first=np.ones(n, bool), reward=np.zeros(n, np.float32), last=no,
                         terminated=no, life_loss=no, real_steps=0)  # fmt: skip
