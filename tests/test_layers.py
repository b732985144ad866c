"""The package's layers are its folders (docs/architecture.md): each folder imports only
from its own folder or the folders below it, each has a README saying what it owns,
and the only import circle is the maths' (a VJP rule of ``sin`` calls ``cos``), whose
members are named here.  Imports inside functions count: a circle deferred to call
time is still a circle.  Outside the circle every import is at the top of its module,
and a module goes by one name wherever it is imported.  Primitives live in
``rules/``, compositions beside their namespaces (``numpy/``, ``scipy/``), except the
few that rules call (``rules/compositions.py``)."""

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
           "testing": "testing", "numpy": "namespaces", "scipy": "namespaces",
           "lax": "namespaces", "compat": "namespaces"}  # fmt: skip
TOP_LEVEL = {"errors": "core", "": "public", "__main__": "public", "extend": "public",
             "stages": "public"}  # fmt: skip

# The one import circle: the maths'.  A rule of one family calls primitives of another
# (sin's VJP calls cos, a batching rule moveaxis, the rule-writing kit sum and
# broadcast_to), so these modules import each other; each does so at its end, after its
# own definitions.  A module that joins the circle, or a second circle, fails the tests.
CIRCLE = {"rules._helpers", "rules.compositions", "rules.elementwise", "rules.indexing",
          "rules.reductions", "rules.shape"}  # fmt: skip

# Dependencies imported inside the function that needs them, on first use, because they
# are slow to import (``import autodiff`` imports none of them): the optional SciPy,
# numba, llvmlite, Dask, networkx and matplotlib, and plum, which only resolving a new (interpreter,
# primitive) pair needs; optree, which only a pytree with containers needs (plain arguments
# are flattened by core/trees.py); and the standard library's shutil and subprocess (with the
# modules they pull in, ~8 ms: a sixth of the package's own import), which only drawing a
# graph with Graphviz's dot needs.  A module of the package that imports one at its top
# (the SciPy rule families) may be imported on first use too.
# Every other import is at the top.
LAZY = {"scipy", "numba", "llvmlite", "dask", "networkx", "matplotlib", "plum", "optree",
        "shutil", "subprocess"}  # fmt: skip
# Modules of the package imported inside the one function that needs them, because a
# plain program never does: the sorting rules, which the plain namespace needs only for
# nonzero's size= under vmap (numpy/_indexing.py's first_true), and vmap's and jit's
# interpreters, which anp.random's draws need only under a transform (numpy/_draws.py);
# the sparse Jacobians, with jit's staging, which jacobian and hessian need only for a
# sparsity; and the support the rules loaded at import need only under Taylor mode,
# sparsity detection or staging: Taylor mode's and sparsity's rule-writing kits (with
# sparsity's index sets), which their rules import at their first call
# (core/loading.py's RuleKit), and the staging graph, whose ShapedArray shape rules make.
# (The package's __init__ leaves more for first use, by name, through
# core/loading.load: its _LAZY table;
# autodiff.numpy, anp.random, anp.fft, anp.linalg and the families of sorting, sets,
# polynomials and statistics, by its _FIRST_USE table; the testing kit, which autograd's
# check_grads loads, and its check_primitive, by testing/__init__.py.)
FIRST_USE = {"autodiff.rules.sorting", "autodiff.interpreters.batching",
             "autodiff.interpreters.staging", "autodiff.transforms.sparse_jacobians",
             "autodiff.rules._taylor", "autodiff.rules._sparsity", "autodiff.core.index_sets",
             "autodiff.core.graph"}  # fmt: skip

# The layers between the primitives and the namespaces, which may call the compositions
# of rules/compositions.py but not those of numpy/ and scipy/.
BELOW_NAMESPACES = ("rules", "interpreters", "compiler", "control", "transforms", "testing",
                    "debug")  # fmt: skip


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


def test_the_only_import_circle_is_the_maths():
    circles = sorted(sorted(c) for c in _circles(_imports()))
    assert circles == [sorted(CIRCLE)], (
        "the import circle changed: break the new import (import what you need from a module "
        "below, or move the function), or, if the maths needs it, name the member in CIRCLE "
        "and in rules/README.md"
    )


