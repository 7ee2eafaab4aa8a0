"""Torsos of the user's own (qzoo.register_torso): a name, selectable as --torso NAME,
for a function that builds a torch module turning observations into features. The
heads (dueling, distributional, noisy, ensemble) still go on top (networks/network.py).
The command line finds a torso registered in a module through --gym-packages."""

import dataclasses
import re
from collections.abc import Callable

from qzoo.configuration.values import Choice
from qzoo.errors import UserError

BUILT_IN = ("auto", "nature_cnn", "dopamine_cnn", "minatar_cnn", "mlp")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


@dataclasses.dataclass(frozen=True)
class UserTorso:
    """`build(observation_shape)` returns the module; the head's hidden layer has
    `head_hidden` units per stream (0: the features go straight to its outputs);
    `module`: the module that registered it (importing it registers it again)."""

    build: Callable
    head_hidden: int
    module: str = ""


_REGISTERED: dict[str, UserTorso] = {}


def register(name: str, build: Callable, head_hidden: int = 0, module: str = "") -> None:
    """Registers (or replaces) the torso `name`, registered by `module`; UserError for
    a bad name or value."""
    if not isinstance(name, str) or not _NAME.match(name) or name in BUILT_IN:
        raise UserError(f"register_torso: bad name {name!r}; expected a name of letters, "
                        f"digits and _ . - that is not one of {', '.join(BUILT_IN)}")  # fmt: skip
    if not callable(build):
        raise UserError(f"register_torso: bad build {build!r}; expected a function of the "
                        "observation shape returning a torch module")  # fmt: skip
    if type(head_hidden) is not int or not 0 <= head_hidden <= 10_000:
        raise UserError(f"register_torso: bad head_hidden {head_hidden!r}; expected an "
                        "integer in [0, 10_000]")  # fmt: skip
    _REGISTERED[name] = UserTorso(build, head_hidden, module)


def registered(name: str) -> UserTorso | None:
    """The user torso called `name`, or None."""
    return _REGISTERED.get(name)


def module_of(name: str) -> str | None:
    """The module to import in another process to find torso `name` again: the one
    that registered it, unless that was the script being run (or it is not a user's)."""
    torso = _REGISTERED.get(name)
    if torso is None or torso.module in ("", "__main__") or torso.module.startswith("qzoo."):
        return None
    return torso.module


class TorsoChoice(Choice):
    """--torso's values: the built-in torsos, and those registered so far."""

    def __init__(self):
        super().__init__(*BUILT_IN)

    @property
    def choices(self):
        return BUILT_IN + tuple(_REGISTERED)

    @choices.setter
    def choices(self, value):  # Choice.__init__ sets it; the registry is the truth
        pass

    @property
    def metavar(self):
        return "{" + ",".join(BUILT_IN) + ",...}"

    @metavar.setter
    def metavar(self, value):
        pass

    @property
    def expected(self):
        extra = " or a torso registered with qzoo.register_torso (in a --gym-packages module)"
        return "one of " + ", ".join(self.choices) + extra

    @expected.setter
    def expected(self, value):
        pass
