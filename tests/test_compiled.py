"""jit's compiling tier (``compiler/llvm_*.py``): what compiles computes what NumPy computes,
bit for bit.

* every ``Elementwise`` lowering against the primitive's NumPy implementation, on the
  special values of every dtype (NaN, infinities, signed zeros, subnormals, the
  extremes), exactly: the kernels call NumPy's own loops where IEEE arithmetic does not
  fix the result;
* fusion: operands broadcast along any axis, 0-d values, Python and NumPy scalars with
  NumPy's promotion, float32 kept; small loops (LLVM vectors) and long ones (loops, runs
  of NumPy's buffer size) alike;
* reductions in NumPy's order, bit for bit, on every axis and layout (transposed views);
* loops: ``while_loop``, ``fori_loop``, ``scan`` (reversed, stacking ``y``), ``cond`` and
  ``switch`` inside them, ``vmap`` of a loop, ``jit(grad(scan))``, compiled whole;
* NumPy's floating-point errors and exceptions, exactly, where a kernel meets them;
* the tiers: ``compile="auto"`` compiles a hot signature in the background and swaps the
  kernels in, ``compile=False`` never compiles, without llvmlite ``jit`` is what it was;
* user primitives declare lowerings; one that does not lower stays NumPy calls.

The disk cache and the silent-wrong-answer classes of issue 31 have files of their own
(``tests/test_kernel_cache.py``, ``tests/test_compiled_exactness.py``); jit's whole
contract with the tier on is checked by ``tests/test_jit_programs.py`` and
``tests/test_jit_registry.py`` (a compiled variant of each).
"""

import gc
import math
import warnings

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import cond, fori_loop, grad, jit, scan, switch, vmap, while_loop
from autodiff.compiler import background, llvm_backend, llvm_codegen, llvm_engine, tiers
from autodiff.compiler.tiers import compiling
from autodiff.core.lowering import Elementwise, Emitter, NotLowered
from autodiff.errors import TransformValueError
from autodiff.extend import Primitive
from tests.jit_contract import assert_exact, check_calls

BACKEND = llvm_backend.BACKEND
needs_llvm = pytest.mark.skipif(not BACKEND.available(), reason=BACKEND.why_not())
pytestmark = needs_llvm


def compiled(f, **kw):
    """``jit(f)`` whose calls run its kernels (tests compile at once)."""
    return jit(f, compile=True, **kw)


def kernels_of(jitted):
    found = jitted._entries[next(iter(jitted._entries))].compiled
    return found.kernels if found is not None else ()


def fused_graph(jitted):
    return jitted._entries[next(iter(jitted._entries))].compiled.graph


def fallbacks(jitted):
    return sum(k.impl.fallback.calls for k in kernels_of(jitted))


