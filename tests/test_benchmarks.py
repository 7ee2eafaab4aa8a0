"""benchmarks/ as one harness: every script's parser and JSON lines come from
benchmarks/harness.py, and the docs' generated tables are those its results give."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
# `qzoo bench` under another name: their lines are the package's own.
THIN_WRAPPERS = {"replay.py", "train.py"}


def load(name):
    """A fresh copy of benchmarks/<name>.py (its module state too)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


def entry_points():
    for path in sorted(BENCHMARKS.glob("*.py")):
        if 'if __name__ == "__main__"' in path.read_text() and path.name not in THIN_WRAPPERS:
            yield path


def test_every_benchmark_takes_its_parser_and_prints_its_lines_through_the_harness():
    paths = list(entry_points())
    assert len(paths) >= 25
    for path in paths:
        text = path.read_text()
        assert "new_parser(__doc__" in text, path.name
        assert "argparse.ArgumentParser(" not in text, path.name
        assert not re.search(r"print\(\s*json\.dumps", text), path.name


def test_emit_prints_the_line_and_appends_it_with_its_context(tmp_path, capsys):
    harness = load("harness")
    out = tmp_path / "kept" / "results.jsonl"
    args = harness.new_parser("What it measures.\n\nMore.").parse_args(["--out", str(out)])
    assert args.out == str(out)
    harness.emit({"name": "speed", "value": 1.5})
    harness.emit_value("memory", 3, "MiB", agent="dqn")
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == [{"name": "speed", "value": 1.5},
                       {"name": "memory", "value": 3, "unit": "MiB", "agent": "dqn"}]  # fmt: skip
    kept = harness.read(out)
    assert [{k: v for k, v in line.items() if k != "context"} for line in kept] == printed
    context = kept[0]["context"]
    assert context["cores"] == os.cpu_count()
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=False).stdout.strip()  # fmt: skip
    assert context["commit"].split("+")[0] == head
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00", context["utc"])


def test_without_out_nothing_is_written_and_a_folder_out_takes_the_named_file(tmp_path, capsys):
    harness = load("harness")
    harness.new_parser("Doc.").parse_args([])
    harness.emit({"name": "x"})
    assert list(tmp_path.iterdir()) == []
    harness.new_parser("Doc.", "gpu_check.jsonl").parse_args(["--out", str(tmp_path)])
    harness.emit({"name": "y"})
    assert [r["name"] for r in harness.read(tmp_path / "gpu_check.jsonl")] == ["y"]
    capsys.readouterr()


def test_the_docs_tables_are_the_ones_the_results_give():
    done = subprocess.run([sys.executable, str(BENCHMARKS / "tables.py"), "--check"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_table_edited_by_hand_is_written_back_and_an_unknown_one_refused():
    tables = load("tables")
    page = (REPO / "docs" / "benchmarks.md").read_text()
    assert "<!-- table pqn_vs_dqn " in page
    edited = page.replace("| pong | 2,001 |", "| pong | 2,500 |")
    assert edited != page and tables.rewrite(edited, "benchmarks.md") == page
    with pytest.raises(ValueError, match="unknown table 'nope'"):
        tables.rewrite("<!-- table nope (x) -->\n| a |\n<!-- end table -->", "page.md")


def test_a_script_that_parses_known_args_keeps_its_lines_too(tmp_path, capsys):
    harness = load("harness")
    _, rest = harness.new_parser("Doc.").parse_known_args(["--out", str(tmp_path / "r"), "-x"])
    harness.emit({"name": "z"})
    assert rest == ["-x"] and [r["name"] for r in harness.read(tmp_path / "r")] == ["z"]
    capsys.readouterr()
