"""The package's layers (docs/architecture.md, "Layers"): each module imports only from
its own layer or those below, and the only import circles are the documented ones.
Imports inside functions count: a circle deferred to call time is still a circle."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]

# Bottom up, as docs/architecture.md draws them.
LAYERS = {
    "foundation": ["errors", "_tracer", "_dispatch", "_rule_forms", "_observe", "numpy._borrow",
                   "_graph"],
    "core": ["_core"],
    "rules": ["rules", "rules.*", "_args", "_nans", "_validate"],
    "transforms": ["_transpose", "_tape", "_reverse", "_forward", "_batching", "_staging",
                   "_passes", "_replay"],
    "compositions": ["_derived", "_checkpoint", "_custom", "_explain", "_checkers", "numpy.random",
                     "numpy._draws", "_call", "_jit", "_control", "_scan", "_subgraphs",
                     "_staged_control", "_staged_grad",
                     "_staged_loops"],
    "public": ["", "__main__", "extend", "testing", "_check_primitive", "numpy", "numpy.*",
               "scipy", "scipy.*"],
}  # fmt: skip

# The circle the code keeps, and why (docs/architecture.md): transposing a rule needs
# reverse mode, and reverse mode needs the transposed rules.
CIRCLES = [
    {"_reverse", "_tape", "_transpose"},
]


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in (ROOT / "autodiff").rglob("*.py"):
        parts = path.relative_to(ROOT / "autodiff").with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autodiff"):
                base = node.module.removeprefix("autodiff").removeprefix(".")
                submodules = [f"{base}.{a.name}".lstrip(".") for a in node.names]
                targets = [m for m in submodules if m in modules] or [base]
            elif isinstance(node, ast.Import):
                targets = [a.name.removeprefix("autodiff").removeprefix(".") for a in node.names
                           if a.name.startswith("autodiff")]  # fmt: skip
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def _layer(name: str) -> int:
    for i, members in enumerate(LAYERS.values()):
        for m in members:
            if name == m or (m.endswith(".*") and name.startswith(m[:-1])):
                return i
    raise AssertionError(f"autodiff.{name} is in no layer: add it to LAYERS and the docs")


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_every_module_imports_only_from_its_layer_or_below():
    graph = _imports()
    upward = [
        f"autodiff.{name} ({list(LAYERS)[_layer(name)]}) imports autodiff.{target} "
        f"({list(LAYERS)[_layer(target)]})"
        for name, targets in sorted(graph.items())
        for target in sorted(targets)
        if _layer(target) > _layer(name)
    ]
    assert upward == []


def test_the_only_import_circles_outside_rules_are_the_documented_ones():
    circles = [c for c in _circles(_imports()) if not all(m.startswith("rules") for m in c)]
    assert sorted(map(sorted, circles)) == sorted(map(sorted, CIRCLES))
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for circle in CIRCLES:
        assert all(f"`{m}.py`" in doc for m in circle)


def test_the_layers_here_are_the_layers_in_the_docs():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## Layers", 1)[1].split("\n## ", 1)[0]
    for layer in LAYERS:
        assert f"**{layer}**" in section, layer
