"""Exploration: epsilon-greedy actions, and each environment's training epsilon.

Every environment decays linearly from --exploration-epsilon-begin-value to its own
final value over DQN Zoo's schedule (schedule.LinearSchedule). The finals are:
  - one value for all (DQN Zoo; the default),
  - rlpyt's `make_vec_eps` with --eps-final-min: log-spaced from eps_final_min to
    --exploration-epsilon-end-value over every environment (log_spaced_epsilons),
  - Ape-X's with --apex-epsilon e and --apex-alpha a: e ** (1 + a i / (N - 1))
    (apex_epsilons), as the ends of the same decay, so that the replay starts from the
    same random play as every other agent's (Ape-X holds them from the start:
    --exploration-epsilon-decay-frame-fraction 0 does that).
Evaluation keeps one scalar epsilon (rlpyt and Ape-X alike). Environments are ranked
0..N-1 globally, whatever worker steps them, so a run's epsilons do not depend on
--acting or --actor-workers. rlpyt's decorrelated start (random actions) is here too."""

import sys

import numpy as np
import torch

from qzoo.acting.schedule import LinearSchedule


def epsilon_greedy(q_values, epsilon, generator):
    """Epsilon-greedy over rows of `q_values` [N, A] on their device; ties broken
    uniformly at random.

    With probability epsilon[i] row i's action is uniform over all actions (which may
    be the greedy one), as in distrax.EpsilonGreedy. `epsilon` is a tensor [N] (one
    per environment) on the same device; `generator` is the caller's random stream.
    NumPy `q_values` and `epsilon` (a CPU policy's) take the host path below, with the
    same draws and actions.
    """
    if isinstance(q_values, np.ndarray):
        return _epsilon_greedy_host(q_values, epsilon, generator)
    n, num_actions = q_values.shape
    device = q_values.device
    is_max = q_values == q_values.max(dim=1, keepdim=True).values
    # Uniform among the maxima: argmax of random keys in [0, 1) lifted by 1 at maxima.
    keys = torch.rand(n, num_actions, device=device, generator=generator) + is_max
    greedy = keys.argmax(dim=1)
    explore = torch.rand(n, device=device, generator=generator) < epsilon
    uniform = torch.randint(num_actions, (n,), device=device, generator=generator)
    return torch.where(explore, uniform, greedy)


def _epsilon_greedy_host(q_values, epsilon, generator):
    """`epsilon_greedy` for NumPy `q_values` [N, A] and `epsilon` [N] with a CPU
    generator: the same three draws, in the same order and from the same stream, and
    the same float32 arithmetic, so the same actions (numpy int64) as the tensor path.
    A CPU policy acting in one environment spends its time in dispatch, not arithmetic,
    and a small NumPy operation dispatches far faster than a PyTorch one."""
    n, num_actions = q_values.shape
    is_max = q_values == q_values.max(axis=1, keepdims=True)
    keys = torch.rand(n, num_actions, generator=generator).numpy() + is_max
    explore = torch.rand(n, generator=generator).numpy() < np.asarray(epsilon, np.float32)
    uniform = torch.randint(num_actions, (n,), generator=generator).numpy()
    return np.where(explore, uniform, keys.argmax(axis=1))


def log_spaced_epsilons(eps_final_min, eps_final, num_envs):
    """rlpyt's vector of final epsilons (`make_vec_eps`): environment i of G gets
    eps_final_min * (eps_final / eps_final_min) ** (i / (G - 1)), log-spaced over every
    environment of every actor (global ranks). As `torch.logspace` does, a single
    environment (G = 1) gets `eps_final_min`, not `eps_final`. R2D1's example, min
    0.0005 and final 0.1 over 4 environments: 0.0005, 0.0029, 0.0171, 0.1.
    """
    if num_envs == 1:
        return np.array([eps_final_min], np.float64)
    i = np.arange(num_envs, dtype=np.float64)
    return eps_final_min * (eps_final / eps_final_min) ** (i / (num_envs - 1))


def apex_epsilons(num_actors, epsilon=0.4, alpha=7.0):
    """Ape-X's fixed per-actor epsilons (Horgan et al. 2018, "Distributed Prioritized
    Experience Replay", sec. 4.1): eps_i = epsilon ** (1 + alpha * i / (N - 1)) for
    i = 0..N-1, so actor 0 explores with 0.4 and actor N-1 with 0.4 ** 8 ~ 0.00066.
    One actor (N = 1) gets `epsilon` (the paper's formula divides by N - 1 = 0).
    """
    if num_actors == 1:
        return np.array([epsilon], np.float64)
    i = np.arange(num_actors, dtype=np.float64)
    return epsilon ** (1.0 + alpha * i / (num_actors - 1))


def uses_epsilon(config):
    """False for noisy-net agents without epsilon-greedy (Rainbow)."""
    return not (
        config.noisy
        and config.exploration_epsilon_begin_value == 0
        and config.exploration_epsilon_end_value == 0
    )


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
