"""Checked by mypy (tests/test_types.py), never run: every implementation of an interface
a contributor implements is assignable to it, and the parts a driver is given are the
ones the factory makes."""

from qzoo.acting.asynchronous import AsyncDriver
from qzoo.acting.batches import BatchDriver
from qzoo.acting.driver import Driver, UpdateBook
from qzoo.acting.pqn import PQNDriver
from qzoo.acting.process import ProcessDriver
from qzoo.acting.serial import SerialDriver
from qzoo.distributed.driver import RayDriver
from qzoo.distributed.offline import OfflineRayDriver
from qzoo.learning.from_config import OBJECTIVES
from qzoo.learning.objectives import (
    CategoricalQLearning,
    EnsembleQLearning,
    ImplicitQuantileQLearning,
    Objective,
    QLearning,
    QRegression,
    QuantileQLearning,
    R2D1SequenceLearning,
    REMQLearning,
)
from qzoo.learning.prefetched import PrefetchedTargets
from qzoo.offline.driver import OfflineDriver
from qzoo.offline.storage import CheckpointPerBatchSampler, DatasetStorage
from qzoo.replay.compressed import CompressedFrameStorage
from qzoo.replay.device import DeviceFrameStorage
from qzoo.replay.device_samplers import DevicePrioritizedSampler, DeviceUniformSampler
from qzoo.replay.frames import FrameStorage
from qzoo.replay.interfaces import Sampler, Storage, WritableStorage
from qzoo.replay.samplers import PrioritizedSampler, UniformSampler
from qzoo.replay.sequences import SequencePrioritizedSampler, SequenceStorage
from qzoo.run.updates import Updates


def storages(a: FrameStorage, b: CompressedFrameStorage, c: DeviceFrameStorage,
             d: SequenceStorage) -> list[WritableStorage]:  # fmt: skip
    return [a, b, c, d]


def dataset(d: DatasetStorage) -> Storage:
    return d


def samplers(a: UniformSampler, b: PrioritizedSampler, c: DeviceUniformSampler,
             d: DevicePrioritizedSampler, e: CheckpointPerBatchSampler,
             f: SequencePrioritizedSampler) -> list[Sampler]:  # fmt: skip
    return [a, b, c, d, e, f]


def drivers(a: SerialDriver, b: AsyncDriver, c: ProcessDriver, d: BatchDriver,
            e: OfflineDriver, f: RayDriver, g: OfflineRayDriver,
            h: PQNDriver) -> list[Driver]:  # fmt: skip
    return [a, b, c, d, e, f, g, h]


def bookkeeping(updates: Updates) -> UpdateBook:
    return updates


def objectives(config: object) -> list[Objective]:
    return [make(config) for make in OBJECTIVES.values()]


def objective_classes(a: QLearning, b: EnsembleQLearning, c: REMQLearning,
                      d: CategoricalQLearning, e: QuantileQLearning,
                      f: ImplicitQuantileQLearning, g: R2D1SequenceLearning, h: QRegression,
                      i: PrefetchedTargets) -> list[Objective]:  # fmt: skip
    return [a, b, c, d, e, f, g, h, i]
