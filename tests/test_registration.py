"""How primitives and their rules are registered: every primitive the package defines
has a name of its own (``explain``, printed graphs and error messages name primitives),
every rule goes through the public ``def_*`` methods of ``Primitive`` and their checks,
and no layer touches another layer's private state."""

from __future__ import annotations

import ast
import importlib
import inspect
import pathlib
import pkgutil
import threading

import numpy as np
import pytest

import autodiff
from autodiff.core.lowering import Elementwise
from autodiff.core.primitive import Primitive
from autodiff.core.stack import Interpreter, current_interpreters, live_again, new_interpreter
from autodiff.errors import RuleError

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "autodiff"

# Extras a module may need; without them (a minimal install) it is not walked.
OPTIONAL = {"scipy", "numba", "llvmlite", "dask", "cupy", "torch", "jax"}


def _package_modules() -> list:
    modules = []
    for info in pkgutil.walk_packages(autodiff.__path__, "autodiff."):
        if info.name == "autodiff.__main__":  # running it is the tour
            continue
        try:
            modules.append(importlib.import_module(info.name))
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in OPTIONAL:
                raise
    return modules


def _primitives_in(value, depth=0):
    """The primitives a module-level value is or holds (a public function's
    ``primitive``, the items of tuples, lists and dicts of them)."""
    prim = getattr(value, "primitive", value)
    if isinstance(prim, Primitive):
        yield prim
    elif isinstance(value, (tuple, list, set, frozenset)) and depth < 2:
        for item in value:
            yield from _primitives_in(item, depth + 1)
    elif isinstance(value, dict) and depth < 2:
        for item in value.values():
            yield from _primitives_in(item, depth + 1)


def _package_primitives() -> dict[int, tuple[Primitive, set[str]]]:
    """Every primitive the package's modules define, by identity, with where it is."""
    found: dict[int, tuple[Primitive, set[str]]] = {}
    for module in _package_modules():
        for attr, value in vars(module).items():
            for prim in _primitives_in(value):
                found.setdefault(id(prim), (prim, set()))[1].add(f"{module.__name__}.{attr}")
    return found


def test_no_two_primitives_share_a_name():
    """explain, printed graphs, Graph.primitives() and every rule's error message tell
    primitives apart by name only."""
    by_name: dict[str, list[set[str]]] = {}
    found = _package_primitives()
    for prim, where in found.values():
        by_name.setdefault(prim.name, []).append(where)
    shared = {name: [sorted(w) for w in wheres] for name, wheres in by_name.items()
              if len(wheres) > 1}  # fmt: skip
    assert not shared, f"primitives sharing a name: {shared}"
    names = set(by_name)
    assert len(found) > 150 and {"scan", "scan_slices", "cond", "while_loop", "jit_call"} <= names


def test_the_walk_finds_a_planted_duplicate(monkeypatch):
    """The test above can fail: a second primitive named like the scan is found."""
    from autodiff.control import scan

    monkeypatch.setattr(scan, "planted_p", Primitive("scan", lambda x: x), raising=False)
    names = [p.name for p, _ in _package_primitives().values()]
    assert names.count("scan") == 2


# Attributes of a primitive that hold its rules: set only by Primitive's def_* methods.
RULE_ATTRIBUTES = {"vjp", "jvp", "batch", "transpose", "shape", "sparsity", "lowering",
                   "impl", "vjp_reads", "jet"}  # fmt: skip


