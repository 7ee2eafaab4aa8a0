"""The public API is what qzoo.__all__ lists: each name exists, is documented (a
docstring, and an entry on the API reference page), and nothing else is defined at the
package root; `import qzoo` loads none of it (nor PyTorch) until a name is used."""

import inspect
import subprocess
import sys
from pathlib import Path

import qzoo

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = ["Agent", "Callback", "Config", "ConfigError", "StopAfterTime", "StopAtReturn",
          "StopTraining", "TrainResult", "UserError", "config", "evaluate", "load",
          "register_torso", "resume", "train"]  # fmt: skip


def test_all_lists_exactly_the_public_names():
    assert sorted(qzoo.__all__) == sorted(PUBLIC)
    assert dir(qzoo) == sorted(PUBLIC + ["__version__"])


def test_every_public_name_exists_and_is_documented():
    reference = (ROOT / "docs" / "api.md").read_text()
    for name in PUBLIC:
        value = getattr(qzoo, name)
        assert inspect.getdoc(value), name
        assert f"::: qzoo.api.{name}" in reference, f"docs/api.md lacks {name}"


def test_nothing_else_is_defined_at_the_root():
    """Only the public names, dunders and subpackages (attributes Python sets when a
    submodule is imported) live in the package's namespace."""
    import types

    extra = [k for k, v in vars(qzoo).items()
             if not k.startswith("__") and k not in PUBLIC and not isinstance(v, types.ModuleType)]  # fmt: skip
    assert extra == []


def test_an_unknown_name_is_an_attribute_error():
    try:
        qzoo.DQN  # noqa: B018
    except AttributeError as e:
        assert "has no attribute 'DQN'" in str(e)
    else:
        raise AssertionError("qzoo.DQN exists")


def test_import_qzoo_loads_nothing_heavy():
    code = ("import sys, qzoo; print(qzoo.__version__); "
            "print(sorted(m for m in ('torch', 'gymnasium', 'qzoo.api') if m in sys.modules))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split("\n")  # fmt: skip
    assert out[0] == qzoo.__version__ and out[1] == "[]"


def test_config_error_is_a_value_error_and_a_user_error():
    assert issubclass(qzoo.ConfigError, ValueError)
    assert issubclass(qzoo.ConfigError, qzoo.UserError)
    assert issubclass(qzoo.StopTraining, KeyboardInterrupt)