def assert_bits(got, want, what=""):
    """The same dtype and values, to the bit (a NaN's sign and payload are free)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    if want.dtype.kind == "f":
        nan = np.isnan(want)
        np.testing.assert_array_equal(np.isnan(got), nan, err_msg=what)
        bits = f"u{want.dtype.itemsize}"
        np.testing.assert_array_equal(got[~nan].view(bits), want[~nan].view(bits), err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


# --- every elementwise lowering, on special values, to the bit ---------------------------------

FLOATS = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -2.5, 3.0, -7.25, 10.0, 100.0,
          0.7853981633974483, 1e-300, -1e-310, 5e-324, 1e300, -1e308, 710.0, -745.5,
          np.inf, -np.inf, np.nan]  # fmt: skip
INTS = [0, 1, -1, 2, -3, 7, 100, -128, 255, 2**31 - 1, -(2**31), 2**62, -(2**63)]


def _lowered_primitives():
    import importlib

    import autodiff.rules as rules

    for family in rules.ON_FIRST_USE:  # imported at first use: not yet attributes of rules
        importlib.import_module(f"autodiff.rules.{family}")
    found = {}
    for module in vars(rules).values():
        if getattr(module, "__name__", "").startswith("autodiff.rules."):
            for value in vars(module).values():
                if isinstance(value, Primitive) and isinstance(value.lowering, Elementwise):
                    found[value.name] = value
    return [found[k] for k in sorted(found)]


LOWERED = _lowered_primitives()
PARAMS = {
    "astype": [{"dtype": np.dtype(np.float32)}, {"dtype": np.dtype(np.float64)}],
    "astype_discrete": [{"dtype": np.dtype(t)} for t in (np.int64, np.int32, np.bool_)],
}
NARGS = {"where": 3}


def _nargs(prim):
    if prim.name in PARAMS:
        return 1
    if prim.name in NARGS:
        return NARGS[prim.name]
    if isinstance(prim.lowering.fn, np.ufunc):
        return prim.lowering.fn.nin
    for n in (1, 2, 3):
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prim.impl(*([np.ones(2)] * n))
        except (TypeError, ValueError):
            continue
        return n
    raise AssertionError(prim.name)


def _grids(nargs, size):
    """Per dtype, operand arrays covering every combination of special values (tiled to
    ``size`` elements: below and above the length of LLVM vectors and of a run)."""
    values = {np.float64: FLOATS, np.float32: FLOATS, np.int64: INTS, np.int32: INTS[:11],
              np.uint8: [0, 1, 2, 7, 128, 255], np.bool_: [False, True]}  # fmt: skip
    for dtype, vals in values.items():
        with np.errstate(all="ignore"):
            column = np.array(vals).astype(dtype)
        if nargs == 1:
            grid = (column,)
        else:
            a, b = np.meshgrid(column, column, indexing="ij")
            grid = (a.ravel(), b.ravel())
            if nargs == 3:
                grid = (np.arange(a.size) % 3 == 0, *grid)
        reps = -(-size // grid[-1].size)
        yield np.dtype(dtype), tuple(np.tile(g, reps)[:size] for g in grid)


@pytest.mark.parametrize("size", [5, 50_000], ids=["vector", "loop"])
@pytest.mark.parametrize("prim", LOWERED, ids=lambda p: p.name)
def test_every_elementwise_lowering_computes_what_numpy_computes(prim, size, monkeypatch):
    monkeypatch.setattr(llvm_backend, "MIN_EQUATIONS", 1)  # one equation is a region here
    monkeypatch.setattr(llvm_backend, "MIN_SCALAR_EQUATIONS", 1)
    nargs = _nargs(prim)
    for dtype, args in _grids(nargs, size):
        for params in PARAMS.get(prim.name, [{}]):
            if params.get("dtype") == dtype:
                continue  # a cast to the same dtype is no equation
            with np.errstate(all="ignore"):
                try:
                    want = prim.impl(*args, **params)
                except (TypeError, ValueError):  # NumPy has no loop for these dtypes
                    continue
                f = compiled(lambda *xs, params=params: prim.bind(*xs, **params))
                got = f(*args)
                got = f(*args)  # (the first call of a fused replay is NumPy's)
            what = f"{prim.name} on {dtype} {params}"
            if not kernels_of(f):
                assert not llvm_backend.lowerable(_only_eqn(f, args)), what
                continue
            assert fallbacks(f) == 0, what
            assert_bits(got, want, what)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("size", [0, 5, 50_000], ids=["0-d", "vector", "loop"])
@pytest.mark.parametrize(
    "name",
    [
        "less",
        "less_equal",
        "greater",
        "greater_equal",
        "equal",
        "not_equal",
        "isfinite",
        "isinf",
        "isnan",
        "min by where",
    ],
)
def test_comparisons_with_nan_are_quiet_as_numpys(name, size, dtype, monkeypatch):
    """NumPy's comparisons raise no invalid flag for a NaN operand, so under
    ``np.errstate(invalid="raise")`` nothing raises, and the kernel's result is the one
    used (a signalling compare, x86's ``cmpltpd`` or the ``minpd`` LLVM makes of
    ``x < y ? x : y``, ran the region again as NumPy calls)."""
    monkeypatch.setattr(llvm_backend, "MIN_EQUATIONS", 1)
    monkeypatch.setattr(llvm_backend, "MIN_SCALAR_EQUATIONS", 1)
    with np.errstate(over="ignore"):
        values = np.array(FLOATS).astype(dtype)
    x, y = (g.ravel() for g in np.meshgrid(values, values, indexing="ij"))
    if size:
        x, y = np.resize(x, size), np.resize(y[::-1], size)
    ufunc = getattr(np, name, None)
    f = {"min by where": lambda x, y: anp.where(x < y, x, y),
         "isfinite": lambda x, y: ufunc(x), "isinf": lambda x, y: ufunc(x),
         "isnan": lambda x, y: ufunc(x)}.get(name, ufunc)  # fmt: skip
    for a, b in [(x, y)] if size else [(np.array(u), np.array(v)) for u, v in zip(x, y)][::7]:
        with np.errstate(all="raise"):
            want = f(a, b)
            jitted = compiled(f)
            got = [jitted(a, b) for _ in range(2)][-1]
        assert kernels_of(jitted) and fallbacks(jitted) == 0, (a, b)
        assert_bits(got, want, f"{name}({a}, {b})" if not size else name)


def _only_eqn(f, args):
    (eqn,) = f.trace(*args).lower().graph.eqns
    return eqn


def test_the_elementwise_lowerings_that_compile():
    """Which dtypes the test above compiles for: every ufunc on float64, and float32."""
    x = np.linspace(0.1, 0.9, 7)
    for prim in LOWERED:
        if prim.name in PARAMS or prim.name == "where" or _nargs(prim) != 1:
            continue
        for dtype in (np.float64, np.float32):
            try:
                with np.errstate(all="ignore"):
                    prim.impl(x.astype(dtype))
            except TypeError:
                continue
            f = jit(lambda v, prim=prim: prim.bind(v))
            (eqn,) = f.graph(x.astype(dtype)).eqns
            assert llvm_backend.lowerable(eqn), f"{prim.name} on {dtype}"


# --- fusion -------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 4), (300, 40)], ids=["vector", "loop"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_loops_broadcast_and_promote_as_numpy(dtype, shape):
    rng = np.random.default_rng(0)
    n, m = shape
    x = rng.standard_normal((n, 1)).astype(dtype)
    y = rng.standard_normal((1, m)).astype(dtype)
    z = np.array(0.75, dtype)  # a 0-d array
    w = rng.standard_normal(m).astype(dtype)

    def f(x, y, z, w):
        a = anp.sin(x) * y + z
        b = anp.tanh(a * 2.0 - w) / (1.5 + anp.abs(w))  # a Python float keeps dtype
        c = b * np.float64(0.5) if dtype == np.float64 else b * np.float32(0.5)
        d = anp.maximum(c, -0.25) + anp.where(c > 0, w, -w) + c**2 + c**0.5
        return d, anp.exp(z * 2.0) - 1.0, (x * 3.0 + 1.0) * x

    jitted = compiled(f)
    with np.errstate(invalid="ignore"):
        check_calls(jitted, f, (x, y, z, w), rtol=0)
        got = jitted(x, y, z, w)
        for g, want in zip(got, f(x, y, z, w), strict=True):
            assert_bits(g, want)
    assert [g.dtype for g in got] == [np.dtype(dtype)] * 3
    (kernel,) = kernels_of(jitted)
    assert len(kernel.region.eqns) >= 15
    assert fallbacks(jitted) == 0


def test_signed_zeros_nans_and_infinities_pass_through_kernels():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-310, -2.0, 3.0])
    z = np.array([[-0.0, 0.0, -0.0], [-0.0, -0.0, -0.0]])  # sums and extremes of zeros

    def f(x, z):
        return (anp.sign(x) * 1.0, anp.maximum(x, -x) + 0.0, anp.minimum(x * -1.0, x),
                anp.where(x > 0, x, -x) * 2.0, anp.copysign(1.0, x) * anp.abs(x),
                anp.sum(x * 0.0), anp.max(-x * 1.0), anp.sum(z * 1.0), anp.sum(z * 1.0, axis=1),
                anp.max(z * 1.0, axis=0), anp.min(-z * 1.0, axis=1))  # fmt: skip

    with np.errstate(all="ignore"):
        jitted = compiled(f)
        for _ in range(3):
            for g, w in zip(jitted(x, z), f(x, z), strict=True):
                assert_bits(g, w)
    assert kernels_of(jitted) and fallbacks(jitted) == 0


# --- reductions, in NumPy's order ---------------------------------------------------------------


def _cancelling(rng, shape, dtype):
    """Terms of many magnitudes and both signs: any other order of summation shows."""
    return (rng.standard_normal(shape) * 10.0 ** rng.integers(-8, 8, shape)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(7,), (1000,), (100_001,), (5, 300), (300, 5), (3, 4, 200),
                                   (17, 33, 9)])  # fmt: skip
def test_reductions_are_numpys_to_the_bit(shape, dtype):
    rng = np.random.default_rng(len(shape) * 1000 + shape[0])
    x = _cancelling(rng, shape, dtype)
    axes = [None, *range(x.ndim), *([(0, x.ndim - 1)] if x.ndim > 2 else [])]
    for transpose in (False, True):  # a view whose memory order is not C's
        for axis in axes:

            def f(v, axis=axis, transpose=transpose):
                v = v * 1.0
                v = anp.transpose(v) if transpose else v
                return anp.sum(v, axis=axis), anp.max(v, axis=axis), anp.min(-v, axis=axis)

            jitted = compiled(f)
            jitted(x)
            for got, want in zip(jitted(x), f(x), strict=True):
                assert_bits(got, want, f"{shape} {dtype.__name__} axis={axis} T={transpose}")
            assert kernels_of(jitted) and fallbacks(jitted) == 0


def test_sums_of_integers_and_booleans_and_any_all():
    rng = np.random.default_rng(3)
    i = rng.integers(-100, 100, (6, 7)).astype(np.int32)
    b = rng.random((6, 7)) > 0.5

    def f(i, b):
        return (anp.sum(i * 2, axis=0), anp.sum(b & b, axis=1), anp.any(b | b, axis=0),
                anp.all(b | ~b), anp.max(i + 1), anp.sum(i - 1, keepdims=True))  # fmt: skip

    jitted = compiled(f)
    check_calls(jitted, f, (i, b), rtol=0)
    assert kernels_of(jitted) and fallbacks(jitted) == 0


# --- loops --------------------------------------------------------------------------------------


def _loops():
    def newton(a):  # while_loop: x <- (x + a / x) / 2
        return while_loop(lambda x: anp.max(anp.abs(x * x - a)) > 1e-12,
                          lambda x: 0.5 * (x + a / x), a)  # fmt: skip

    def fori(a):
        return fori_loop(0, 7, lambda i, c: (c[0] * 0.5 + anp.sin(c[1]), c[1] + i), (a, a))

    def fori_traced(a, n):
        return fori_loop(0, n, lambda i, c: c * 1.01 + anp.cos(c), a)

    def rnn(w, xs):  # scan, reversed, stacking y; a cond and a switch inside the body
        def step(h, x):
            h = anp.tanh(w @ h + x)
            h = cond(anp.sum(h) > 0, lambda v: v * 0.5, lambda v: v - 0.25, h)
            k = anp.astype(anp.abs(anp.sum(h)) * 3.0, np.int64)
            h = switch(k, [lambda v: v, lambda v: v * 2.0, lambda v: -v], h)
            return h, anp.sum(h * h)

        return scan(step, anp.zeros(3), xs, reverse=True)

    def batched_newton(a):  # vmap of a while_loop: a batched predicate
        def one(ai):
            def step(c):
                d = (c[0] ** 3 - ai) / (3 * c[0] ** 2)
                return c[0] - d, d

            return while_loop(lambda c: anp.abs(c[1]) > 1e-13, step, (ai, 1.0))[0]

        return vmap(one)(a)

    def rnn_grad(w, xs):  # jit(grad(scan)): two staged scans
        def loss(w):
            h, ys = scan(lambda h, x: (anp.tanh(w @ h + x), anp.sum(h)), anp.ones(3), xs)
            return anp.sum(h) + anp.sum(ys)

        return grad(loss)(w)

    def swap(a):  # carries that exchange places each step (a write order hazard)
        return fori_loop(0, 5, lambda i, c: (c[1], c[0] * 2.0 + c[2], c[2] + 1.0), (a, -a, a))

    rng = np.random.default_rng(1)
    w, xs = rng.standard_normal((3, 3)) / 2, rng.standard_normal((6, 3))
    a = np.linspace(1.0, 5.0, 6)
    return {
        "while_loop": (newton, (a,)),
        "fori_loop": (fori, (a,)),
        "fori_loop, traced bounds": (fori_traced, (a, np.int64(5))),
        "scan with cond and switch": (rnn, (w, xs)),
        "vmap(while_loop)": (batched_newton, (a,)),
        "jit(grad(scan))": (rnn_grad, (w, xs)),
        "carries swapping": (swap, (a,)),
    }


LOOPS = _loops()


@pytest.mark.parametrize("name", list(LOOPS))
def test_loops_compile_whole_and_equal_the_replay(name):
    f, args = LOOPS[name]
    jitted = compiled(f)
    check_calls(jitted, jit(f, compile=False), args, rtol=0)
    found = kernels_of(jitted)
    assert found and all(k.impl.fallback.calls == 0 for k in found)
    # the loop itself is compiled: no loop primitive is left between the kernels
    assert not any(getattr(e.prim, "runs_functions", False) for e in fused_graph(jitted).eqns)


def _partly_body(v, s):
    """A step of which ``cumsum`` does not lower: a kernel, a NumPy call, a kernel."""
    v = anp.cumsum(anp.sin(v) * s + v) * 0.5
    return v * 0.9 + 0.1


def _partly_while(x):
    return while_loop(lambda c: c[0] < 6, lambda c: (c[0] + 1, _partly_body(c[1], 2.0)), (0, x))[1]


def _partly_between(x):  # compiled code around the loop as well
    return anp.exp(_partly_while(anp.tanh(x) * 3.0 + 1.0)) * 2.0 - x


def _partly_scan(x):
    def step(c, s):
        c = _partly_body(c, s)
        return c, anp.sum(c * c)

    return scan(step, x, np.linspace(0.1, 1.0, 6))


def _partly_scan_grad(x):
    c, ys = _partly_scan(x)
    return anp.sum(anp.cos(c)) + anp.sum(ys)


PARTLY = {
    "while_loop": (_partly_while, lambda f: f),
    "while_loop between kernels": (_partly_between, lambda f: f),
    "scan": (_partly_scan, lambda f: f),
    "jit(grad(scan))": (_partly_scan_grad, grad),
    "grad(jit(scan))": (_partly_scan_grad, lambda f: f),  # jit inside grad: call_p's graphs
    "vmap(jit(scan))": (_partly_scan, lambda f: f),
}


@pytest.mark.interpreted  # the first call interpreted, as a user's: its loops' bodies too
@pytest.mark.parametrize("name", list(PARTLY))
@pytest.mark.parametrize("mode", [True, False])
def test_a_loop_whose_body_lowers_in_part_runs_its_kernels_between_numpy_calls(
    name, mode, monkeypatch
):
    """The body's compiled regions run at every step, NumPy's cumsum between them (the
    outer program may have nothing to compile: the loop is its one NumPy call); with
    ``compile=False`` none ever compiles, in the first, interpreted, call either."""
    ran: dict[tuple, int] = {}
    real = llvm_backend.caller

    def counting(entry, region, *args, **kwargs):
        run = real(entry, region, *args, **kwargs)
        prims = tuple(e.prim.name for e in region.eqns)

        def counted(*xs):
            ran[prims] = ran.get(prims, 0) + 1
            return run(*xs)

        counted.fallback = run.fallback
        return counted

    monkeypatch.setattr(llvm_backend, "caller", counting)
    fun, transform = PARTLY[name]
    x = np.linspace(-1.0, 1.0, 7)
    xs = np.stack([x, x * 0.5 + 0.25, -x])
    if name.startswith("grad(jit"):
        run_plain = lambda: grad(jit(fun, compile=False))(x)
        jitted = jit(fun, compile=mode)
        run_jit = lambda: grad(jitted)(x)
    elif name.startswith("vmap(jit"):  # (a while_loop or cond there runs as eagerly)
        run_plain = lambda: vmap(jit(fun, compile=False))(xs)
        jitted = jit(fun, compile=mode)
        run_jit = lambda: vmap(jitted)(xs)
    else:
        run_plain = lambda: transform(fun)(x)
        jitted = jit(transform(fun), compile=mode)
        run_jit = lambda: jitted(x)
    want = run_plain()
    with compiling(False):
        assert_exact(run_plain(), want)  # the replay alone, for reference
    ran.clear()
    for _ in range(4):
        assert_exact(run_jit(), want, rtol=0)
    background.wait_for_background(timeout=120)
    in_body = sum(n for prims, n in ran.items() if "sin" in prims and "tanh" not in prims)
    if mode is False:
        assert ran == {}
    else:  # six steps a call: the body's kernels ran at (nearly) every one
        assert in_body >= 6 * 3, ran


def test_a_loop_with_a_primitive_that_does_not_lower_stays_a_python_loop():
    opaque_p = Primitive("opaque", lambda x: np.round(x, 3))  # no lowering

    def f(a):
        return while_loop(lambda x: anp.max(x) < 10.0, lambda x: opaque_p.bind(x * 1.5 + 0.1), a)

    a = np.linspace(0.5, 1.0, 4)
    jitted = compiled(f)
    check_calls(jitted, f, (a,))
    if kernels_of(jitted):  # the loop is the replay's, its operands' arithmetic compiled
        assert any(e.prim.name == "while_loop" for e in fused_graph(jitted).eqns)


def _smooth(x):
    return anp.sum(anp.tanh(anp.sin(x) * 1.5 + x) * anp.cos(x))


@pytest.mark.parametrize("transform", ["grad", "vmap", "jvp"])
def test_transforms_of_a_jitted_function_run_compiled(transform, monkeypatch):
    """grad(jit(f)), vmap(jit(f)), jvp(jit(f)): the graphs call_p runs (forward and
    backward, batched, JVP) are compiled as a signature is, NumPy's values to the bit."""
    made = []
    real = tiers.compiled

    def spy(graph, *args, **kwargs):
        made.append(real(graph, *args, **kwargs))
        return made[-1]

    monkeypatch.setattr(tiers, "compiled", spy)
    x, xs = np.linspace(-1.0, 1.0, 6), np.linspace(-1.0, 1.0, 12).reshape(4, 3)

    def run(f):
        if transform == "grad":
            return grad(f)(x)
        if transform == "vmap":
            return vmap(f)(xs)
        return autodiff.jvp(f, (x,), (np.ones(6),))

    want = run(jit(_smooth, compile=False))
    for _ in range(2):
        assert_exact(run(jit(_smooth, compile=True)), want)
    assert any(found is not None and found.kernels for found in made)


