"""The processes that act: a training actor per Ray actor (Ape-X's actors) and one
evaluator. Plain classes, made Ray actors by the driver (`ray.remote(ActorWorker)`), so
that this module imports without Ray.

An `ActorWorker` runs qzoo's `Actor` (acting/actor.py) over `--envs-per-actor`
environments with fixed Ape-X epsilons, on a CPU copy of the learner's network,
refreshed when the learner has published newer weights. It steps `CHUNK_STEPS` times
per `collect` and returns the chunk of rows (for its replay shard) and, for
prioritized agents, the initial priorities Ape-X computes on the actor: |TD error| of
each transition under the actor's copy of the network (which stands for both the
online and the target network: Horgan et al. 2018 compute them with the actor's local
copy).
"""

import dataclasses
import os

import numpy as np
import torch

from qzoo.acting.actor import Actor
from qzoo.acting.exploration import apex_epsilons, uses_epsilon
from qzoo.acting.from_config import acting_of, in_process
from qzoo.acting.policy import Policy
from qzoo.distributed.shards import ROW_FIELDS
from qzoo.learning.from_config import make_objective
from qzoo.networks.network import make_network
from qzoo.replay.batch import Row
from qzoo.replay.frames import FrameStorage, observation_shape
from qzoo.streams import PARTS, Stream, Streams

# Rows an actor steps before sending them (Ape-X's local buffer of 50 transitions,
# Horgan et al. 2018, appendix: "the actors ... send ... every 50 steps").
CHUNK_STEPS = 50


def ray_epsilons(config):
    """Ape-X's fixed epsilons over every environment of every actor
    (acting/exploration.py), or zeros for noisy-net agents that do not act
    epsilon-greedily."""
    n = config.actors * config.envs_per_actor
    if not uses_epsilon(config):
        return np.zeros(n)
    # --apex-epsilon / --apex-alpha (0: Ape-X's 0.4; alpha defaults to its 7).
    return apex_epsilons(n, config.apex_epsilon or 0.4, config.apex_alpha)


def to_numpy(state_dict):
    """A CPU state dict as NumPy arrays: Ray's object store shares them without a copy
    between the processes of a machine."""
    return {k: v.numpy() for k, v in state_dict.items()}


def from_numpy(arrays):
    """Back to tensors (copies: arrays from the object store are read-only)."""
    return {k: torch.from_numpy(np.array(v)) for k, v in arrays.items()}


def actor_stream(seed, index, restart=0):
    """Actor `index`'s random stream: child `index` of the run's actor stream
    (qzoo/streams.py), so that actor i acts the same in every run of a seed; a
    restarted actor (`restart` not 0) gets another one, not a replay of the episodes
    its first life played."""
    child = np.random.SeedSequence(seed).spawn(len(PARTS))[PARTS.index("actor")]
    sequence = child.spawn(index + 1)[index]
    if restart:
        sequence = np.random.SeedSequence([seed, index, restart])
    return Stream(sequence, "cpu")


def _was_restarted():
    import ray

    return ray.get_runtime_context().was_current_actor_reconstructed


