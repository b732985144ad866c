"""The package's layers are its folders (docs/architecture.md): each folder imports only
from its own folder or the folders below it, each has a README saying what it owns,
and the only import circles are inside ``rules/`` (the maths': a VJP rule of ``sin``
calls ``cos``).  Imports inside functions count: a circle deferred to call time is
still a circle."""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "autodiff"

# Bottom up.  A module's layer is its folder; errors.py, the exceptions every layer
# raises, sits with the core; the package's own __init__, __main__, extend.py and
# stages.py (the public API) on top.
LAYERS = ["core", "debug", "rules", "interpreters", "compiler", "control", "transforms",
          "testing", "namespaces", "public"]  # fmt: skip
FOLDERS = {"core": "core", "debug": "debug", "rules": "rules", "interpreters": "interpreters",
           "compiler": "compiler", "control": "control", "transforms": "transforms",
           "testing": "testing", "numpy": "namespaces", "scipy": "namespaces"}  # fmt: skip
TOP_LEVEL = {"errors": "core", "": "public", "__main__": "public", "extend": "public",
             "stages": "public"}  # fmt: skip


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
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


def _layer(name: str) -> str:
    if name in TOP_LEVEL:
        return TOP_LEVEL[name]
    folder = name.split(".")[0]
    assert folder in FOLDERS, f"autodiff/{folder} is in no layer: add it to FOLDERS and the docs"
    return FOLDERS[folder]


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


def test_every_module_imports_only_from_its_folder_or_the_folders_below():
    graph = _imports()
    upward = [
        f"autodiff.{name} ({_layer(name)}) imports autodiff.{target} ({_layer(target)})"
        for name, targets in sorted(graph.items())
        for target in sorted(targets)
        if LAYERS.index(_layer(target)) > LAYERS.index(_layer(name))
    ]
    assert upward == []


def test_the_only_import_circles_are_inside_rules():
    circles = [c for c in _circles(_imports()) if not all(m.startswith("rules") for m in c)]
    assert circles == []


def test_the_core_knows_no_primitive_and_no_transform():
    """The foundation's imports stop at the core: no rule family, no interpreter."""
    graph = _imports()
    for name, targets in graph.items():
        if _layer(name) == "core":
            assert all(_layer(t) == "core" for t in targets), (name, targets)


def test_every_folder_has_a_readme_naming_its_modules():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for folder in FOLDERS:
        readme = PACKAGE / folder / "README.md"
        assert readme.exists(), f"autodiff/{folder} has no README.md"
        text = readme.read_text()
        for path in sorted((PACKAGE / folder).glob("*.py")):
            if path.name != "__init__.py":
                assert f"`{path.name}`" in text, f"autodiff/{folder}/README.md: {path.name}?"
        assert f"`{folder}/`" in doc, f"docs/architecture.md does not place {folder}/"


def test_the_layers_here_are_the_layers_in_the_docs():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## Layers", 1)[1].split("\n## ", 1)[0]
    positions = [section.index(f"| `{folder}/`") for folder in
                 ("core", "debug", "rules", "interpreters", "compiler", "control", "transforms",
                  "testing")]  # fmt: skip
    assert positions == sorted(positions), "the docs list the folders in another order"