# --- NumPy's floating-point errors and exceptions, exactly -------------------------------------


def test_floating_point_errors_are_reported_as_numpy_reports_them():
    def f(x):
        return anp.log(x) * 2.0 + anp.sqrt(anp.abs(x)) * 0.5

    x = np.array([1.0, -1.0, 4.0])
    jitted = compiled(f)
    with pytest.warns(RuntimeWarning, match="invalid value encountered in log"):
        want = f(x)
    for _ in range(2):
        with pytest.warns(RuntimeWarning, match="invalid value encountered in log"):
            assert_exact(jitted(x), want)
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError, match="log"):
        jitted(x)
    calls = fallbacks(jitted)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_exact(jitted(x), want)  # nothing to report: the kernel's own results
    assert fallbacks(jitted) == calls
    ok = np.array([1.0, 2.0, 4.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_exact(jitted(ok), f(ok))
    assert fallbacks(jitted) == calls


def test_numpy_exceptions_raised_in_a_kernel_are_numpys():
    def f(a, b):
        return anp.linalg.solve(a * 1.0 + 0.0, b * 2.0 + 1.0)

    jitted = compiled(f)
    a, b = np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([1.0, 0.5])
    for _ in range(2):
        assert_exact(jitted(a, b), f(a, b), rtol=0)
    assert kernels_of(jitted)
    singular = np.ones((2, 2))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        f(singular, b)
    for state in ("warn", "ignore"):  # whatever the caller's errstate, as NumPy's solve
        with np.errstate(invalid=state), pytest.raises(np.linalg.LinAlgError, match="Singular"):
            jitted(singular, b)


# --- fresh results, layouts ---------------------------------------------------------------------


def test_results_of_kernels_share_memory_with_nothing():
    def f(x, y):
        a = x * 2.0 + y
        return a, anp.transpose(a), a[0], x[0] * 1.0 + 0.0, anp.reshape(a * 3.0 - 1.0, (-1,))

    x, y = np.ones((2, 3)), np.full(3, 0.5)
    check_calls(compiled(f), f, (x, y))

    def g(a):  # a loop whose carry comes back unchanged (zero iterations)
        return while_loop(lambda v: anp.sum(v) > 100.0, lambda v: v * 0.5 - 0.1, a)

    check_calls(compiled(g), g, (np.ones(3),))


def test_arguments_the_kernel_does_not_take_run_as_numpy_calls():
    """A strided view (NumPy's order of a sum follows the layout), a Python int for an
    int64, a subclass: converted where that changes nothing, else NumPy calls."""

    def f(x, k):
        return anp.sum(anp.sin(x) * 2.0 + x * x, axis=0) + k

    base = np.linspace(0, 1, 16).reshape(4, 4)
    jitted = compiled(f)
    k = np.int64(3)
    assert_bits(jitted(base, k), f(base, k))
    assert_bits(jitted(base, k), f(base, k))
    assert fallbacks(jitted) == 0
    view = base.T
    assert_bits(jitted(view, k), f(view, k))
    assert fallbacks(jitted) == 1
    python_int = compiled(f)  # a signature of its own: a weak int64
    for _ in range(3):
        assert_bits(python_int(base, 3), f(base, 3))
    assert kernels_of(python_int) and fallbacks(python_int) == 0


def test_a_kernel_no_function_uses_is_released():
    def f(x):
        return anp.cos(x) * 0.125 + anp.sin(x) * 0.375

    gc.collect()
    before = llvm_engine.live_engines()
    jitted = compiled(f)
    jitted(np.ones(5))
    assert kernels_of(jitted)
    assert llvm_engine.live_engines() == before + 1
    del jitted
    gc.collect()
    assert llvm_engine.live_engines() == before


def test_a_function_freed_by_a_collection_while_one_is_made_does_not_deadlock():
    """A garbage collection while ``_Definitions.function`` allocates (holding its lock)
    frees a dead function's definition in the same thread: that must not wait for the
    lock (it hung a full test run).  On an instance of its own, in a thread of its own,
    so that a regression fails here rather than hanging every later kernel."""
    import threading

    definitions = llvm_engine._Definitions()
    freed = threading.Event()

    def collect_while_allocating():
        with definitions.lock:  # as function() holds it while it allocates
            definitions._free(object())  # what a weak reference's callback runs
        freed.set()

    threading.Thread(target=collect_while_allocating, daemon=True).start()
    assert freed.wait(10)
    assert len(definitions.free) == 1


# --- the tiers ----------------------------------------------------------------------------------


@pytest.mark.interpreted
def test_auto_compiles_a_hot_signature_in_the_background_and_swaps_it_in(monkeypatch):
    jobs = []
    monkeypatch.setattr(background, "compile_later", jobs.append)  # held, not run

    def f(x):
        return anp.tanh(anp.sin(x) * 1.5 + 0.25) * x

    jitted = jit(f)  # compile="auto"
    x = np.linspace(-1, 1, 5)
    for _ in range(tiers.HOT_CALLS + 5):
        assert_exact(jitted(x), f(x), rtol=0)
    assert len(jobs) == 1  # hot once: one compilation asked for, none waited for
    assert not kernels_of(jitted)
    jobs[0]()  # the background thread's work
    assert kernels_of(jitted)
    for _ in range(3):
        assert_exact(jitted(x), f(x), rtol=0)
    assert kernels_of(jitted)


@pytest.mark.interpreted
def test_auto_compiles_in_a_thread_no_call_waits_for():
    def f(x):
        return anp.cos(x) * 2.375 - anp.exp(x * 0.5)

    jitted = jit(f)
    x = np.linspace(0, 1, 7)
    for _ in range(tiers.HOT_CALLS + 1):
        assert_exact(jitted(x), f(x), rtol=0)
    assert background.wait_for_background(timeout=120)
    for _ in range(2):
        assert_exact(jitted(x), f(x), rtol=0)
    assert kernels_of(jitted)


@pytest.mark.interpreted
def test_compile_false_never_compiles():
    jitted = jit(lambda x: anp.sin(x) * 2.0 + 1.0, compile=False)
    x = np.ones(3)
    for _ in range(tiers.HOT_CALLS + 3):
        jitted(x)
    background.wait_for_background(timeout=120)
    assert "define" not in jitted.source(x)


@pytest.mark.interpreted
def test_without_llvmlite_jit_is_what_it_was(monkeypatch):
    monkeypatch.setattr(BACKEND, "available", lambda: False)
    monkeypatch.setattr(BACKEND, "why_not", lambda: "llvmlite is not installed (simulated)")
    with pytest.raises(TransformValueError, match="llvmlite is not installed"):
        jit(lambda x: x, compile=True)

    def f(x):
        return anp.sin(x) * 2.0 + 1.0

    jitted = jit(f)
    x = np.linspace(0, 1, 4)
    for _ in range(tiers.HOT_CALLS + 3):
        check_calls(jitted, f, (x,))
    assert not kernels_of(jitted)
    with compiling(True):  # forcing it where it is unavailable compiles nothing
        check_calls(jit(f), f, (x,))


def test_the_environment_switches_the_tier_off(monkeypatch):
    monkeypatch.setenv("AUTODIFF_COMPILE", "0")
    assert not BACKEND.available()
    assert "AUTODIFF_COMPILE=0" in BACKEND.why_not()


@pytest.mark.parametrize("bad", ["yes", 1, None, "always"])
def test_compile_takes_auto_true_or_false(bad):
    with pytest.raises(TransformValueError, match="compile must be 'auto'"):
        jit(lambda x: x, compile=bad)


# --- user primitives ----------------------------------------------------------------------------


def test_user_primitives_declare_their_lowering():
    softplus_p = Primitive(
        "softplus",
        lambda x: np.logaddexp(x, 0.0),
        lowering=Elementwise(lambda x: np.logaddexp(x, 0.0)),  # traced: NumPy's logaddexp
    )

    def _norm_rows(ctx, x):  # an Emitter: statements on whole arrays
        if ctx.in_avals[0].ndim != 2:
            raise NotLowered("rows of a matrix only")
        return ctx.apply(np.sqrt, ctx.reduce(np.add, ctx.apply(np.multiply, x, x), axis=(1,)))

    row_norm_p = Primitive("row_norm", lambda x: np.sqrt(np.sum(x * x, axis=1)),
                           lowering=Emitter(_norm_rows))  # fmt: skip
    opaque_p = Primitive("opaque", lambda x: x.round(6))  # no lowering: a NumPy call

    def f(x):
        a = softplus_p.bind(x * 2.0) - 1.0
        b = row_norm_p.bind(a) * 3.0 + 1.0
        return opaque_p.bind(b) * 2.0 + anp.sum(a)

    x = np.linspace(-2, 2, 12).reshape(3, 4)
    jitted = compiled(f)
    check_calls(jitted, f, (x,), rtol=0)
    found = kernels_of(jitted)
    assert len(found) == 2  # two kernels, the opaque primitive a NumPy call between them
    assert [e.prim.name for e in fused_graph(jitted).eqns] == ["kernel", "opaque", "kernel"]


@pytest.mark.parametrize(
    "shape", [(), (3,), (100,), (3, 9000)], ids=["0-d", "vector", "chunked", "chunked, 2-d"]
)
def test_a_value_a_lowering_drops_is_not_computed(shape):
    """An Elementwise lowering whose function computes a value it then drops (a NumPy
    loop's, as ``rules/convolution.py``'s ``_choosing`` could): the kernel compiles (a
    call of NumPy's loop nothing reads once raised KeyError while writing its loop) and
    makes no such call (its invalid flag would rerun the region as NumPy calls)."""
    doubled_p = Primitive(
        "doubled", lambda x: x * 2.0,
        lowering=Elementwise(lambda x: (np.log(x), np.maximum(x, 0.0), x * 2.0)[2]),
    )  # fmt: skip

    def f(x):
        for _ in range(4):  # enough 0-d equations for a kernel
            x = doubled_p.bind(x * 1.5) - 1.0
        return x

    x = -np.linspace(1.0, 2.0, math.prod(shape)).reshape(shape)  # log: the invalid flag
    jitted = compiled(f)
    check_calls(jitted, f, (x,), rtol=0)
    assert kernels_of(jitted) and fallbacks(jitted) == 0


def test_a_scalar_function_with_python_control_flow_stays_numpy_calls():
    strange_p = Primitive(
        "strange", lambda x: np.where(x > 0, x, 0.0),
        lowering=Elementwise(lambda x: x if x > 0 else 0.0),  # bool() of a traced value
    )  # fmt: skip

    def f(x):
        return strange_p.bind(x * 2.0) * 3.0 + x

    x = np.linspace(-1, 1, 5)
    jitted = compiled(f)
    check_calls(jitted, f, (x,))
    for k in kernels_of(jitted):
        assert "strange" not in [e.prim.name for e in k.region.eqns]


def test_a_lowering_is_declared_as_one():
    with pytest.raises(TypeError, match="a lowering is an Elementwise or an Emitter"):
        Primitive("p", np.sin, lowering=np.sin)
    assert isinstance(autodiff.numpy.sin.primitive.lowering, Elementwise)


def test_views_cost_nothing_and_follow_numpys_copies():
    """Reshapes, transposes, static indices and broadcasts are layouts, found by NumPy on
    a stand-in; a reshape NumPy must copy (of a transposed array) copies first."""

    def f(x):
        t = anp.transpose(x * 2.0)  # (4, 3), not C order
        r = anp.reshape(t, (12,)) + 1.0  # NumPy copies here
        s = x[1:, ::-1] * x[0] + anp.expand_dims(x[1:, 0], 1)
        return r, s, anp.broadcast_to(x[0], (2, 4)) * 1.0, x[2, 3] * 2.0

    x = np.arange(12.0).reshape(3, 4)
    jitted = compiled(f)
    check_calls(jitted, f, (x,), rtol=0)
    assert len(kernels_of(jitted)) == 1 and fallbacks(jitted) == 0
    cg = llvm_codegen.Codegen()
    a = cg.param(autodiff.core.graph.ShapedArray((3, 4), np.float64), "p0")
    v = cg.view(a, lambda z: z.T[::2])
    assert (v.shape, v.strides, v.offset) == ((2, 3), (2, 4), 0)
