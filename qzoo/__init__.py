"""qzoo: value-based (DQN-family) agents for Atari and discrete-action Gymnasium envs.

The public API is what `__all__` lists (qzoo/api.py); `import qzoo` stays fast: each
name is imported when first used."""

from qzoo.version import __version__ as __version__

__all__ = [
    "Agent", "Callback", "Config", "ConfigError", "StopAfterTime", "StopAtReturn",
    "StopTraining", "TrainResult", "UserError", "config", "evaluate", "load",
    "register_torso", "resume", "train",
]  # fmt: skip


def __getattr__(name):
    if name in __all__:
        from qzoo import api

        value = getattr(api, name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'qzoo' has no attribute {name!r}")


def __dir__():
    return sorted(__all__ + ["__version__"])
