"""qzoo: value-based (DQN-family) agents for Atari and discrete-action Gymnasium envs."""

__version__ = "0.1.0"