def _enclosing_functions(tree: ast.AST) -> dict[ast.AST, bool]:
    """Each import node of ``tree``: whether it sits inside a function or class."""
    out: dict[ast.AST, bool] = {}

    def visit(node: ast.AST, inside: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out[child] = inside
            nested = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            visit(child, inside or nested)

    visit(tree, False)
    return out


def test_outside_the_circle_imports_are_at_the_top():
    """No import inside a function (except an optional heavy dependency, LAZY) and no
    module-level import after the first definition: a reader sees what a module needs
    where it starts, and a deferred import cannot hide a circle."""
    modules = _modules()
    trees = {name: ast.parse(path.read_text()) for name, path in modules.items()}

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [a.name for a in node.names]
        return [f"{node.module}.{a.name}" if f"{node.module}.{a.name}"[9:] in modules
                else node.module or "" for a in node.names]  # fmt: skip

    def lazy(target: str) -> bool:
        if target.split(".")[0] in LAZY or target.startswith(tuple(FIRST_USE)):
            return True
        name = target.removeprefix("autodiff").removeprefix(".")
        tops = [n for n in trees.get(name, ()) and trees[name].body
                if isinstance(n, (ast.Import, ast.ImportFrom))]  # fmt: skip
        # a module of ours that imports one at its top
        return any(t.split(".")[0] in LAZY for n in tops for t in targets(n))

    late = []
    for name, tree in sorted(trees.items()):
        if name in CIRCLE:
            continue
        for node, inside in _enclosing_functions(tree).items():
            if inside and not all(lazy(t) for t in targets(node)):
                late.append(
                    f"autodiff.{name}:{node.lineno} imports {targets(node)} inside a function"
                )
        first_def = min((n.lineno for n in tree.body if isinstance(
            n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))), default=None)  # fmt: skip
        late += [f"autodiff.{name}:{node.lineno} imports after a definition"
                 for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
                 and first_def is not None and node.lineno > first_def]  # fmt: skip
    assert late == []


def _module_bindings() -> dict[str, set[tuple[str, str]]]:
    """Each package module imported as a module: {(the name it is bound to, by whom)}.
    A package's __init__ binding its own submodule by its name (a re-export, or an import
    for its side effects) is no alias and is left out."""
    modules = _modules()
    out: dict[str, set[tuple[str, str]]] = {}
    for importer, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            pairs = []
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autodiff"):
                base = node.module.removeprefix("autodiff").removeprefix(".")
                pairs = [(f"{base}.{a.name}".lstrip("."), a.asname or a.name) for a in node.names]
            elif isinstance(node, ast.Import):  # "import autodiff.x" binds autodiff, "as y" y
                named = [a for a in node.names if a.name.startswith("autodiff") and a.asname]
                pairs = [
                    (a.name.removeprefix("autodiff").removeprefix("."), a.asname) for a in named
                ]
            for target, bound in pairs:
                if target not in modules or target == importer:
                    continue
                parent, _, own = target.rpartition(".")
                if parent == importer and bound == own and path.name == "__init__.py":
                    continue
                out.setdefault(target, set()).add((bound, importer))
    return out


def test_each_module_goes_by_one_name():
    """``from autodiff.rules import shape as _shp`` everywhere, never ``_shape_rules`` in
    one module and ``_shp`` in the next: a reader learns each alias once."""
    several = {target: sorted(bindings) for target, bindings in _module_bindings().items()
               if len({bound for bound, _ in bindings}) > 1}  # fmt: skip
    assert several == {}


def test_the_compositions_in_rules_are_the_ones_rules_call():
    """Each public function of rules/compositions.py is called by a rule (or a primitive's
    public function, or the rule-writing kit) or by a layer between rules/ and the
    namespaces; a composition nothing there calls belongs in numpy/ or scipy/."""
    import autodiff.rules.compositions as comp

    callers: dict[str, set[str]] = {name: set() for name in comp.__all__}
    for name, path in _modules().items():
        if not name.startswith(BELOW_NAMESPACES) or name == "rules.compositions":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id == "_comp" and node.attr in callers):  # fmt: skip
                callers[node.attr].add(name)
            elif isinstance(node, ast.ImportFrom) and node.module == "autodiff.rules.compositions":
                for a in node.names:
                    if a.name in callers:
                        callers[a.name].add(name)
    assert sorted(n for n, c in callers.items() if not c) == []


def test_a_public_function_is_a_primitive_exactly_when_it_lives_in_a_rules_family():
    """``rules/<family>.py`` holds primitives (their public functions carry ``.primitive``);
    ``rules/compositions.py``, ``numpy/`` and ``scipy/`` hold compositions.  So the folder
    of a public name says whether it is a primitive."""
    import inspect

    import autodiff.numpy as anp
    import autodiff.scipy.linalg
    import autodiff.scipy.signal
    import autodiff.scipy.special

    wrong = []
    for namespace in (anp, anp.linalg, anp.fft, autodiff.scipy.special, autodiff.scipy.linalg,
                      autodiff.scipy.signal):  # fmt: skip
        for name in sorted(set(namespace.__all__) - set(getattr(namespace, "_borrowed", ()))):
            obj = getattr(namespace, name)
            if inspect.ismodule(obj):
                continue
            module = getattr(obj, "__module__", None) or ""
            in_family = module.startswith("autodiff.rules.") and module != (
                "autodiff.rules.compositions"
            )
            if in_family != hasattr(obj, "primitive"):
                wrong.append(f"{namespace.__name__}.{name} (in {module})")
    assert wrong == []


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
