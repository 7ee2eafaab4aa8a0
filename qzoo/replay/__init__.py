"""Replay = storage (how transitions live) + sampler (which ones a batch holds).

Actors write `Row`s, the learner reads `Batch`es; neither sees how frames are stored
or how slots are drawn. Samplers address slots as (row, column) of a ring of rows
written in lockstep by N environments (see samplers.py for the few methods they use),
so any storage organised that way (deduplicated frames, a DQN Replay Dataset file, a
compressed or sequence storage) works with the uniform and the prioritized sampler.
"""

from qzoo.replay.batch import Batch, Row
from qzoo.replay.factory import make_replay, make_sampler, make_storage, replay_bytes_needed
from qzoo.replay.frames import FrameStorage
from qzoo.replay.replay import Replay
from qzoo.replay.samplers import PrioritizedSampler, UniformSampler

__all__ = ["Batch", "FrameStorage", "PrioritizedSampler", "Replay", "Row", "UniformSampler",
           "make_replay", "make_sampler", "make_storage", "replay_bytes_needed"]  # fmt: skip
