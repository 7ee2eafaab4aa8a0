"""R2D1 on Ray: R2D2's distributed layout (Kapturowski et al. 2019, ICLR: Ape-X's
actors and replay with sequences, stored recurrent state and burn-in) on qzoo's parts.
The driver (driver.py) takes these classes for --recurrent (`worker_classes`); the
learner is the local R2D1's (objectives.R2D1SequenceLearning, burn-in included).

- `SequenceActorWorker`: an ActorWorker acting with a recurrent policy, one (h, c) per
  environment, carried from chunk to chunk.
- `SequenceShard`: a ReplayShard whose per-actor replays are R2D1's sequence replay
  (replay/sequences.py).
- Initial priorities: from the Q-values the actor computed while acting, with its own
  network copy and carried state (Ape-X's way, which R2D2 follows), by the local
  R2D1's input priorities (SequenceStorage.input_priorities, rlpyt B3.4), computed in
  the shard as each sequence completes. With --no-input-priorities a sequence enters
  at the largest priority seen, as locally.
- `SequenceEvalWorker`: the evaluator with a recurrent policy."""

from typing import NamedTuple

import numpy as np
import torch

from qzoo.acting.recurrent_policy import RecurrentInfo, RecurrentPolicy
from qzoo.distributed.shards import ROW_FIELDS, ReplayShard
from qzoo.distributed.workers import ActorWorker, EvalWorker, stack_rows
from qzoo.replay.batch import Row, SequenceBatch


def worker_classes(config):
    """(shard, actor, evaluator) classes of a Ray run: R2D1's for --recurrent."""
    if config.recurrent:
        return SequenceShard, SequenceActorWorker, SequenceEvalWorker
    return ReplayShard, ActorWorker, EvalWorker


class SequenceChunk(NamedTuple):
    """What an R2D1 actor sends with a chunk's rows [L, M]: `row0`, the actor's count of
    rows before the chunk; `states` [P, M, 2, H], the (h, c) acted from at the chunk's
    rows j with (row0 + j) mod interval = 0, in order; `q_taken`, `q_max` [L, M]."""

    row0: int
    states: np.ndarray
    q_taken: np.ndarray
    q_max: np.ndarray


def stored_rows(row0, length, interval):
    """The rows j of a chunk of `length` rows starting at actor row `row0` whose state
    replay stores: (row0 + j) mod interval = 0."""
    return np.arange((-row0) % interval, length, interval)


class SequenceActorWorker(ActorWorker):
    """An R2D1 actor: an ActorWorker acting with recurrent_policy.RecurrentPolicy, one
    (h, c) per environment. Its environments run on from chunk to chunk, and so do the
    states: they reset only where an episode starts (RecurrentPolicy.observe). Besides
    the rows, a chunk carries (`SequenceChunk`) the actor's Q-values of every row (of the
    action taken and the greedy one, for input priorities) and the state it acted from at
    the rows where replay stores one: those whose number, counted from the actor's first
    row, is a multiple of --store-state-interval (2 x H floats per environment every
    interval rows, not every row)."""

    def make_policy(self, network):
        return RecurrentPolicy(network, self.config.num_envs)

    def setup_priorities(self, info):
        """No local copy: a sequence's input priority comes from the Q-values sent."""
        self.objective = self.local = None
        self.rows_sent = 0

    def keep(self, row):
        # agent_info's state is a new tensor each step (RecurrentPolicy): kept as is.
        return Row(*(np.array(x) for x in row[:ROW_FIELDS]), row.agent_info)

    def send(self, rows):
        """(the chunk's rows, its SequenceChunk)."""
        row0, interval = self.rows_sent, self.config.store_state_interval
        self.rows_sent += len(rows)
        infos = [row.agent_info for row in rows]
        keep = stored_rows(row0, len(rows), interval)
        state_shape = tuple(infos[0].state.shape)
        states = np.stack([infos[j].state.numpy() for j in keep]) if len(keep) else (
            np.zeros((0,) + state_shape, np.float32))  # fmt: skip
        q_taken = np.stack([info.q_taken for info in infos])
        q_max = np.stack([info.q_max for info in infos])
        return stack_rows(rows), SequenceChunk(row0, states, q_taken, q_max)


class SequenceEvalWorker(EvalWorker):
    """The evaluator with R2D1's recurrent policy (states reset with the environments
    each phase)."""

    def make_policy(self, network):
        return RecurrentPolicy(network, self.config.num_envs)


class SequenceShard(ReplayShard):
    """A replay shard of R2D1 sequences: per-actor sequence replays (replay/sequences.py):
    frames once, a state every interval rows, prioritized sequences of priority
    eta max + (1 - eta) mean |delta| (R2D2's eta 0.9). A slot stores a state at its rows t
    with t mod interval = 0; the chunk's states line up with them when the slot's rows and
    the actor's are equal mod the interval. When they are not (a fresh or restarted shard,
    a restarted actor, a resumed run), the shard drops the chunk's rows before the first
    that lines up (at most interval - 1) and starts there as a fresh slot does (FIRST: the
    cut episode is one abandoned as at a phase's end, with zero-padded stacks)."""

    def add(self, slot, data):
        """Writes an actor's chunk: `data` = (Row of [L, M] arrays, SequenceChunk)."""
        chunk, sent = data
        replay = self.replays[slot]
        storage = replay.storage
        interval, length = storage.interval, len(chunk.action)
        # Rows to drop so that the slot's storage points get the actor's stored states.
        skip = (storage.num_adds - sent.row0) % interval
        if skip >= length:
            return self.stats()
        if storage.num_adds == 0 or skip:
            # A fresh slot, or rows cut: the first row kept starts what follows.
            first = np.array(chunk.first)  # Ray's arrays are read-only
            first[skip] = True
            chunk = chunk._replace(first=first)
        states = dict(zip(stored_rows(sent.row0, length, interval).tolist(), sent.states))
        for j in range(skip, length):
            state = states.get(j)
            if state is not None:
                state = torch.tensor(state)  # a copy: SequenceStorage takes a tensor
            info = RecurrentInfo(state, sent.q_taken[j], sent.q_max[j])
            replay.add(Row(*(column[j] for column in chunk[:ROW_FIELDS]), info))
        return self.stats()

    def gather(self, replay, t, b):
        """The sequences starting at storage points t (rows t x interval) of columns b."""
        return replay.storage.gather(t * replay.storage.interval, b)

    def join(self, batches):
        """One SequenceBatch of several: sequences lie along axis 1 (time first), the
        per-sequence zero_state along axis 0."""
        fields = SequenceBatch._fields[:11]
        return SequenceBatch(*(
            np.concatenate([getattr(batch, name) for batch in batches],
                           axis=0 if name == "zero_state" else 1)
            for name in fields
        ))  # fmt: skip
