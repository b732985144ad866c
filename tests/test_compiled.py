"""jit's compiling tier (``compiler/kernels.py``, ``compiler/numba_tier.py``): what compiles
computes what the NumPy replay computes.

* every ``Elementwise`` lowering against the primitive's NumPy implementation, on the
  special values of each dtype it declares (NaN, infinities, signed zeros, subnormals,
  the extremes): float64 to 1e-12, float32 and integers exactly, signs of zeros equal;
* fusion: operands broadcast along any axis, 0-d values, Python and NumPy scalars with
  NumPy's promotion, float32 kept;
* loops: ``while_loop``, ``fori_loop``, ``scan`` (reversed, stacking ``y``), ``cond`` and
  ``switch`` inside them, ``vmap`` of a loop, ``jit(grad(scan))``, compiled whole, equal
  to the replay;
* the floating-point errors NumPy reports (warnings, ``np.errstate(...='raise')``), and
  NumPy's exceptions, exactly, where a kernel meets them;
* the tiers: ``compile="auto"`` compiles a hot signature in the background and swaps the
  kernels in (no call runs the compiler), ``compile=False`` never compiles, without numba
  ``jit`` is what it was, kernels are loaded from the disk cache by another process;
* user primitives declare lowerings; one numba refuses stays NumPy calls, with a warning.

jit's whole contract with the tier on is checked by ``tests/test_jit_programs.py`` and
``tests/test_jit_registry.py`` (a compiled variant of each).
"""

import contextlib
import math
import os
import pathlib
import subprocess
import sys
import textwrap
import time
import warnings

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import cond, fori_loop, grad, jit, scan, switch, vmap, while_loop
from autodiff.compiler import background, disk_cache, kernels, numba_process, numba_tier, stages
from autodiff.compiler.tiers import HOT_CALLS, compiling
from autodiff.core.lowering import Elementwise, Emitter, NotLowered
from autodiff.errors import AutodiffWarning, TransformValueError
from autodiff.extend import Primitive
from tests.jit_contract import assert_exact, check_calls

needs_numba = pytest.mark.skipif(not numba_tier.available(), reason=numba_tier.why_not())


def compiled(f, **kw):
    """``jit(f)`` whose calls run its kernels from the first (tests compile at once)."""
    return jit(f, compile=True, **kw)


def kernels_of(jitted, *args):
    found = jitted._entries[next(iter(jitted._entries))].compiled
    return found.kernels if found is not None else ()


def fallbacks(jitted):
    return sum(k.impl.fallback.calls for k in kernels_of(jitted))


# --- every elementwise lowering, on special values -------------------------------------------

FLOATS = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 1.5, -2.5, 3.0, -7.25, 10.0, 100.0,
          0.7853981633974483, 1e-300, -1e-310, 5e-324, 1e300, -1e308, 710.0, -745.5,
          np.inf, -np.inf, np.nan]  # fmt: skip
INTS = [0, 1, -1, 2, -3, 7, 100, -128, 255, 2**31 - 1, -(2**31), 2**62, -(2**63)]


def _lowered_primitives():
    import autodiff.rules as rules

    found = {}
    for module in vars(rules).values():
        if getattr(module, "__name__", "").startswith("autodiff.rules."):
            for value in vars(module).values():
                if isinstance(value, Primitive) and isinstance(value.lowering, Elementwise):
                    found[value.name] = value
    return [found[k] for k in sorted(found)]


LOWERED = _lowered_primitives()


# the parameters of the lowered primitives that take some
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
    for n in (1, 2, 3):
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prim.impl(*([np.ones(2)] * n))
        except (TypeError, ValueError):
            continue
        return n
    raise AssertionError(prim.name)


