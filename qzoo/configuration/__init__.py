"""A run's configuration: the schema (every option, schema.py), the presets (one per
paper, presets.py), the other domains' defaults (domains.py), the value domains
(values.py), the checks (validate.py and one rules module per feature, rules/), and how
a run's config is built from them (build.py).

    from qzoo.configuration import build_config
    config = build_config("rainbow", {"env": "pong", "num_envs": "8"})
"""

from qzoo.configuration.build import (
    build_config,
    check_agent,
    default_run_dir,
    default_values,
    layered_values,
    make_config,
    preset_values,
)
from qzoo.configuration.domains import DOMAIN_DEFAULTS
from qzoo.configuration.presets import PRESETS
from qzoo.configuration.schema import FIELDS, GROUPS, Config, option

__all__ = [
    "DOMAIN_DEFAULTS", "FIELDS", "GROUPS", "PRESETS", "Config", "build_config", "check_agent",
    "default_run_dir", "default_values", "layered_values", "make_config", "option",
    "preset_values",
]  # fmt: skip
