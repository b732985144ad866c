"""``jit(f)`` equals ``f`` for every sample of the primitive registry (``tests/registry``).

For each sample, with ``autodiff.numpy`` and through the plain NumPy call:

* ``jit(f)(*args)`` keeps jit's contract (``tests/jit_contract.py``) on its first,
  compiled and warm calls: ``f``'s values and dtypes (signed zeros included), results
  that share memory with no argument and no other result, and that the caller may
  write into without changing a later call; and every equation of ``make_graph(f)`` has
  the shapes and dtypes its implementation gives (the shape rules, or the
  placeholder evaluation, tell the truth);
* ``jit(f)`` and ``jit(grad(f))``, closing over the sample's other arrays, keep the
  values those arrays had when staged, after the arrays are written into;

and with ``autodiff.numpy``, one composition per sample, drawn (seeded by the
function's name and the sample's position, so the same ones run every time) from
``jit(grad)``, ``grad(jit)``, ``vmap(jit)`` and ``jit(vmap)`` with drawn ``in_dims``,
``jvp(jit)``, ``jit(jvp)``, ``jit(vmap(grad))``, ``vmap(grad(jit))``: against the same
stack without ``jit``, which ``tests/test_primitives.py`` checks against finite
differences and loops;

and, for a fixed sixteenth of the samples (drawn by a hash of their names), the same two
checks with the compiling tier on (``compiling(True)``, every equation that lowers a
kernel of its own, so each primitive's lowering, elementwise or not, meets its samples);

and every lowering the package declares is compiled and run: the ``Elementwise`` ones of
``rules/`` on grids of special values (``tests/test_compiled.py``), every other one on
the first registry sample whose ``jit`` (or, for a primitive only derivatives bind,
``jit(grad)``) program puts it in a region, or on a small program of its own (control
flow, which the registry has no records for); its kernel must run (no NumPy fallback)
and give the function's results.  A lowering that no sample compiles fails the suite.

Expected failures are listed in ``tests/registry.EXPECTED_FAILURES`` under the test
names ``"jit"`` and ``"jit under transforms"``.
"""

import functools
import importlib
import sys
import warnings
import zlib

import numpy as np
import optree
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import grad, jit, jvp, make_graph, vmap
from autodiff.compiler import llvm_backend
from autodiff.compiler.stages import default_backend
from autodiff.compiler.tiers import compiling
from autodiff.core.graph import Literal
from autodiff.core.primitive import Primitive
from autodiff.errors import ConcretizationError, UnsupportedFunctionError
from tests.backends import CoercionError, StrictArray, strict, unwrap
from tests.jit_contract import assert_fresh, check_calls, check_captured
from tests.registry import EXPECTED_FAILURES, OPS
from tests.test_backends import BACKEND_NEUTRAL, SCIPY_ONLY
from tests.test_compiled import LOWERED

COMPOSITIONS = ["jit(grad)", "grad(jit)", "vmap(jit)", "jit(vmap)", "jvp(jit)", "jit(jvp)",
                "jit(vmap(grad))", "vmap(grad(jit))"]  # fmt: skip
DERIVATIVES = {"jit(grad)", "grad(jit)", "jvp(jit)", "jit(jvp)", "jit(vmap(grad))",
               "vmap(grad(jit))"}  # fmt: skip


# Samples jit refuses, with the error that says why: their results' shapes or dtypes
# depend on the values (the shape rules of eig_p and roots_p refuse staging).  Run as
# strict xfails: one that starts passing fails the suite.
VALUE_DEPENDENT = "the result's dtype or shape depends on the values"
JIT_LIMITS: dict[tuple[str, str], tuple[str, type]] = {
    ("linalg.eig", "real eigenvalues"): (VALUE_DEPENDENT, ConcretizationError),
    ("linalg.eig", "stack"): (VALUE_DEPENDENT, ConcretizationError),
    ("linalg.eig", "real, complex pair"): (VALUE_DEPENDENT, ConcretizationError),
    ("linalg.eigvals", "real"): (VALUE_DEPENDENT, ConcretizationError),
    ("linalg.eigvals", "real, complex pair"): (VALUE_DEPENDENT, ConcretizationError),
    ("roots", "real roots"): (VALUE_DEPENDENT, ConcretizationError),
    ("roots", "complex coefficients"): (VALUE_DEPENDENT, ConcretizationError),
    ("roots", "complex pair"): (VALUE_DEPENDENT, ConcretizationError),
}
# SciPy's own implementations take NumPy arrays only, eagerly as under jit
# (tests/test_backends.py checks the message).
SCIPY_ONLY_REASON = "SciPy's implementation takes NumPy arrays only"
STRICT_LIMITS = {
    ("at.multiply", "batched index"): (
        "the VJP of x.at[i].multiply(y) in y reads the index counts (to refuse repeated "
        "indices), which the strict array forbids; eagerly too",
        CoercionError,
    ),
}