def _grids(kinds, nargs):
    """Per declared dtype, operand arrays covering every combination of special values."""
    values = {"d": (np.float64, FLOATS), "f": (np.float32, FLOATS), "i": (np.int64, INTS),
              "u": (np.uint8, [0, 1, 2, 7, 128, 255]), "b": (np.bool_, [False, True])}  # fmt: skip
    for kind in kinds + ("d" if "f" in kinds else ""):
        dtype, vals = values[kind]
        with np.errstate(all="ignore"):
            column = np.array(vals, dtype=np.float64 if dtype in (np.float32,) else None)
            column = column.astype(dtype) if kind != "i" else np.array(vals, dtype=np.int64)
        if nargs == 1:
            yield kind, (column,)
        elif nargs == 2:
            a, b = np.meshgrid(column, column, indexing="ij")
            yield kind, (a.ravel(), b.ravel())
        else:  # where(c, x, y)
            a, b = np.meshgrid(column, column, indexing="ij")
            c = np.arange(a.size) % 3 == 0
            yield kind, (c, a.ravel(), b.ravel())


@needs_numba
@pytest.mark.parametrize("prim", LOWERED, ids=lambda p: p.name)
def test_every_elementwise_lowering_computes_what_numpy_computes(prim, monkeypatch):
    monkeypatch.setattr(kernels, "MIN_EQUATIONS", 1)  # one equation is a region here
    monkeypatch.setattr(kernels, "MIN_SCALAR_EQUATIONS", 1)
    nargs = _nargs(prim)
    for kind, args in _grids(prim.lowering.kinds, nargs):
        for params in PARAMS.get(prim.name, [{}]):
            _check_lowering(prim, kind, args, params)


def _check_lowering(prim, kind, args, params):
    if "dtype" in params and params["dtype"] == args[0].dtype:
        return  # a cast to the same dtype is no equation
    if True:
        with np.errstate(all="ignore"):
            try:
                want = prim.impl(*args, **params)
            except (TypeError, ValueError):  # NumPy has no loop for this dtype
                return
            f = compiled(lambda *xs: prim.bind(*xs, **params))
            got = f(*args)
        assert kernels_of(f), f"{prim.name} ({kind}) did not compile"
        assert fallbacks(f) == 0
        what = f"{prim.name} on {args[-1].dtype} {params}"
        assert got.dtype == want.dtype, what
        exact = kind != "d" or want.dtype.kind in "biu" or prim.name.startswith("astype")
        np.testing.assert_allclose(got, want, rtol=0 if exact else 1e-12, atol=0,
                                   equal_nan=True, err_msg=what)  # fmt: skip
        if want.dtype.kind == "f":
            both = ~np.isnan(want)
            np.testing.assert_array_equal(np.signbit(got[both]), np.signbit(want[both]),
                                          err_msg=f"{what}: the sign of a zero")  # fmt: skip


# --- fusion -----------------------------------------------------------------------------------


@needs_numba
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fused_loops_broadcast_and_promote_as_numpy(dtype):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 1)).astype(dtype)
    y = rng.standard_normal((1, 4)).astype(dtype)
    z = np.array(0.75, dtype)  # a 0-d array
    w = rng.standard_normal(4).astype(dtype)

    def f(x, y, z, w):
        a = anp.sin(x) * y + z  # (3, 4)
        b = anp.tanh(a * 2.0 - w) / (1.5 + anp.abs(w))  # a Python float keeps dtype
        c = b * np.float64(0.5) if dtype == np.float64 else b * np.float32(0.5)
        d = anp.maximum(c, -0.25) + anp.where(c > 0, w, -w)
        return d, anp.exp(z * 2.0) - 1.0, (x * 3.0 + 1.0) * x  # (3, 4), (), (3, 1)

    jitted = compiled(f)
    check_calls(jitted, f, (x, y, z, w))  # float32 too: to 1e-12
    found = kernels_of(jitted)
    if dtype == np.float64:
        assert len(found) == 1 and len(found[0].region.eqns) >= 12
    else:  # float32's sin, tanh and exp are NumPy calls (kinds="d"): several kernels
        assert len(found) >= 2 and "np.float32" in found[0].source
    got = jitted(x, y, z, w)
    assert [g.dtype for g in got] == [np.dtype(dtype)] * 3
    assert fallbacks(jitted) == 0


