"""Environments of the user's own: what `--env module:name` means, and the checks that
turn a broken environment into one line instead of a traceback hours into a run.

  module:EnvId    Gymnasium's convention: the module is imported (registering EnvId),
                  then the id is made
  module:factory  a function or class of the module, called with no arguments
  a callable      from Python (qzoo.config(env=make_env)): named module:qualname; when
                  another process cannot import it by that name (a lambda, a nested
                  function, a functools.partial, one defined in the script being
                  run), it lives in this process's table below as module:qualname#N,
                  and modes that act in other processes (--actor-process, --ray)
                  refuse it
"""

import numbers
import warnings
from collections.abc import Callable

import gymnasium
import numpy as np

from qzoo.configuration.user_modules import import_module, is_module_name
from qzoo.errors import UserError, shown

# Environments made by callables of this process that no other process can import:
# name -> callable (parallel workers are forked, so they see it too).
_IN_PROCESS: dict[str, Callable] = {}
# The acting modes that rebuild environments in processes of their own, not forked.
OTHER_PROCESS_MODES = ("actor_process", "ray")


def is_user_env(name: str) -> bool:
    """Whether `name` has the `module:name` form."""
    return ":" in name


def name_for(make_env: Callable) -> str:
    """The --env name of callable `make_env` (see the module docstring)."""
    module = getattr(make_env, "__module__", None) or "__main__"
    qualname = getattr(make_env, "__qualname__", None) or type(make_env).__qualname__
    name = f"{module}:{qualname}"
    if _importable(module, qualname) is make_env:
        return name
    for key, known in _IN_PROCESS.items():
        if known is make_env:
            return key
    taken = [key for key in _IN_PROCESS if key.startswith(name + "#")]
    key = f"{name}#{len(taken) + 1}"  # '#': no other process can make it
    _IN_PROCESS[key] = make_env
    return key


def module_of(name: str) -> str | None:
    """For a Gymnasium id registered by the user's code (not Gymnasium's, ale-py's,
    MinAtar's or qzoo's), the module of its entry point: importing it in another
    process registers the id again where the module registers it (a package's
    __init__, or the module itself). None otherwise."""
    spec = gymnasium.registry.get(name) if isinstance(name, str) and ":" not in name else None
    if spec is None:
        return None
    entry = spec.entry_point
    module = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    ours = ("gymnasium", "ale_py", "minatar", "qzoo", "shimmy", "__main__")
    if not module or module.split(".")[0] in ours or not is_module_name(module):
        return None
    return module


def in_process_only(name: str) -> bool:
    """Whether `name` is a callable of this process that another cannot import, or a
    Gymnasium id that the script being run registered (its entry point in __main__)."""
    if name in _IN_PROCESS:
        return True
    spec = gymnasium.registry.get(name)
    if spec is None:
        return False
    entry = spec.entry_point
    module = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", "")
    return module == "__main__"


def _importable(module, qualname):
    """The object `module`.`qualname` names when importing finds it, else None."""
    if module == "__main__" or "<" in qualname or not is_module_name(module):
        return None
    try:
        found = import_module(module, f"env {module}:{qualname}")
    except UserError:
        return None
    for part in qualname.split("."):
        found = getattr(found, part, None)
    return found


def maker(name: str, checking: bool = False) -> Callable[[], object]:
    """A function making one environment of user env `name` (module:EnvId or
    module:factory, or a callable of this process); UserError, one line, when the
    module cannot be imported or holds neither. `checking`: for `problem`, without
    Gymnasium's passive checker (its warnings and errors would hide what is wrong)."""
    if name in _IN_PROCESS:
        return _IN_PROCESS[name]
    if "#" in name:  # a callable of the process that built the config: not this one
        raise _error(name, "an environment this process can make: it was a Python callable "
                     "of the process that trained the run (a lambda, a nested function, a "
                     "functools.partial or a function of its script); define a function in a "
                     "module and train with env='module:function' to use the run elsewhere")  # fmt: skip
    module_name, _, attribute = name.partition(":")
    if not module_name or not attribute:
        raise _error(name, "module:EnvId or module:function (both parts named)")
    if module_name == "__main__":
        raise _error(name, "an environment another process can import: "
                     f"{attribute} was defined in the script that trained the run; move it "
                     "into a module and name it module:" + attribute)  # fmt: skip
    module = import_module(module_name, f"env {name!r}")
    if attribute in gymnasium.registry:
        return lambda: gymnasium.make(attribute, disable_env_checker=checking or None)
    found = module
    for part in attribute.split("."):
        found = getattr(found, part, None)
    if callable(found):
        return found
    ids = [k for k, spec in gymnasium.registry.items()
           if str(getattr(spec.entry_point, "__module__", spec.entry_point)).startswith(module_name)]  # fmt: skip
    listed = f" (it registers {', '.join(sorted(ids)[:5])})" if ids else ""
    raise _error(name, f"a Gymnasium id that {module_name} registers, or a function or class "
                 f"of it{listed}")  # fmt: skip


