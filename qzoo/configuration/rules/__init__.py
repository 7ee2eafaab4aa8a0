"""The relations of the options of features built on the core (configuration/validate.py):
one module per feature. Each function returns (involved options, holds, accepted)
triples, or raises a UserError naming the bad value; ACTS_ONLY_WITH joins the core's
table of options that act only with others."""

from qzoo.configuration.rules.acting import (
    actor_process_relations,
    batch_relations,
    check_acting,
    pin_relations,
    prefetch_relations,
)
from qzoo.configuration.rules.atari100k import ACTS_ONLY_WITH as _ATARI_100K_ONLY
from qzoo.configuration.rules.atari100k import atari100k_relations
from qzoo.configuration.rules.device_replay import ACTS_ONLY_WITH as _CAPTURE_ONLY
from qzoo.configuration.rules.device_replay import capture_relations, device_replay_relations
from qzoo.configuration.rules.offline import ACTS_ONLY_WITH as _OFFLINE_ONLY
from qzoo.configuration.rules.offline import offline_relations
from qzoo.configuration.rules.pqn import ACTS_ONLY_WITH as _PQN_ONLY
from qzoo.configuration.rules.pqn import pqn_relations
from qzoo.configuration.rules.r2d1 import ACTS_ONLY_WITH as _R2D1_ONLY
from qzoo.configuration.rules.r2d1 import check_preset_recurrence, recurrent_relations
from qzoo.configuration.rules.ray import ACTS_ONLY_WITH as _RAY_ONLY
from qzoo.configuration.rules.ray import ray_relations, valid_address

ACTS_ONLY_WITH = {**_ATARI_100K_ONLY, **_CAPTURE_ONLY, **_OFFLINE_ONLY, **_R2D1_ONLY,
                  **_RAY_ONLY, **_PQN_ONLY}  # fmt: skip

__all__ = [
    "ACTS_ONLY_WITH", "actor_process_relations", "atari100k_relations", "batch_relations",
    "capture_relations", "check_acting", "check_preset_recurrence", "device_replay_relations",
    "offline_relations", "pin_relations", "pqn_relations", "prefetch_relations", "ray_relations",
    "recurrent_relations", "valid_address",
]  # fmt: skip