def _params(test, libs, extra=None):
    params = []
    for op in OPS:
        for i, sample in enumerate(op.samples):
            for lib in libs:
                if lib == "np" and not op.has_numpy:
                    continue
                more = extra(op, sample, i) if extra else ()
                if more is None:
                    continue
                ident = f"{op.name}[{sample.label or i}]-{lib}" + (f"-{more[0]}" if more else "")
                reason = EXPECTED_FAILURES.get((op.name, test))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                limits = {**JIT_LIMITS, **(STRICT_LIMITS if "strict" in test else {})}
                limit = limits.get((op.name, sample.label))
                neutral = (op.name, sample.label) in BACKEND_NEUTRAL
                if "strict" in test and op.name in SCIPY_ONLY and not neutral:
                    limit = (SCIPY_ONLY_REASON, UnsupportedFunctionError)
                if limit is not None:
                    marks = [pytest.mark.xfail(strict=True, reason=limit[0], raises=limit[1])]
                params.append(pytest.param(op, sample, lib, *more, id=ident, marks=marks))
    return params


def assert_same(got, want, rtol=1e-12):
    got_leaves, want_leaves = optree.tree_leaves(got), optree.tree_leaves(want)
    assert optree.tree_structure(got) == optree.tree_structure(want)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        assert np.shape(g) == np.shape(w)
        assert np.result_type(g) == np.result_type(w)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-12, equal_nan=True)


def check_avals(graph, args):
    """Run ``graph`` equation by equation on ``args``; every result must have the
    shape and dtype its variable says.  Returns every variable's value."""
    env = dict(zip(graph.invars, args))
    env.update(zip(graph.constvars, graph.consts))

    def read(v):
        return v.value if type(v) is Literal else env[v]

    for eqn in graph.eqns:
        out = eqn.prim.impl(*map(read, eqn.invars), **eqn.params)
        for var, value in zip(eqn.outvars, out if eqn.prim.multiple_results else [out]):
            got = (tuple(np.shape(value)), np.result_type(value))
            assert got == (var.aval.shape, var.aval.dtype), f"{eqn.prim.name}: {var.aval}, {got}"
            env[var] = value
    return env


@pytest.mark.interpreted
@pytest.mark.parametrize(("op", "sample", "lib"), _params("jit", ("anp", "np")))
def test_jit_equals_the_function(op, sample, lib):
    """The first call (the staged graph interpreted), the second (its compiled replay,
    after the passes) and a warm one all give the function's results, as fresh arrays."""
    f = op.bound(sample, lib)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # samples at the edge of a domain
        check_calls(jit(f), f(*sample.args), sample.args)
        check_avals(make_graph(f)(*sample.args), sample.args)


def _closing(op, sample, i):
    """Samples with an array besides the first differentiated argument, for the jitted
    function to close over."""
    positions = sample.diff_positions()
    if not (op.differentiable and positions):
        return None
    others = [k for k, a in enumerate(sample.args)
              if k != positions[0] and isinstance(a, np.ndarray) and a.size]  # fmt: skip
    return () if others else None


@pytest.mark.interpreted
@pytest.mark.parametrize(("op", "sample", "lib"), _params("jit", ("anp",), extra=_closing))
def test_closed_over_arrays_are_captured_by_value(op, sample, lib):
    fn = op.bound(sample, lib)
    k = sample.diff_positions()[0]
    closed = [np.array(a, copy=True) if isinstance(a, np.ndarray) else a for a in sample.args]

    def f(x):
        return fn(*closed[:k], x, *closed[k + 1 :])

    def scalar(x):  # a real scalar of every floating output
        leaves = [o for o in optree.tree_leaves(f(x)) if np.dtype(o.dtype).kind in "fc"]
        return sum(anp.sum(anp.real(o) * (1.0 + j)) for j, o in enumerate(leaves))

    def change(c):
        c[...] = _variant(c)

    written = [c for j, c in enumerate(closed) if j != k and isinstance(c, np.ndarray) and c.size]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check_captured(lambda: (jit(f), jit(grad(scalar))), written, (sample.args[k],), change)


