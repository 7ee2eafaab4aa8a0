"""The vector environment of a config: ale-py's for Atari, Gymnasium's for MinAtar and
other ids (qzoo's own, e.g. qzoo/StatelessCartPole-v1, registered on import), and the
user's own (module:EnvId, module:function: configuration/user_envs.py)."""

import gymnasium

from qzoo.configuration import user_envs, user_modules
from qzoo.configuration.environments import resolve
from qzoo.envs import memory  # noqa: F401  registers qzoo/StatelessCartPole-v1


def make(config, num_envs, seed, eval_mode=False):
    """Builds the vector environment for `config.env` (seeded, already reset-ready)."""
    user_modules.import_modules(
        config.gym_packages, "the run's gym_packages"
    )  # in every process that builds one
    domain, name = resolve(config.env)
    if domain == "atari":
        from qzoo.envs.atari import AtariVector

        return AtariVector(name, num_envs, config)
    if domain == "minatar":
        from qzoo.envs.gym import GymVector, MinAtarEnv

        game = name.split("/", 1)[1]
        return GymVector(lambda: MinAtarEnv(game), num_envs, name, config)
    from qzoo.envs.gym import GymVector

    if user_envs.is_user_env(name):
        return GymVector(user_envs.maker(name), num_envs, name, config)
    return GymVector(lambda: gymnasium.make(name), num_envs, name, config)


def describe(config):
    """EnvInfo for `config.env`, built from a one-environment instance."""
    env = make(config, 1, config.seed)
    try:
        return env.info
    finally:
        env.close()