class ActorWorker:
    """One Ape-X actor (see the module docstring)."""

    def __init__(self, config, info, index, epsilons):
        torch.set_num_threads(1)
        self.config = config = dataclasses.replace(config, num_envs=config.envs_per_actor)
        restart = os.getpid() if _was_restarted() else 0
        shape = observation_shape(info.frame_shape, config.frame_stack)
        self.policy = self.make_policy(make_network(config, info, shape))
        epsilons = np.asarray(epsilons, np.float32)
        self.stream = actor_stream(config.seed, index, restart)
        self.actor = Actor(acting_of(config), info, self.policy, self.stream, lambda _: epsilons,
                           in_process(config))  # fmt: skip
        self.actor.start()
        self.version = -1  # of the weights held: none yet
        self.setup_priorities(info)

    def make_policy(self, network):
        """The policy acting with the actor's copy of the network (a hook: R2D1's actor,
        recurrent.py, carries recurrent states)."""
        config = self.config
        deep = config.head_mixing if config.deep_exploration else None  # as run/factory.py
        return Policy(network, config.tau_samples_policy, deep)

    def setup_priorities(self, info):
        """For prioritized agents, what `_priorities` needs: the objective, and a local
        copy of the rows whose priorities the next chunk can give."""
        config = self.config
        self.objective = self.local = None
        if config.prioritized:
            self.objective = make_objective(config)
            # The rows whose priorities the next chunk can give: the chunk, the n rows
            # before it whose n-step returns it completes, and their stacks' history.
            rows = CHUNK_STEPS + config.n_steps + config.frame_stack + 1
            self.local = FrameStorage(
                rows * config.num_envs, config.num_envs, info.frame_shape, info.frame_dtype,
                info.num_actions, config.frame_stack, config.n_steps, config.discount,
            )  # fmt: skip

    def collect(self, version, weights):
        """Steps CHUNK_STEPS times with the weights of `version` (`weights`: [ObjectRef],
        fetched only when newer than those held). Returns ((chunk, priorities), stats):
        a `Row` of [CHUNK_STEPS, M] arrays, the initial priorities of the transitions
        starting at the chunk's rows shifted n rows back (`ReplayShard.add`), or None,
        and {frames, steps, returns of the episodes ended, state_value, pid}."""
        if version != self.version:
            import ray

            self.policy.load_weights(from_numpy(ray.get(weights[0])))
            self.version = version
        actor, frames, rows = self.actor, 0, []
        steps_before = actor.agent_steps
        for _ in range(CHUNK_STEPS):
            row, new_frames = actor.step()
            rows.append(self.keep(row))
            frames += new_frames
        returns, actor.episodes.completed = actor.episodes.completed, []
        steps = actor.agent_steps - steps_before
        stats = {"frames": frames, "steps": steps, "returns": returns,
                 "state_value": actor.state_value.value, "pid": os.getpid()}  # fmt: skip
        return self.send(rows), stats

    def keep(self, row):
        """The row as the chunk keeps it: copies (the env may reuse its buffers) of the
        feed-forward fields, also written to the local copy for priorities."""
        row = Row(*(np.array(x) for x in row[:ROW_FIELDS]))
        if self.local is not None:
            self.local.add(row)
        return row

    def send(self, rows):
        """What goes to the replay shard: (the chunk, its initial priorities or None)."""
        return stack_rows(rows), self._priorities()

    @torch.no_grad()
    def _priorities(self):
        """[P, M] |TD error| of the transitions starting at the P <= CHUNK_STEPS rows that
        end n rows before the newest (their n-step returns are now stored)."""
        if self.objective is None:
            return None
        local, n = self.local, self.config.n_steps
        newest = local.num_adds  # rows written; counters first..last-1 are complete
        first, last = max(0, newest - CHUNK_STEPS - n), newest - n
        if last <= first:
            return np.zeros((0, local.num_envs), np.float32)
        t = np.repeat(np.arange(first, last) % local.num_rows, local.num_envs)
        b = np.tile(np.arange(local.num_envs), last - first)
        batch = local.gather(t, b).to("cpu")
        network = self.policy.network
        out = self.objective(network, network, batch, self.stream.torch)
        return out.priorities.float().numpy().reshape(last - first, local.num_envs)


def stack_rows(rows):
    """A chunk: one `Row` of [L, M] arrays from L rows' feed-forward fields."""
    return Row(*(np.stack(column) for column in zip(*(r[:ROW_FIELDS] for r in rows))))


class EvalWorker:
    """The evaluator: qzoo's evaluation `Actor` with the run's evaluation stream and
    epsilon, on the weights it is given, one phase per call."""

    def __init__(self, config, info):
        torch.set_num_threads(1)
        shape = observation_shape(info.frame_shape, config.frame_stack)
        self.config = config
        self.policy = self.make_policy(make_network(config, info, shape))
        stream = Streams(config.seed, "cpu").evaluation
        epsilon = config.eval_exploration_epsilon
        self.actor = Actor(acting_of(config), info, self.policy, stream, lambda _: epsilon,
                           in_process(config), eval_mode=True)  # fmt: skip

    def make_policy(self, network):
        """The evaluation policy (the heads' mean; a hook for R2D1's, recurrent.py)."""
        return Policy(network, self.config.tau_samples_policy)

    def evaluate(self, weights, num_frames):
        """Acts for `num_frames` frames with `weights`; the phase's statistics."""
        self.policy.load_weights(from_numpy(weights))
        actor = self.actor
        actor.start()
        try:
            while actor.frames < num_frames:
                actor.step()
            if self.config.eval_finish_episodes:  # as acting/serial.py's run_phase
                actor.finish_episodes()
                while not actor.episodes.all_finished():
                    actor.step()
        finally:
            stats = actor.stop()
        return stats