@needs_numba
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
        for _ in range(2):
            assert_exact(jitted(x, z), f(x, z))
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
    }


LOOPS = _loops()


@needs_numba
@pytest.mark.parametrize("name", list(LOOPS))
def test_loops_compile_whole_and_equal_the_replay(name):
    f, args = LOOPS[name]
    jitted = compiled(f)
    check_calls(jitted, jit(f, compile=False), args)
    found = kernels_of(jitted)
    assert found and all(k.impl.fallback.calls == 0 for k in found)
    source = "\n".join(k.source for k in found)
    assert "while True:" in source or "for s" in source  # the loop itself is compiled


@needs_numba
def test_a_loop_with_a_primitive_that_does_not_lower_stays_a_python_loop():
    opaque_p = Primitive("opaque", lambda x: np.round(x, 3))  # no lowering

    def f(a):
        return while_loop(lambda x: anp.max(x) < 10.0, lambda x: opaque_p.bind(x * 1.5 + 0.1), a)

    a = np.linspace(0.5, 1.0, 4)
    jitted = compiled(f)
    check_calls(jitted, f, (a,))
    assert not any("while True" in k.source for k in kernels_of(jitted))


# --- NumPy's floating-point errors and exceptions, exactly -------------------------------------


@needs_numba
def test_floating_point_errors_are_reported_as_numpy_reports_them():
    def f(x):
        return anp.log(x) * 2.0 + anp.sqrt(anp.abs(x)) * 0.5

    x = np.array([1.0, -1.0, 4.0])
    jitted = compiled(f)
    with pytest.warns(RuntimeWarning, match="invalid value encountered in log"):
        want = f(x)
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


@needs_numba
def test_numpy_exceptions_raised_in_a_kernel_are_numpys():
    def f(a, b):
        return anp.linalg.solve(a * 1.0 + 0.0, b * 2.0 + 1.0)

    jitted = compiled(f)
    a, b = np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([1.0, 0.5])
    assert_exact(jitted(a, b), f(a, b))
    singular = np.ones((2, 2))
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        f(singular, b)
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        jitted(singular, b)


# --- fresh results ------------------------------------------------------------------------------


@needs_numba
def test_results_of_kernels_share_memory_with_nothing():
    def f(x, y):
        a = x * 2.0 + y
        return a, anp.transpose(a), a[0], x[0] * 1.0 + 0.0, anp.reshape(a * 3.0 - 1.0, (-1,))

    x, y = np.ones((2, 3)), np.full(3, 0.5)
    check_calls(compiled(f), f, (x, y))

    def g(a):  # a loop whose carry comes back unchanged (zero iterations)
        return while_loop(lambda v: anp.sum(v) > 100.0, lambda v: v * 0.5 - 0.1, a)

    check_calls(compiled(g), g, (np.ones(3),))


@needs_numba
@pytest.mark.parametrize("sync", [True, False])
def test_a_strided_view_where_a_kernel_expects_a_contiguous_array(sync, monkeypatch):
    """Kernels are compiled for the layouts of the arrays that made them (C-contiguous);
    a call with a strided view gets the variant for any layout, compiled at once
    (compile=True) or in the background, NumPy calls meanwhile."""
    jobs = []
    if not sync:
        monkeypatch.setattr(background, "compile_later", jobs.append)

    def f(x):  # (kernels of one source share their variants: one source per case)
        return anp.sin(x) * (2.0 if sync else 3.0) + x * x

    base = np.linspace(0, 1, 16).reshape(4, 4)
    graph = jit(f).graph(base)
    found = stages.compiled(graph, layouts=[True], sync=sync)
    replay = found.run
    (kernel,) = found.kernels
    assert_exact(replay(base)[0], f(base))
    view = base.T  # F-ordered: not what the kernel was compiled for
    assert_exact(replay(view)[0], f(view))
    assert kernel.impl.fallback.calls == (0 if sync else 1)
    if not sync:
        (job,) = jobs
        job()
        assert_exact(replay(view)[0], f(view))
        assert kernel.impl.fallback.calls == 1
    assert len(kernel.dispatcher.overloads) == 2