def _drawn(op, sample, i):
    rng = np.random.default_rng(zlib.crc32(f"{op.name}-{i}".encode()))
    differentiable = op.differentiable and bool(sample.diff_positions())
    choices = COMPOSITIONS if differentiable else [c for c in COMPOSITIONS if c not in DERIVATIVES]
    composition = choices[int(rng.integers(len(choices)))]
    dims = tuple(int(d) if d is not None else None
                 for d in rng.choice([0, -1, None], size=len(sample.args)))  # fmt: skip
    if all(d is None for d in dims):
        dims = (0, *dims[1:])
    return (composition, dims)


def _variant(a):
    """Another example like ``a``, in the same domain (index arrays stay valid)."""
    return a * 0.95 if a.dtype.kind in "fc" else np.roll(a.ravel(), 1).reshape(a.shape)


def _stacks(op, sample, composition, dims, closed=None):
    """(the stack with jit, the same without, its arguments); ``closed`` replaces the
    sample's arguments that are not differentiated (which ``f`` closes over)."""
    fn = op.bound(sample, "anp")
    positions = sample.diff_positions()
    closed = sample.args if closed is None else closed

    def f(*diff):
        args = list(closed)
        for k, x in zip(positions, diff):
            args[k] = x
        return fn(*args)

    def scalar(*diff):  # a real scalar of every floating output
        leaves = [o for o in optree.tree_leaves(f(*diff)) if np.dtype(o.dtype).kind in "fc"]
        return sum(anp.sum(anp.real(o) * (1.0 + k)) for k, o in enumerate(leaves))

    diff_args = tuple(sample.args[k] for k in positions)
    argnums = tuple(range(len(positions)))
    batched = tuple(a if d is None else np.stack([a, _variant(a)], axis=d)
                    for a, d in zip(sample.args, dims))  # fmt: skip
    tangents = tuple(np.ones_like(a) for a in diff_args)
    if composition == "jit(grad)":
        return jit(grad(scalar, argnums)), grad(scalar, argnums), diff_args
    if composition == "grad(jit)":
        return grad(jit(scalar), argnums), grad(scalar, argnums), diff_args
    if composition == "vmap(jit)":
        return vmap(jit(fn), in_dims=dims), vmap(fn, in_dims=dims), batched
    if composition == "jit(vmap)":
        return jit(vmap(fn, in_dims=dims)), vmap(fn, in_dims=dims), batched
    if composition == "jvp(jit)":
        return (lambda *a: jvp(jit(f), a, tangents)), (lambda *a: jvp(f, a, tangents)), diff_args
    if composition == "jit(jvp)":
        return jit(lambda *a: jvp(f, a, tangents)), (lambda *a: jvp(f, a, tangents)), diff_args
    # per-example gradients: the differentiable arguments batched along axis 0
    dims0 = (0,) * len(diff_args)
    per_example = tuple(np.stack([a, _variant(a)]) for a in diff_args)
    eager = vmap(grad(scalar, argnums), in_dims=dims0)
    if composition == "jit(vmap(grad))":
        return jit(eager), eager, per_example
    return vmap(grad(jit(scalar), argnums), in_dims=dims0), eager, per_example


@pytest.mark.parametrize(
    ("op", "sample", "lib", "composition", "dims"),
    _params("jit under transforms", ("anp",), extra=_drawn),
)
def test_jit_under_transforms(op, sample, lib, composition, dims):
    jitted, eager, args = _stacks(op, sample, composition, dims)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_same(jitted(*args), eager(*args), rtol=1e-10)


