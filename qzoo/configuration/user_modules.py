"""The user's own modules (--gym-packages, and the module of `--env module:name`):
imported before anything is built from a config, in every process that builds one
(the run, a resume, the tools, worker and Ray processes), so that the Gymnasium
environments and qzoo torsos they register are found by name, as rl-baselines3-zoo's
--gym-packages and Gymnasium's `module:EnvId` do."""

import importlib
import os
import re
import sys

from qzoo.errors import UserError

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def is_module_name(text: str) -> bool:
    """Whether `text` is a dotted Python module name (gym, my_envs.grid)."""
    return bool(_MODULE.match(text))


def names(text: str) -> list[str]:
    """'a, b.c' -> ['a', 'b.c'] (--gym-packages' comma-separated modules)."""
    return [part.strip() for part in text.split(",") if part.strip()]


def import_module(name: str, source: str = "--gym-packages"):
    """Imports module `name`, from the current folder too (as `python -m` would: the
    `qzoo` command's own path does not hold it). UserError starting with `source`
    (what named the module) when it cannot be imported, or fails while importing."""
    if name in sys.modules:
        return sys.modules[name]
    if not is_module_name(name):
        raise UserError(f"{source}: bad value {name!r}; expected Python module names "
                        "(my_envs, package.module), comma-separated")  # fmt: skip
    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.append(here)  # last: a module of the folder never hides an installed one
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        missing = e.name or name
        where = (
            ""
            if missing != name.split(".")[0]
            else (" (expected in the current folder, installed, or on PYTHONPATH)")
        )
        raise UserError(f"{source}: cannot import {name!r}: no module named "
                        f"{missing!r}{where}") from None  # fmt: skip
    except Exception as e:  # noqa: BLE001  the user's module failed while importing: one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise UserError(f"{source}: importing {name!r} failed: "
                        f"{type(e).__name__}{': ' + first if first else ''}") from None  # fmt: skip
    if getattr(module, "__file__", None) is None:  # a folder of that name (a run's, say)
        del sys.modules[name]
        folder = list(getattr(module, "__path__", []))[:1]
        raise UserError(f"{source}: cannot import {name!r}: {folder[0] if folder else name} "
                        f"is a folder, not a module (no {name.split('.')[-1]}.py there)")  # fmt: skip
    return module


def import_modules(text: str, source: str = "--gym-packages") -> None:
    """Imports each module of --gym-packages' `text` (already imported ones cost a dict
    lookup, so every builder of a run may call this)."""
    for name in names(text):
        import_module(name, source)