@needs_numba
def test_a_kernel_no_function_uses_is_released():
    import gc

    def f(x):
        return anp.cos(x) * 0.125 + anp.sin(x) * 0.375

    jitted = compiled(f)
    jitted(np.ones(5))
    (kernel,) = kernels_of(jitted)
    name = kernel.dispatcher.py_func.__module__
    assert name in sys.modules
    del jitted, kernel
    gc.collect()
    assert name not in sys.modules


# --- the tiers ----------------------------------------------------------------------------------


@needs_numba
@pytest.mark.interpreted
def test_auto_compiles_a_hot_signature_in_the_background_and_swaps_it_in(monkeypatch):
    jobs = []
    monkeypatch.setattr(background, "compile_later", jobs.append)  # held, not run

    def f(x):
        return anp.tanh(anp.sin(x) * 1.5 + 0.25) * x

    jitted = jit(f)  # compile="auto"
    x = np.linspace(-1, 1, 5)
    for _ in range(HOT_CALLS + 5):
        assert_exact(jitted(x), f(x))
    assert len(jobs) == 1  # hot once: one compilation asked for, none waited for
    assert "def kernel" not in jitted.source(x)
    jobs[0]()  # the background thread's work
    assert "def kernel" in jitted.source(x)
    for _ in range(2):
        assert_exact(jitted(x), f(x))
    assert kernels_of(jitted)


@needs_numba
@pytest.mark.interpreted
def test_auto_compiles_in_another_process_that_no_call_waits_for(tmp_path, monkeypatch):
    """The background thread has numba compile in another process, into the cache on
    disk (numba holds the GIL: compiling here would make calls wait), then loads it."""
    monkeypatch.setenv("AUTODIFF_CACHE_DIR", str(tmp_path))

    def f(x):  # (a source of its own: no kernel of this process shares it)
        return anp.cos(x) * 2.375 - anp.exp(x * 0.5)

    jitted = jit(f)
    x = np.linspace(0, 1, 7)
    for _ in range(HOT_CALLS + 1):
        assert_exact(jitted(x), f(x))
    assert background.wait_for_background(timeout=300)
    assert_exact(jitted(x), f(x))
    (kernel,) = kernels_of(jitted)
    loaded = kernel.dispatcher.stats
    assert sum(loaded.cache_hits.values()) == 1 and not sum(loaded.cache_misses.values())


@needs_numba
@pytest.mark.skipif(not pathlib.Path("/proc/self/cmdline").exists(), reason="reads /proc")
def test_a_compile_process_never_outlives_the_users(tmp_path):
    """A process that exits while its kernels compile in another process ends that one."""
    script = textwrap.dedent("""
        import time, numpy as np, autodiff, autodiff.numpy as anp
        f = autodiff.jit(lambda x: anp.sin(x) * 1.25 + anp.cos(x) * 0.375)
        for _ in range(9):  # past HOT_CALLS: compiling elsewhere, in the background
            f(np.ones(3))
        time.sleep(1.0)  # the other process starts
    """)
    slow = tmp_path / "site"  # the compiling process takes its time starting
    slow.mkdir()
    (slow / "sitecustomize.py").write_text(
        "import sys, time\nif any(a.endswith('.json') for a in sys.argv):\n    time.sleep(60)\n"
    )
    root = pathlib.Path(__file__).resolve().parents[1]  # (this checkout's autodiff)
    env = {"AUTODIFF_CACHE_DIR": str(tmp_path), "PATH": "",
           "PYTHONPATH": os.pathsep.join([str(slow), str(root)])}  # fmt: skip
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120)

    def compiling():
        found = []
        for cmdline in pathlib.Path("/proc").glob("[0-9]*/cmdline"):
            with contextlib.suppress(OSError):
                if str(tmp_path).encode() in cmdline.read_bytes():
                    found.append(cmdline)
        return found

    for _ in range(10):  # (a process being killed may linger a moment; compiling takes s)
        if not compiling():
            break
        time.sleep(0.05)
    assert not compiling()
    assert list(tmp_path.glob("k*.py")), "no kernel went to the other process"