def _error(name, expected):
    return UserError(f"--env: bad value {shown(name)}; expected {expected}")


def problem(make_env: Callable[[], object]) -> str | None:
    """What makes the environment `make_env` builds unusable, in the words of an
    "expected ..." message, or None: discrete actions, a Box observation, and
    Gymnasium's reset and step (reset(seed=0) gives (observation, info), step gives
    (observation, reward, terminated, truncated, info), observations of the space's shape)."""
    with warnings.catch_warnings():  # deprecated versions warn; the message is one line
        warnings.simplefilter("ignore")
        try:
            env = make_env()
        # Missing packages (Box2D, MuJoCo: DependencyNotInstalled is an ImportError),
        # broken registrations, and a user's constructor that fails.
        except UserError:
            raise
        except Exception as e:  # noqa: BLE001  the user's code may raise anything: one line
            return _failed("an environment that can be made", e)
        try:
            return _space_problem(env) or _api_problem(getattr(env, "unwrapped", env))
        finally:
            try:
                env.close()
            except Exception:  # noqa: BLE001, S110  a close that fails changes nothing here
                pass


def _failed(what, e):
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{what} ({type(e).__name__}{': ' + first if first else ''})"


def _space_problem(env):
    problems = []
    action = getattr(env, "action_space", None)
    if not isinstance(action, gymnasium.spaces.Discrete):
        problems.append(f"discrete actions, not {action}")
    observation = getattr(env, "observation_space", None)
    if not isinstance(observation, gymnasium.spaces.Box):
        what = ", one integer per state" if isinstance(
            observation, gymnasium.spaces.Discrete) else ""  # fmt: skip
        problems.append(f"a Box observation (an array), not {observation}{what}")
    return " and ".join(problems) or None


def _api_problem(env):
    """Gymnasium 1.x's reset and step, tried once each."""
    shape = tuple(env.observation_space.shape)
    try:
        out = env.reset(seed=0)
    except Exception as e:  # noqa: BLE001  the user's reset: one line, whatever it raised
        return _failed("Gymnasium's reset(seed=...): reset(seed=0) failed", e)
    if not (isinstance(out, tuple) and len(out) == 2):
        return ("Gymnasium's reset(seed=...) returning (observation, info), not "
                f"{_described(out)}")  # fmt: skip
    if np.shape(out[0]) != shape:
        return (f"observations of the observation space's shape {shape}: reset gave one of "
                f"shape {np.shape(out[0])}")  # fmt: skip
    try:
        out = env.step(int(env.action_space.sample()))
    except Exception as e:  # noqa: BLE001  the user's step: one line, whatever it raised
        return _failed("Gymnasium's step(action): step failed", e)
    if not (isinstance(out, tuple) and len(out) == 5):
        old = " (the old Gym API's done)" if isinstance(out, tuple) and len(out) == 4 else ""
        return ("Gymnasium's step returning (observation, reward, terminated, truncated, "
                f"info), not {_described(out)}{old}")  # fmt: skip
    observation, reward, terminated, truncated, _ = out
    if np.shape(observation) != shape:
        return (f"observations of the observation space's shape {shape}: step gave one of "
                f"shape {np.shape(observation)}")  # fmt: skip
    if not isinstance(reward, numbers.Real) or isinstance(reward, bool):
        return f"a number as step's reward, not {type(reward).__name__} {reward!r}"
    for name, flag in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(flag, (bool, np.bool_)):
            return f"true or false as step's {name}, not {type(flag).__name__} {flag!r}"
    return None


def _described(value):
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    return type(value).__name__


def relations(config):
    """(options, holds, expected) for validate.py: callables of this process only in
    modes that act in it (serial, parallel's forked workers, async's thread)."""
    local = in_process_only(config.env)
    fix = ("define the environment in a module other processes can import and pass "
           "env='module:function' (or register its id there and name that module in "
           "--gym-packages)")  # fmt: skip
    return [
        (
            (mode,),
            not (local and getattr(config, mode)),
            (
                f"false: env {config.env!r} is a Python callable of this process, which "
                f"--{mode.replace('_', '-')} cannot reach from its own process; {fix}"
            ),
        )
        for mode in OTHER_PROCESS_MODES
    ]
