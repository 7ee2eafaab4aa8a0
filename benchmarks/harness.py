"""The benchmarks' one harness: their shared arguments and their JSON lines.

Every script under benchmarks/ is one entry point, `python benchmarks/NAME.py ...`, whose
parser comes from `new_parser(__doc__)` and whose measurements go out through `emit`: one
JSON object a line on stdout, as before, and with `--out FILE` also appended to FILE,
each line then stamped with where and when it was measured (`context`). The results
kept under benchmarks/results/ are such files, and benchmarks/tables.py writes the
docs' tables from them, so that a figure in the docs is a line on record.
"""

import argparse
import datetime
import functools
import json
import os
import platform
import subprocess

_OUT = {"path": None}


class Parser(argparse.ArgumentParser):
    """argparse with the shared options; `parse_args` remembers where lines go."""

    def __init__(self, doc, folder_file=None, default_out=None, out_help=None):
        first = (doc or "").strip().split("\n\n")[0]
        super().__init__(description=first, formatter_class=argparse.RawDescriptionHelpFormatter)
        self.folder_file = folder_file
        if folder_file:
            what = f"the folder for {folder_file} and the run's other files"
            self.add_argument("--out", metavar="DIR", default=default_out, help=what)
        else:
            what = out_help or "also append each JSON line, with its context, to FILE"
            self.add_argument("--out", metavar="FILE", default=default_out, help=what)

    def parse_known_args(self, *args, **kwargs):  # parse_args comes through here too
        parsed, rest = super().parse_known_args(*args, **kwargs)
        out = parsed.out
        _OUT["path"] = os.path.join(out, self.folder_file) if out and self.folder_file else out
        return parsed, rest


def new_parser(doc, folder_file=None, default_out=None, out_help=None):
    """The parser of a benchmark whose module docstring is `doc` (its first paragraph
    is the description), with the shared `--out FILE`; with `folder_file`, `--out DIR`
    instead (the device machine's $OUT, which brings back what is in it) and the lines
    go to DIR/`folder_file`. `out_help`: another meaning of --out FILE, for a script
    that writes its own records there (same_results.py)."""
    return Parser(doc, folder_file, default_out, out_help)


def context():
    """Where and when: the CPU's model, its cores, the Python, the commit of the
    checkout (with "+changes" when it has uncommitted ones) and the time (UTC)."""
    utc = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {**_machine(), "utc": utc}


@functools.cache  # once a process: not two git processes between a benchmark's rounds
def _machine():
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "commit": _commit()}  # fmt: skip


def _commit():
    here = os.path.dirname(os.path.abspath(__file__))

    def git(*argv):
        argv = ["git", "-C", here, *argv]
        done = subprocess.run(argv, check=False, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    head = git("rev-parse", "--short", "HEAD")
    return head + (
        "+changes" if head and git("status", "--porcelain", "--untracked-files=no") else ""
    )


def emit(record):
    """Prints `record` (a dict: "name" first by convention) as one JSON line; with
    --out, also appends it with its context to that file."""
    print(json.dumps(record), flush=True)
    if _OUT["path"]:
        folder = os.path.dirname(_OUT["path"])
        if folder:
            os.makedirs(folder, exist_ok=True)
        with open(_OUT["path"], "a") as f:
            f.write(json.dumps({**record, "context": context()}) + "\n")


def emit_value(name, value, unit, **fields):
    """`emit` of one measured value: {"name", "value", "unit", **fields}."""
    emit({"name": name, "value": value, "unit": unit, **fields})


def read(path):
    """The JSON lines of a results file, in order (blank lines skipped)."""
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]