def test_what_another_process_can_compile():
    """Scalar functions another process rebuilds from their code: no closure, no
    defaults, no globals but NumPy, math and the builtins."""
    scale = 2.0
    assert numba_process.portable(lambda x: np.sin(x) + math.pi + abs(x))
    assert numba_process.portable(lambda x: x * scale) is None  # a closure
    assert numba_process.portable(lambda x, k=2.0: x * k) is None  # a default
    assert numba_process.portable(_row_norms)  # np only
    assert numba_process.portable(test_what_another_process_can_compile) is None  # globals


@pytest.mark.interpreted
def test_compile_false_never_compiles():
    jitted = jit(lambda x: anp.sin(x) * 2.0 + 1.0, compile=False)
    x = np.ones(3)
    for _ in range(HOT_CALLS + 3):
        jitted(x)
    background.wait_for_background(timeout=120)
    assert "def kernel" not in jitted.source(x)


@pytest.mark.interpreted
def test_without_numba_jit_is_what_it_was(monkeypatch):
    monkeypatch.setattr(numba_tier, "available", lambda: False)
    monkeypatch.setattr(numba_tier, "why_not", lambda: "numba is not installed (simulated)")
    with pytest.raises(TransformValueError, match="numba is not installed"):
        jit(lambda x: x, compile=True)

    def f(x):
        return anp.sin(x) * 2.0 + 1.0

    jitted = jit(f)
    x = np.linspace(0, 1, 4)
    for _ in range(HOT_CALLS + 3):
        check_calls(jitted, f, (x,))
    assert "def kernel" not in jitted.source(x)
    with compiling(True):  # forcing it where it is unavailable compiles nothing
        check_calls(jit(f), f, (x,))


def test_the_environment_switches_the_tier_off(monkeypatch):
    monkeypatch.setenv("AUTODIFF_COMPILE", "0")
    assert not numba_tier.available()
    assert "AUTODIFF_COMPILE=0" in numba_tier.why_not()


@pytest.mark.parametrize("bad", ["yes", 1, None, "always"])
def test_compile_takes_auto_true_or_false(bad):
    with pytest.raises(TransformValueError, match="compile must be 'auto'"):
        jit(lambda x: x, compile=bad)


@needs_numba
def test_kernels_are_kept_on_disk_for_the_next_process(tmp_path):
    script = textwrap.dedent("""
        import numpy as np, autodiff, autodiff.numpy as anp
        from autodiff.compiler.tiers import compile_at_once
        f = autodiff.jit(lambda x: anp.sin(x) * 3.0 + anp.cos(x), compile=True)
        with compile_at_once():
            f(np.ones(3))
        (k,) = f._entries[next(iter(f._entries))].compiled.kernels
        print(sum(k.dispatcher.stats.cache_hits.values()),
              sum(k.dispatcher.stats.cache_misses.values()))
    """)
    env = {"AUTODIFF_CACHE_DIR": str(tmp_path), "PATH": ""}

    def run():
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env=env, check=True)  # fmt: skip
        return tuple(map(int, done.stdout.split()))

    assert run() == (0, 1)  # compiled, and kept
    assert len(list(tmp_path.glob("k*.py"))) == 1
    assert run() == (1, 0)  # loaded
    monkey = pytest.MonkeyPatch()
    monkey.setenv("AUTODIFF_CACHE_DIR", str(tmp_path))
    try:
        disk_cache.clear_cache()
    finally:
        monkey.undo()
    assert not tmp_path.exists()


