"""qzoo's packages are layers and imports flow one way (docs/architecture.md): every
import in qzoo/, the ones made inside functions included, goes to a module of the same
layer or a lower one, and no two modules import each other, however indirectly. The
imports are read from the source (ast), not by importing, so a lazy import counts."""

import ast
import os

import qzoo

PACKAGE = os.path.dirname(qzoo.__file__)
# Layer of each top-level part (higher may import lower, never the reverse).
LAYERS = {
    "__init__": 8,  # the public names (qzoo/__init__.py re-exports qzoo/api.py's)
    "__main__": 7,
    "cli": 6, "tools": 6, "api": 6,  # the commands and the Python API beside them
    "run": 5,  # trainer, factory, run folder, checkpoints
    "acting": 4, "offline": 4, "distributed": 4,  # the drivers
    "replay": 3, "learning": 3, "envs": 3,
    "networks": 2,
    "configuration": 1, "errors": 1, "version": 1, "streams": 1, "files": 1, "terminal": 1, "data": 1,
    "signals": 1, "checksums": 1,
}  # fmt: skip


def modules():
    """{module name: path} of every module of the package."""
    found = {}
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
                found[rel.removesuffix(".__init__")] = path
    return found


def imports(path, known):
    """The qzoo modules `path` imports anywhere in it (a `from X import name` of a
    submodule counts as importing the submodule)."""
    out = set()
    with open(path) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.split(".")[0] == "qzoo")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "qzoo":
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                out.add(submodule if submodule in known else node.module)
    return {m for m in out if m in known}


def layer(module):
    parts = module.split(".")
    return LAYERS["__init__" if len(parts) == 1 else parts[1]]


def graph():
    known = modules()
    return {m: imports(p, known) - {m} for m, p in known.items()}


def test_every_part_has_a_layer():
    assert {m.split(".")[1] for m in modules() if "." in m} <= set(LAYERS)


def test_imports_go_to_the_same_layer_or_below():
    upward = sorted((m, o) for m, out in graph().items() for o in out if layer(o) > layer(m))
    assert upward == []


def cycles_of(edges):
    """Tarjan's strongly connected components of a graph {node: set of nodes}: those of
    more than one node (each sorted), i.e. the import cycles."""
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycle():
    assert cycles_of(graph()) == []


def test_the_checker_sees_a_lazy_import_and_a_cycle(tmp_path):
    """By hand: a module importing another inside a function is an edge, and two such
    modules make a cycle that test_no_import_cycle would report; a third module that
    only imports one of them is in none."""
    a, b, c = tmp_path / "a.py", tmp_path / "b.py", tmp_path / "c.py"
    a.write_text("def f():\n    from qzoo.x import b\n")
    b.write_text("import qzoo.x.a\n")
    c.write_text("from qzoo.x import a\n")
    known = {"qzoo.x.a": str(a), "qzoo.x.b": str(b), "qzoo.x.c": str(c), "qzoo.x": ""}
    assert imports(str(a), known) == {"qzoo.x.b"} and imports(str(b), known) == {"qzoo.x.a"}
    edges = {m: imports(p, known) - {m} for m, p in known.items() if p}
    assert cycles_of(edges) == [["qzoo.x.a", "qzoo.x.b"]]
    assert cycles_of({**edges, "qzoo.x.b": set()}) == []


def test_no_file_over_400_lines():
    long = {}
    for module, path in modules().items():
        with open(path) as f:
            lines = len(f.read().splitlines())
        if lines > 400:
            long[module] = lines
    assert long == {}
