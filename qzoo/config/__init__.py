"""A run's configuration: the schema (every option, schema.py), the presets (one per
paper, presets.py), the other domains' defaults (domains.py), the value domains
(values.py), the checks (validate.py and one rules module per feature, rules/), and how
a run's config is built from them (build.py).

    from qzoo.config import build_config
    config = build_config("rainbow", {"env": "pong", "num_envs": "8"})
"""

from qzoo.config.build import (
    build_config,
    check_agent,
    default_run_dir,
    default_values,
    layered_values,
    make_config,
    preset_values,
)
from qzoo.config.domains import DOMAIN_DEFAULTS
from qzoo.config.presets import PRESETS
from qzoo.config.schema import FIELDS, GROUPS, Config, option

__all__ = [
    "DOMAIN_DEFAULTS", "FIELDS", "GROUPS", "PRESETS", "Config", "build_config", "check_agent",
    "default_run_dir", "default_values", "layered_values", "make_config", "option",
    "preset_values",
]  # fmt: skip