def _rule_assignments(source: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            for t in target.elts if isinstance(target, ast.Tuple) else [target]:
                own = isinstance(t, ast.Attribute) and ast.unparse(t.value) == "self"
                if isinstance(t, ast.Attribute) and t.attr in RULE_ATTRIBUTES and not own:
                    out.append(f"line {node.lineno}: {ast.unparse(t)} = ...")
    return out


def test_rules_are_given_through_the_def_methods():
    """``prim.vjp = rule`` would skip the checks ``def_vjp`` makes (its arity, its form);
    only ``core/primitive.py`` sets these attributes."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).as_posix() == "core/primitive.py":
            continue
        hits = _rule_assignments(path.read_text())
        if hits:
            found[path.relative_to(ROOT).as_posix()] = hits
    assert not found, f"rules assigned as attributes: {found}"
    assert _rule_assignments("p.vjp = f\np.jvp, p.batch = g, h\nself.vjp = f") == [
        "line 1: p.vjp = ...", "line 2: p.jvp = ...", "line 2: p.batch = ..."
    ]  # fmt: skip


def _folder(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else ""


def _private_state_uses(path: pathlib.Path, source: str | None = None) -> list[str]:
    """Where the module at ``path`` reaches into a module of another folder for a
    private name: an attribute of that module (``_core._stack``), or an imported
    private name that is not a function or class (a ContextVar, a table, a lock)."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    mine = parts[0] if len(parts) > 1 else ""
    tree = ast.parse(path.read_text() if source is None else source)
    modules: dict[str, str] = {}  # local name -> module of another folder
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("autodiff."):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if (PACKAGE / "/".join(full.split(".")[1:])).with_suffix(".py").exists():
                    if _folder(full) != mine:
                        modules[alias.asname or alias.name] = full
                elif (alias.name.startswith("_") and not alias.name.startswith("__")
                      and _folder(full) != mine):  # fmt: skip
                    value = getattr(importlib.import_module(node.module), alias.name)
                    if not (inspect.isfunction(value) or inspect.isclass(value)):
                        out.append(f"imports {full}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("autodiff.") and _folder(alias.name) != mine:
                    modules[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and node.attr.startswith("_")
                and not node.attr.startswith("__")):  # fmt: skip
            out.append(f"line {node.lineno}: {modules[node.value.id]}.{node.attr}")
    return out


def test_no_layer_touches_another_layers_private_state():
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        hits = _private_state_uses(path)
        if hits:
            found[path.relative_to(ROOT).as_posix()] = hits
    assert not found, found


def test_the_private_state_check_finds_a_planted_use():
    planted = ("from autodiff.core import stack as _core\n"
               "from autodiff.core.stack import _stack\n"
               "_core._stack.set(())\n")  # fmt: skip
    assert _private_state_uses(PACKAGE / "control" / "planted.py", planted) == [
        "imports autodiff.core.stack._stack", "line 3: autodiff.core.stack._stack"
    ]  # fmt: skip


# --- the def_* methods and their checks ----------------------------------------------------------


def _square_p() -> Primitive:
    return Primitive("test_square", lambda x: x * x)


def test_a_packed_rule_is_checked_for_its_form():
    prim = _square_p()
    with pytest.raises(RuleError, match=r"packed and takes 3 .*\(ct, ans, primals, params, arg"):
        prim.def_vjp(lambda ct, ans, x: [2 * x * ct], packed=True)
    with pytest.raises(RuleError, match=r"packed, so one function"):
        prim.def_vjp([lambda ct, ans, x: 2 * x * ct], packed=True)
    with pytest.raises(RuleError, match=r"JVP rule .* \(tangents, ans, primals, params\): 4"):
        prim.def_jvp(lambda tangents, ans, primals, params, argnums: None, packed=True)
    with pytest.raises(RuleError, match="not a function"):
        prim.def_vjp(3.0)
    assert prim.vjp is None and prim.jvp is None  # a refused rule leaves none behind


def test_a_packed_rule_is_the_rule_the_transforms_call():
    """grad, jvp and linearize call a packed rule as given: its cotangents for the
    positions asked, its tangent with None for a zero one."""
    seen = []

    def vjp_rule(ct, ans, primals, params, argnums):
        seen.append(("vjp", tuple(argnums), params))
        x, y = primals
        return [{0: ct * y, 1: ct * x}[i] for i in argnums]

    def jvp_rule(tangents, ans, primals, params):
        seen.append(("jvp", tuple(t is None for t in tangents), params))
        (tx, ty), (x, y) = tangents, primals
        return (0.0 if tx is None else tx * y) + (0.0 if ty is None else ty * x)

    mul_p = Primitive("test_packed_multiply", lambda x, y, *, k: x * y)
    assert mul_p.def_vjp(vjp_rule, packed=True) is vjp_rule
    mul_p.def_jvp(jvp_rule, packed=True)
    f = lambda x, y: mul_p.bind(x, y, k=1)
    assert autodiff.grad(f, argnums=1)(3.0, 5.0) == 3.0
    assert seen[-1] == ("vjp", (1,), {"k": 1})
    assert autodiff.jvp(lambda x: f(x, 5.0), (3.0,), (2.0,))[1] == 10.0
    assert seen[-1] == ("jvp", (False, True), {"k": 1})


def test_a_batching_rule_takes_args_and_dims():
    prim = _square_p()
    with pytest.raises(RuleError, match=r"batching rule of primitive 'test_square'.*\(args, dims"):
        prim.def_batch(lambda args: args)
    with pytest.raises(RuleError, match="batching rule"):
        prim.def_batch("not a rule")
    rule = prim.def_batch(lambda args, dims, **params: (prim.bind(*args), dims[0]))
    np.testing.assert_array_equal(autodiff.vmap(prim.bind)(np.arange(3.0)), [0.0, 1.0, 4.0])
    assert prim.batch is rule


def test_shape_sparsity_and_lowering_rules_are_checked():
    prim = _square_p()
    for method in (prim.def_shape, prim.def_sparsity):
        with pytest.raises(TypeError, match=r"test_square.*must be a function"):
            method(np.float64(1.0))
    with pytest.raises(TypeError, match="an Elementwise or an Emitter"):
        prim.def_lowering(lambda x: x)
    prim.def_lowering(Elementwise(lambda x: x * x))
    assert prim.def_lowering(None) is None and prim.lowering is None  # removed


# --- live_again: a transform's interpreter live again after it ended -----------------------------


class _Plain(Interpreter):
    transform = "plain"


def test_live_again_restores_the_stack_and_activity_on_errors():
    with new_interpreter(_Plain()) as interp:
        pass
    seen = []

    def fails():
        with live_again(interp):
            seen.append((interp.active, current_interpreters()))
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        fails()
    assert seen == [(True, (interp,))]
    assert not interp.active and current_interpreters() == ()
    with new_interpreter(_Plain()) as outer:  # live already: not pushed twice, still active
        with live_again(outer):
            assert current_interpreters() == (outer,)
        assert outer.active


def test_live_again_holds_until_the_last_block_ends_in_any_thread():
    """Backward passes of one tape may recompute in two threads at once: the first to
    finish must not end the other's."""
    with new_interpreter(_Plain()) as interp:
        pass
    entered, release = threading.Event(), threading.Event()
    seen = []

    def other():
        with live_again(interp):
            entered.set()
            release.wait(10)
            seen.append(interp.active)

    thread = threading.Thread(target=other)
    thread.start()
    entered.wait(10)
    with live_again(interp):
        assert current_interpreters() == (interp,)
    assert interp.active  # the other thread's block still holds it
    assert current_interpreters() == ()  # this thread's stack is its own
    release.set()
    thread.join()
    assert seen == [True] and not interp.active
