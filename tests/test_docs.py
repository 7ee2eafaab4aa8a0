"""The documentation site builds with `mkdocs build --strict` (no broken link or anchor,
every page in the nav), its options page lists every field of the Config schema, and the
README stays a front page: at most 250 lines, holding the test command CI runs."""

import dataclasses
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_TEST_COMMAND = (
    "pip install torch==2.13.0 -e '.[dev]' && python -m pytest -q -n 2 --dist loadfile"
)

needs_mkdocs = pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None,
    reason="mkdocs and mkdocs-material are not installed (pip install -e '.[docs]')",
)


def _config_class():
    try:  # where the schema lives after qzoo's modules moved into packages
        from qzoo.configuration import Config
    except ImportError:
        from qzoo.configuration import Config
    return Config


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,  # a bound on a broken build: it takes seconds, minutes under load
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, (
        f"mkdocs build --strict failed:\n{result.stdout}\n{result.stderr}"
    )
    return site_dir


@needs_mkdocs
def test_docs_build_strict(site):
    for page in ("index.html", "options/index.html", "benchmarks/index.html"):
        assert (site / page).is_file(), page


@needs_mkdocs
def test_options_page_lists_every_config_field(site):
    html = (site / "options" / "index.html").read_text()
    fields = [f.name for f in dataclasses.fields(_config_class())]
    assert len(fields) > 50
    # AGENT is positional (`qzoo train AGENT`); every other field is an --option.
    missing = [
        name for name in fields if name != "agent" and f"--{name.replace('_', '-')}" not in html
    ]
    assert not missing, f"options missing from the options page: {missing}"


def test_the_extras_table_lists_every_extra():
    """Issue 34 #16: tune, wandb, hub and rlu were missing from it."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    page = (ROOT / "docs" / "getting-started.md").read_text()
    table = [line for line in page.splitlines() if line.startswith("| `pip install 'qzoo[")]
    listed = [line.split("qzoo[")[1].split("]")[0] for line in table]
    assert sorted(listed) == sorted(extras)


def test_readme_is_a_front_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250
    assert README_TEST_COMMAND in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert README_TEST_COMMAND in ci, "CI runs the README's test command"
