"""`qzoo tune`'s search space: the preset's (config/search_spaces.py) with the command
line's `--space NAME=SPEC` over it, as Optuna distributions, every bound checked
against the option's own domain before any trial starts."""

import math

from qzoo.configuration import FIELDS
from qzoo.configuration.search_spaces import default_space
from qzoo.configuration.values import Bool, Choice, Int, Real
from qzoo.errors import UserError, closest, flag, shown

KINDS = ("loguniform", "uniform", "int", "logint", "choice")
SPEC_FORMS = ("loguniform:LOW:HIGH, uniform:LOW:HIGH, int:LOW:HIGH, logint:LOW:HIGH, "
              "choice:A,B,... or off")  # fmt: skip
# Options that name a run rather than shape it: never searched.
NOT_SEARCHED = ("agent", "env", "seed", "run_dir", "accept_changes", "progress", "tensorboard",
                "device", "threads", "track", "wandb_project", "wandb_entity")  # fmt: skip


def parse_spaces(texts: list[str]) -> dict:
    """['learning_rate=loguniform:1e-5:1e-3', ...] -> {name: spec}, names as Config's."""
    out = {}
    for text in texts:
        name, equals, spec = text.partition("=")
        name = name.strip().lstrip("-").replace("-", "_")
        if not equals or not name or not spec.strip():
            raise UserError(f"--space: bad value {shown(text)}; expected NAME=SPEC, SPEC one of "
                            f"{SPEC_FORMS}")  # fmt: skip
        if name not in FIELDS:
            hint = closest(name, FIELDS)
            raise UserError(f"--space: unknown option {name!r}"
                            + (f"; did you mean {hint[0]}?" if hint else ""))  # fmt: skip
        if name in NOT_SEARCHED:
            raise UserError(f"--space: {name} is not searched (it names or places a run); "
                            "give it as a train option after --")  # fmt: skip
        out[name] = spec.strip()
    return out


def search_space(agent: str, domain: str, given: dict, fixed: set) -> dict:
    """{name: optuna distribution}: the preset's space for `domain`, `given` ({name: spec})
    over it, less the options `fixed` after `--` and those switched `off`."""
    specs = {**default_space(agent, domain), **given}
    return {
        name: distribution(name, spec)
        for name, spec in specs.items()
        if spec != "off" and name not in fixed
    }


def distribution(name: str, spec: str):
    """The Optuna distribution of `spec` for option `name`; UserError, one line."""
    import optuna.distributions as od

    kind, _, rest = spec.partition(":")
    domain = FIELDS[name].metadata["domain"]

    def bad(expected):
        return UserError(f"--space {name}: bad value {shown(spec)}; expected {expected}")

    if kind not in KINDS:
        raise bad(SPEC_FORMS)
    if kind == "choice":
        texts = [t.strip() for t in rest.split(",")]
        if not rest or not all(texts):
            raise bad("choice:A,B,... with values separated by commas")
        values = [_value(name, domain, t, spec) for t in texts]
        return od.CategoricalDistribution(list(dict.fromkeys(values)))
    if isinstance(domain, (Bool, Choice)) or not isinstance(domain, (Int, Real)):
        raise bad(f"choice:A,B,... ({flag(name)} takes {domain.expected})")
    parts = rest.split(":")
    integer = kind in ("int", "logint")
    if len(parts) != 2:
        raise bad(f"{kind}:LOW:HIGH")
    if isinstance(domain, Int) and not integer:
        raise bad(f"int:LOW:HIGH or logint:LOW:HIGH ({flag(name)} takes integers)")
    low, high = (_value(name, domain, t.strip(), spec) for t in parts)
    if integer and not all(isinstance(v, int) for v in (low, high)):
        raise bad(f"{kind}:LOW:HIGH with integer bounds")
    if not low < high:
        raise bad(f"LOW < HIGH (got {shown(low)} and {shown(high)})")
    if kind.startswith("log") and low <= 0:
        raise bad(f"{kind} bounds > 0 (got {shown(low)})")
    if integer:
        return od.IntDistribution(int(low), int(high), log=kind == "logint")
    return od.FloatDistribution(float(low), float(high), log=kind == "loguniform")


def _value(name, domain, text, spec):
    """`text` as option `name` takes it, within its domain."""
    try:
        value = domain.parse(text)
    except (ValueError, OverflowError):
        value = None
    if isinstance(domain, Real) and isinstance(value, float) and value.is_integer():
        value = float(value)
    if (
        value is None
        or (isinstance(value, float) and not math.isfinite(value))
        or not (domain.accepts(value))
    ):
        raise UserError(
            f"--space {name}: bad value {shown(text)} in {shown(spec)}; {flag(name)} takes "
            f"{domain.expected}"
        )
    return value


def as_option(value) -> str:
    """A sampled value as the command line writes it (floats exact: repr round-trips)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value)
    return str(value)