@needs_numba
def test_a_cache_numba_cannot_read_is_passed_over(tmp_path, monkeypatch):
    import gc

    monkeypatch.setenv("AUTODIFF_CACHE_DIR", str(tmp_path))

    def f(x):
        return anp.tanh(x) * 0.625 - anp.cos(x) * 0.25

    x = np.linspace(0, 1, 6)
    first = compiled(f)
    first(x)
    del first
    gc.collect()  # the kernel's dispatcher goes: the next one reads the disk
    cached = list((tmp_path / "__pycache__").glob("*.nbc"))
    assert cached
    for path in cached:
        path.write_bytes(b"not what numba wrote")
    again = compiled(f)
    assert_exact(again(x), f(x))
    assert kernels_of(again)


# --- user primitives ----------------------------------------------------------------------------


@needs_numba
def test_user_primitives_declare_their_lowering():
    softplus_p = Primitive(
        "softplus",
        lambda x: np.logaddexp(x, 0.0),
        lowering=Elementwise(lambda x: np.logaddexp(x, 0.0)),  # float64 (kinds="d")
    )

    def _norm_rows(ctx, x):  # an Emitter: whole arrays, a Python helper numba compiles
        if ctx.in_avals[0].ndim != 2:
            raise NotLowered("rows of a matrix only")
        return ctx.call(_row_norms, f"np.ascontiguousarray({x})")

    row_norm_p = Primitive("row_norm", lambda x: np.sqrt(np.sum(x * x, axis=1)),
                           lowering=Emitter(_norm_rows))  # fmt: skip
    opaque_p = Primitive("opaque", lambda x: x.round(6))  # no lowering: a NumPy call

    def f(x):
        a = softplus_p.bind(x * 2.0) - 1.0
        b = row_norm_p.bind(a) * 3.0 + 1.0
        return opaque_p.bind(b) * 2.0 + anp.sum(a)

    x = np.linspace(-2, 2, 12).reshape(3, 4)
    jitted = compiled(f)
    check_calls(jitted, f, (x,))
    found = kernels_of(jitted)
    assert len(found) == 2  # two kernels, the opaque primitive a NumPy call between them
    assert "f0_lambda(" in found[0].source  # the user's scalar function, called
    graph = jitted._entries[next(iter(jitted._entries))].compiled.graph
    assert [e.prim.name for e in graph.eqns] == ["kernel", "opaque", "kernel"]


def _row_norms(a):
    out = np.empty(a.shape[0])
    for i in range(a.shape[0]):
        out[i] = np.sqrt(np.sum(a[i] * a[i]))
    return out


@needs_numba
def test_a_lowering_numba_refuses_stays_numpy_calls_with_a_warning():
    strange_p = Primitive(
        "strange", lambda x: x + 1.0, lowering=Elementwise(lambda x: x + object())
    )

    def f(x):
        return strange_p.bind(x * 2.0) * 3.0

    x = np.ones(3)
    jitted = compiled(f)
    with pytest.warns(AutodiffWarning, match="did not compile and runs as NumPy calls"):
        got = jitted(x)
    assert_exact(got, f(x))
    assert not kernels_of(jitted)


def test_a_lowering_is_declared_as_one():
    with pytest.raises(TypeError, match="a lowering is an Elementwise or an Emitter"):
        Primitive("p", np.sin, lowering=np.sin)
    assert isinstance(autodiff.numpy.sin.primitive.lowering, Elementwise)


def test_a_kernels_key_holds_the_values_of_the_globals_its_functions_read(monkeypatch):
    """numba freezes the globals a scalar function reads: a kernel cached on disk must
    not outlive a change of their values (a library upgrade changing a coefficient)."""
    from autodiff.compiler.disk_cache import fingerprint as _fingerprint
    from autodiff.rules import elementwise

    before = _fingerprint(elementwise._tanh_scalar)
    monkeypatch.setattr(elementwise, "_TANH_P", (1.0, 2.0, 3.0))
    assert _fingerprint(elementwise._tanh_scalar) != before