@pytest.mark.parametrize(("op", "sample", "lib"), _params("jit on a strict array", ("anp",)))
def test_jit_on_a_strict_duck_array(op, sample, lib):
    """The replay on another array library (``tests/backends.py``'s StrictArray, which
    refuses conversions to NumPy and plain arrays in its computations, as CuPy does):
    the constants of the graph are that library's arrays; under grad too."""
    f = op.bound(sample, lib)
    args = strict(sample.args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = jit(f)(*args)
        for leaf in optree.tree_leaves(got):
            assert type(leaf) is StrictArray or np.ndim(leaf) == 0
        assert_same(unwrap(got), f(*sample.args))
        if op.differentiable and sample.diff_positions():
            jitted, _, diff_args = _stacks(op, sample, "jit(grad)", (), closed=args)
            _, eager, _ = _stacks(op, sample, "jit(grad)", ())
            assert_same(unwrap(jitted(*strict(diff_args))), eager(*diff_args), rtol=1e-10)


# --- the compiling tier on ----------------------------------------------------------------------


def _sampled(op, sample, i):
    """A fixed sixteenth of the samples, and the composition ``_drawn`` gives them."""
    if zlib.crc32(f"compiled-{op.name}-{i}".encode()) % 16:
        return None
    return _drawn(op, sample, i)


needs_backend = pytest.mark.skipif(
    not default_backend().available(), reason=default_backend().why_not()
)


@needs_backend
@pytest.mark.parametrize(
    ("op", "sample", "lib", "composition", "dims"),
    _params("jit compiled", ("anp",), extra=_sampled),
)
def test_compiled_jit_equals_the_function(op, sample, lib, composition, dims, monkeypatch):
    """The kernels of ``jit(f)`` and of the sample's drawn composition, on their first
    (compiled), second and warm calls: ``f``'s results, fresh, as the replay's are."""
    monkeypatch.setattr(llvm_backend, "MIN_EQUATIONS", 1)  # each equation that lowers compiles
    monkeypatch.setattr(llvm_backend, "MIN_SCALAR_EQUATIONS", 1)
    f = op.bound(sample, lib)
    jitted, eager, args = _stacks(op, sample, composition, dims)
    with warnings.catch_warnings(), compiling(True):
        warnings.simplefilter("ignore", RuntimeWarning)
        check_calls(jit(f), f(*sample.args), sample.args)
        assert_same(jitted(*args), eager(*args), rtol=1e-10)


# --- every declared lowering, compiled and run ------------------------------------------------

# Programs for the lowerings the registry has no records for: control flow, and the JVP
# of a windowed maximum (``window_gather``; its transpose is in ``jit(grad)`` of the
# ``reduce_window_max`` records).
PROGRAMS = {
    "window_gather": lambda x: jvp(
        lambda v: autodiff.lax.reduce_window_max(v, (2,), (2,), "SAME"), (x,), (x * 0.5,)
    )[1],
    "cond": lambda x: autodiff.cond(anp.sum(x) > 0.0, lambda v: anp.sin(v) * 2.0,
                                    lambda v: anp.cos(v) + 1.0, x),
    "scan": lambda x: autodiff.scan(lambda c, v: (c * 0.5 + v, anp.sin(c) * 2.0), x[0], x),
    "while_loop": lambda x: autodiff.while_loop(lambda v: anp.sum(v) < 10.0,
                                                lambda v: v * 1.5 + 0.25, x),
}  # fmt: skip


def _declared_lowerings() -> dict[int, Primitive]:
    """Every primitive of the package that declares a lowering (its modules' names)."""
    for module, _ in autodiff._LAZY.values():  # the modules import autodiff leaves for first use
        importlib.import_module(module)
    found = {}
    for name, module in list(sys.modules.items()):
        if name == "autodiff" or name.startswith("autodiff."):
            for value in list(vars(module).values()):
                if isinstance(value, Primitive) and value.lowering is not None:
                    found[id(value)] = value
    return found


def _sources(derivatives: bool):
    """(label, function, arguments) of the programs that may compile a lowering, in a
    fixed order: ``PROGRAMS`` and each registry sample with ``anp``; or,
    with ``derivatives``, the ``jit(grad)`` of each differentiable sample."""
    if not derivatives:
        x = np.linspace(0.1, 0.9, 6)
        for name, fn in PROGRAMS.items():
            yield name, fn, (x,)
    for op in OPS:
        for i, sample in enumerate(op.samples):
            label = f"{op.name}[{sample.label or i}]"
            if not derivatives:
                yield label, op.bound(sample, "anp"), sample.args
            elif op.differentiable and sample.diff_positions():
                _, eager, args = _stacks(op, sample, "jit(grad)", ())
                yield f"jit(grad({label}))", eager, args


@functools.cache
def _compiling_samples() -> tuple[dict, list]:
    """For each declared lowering but the gridded ones, the program (``_sources``) with
    the fewest equations in regions, then the lowest-rank and smallest arrays, that puts
    it in one (a derivative's only where no function's does), as ``{label: (function,
    arguments, primitive names)}``; and the names of the lowerings no program compiles."""
    todo = {k: p for k, p in _declared_lowerings().items()
            if k not in {id(p) for p in LOWERED}}  # fmt: skip
    best: dict = {}  # primitive -> (equations compiled, order, label, function, arguments)
    with pytest.MonkeyPatch.context() as m, warnings.catch_warnings():
        m.setattr(llvm_backend, "MIN_EQUATIONS", 0)  # every equation that lowers is compiled
        m.setattr(llvm_backend, "MIN_SCALAR_EQUATIONS", 0)
        warnings.simplefilter("ignore")
        for derivatives in (False, True):
            for order, (label, fn, args) in enumerate(_sources(derivatives)):
                if derivatives and set(todo) <= set(best):
                    break
                try:
                    lowered = jit(fn).trace(*args).lower()
                except (ConcretizationError, UnsupportedFunctionError):
                    continue  # jit refuses it (JIT_LIMITS)
                inputs = [v.aval for r in lowered.regions for v in r.region.inputs]
                eqns = sum(len(r.eqns) for r in lowered.regions)
                size = (eqns, max((a.ndim for a in inputs), default=0), sum(a.size for a in inputs))
                for k in {id(e.prim) for r in lowered.regions for e in r.eqns} & set(todo):
                    if k not in best or (not derivatives and (size, order) < best[k][:2]):
                        best[k] = (size, order, label, fn, args)
    chosen: dict = {}
    for k, (_, _, label, fn, args) in best.items():
        chosen.setdefault(label, (fn, args, []))[2].append(todo[k].name)
    return chosen, sorted(p.name for k, p in todo.items() if k not in best)


def test_every_declared_lowering_is_compiled_by_a_sample():
    chosen, never = _compiling_samples()
    assert not never, f"no sample compiles the lowering of {never}: add a registry sample"
    assert len(chosen) <= 30  # (the compiling test below stays cheap)


@needs_backend
@pytest.mark.parametrize("part", range(4))
def test_every_declared_lowering_runs_and_equals_the_function(part, monkeypatch):
    """The chosen programs, a quarter each, compiled (with every equation that lowers in
    a region): each chosen lowering in a kernel that runs (no NumPy fallback), each
    kernel's results equal to its region's as NumPy computes them and sharing memory
    with none of its inputs (an emitter's undeclared view would), the function's results
    equal and fresh."""
    monkeypatch.setattr(llvm_backend, "MIN_EQUATIONS", 0)
    monkeypatch.setattr(llvm_backend, "MIN_SCALAR_EQUATIONS", 0)
    chosen, _ = _compiling_samples()
    for label in sorted(chosen)[part::4]:
        fn, args, names = chosen[label]
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            compiled = jit(fn).trace(*args).lower().compile()
            got, want = compiled(*args), fn(*args)
            # each kernel alone, on its region's inputs as NumPy computes them
            env = check_avals(compiled.lowered.graph, optree.tree_leaves(args))
            for kernel in compiled.kernels:
                inputs = [env[v] for v in kernel.region.inputs]
                for var, out in zip(kernel.region.outputs, kernel.impl(*inputs), strict=True):
                    assert_same(out, env[var], rtol=1e-10)
                    shared = [i for i in inputs if np.shares_memory(out, i)]
                    assert not shared, f"{label}: a kernel's result views its input"
        kernels_run = {e.prim.name for k in compiled.kernels for e in k.region.eqns}
        assert set(names) <= kernels_run, f"{label}: {names} not compiled"
        assert all(k.impl.fallback.calls == 0 for k in compiled.kernels), f"{label}: fell back"
        assert_same(got, want, rtol=1e-10)
        assert_fresh(got, args, label)
