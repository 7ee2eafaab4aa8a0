"""The core (learner, objectives, losses, optimizers, replay storage and samplers,
actor, policy, the serial driver and the update bookkeeping) takes typed arguments
(acting/driver.py's `Parts`, what the other drivers are given, still holds the Config):
no core module reads a Config (no parameter or name `config`, no `.config`
attribute), and none imports a fast path (compiled, captured, prefetched targets,
device replay, the next batch drawn ahead, the async, process and batch drivers,
worker processes, Ray). The `from_config` and `factory` modules map a Config to the
core's arguments; the fast paths wrap the core (docs/architecture.md)."""

import ast
import os

from test_layers import PACKAGE, imports, modules

CORE = [
    "learning/learner.py", "learning/objectives.py", "learning/losses.py", "learning/optim.py",
    "replay/frames.py", "replay/samplers.py", "replay/sumtree.py", "replay/replay.py",
    "replay/batch.py", "replay/interfaces.py", "acting/actor.py", "acting/policy.py",
    "acting/serial.py", "acting/lockstep.py", "run/updates.py",
]  # fmt: skip
FAST_PATHS = [
    "qzoo.learning.compiled", "qzoo.learning.captured", "qzoo.learning.prefetched",
    "qzoo.replay.device", "qzoo.replay.device_samplers", "qzoo.replay.ahead",
    "qzoo.acting.asynchronous", "qzoo.acting.process", "qzoo.acting.process_channels",
    "qzoo.acting.prefetch", "qzoo.acting.batches", "qzoo.acting.workers",
    "qzoo.acting.pinning", "qzoo.run.fast_updates",
]  # fmt: skip


def _tree(path):
    with open(os.path.join(PACKAGE, path)) as f:
        return ast.parse(f.read())


def test_the_listed_modules_exist():
    known = modules()
    assert all(os.path.isfile(os.path.join(PACKAGE, path)) for path in CORE)
    assert all(name in known for name in FAST_PATHS)


def test_no_core_module_imports_a_fast_path():
    known = modules()
    found = {path: sorted(imports(os.path.join(PACKAGE, path), known) & set(FAST_PATHS))
             for path in CORE}  # fmt: skip
    assert {path: names for path, names in found.items() if names} == {}


def config_reads(tree):
    """(line, what) of each parameter or name `config` and each `.config` in `tree`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.arg == "config":
            found.append((node.lineno, "parameter"))
        elif isinstance(node, ast.Name) and node.id == "config":
            found.append((node.lineno, "name"))
        elif isinstance(node, ast.Attribute) and node.attr == "config":
            found.append((node.lineno, "attribute"))
    return sorted(found)


def test_no_core_module_reads_a_config():
    """A core part is given the values it uses, never the whole Config."""
    found = {path: config_reads(_tree(path)) for path in CORE}
    assert {path: lines for path, lines in found.items() if lines} == {}


def test_config_reads_finds_each_way_of_reading_one():
    source = "def learn(config):\n    size = config.batch_size\n    return self.config\n"
    assert config_reads(ast.parse(source)) == [(1, "parameter"), (2, "name"), (3, "attribute")]
