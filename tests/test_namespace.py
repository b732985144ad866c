"""``autodiff.numpy`` as a drop-in for ``numpy``: every name, arrays from nested lists of
traced values, the scalar and array types, the array API, and the places where NumPy
itself cannot hand a traced value to autodiff.

The per-function derivative and batching checks of the new functions (``array``,
``linspace``, ``vecdot``, ...) run from their records in ``tests/registry/``.
"""

import importlib
import io
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, jvp, vmap
from autodiff.core.overrides import numpy_overrides
from autodiff.errors import ConcretizationError, TransformValueError, UnsupportedFunctionError
from autodiff.testing import check_grads, check_vmap

NAMESPACES = [(np, anp), (np.linalg, anp.linalg), (np.fft, anp.fft), (np.random, anp.random)]
IDS = ["numpy", "linalg", "fft", "random"]


# --- every name -------------------------------------------------------------------------------


@pytest.mark.parametrize(("numpy_module", "ours"), NAMESPACES, ids=IDS)
def test_every_public_name_of_numpy_resolves(numpy_module, ours):
    missing = [name for name in numpy_module.__all__ if not hasattr(ours, name)]
    assert not missing, f"{ours.__name__} lacks {missing}"
    assert set(numpy_module.__all__) <= set(ours.__all__)


@pytest.mark.parametrize(("numpy_module", "ours"), NAMESPACES, ids=IDS)
def test_borrowed_names_are_numpys_own_objects(numpy_module, ours):
    # Nothing borrowed is vacuous, unless every name has rules (numpy.fft does).
    assert ours._borrowed or set(numpy_module.__all__) <= ours._own, "nothing borrowed"
    for name in ours._borrowed:
        assert getattr(ours, name) is getattr(numpy_module, name), name
    assert not set(ours._borrowed) & ours._own


def test_the_names_loaded_at_first_use_are_their_modules():
    # anp._FIRST_USE lists, without importing them, the names each module gives anp:
    # all of its __all__ (rules/linalg.py's primitives are anp.linalg's; it gives anp roots).
    for module, names in anp._FIRST_USE.items():
        defining = importlib.import_module(module)
        if module == f"autodiff.numpy.{names[0]}":  # a submodule: anp.linalg
            assert getattr(anp, names[0]) is defining
            continue
        if module != "autodiff.rules.linalg":
            assert set(names) == set(defining.__all__), module
        for name in names:
            assert getattr(anp, name) is getattr(defining, name), name


def test_numpys_functions_find_their_rules_loaded_at_first_use():
    # Each NumPy function (ufunc method, index update) that a module loaded at first use
    # registers a rule for leads to that module's family (anp._load_rules), so it never
    # meets a traced value first with no rule.  (rules/creation.py, shape.py, ... load with
    # the package: only their namesakes in numpy/ wait.)
    import autodiff.rules as rules

    lazy = {*anp._FIRST_USE, *(f"autodiff.rules.{f}" for f in (*rules.ON_FIRST_USE, "fft"))}
    lazy -= {"autodiff.numpy.random"}
    found = 0
    for module in anp._FIRST_USE:
        importlib.import_module(module)
    for func, impl in dict.items(numpy_overrides):
        if impl.__module__ in lazy:
            family = impl.__module__.rpartition(".")[2].lstrip("_")
            loads = anp._first_use_module(func)
            assert loads is not None and loads.rpartition(".")[2].lstrip("_") == family, func
            found += 1
    assert found > 200


def test_constants_and_types_are_numpys():
    assert (anp.pi, anp.e, anp.euler_gamma, anp.inf) == (np.pi, np.e, np.euler_gamma, np.inf)
    assert np.isnan(anp.nan) and anp.newaxis is None
    assert anp.finfo is np.finfo and anp.iinfo is np.iinfo and anp.dtype is np.dtype
    assert anp.errstate is np.errstate and anp.linalg.LinAlgError is np.linalg.LinAlgError
    assert anp.s_ is np.s_ and anp.index_exp is np.index_exp and anp.mgrid is np.mgrid
    assert anp.ma is np.ma and anp.polynomial is np.polynomial  # submodules, on first use
    with pytest.raises(AttributeError, match="no attribute 'not_a_numpy_name'"):
        anp.not_a_numpy_name


def _dispatching_functions():
    """Borrowed functions NumPy hands to a traced argument: ufuncs and functions with an
    ``__array_function__`` dispatcher."""
    out = []
    for module, ours in NAMESPACES[:3]:
        for name in ours._borrowed:
            obj = getattr(ours, name)
            if isinstance(obj, np.ufunc) or hasattr(obj, "_implementation"):
                out.append(pytest.param(obj, id=f"{module.__name__}.{name}"))
    assert len(out) >= 10  # enough that the test below means something
    return out


# Functions whose first arguments are not arrays (NumPy dispatches on the ones after).
_NOT_ARRAYS_FIRST = {"savez": (io.BytesIO(),), "savez_compressed": (io.BytesIO(),)}


@pytest.mark.parametrize("func", _dispatching_functions())
@pytest.mark.parametrize("transform", ["grad", "vmap"])
def test_borrowed_functions_raise_on_traced_values(func, transform):
    """A function without rules never computes on a traced value's concrete value:
    given traced values for as many arguments as it needs, it raises our error."""
    x = np.full((3, 3), 0.5)
    first = _NOT_ARRAYS_FIRST.get(func.__name__, ())

    def f(t):
        for n in range(1, 6):
            try:
                func(*first, *([t] * n))
            except UnsupportedFunctionError:
                raise
            except TypeError as e:  # too few arguments: NumPy's own check, before dispatch
                if "argument" not in str(e):
                    raise
            else:
                raise AssertionError(f"{func} computed on a traced value")
        raise AssertionError(f"{func}: no argument count reached the tracer")

    wrapped = grad(f) if transform == "grad" else vmap(f)
    with pytest.raises(UnsupportedFunctionError, match=r"has no autodiff rule"):
        wrapped(x)


def test_unsupported_message_names_the_numpy_function():
    with pytest.raises(UnsupportedFunctionError, match=r"numpy\.packbits has no autodiff rule"):
        grad(lambda x: np.packbits(x).sum())(np.ones(3))
    with pytest.raises(UnsupportedFunctionError, match=r"numpy\.isnat has no autodiff rule"):
        grad(lambda x: np.isnat(x).sum())(np.ones(3))


# --- ndarray and the scalar types ----------------------------------------------------------------


def test_isinstance_ndarray_holds_for_traced_values_under_every_transform():
    seen = []

    def f(x):
        seen.append(isinstance(x, anp.ndarray) and isinstance(x * 2.0, anp.ndarray))
        return (x * x).sum()

    x = np.arange(3.0)
    grad(f)(x), jvp(f, (x,), (x,)), vmap(f)(np.ones((2, 3)))
    assert seen == [True, True, True]
    assert isinstance(x, anp.ndarray) and not isinstance(1.0, anp.ndarray)
    assert issubclass(np.ndarray, anp.ndarray)
    assert anp.ndarray((2, 3)).shape == (2, 3)


def test_scalar_types_are_numpys_for_dtypes_and_cast_traced_values():
    for name in ["float32", "float64", "int64", "complex128", "bool_", "bool", "double", "intp"]:
        ours, theirs = getattr(anp, name), getattr(np, name)
        assert np.dtype(ours) == np.dtype(theirs), name
        assert np.zeros(2, ours).dtype == theirs, name
        assert isinstance(theirs(1), ours) and issubclass(ours, theirs), name
    assert anp.double is anp.float64 and anp.float64(2) == 2.0
    assert type(anp.float32(1.5)) is np.float32
    assert np.issubdtype(anp.float32, np.floating)
    # A cast of a traced value stays traced: derivative 1 (0 for the integer cast).
    assert grad(lambda x: anp.float32(x) * 3.0)(np.float32(2.0)) == 3.0
    assert grad(lambda x: x * anp.int64(x))(2.5) == 2.0
    np.testing.assert_array_equal(
        vmap(lambda x: anp.float32(x))(np.arange(3.0)), np.arange(3.0, dtype=np.float32)
    )


def test_questions_about_dtypes_are_answered_for_traced_values():
    seen = {}

    def f(x):
        seen["result_type"] = np.result_type(x, 1.0, np.int8)
        seen["can_cast"] = np.can_cast(x, np.float64), np.can_cast(x, np.int32)
        seen["objs"] = np.iscomplexobj(x), np.isrealobj(x), np.common_type(x, np.zeros(1))
        return x.sum()

    grad(f)(np.ones(2, np.float32))
    assert seen == {
        "result_type": np.dtype(np.float32),
        "can_cast": (True, False),
        "objs": (False, True, np.float64),
    }
    vmap(lambda z: seen.update(c=np.iscomplexobj(z), r=np.result_type(z, 2)) or z)(np.ones(2) * 1j)
    assert seen["c"] is True and seen["r"] == np.complex128


# --- anp.array of nested lists of traced values ---------------------------------------------


def _nested(x, y):
    """Nesting of several depths, traced and constant entries, Python scalars."""
    return anp.array([[[x[0], 2.0], [y, x[1] * y]], [[1, -x[2]], (y * y, 0.5)]])


def _nested_reference(x, y):
    return np.array([[[x[0], 2.0], [y, x[1] * y]], [[1, -x[2]], (y * y, 0.5)]])


def test_array_of_nested_lists_equals_numpys_on_plain_values():
    x, y = np.array([0.3, -1.2, 0.7]), np.array(1.3)
    np.testing.assert_array_equal(_nested(x, y), _nested_reference(x, y))
    got = grad(lambda x, y: (_nested(x, y) * np.arange(8.0).reshape(2, 2, 2)).sum(), (0, 1))(x, y)
    # d/dx0: weight 0; d/dx1: y * 3; d/dx2: -5; d/dy: 2 + x1 * 3 + 2 y * 6
    np.testing.assert_allclose(got[0], [0.0, 3 * 1.3, -5.0], rtol=1e-14)
    np.testing.assert_allclose(got[1], 2.0 + 3 * -1.2 + 12 * 1.3, rtol=1e-14)


def test_array_of_nested_lists_to_second_order():
    x, y = np.array([0.3, -1.2, 0.7]), np.array(1.3)
    check_grads(lambda x, y: anp.sin(_nested(x, y)), (x, y), order=2, modes=("fwd", "rev"))


def test_array_of_nested_lists_under_vmap_against_a_loop():
    rng = np.random.default_rng(5)
    xs, ys = rng.normal(size=(4, 3)), rng.normal(size=4)  # independent examples
    check_vmap(_nested, (0, 0), (xs, ys))
    check_vmap(_nested, (1, None), (xs.T, ys[0]))
    check_vmap(lambda x: vmap(lambda y: _nested(x, y))(ys), (0,), (xs,))  # vmap of vmap


def test_array_of_traced_values_under_vmap_of_grad_and_jvp_of_grad():
    rng = np.random.default_rng(6)
    xs, y = rng.normal(size=(3, 3)), np.array(0.4)

    def f(x):
        return (anp.array([[x[0] * x[1], y], [x[2], x[0] ** 3]]) ** 2).sum()

    got = vmap(grad(f))(xs)
    for i in range(3):
        np.testing.assert_allclose(got[i], grad(f)(xs[i]), rtol=1e-13)
    check_grads(grad(f), (xs[0],), order=1)


@pytest.mark.parametrize(
    "build",
    [
        lambda t: [t, 2.0],
        lambda t: [t, 2],
        lambda t: [t, np.float64(2.0)],
        lambda t: [[t], [True]],
        lambda t: [t, 1j],
        lambda t: [t, np.int8(3)],
        lambda t: [t, np.array(1.0, np.float32)],
        lambda t: ((t, t), (t, t)),
    ],
    ids=["float", "int", "float64", "bool", "complex", "int8", "0-d float32", "tuples"],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32], ids=str)
def test_array_dtype_promotion_is_numpys(build, dtype):
    value = np.array(1, dtype)
    want = np.array(build(value))
    seen = []
    vmap(lambda t: seen.append(anp.array(build(t)).dtype) or t)(np.stack([value, value]))
    assert seen == [want.dtype]
    assert anp.array(build(value)).dtype == want.dtype  # plain values: NumPy's own call


def test_array_keywords_and_ragged_lists():
    out = vmap(lambda t: anp.array([t, t], dtype=np.float32, ndmin=3))(np.arange(2.0))
    assert out.shape == (2, 1, 1, 2) and out.dtype == np.float32
    with pytest.raises(ValueError, match="inhomogeneous"):
        grad(lambda t: anp.array([t, [t, t]]).sum())(1.0)
    assert grad(lambda t: anp.asarray((t, 3.0)).sum())(1.0) == 1.0
    assert grad(lambda t: anp.copy([t, t]).sum())(1.0) == 2.0


# --- creation with traced values -----------------------------------------------------------------


def test_full_and_full_like_take_a_traced_fill_value():
    check_grads(lambda v: anp.full((2, 3), v) * np.arange(6.0).reshape(2, 3), (1.5,), order=2)
    check_grads(lambda v: anp.full_like(np.ones(4), v) ** 2, (np.array(0.7),), order=2)
    check_vmap(lambda v: anp.full((2,), v), 0, (np.array([1.0, 2.0, 3.0]),))
    assert anp.full((2,), 1.0, dtype=np.float32).dtype == np.float32


def test_linspace_is_differentiable_in_its_ends():
    def f(a, b):
        return anp.linspace(a, b, 5)

    np.testing.assert_array_equal(f(0.5, 2.0), np.linspace(0.5, 2.0, 5))
    # d/da = 1 - i/4, d/db = i/4 for sample i
    np.testing.assert_allclose(grad(lambda a: f(a, 2.0) @ np.arange(5.0))(0.5), 10 - 7.5)
    np.testing.assert_allclose(grad(lambda b: f(0.5, b) @ np.arange(5.0))(2.0), 7.5)
    t = np.linspace(0.0, 1.0, 50)
    assert grad(lambda T: anp.linspace(0, T, 50).sum())(3.0) == pytest.approx(t.sum())


def test_ranges_reach_numpys_own_functions_through_the_protocol():
    """np.linspace etc. dispatch on their arguments, so plain NumPy code works."""
    np.testing.assert_allclose(grad(lambda t: np.linspace(0, t, 4).sum())(1.0), 2.0)
    np.testing.assert_allclose(grad(lambda t: np.logspace(0, t, 3)[-1])(1.0), 10 * np.log(10))
    np.testing.assert_allclose(grad(lambda t: np.geomspace(t, 4 * t, 3)[1])(1.0), 2.0)
    xs, ys = vmap(lambda x: np.meshgrid(x, 2 * x))(np.ones((3, 2)))
    assert xs.shape == ys.shape == (3, 2, 2)


# --- the array API: array-API-aware SciPy functions on traced values ---------------------------

_SCIPY_SCRIPT = """
import numpy as np
import scipy.special as sp
import autodiff.numpy as anp
from autodiff import grad, vmap
from autodiff.testing import check_grads

rng = np.random.default_rng(0)
x = rng.normal(size=4)
xs = rng.normal(size=(3, 4))  # independent examples
softmax = np.exp(x) / np.exp(x).sum()
np.testing.assert_allclose(grad(sp.logsumexp)(x), softmax, rtol=1e-13)
check_grads(lambda x, w: sp.logsumexp(x, b=w), (x, np.arange(1.0, 5.0)), order=2)
check_grads(lambda x: sp.softmax(x), (x,), order=2)
np.testing.assert_allclose(vmap(sp.logsumexp)(xs), np.log(np.exp(xs).sum(1)), rtol=1e-13)
np.testing.assert_allclose(
    vmap(sp.softmax)(xs), np.exp(xs) / np.exp(xs).sum(1, keepdims=True), rtol=1e-13
)
per_example = vmap(grad(lambda x: sp.logsumexp(x, b=x * x)))(xs)
for i in range(3):
    w = xs[i] ** 2
    want = (2 * xs[i] + w) * np.exp(xs[i]) / (w * np.exp(xs[i])).sum()
    np.testing.assert_allclose(per_example[i], want, rtol=1e-12)
print("ok")
"""


def test_array_api_aware_scipy_functions_under_grad_and_vmap():
    """With SCIPY_ARRAY_API=1, SciPy computes with the namespace our tracers name."""
    pytest.importorskip("scipy")
    env = {**os.environ, "SCIPY_ARRAY_API": "1"}
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", textwrap.dedent(_SCIPY_SCRIPT)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-3000:]


def test_array_namespace_and_attributes_of_tracers():
    seen = {}

    def f(x):
        seen["xp"] = x.__array_namespace__()
        seen["device"], seen["mT"] = x.device, x.mT.shape
        assert x.to_device("cpu") is x
        return x.sum()

    grad(f)(np.ones((2, 3)))
    assert seen == {"xp": anp, "device": "cpu", "mT": (3, 2)}
    with pytest.raises(ValueError, match="api_version"):
        grad(lambda x: x.__array_namespace__(api_version="1999.01") and x)(1.0)


def test_traced_boolean_mask_updates_batch_as_selects():
    """x.at[mask].set(v) with a traced mask and one value for all: a where, batchable."""
    xs = np.array([[1.0, -2.0, 3.0], [-1.0, 4.0, -5.0]])

    def f(x):
        at = anp.at(x)
        return at[x < 0].set(0.0) + at[x > 2].add(10.0) * at[x > 0].multiply(2.0)

    got = vmap(f)(xs)
    for i in range(2):
        x = xs[i]
        want = np.where(x < 0, 0, x) + np.where(x > 2, x + 10, x) * np.where(x > 0, 2 * x, x)
        np.testing.assert_allclose(got[i], want)
    check_grads(f, (xs[0],), order=2)


# --- where NumPy itself cannot dispatch ---------------------------------------------------------


def test_storing_a_traced_value_into_a_plain_array_raises():
    out = np.zeros(3)

    def store_row(x):
        out[0:2] = x
        return x.sum()

    def store_scalar(x):
        out[0] = x
        return x

    store = r"plain NumPy array.*out = anp\.at\(out\)\[.+\]\.set\(x\).*anp\.array.*anp\.stack"
    with pytest.raises(ConcretizationError, match=store):
        grad(store_row)(np.ones(2))
    # NumPy converts a 0-d value with float() and, because tracers support indexing,
    # raises its own ValueError in our error's place: ours is surfaced in store_scalar.
    with pytest.raises(ConcretizationError, match=store):
        grad(store_scalar)(1.0)


def test_np_array_of_traced_values_names_anp_array():
    with pytest.raises(ConcretizationError, match=r"traced by grad.*: write anp\.array\(\["):
        grad(lambda x: np.array([x, 2 * x]).sum())(1.0)
    with pytest.raises(ConcretizationError, match=r"batched by vmap.*: write anp\.array\(\["):
        vmap(lambda x: np.array([x, 2 * x]))(np.ones(2))


@pytest.mark.parametrize("shorthand", ["r_", "c_"])
def test_np_r_and_c_name_their_anp_spelling(shorthand):
    with pytest.raises(ConcretizationError, match=rf"write anp\.{shorthand}\["):
        grad(lambda x: getattr(np, shorthand)[x, x].sum())(np.ones(2))


@pytest.mark.parametrize(
    "build",
    [
        lambda r, c, x, y: r[x, 2.0 * y, 0:3],
        lambda r, c, x, y: r[x, y, 5, 0:1:3j],
        lambda r, c, x, y: r["0,2", x, y],
        lambda r, c, x, y: r["0,2,0", x, y],
        lambda r, c, x, y: r["1,2", x, y],
        lambda r, c, x, y: c[x, y],
        lambda r, c, x, y: c[x, y, np.arange(3.0)],
    ],
    ids=["slice", "linspace", "0,2", "0,2,0", "1,2", "c_", "c_ constant"],
)
def test_anp_r_and_c_equal_numpys_and_differentiate(build):
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=3), rng.normal(size=3)
    np.testing.assert_array_equal(build(anp.r_, anp.c_, x, y), build(np.r_, np.c_, x, y))
    check_grads(lambda x, y: build(anp.r_, anp.c_, x, y), (x, y), order=2)
    xs, ys = rng.normal(size=(4, 3)), rng.normal(size=(4, 3))
    check_vmap(lambda x, y: build(anp.r_, anp.c_, x, y), (0, 0), (xs, ys))
    assert anp.r_[1:4].tolist() == [1, 2, 3]  # no traced item: NumPy's own


def test_anp_r_matrix_directive_explains():
    with pytest.raises(NotImplementedError, match=r"numpy\.matrix"):
        grad(lambda x: anp.r_["r", x, x].sum())(np.ones(2))


def test_where_of_a_condition_alone_is_nonzero_as_in_numpy():
    # np.where(c) is np.nonzero(c): plain, traced under grad (its positions index x), and
    # NumPy's own np.where meeting a traced condition; its errors are NumPy's
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 4))
    want = np.nonzero(x > 0.2)
    for ours in (anp.where(x > 0.2), np.where(x > 0.2)):
        assert len(ours) == 2 and all(np.array_equal(a, b) for a, b in zip(ours, want))
    for where in (anp.where, np.where):
        g = grad(lambda y, where=where: anp.sum(y[where(y > 0.2)] ** 2))(x)
        np.testing.assert_allclose(g, np.where(x > 0.2, 2 * x, 0.0), rtol=1e-15)
    with pytest.raises(ValueError, match="both or neither"):
        anp.where(x > 0, x)
    with pytest.raises(ValueError, match="0d arrays"):
        anp.where(np.array(True))


# --- anp.random: NumPy's legacy functions ---------------------------------------------------------


def test_legacy_random_functions_draw_like_numpy():
    np.random.seed(3)
    ours = (anp.random.randn(2), anp.random.normal(1.0, 2.0, 3), anp.random.gamma(2.0))
    np.random.seed(3)
    theirs = (np.random.randn(2), np.random.normal(1.0, 2.0, 3), np.random.gamma(2.0))
    for a, b in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(a, b)
    assert type(ours[2]) is type(theirs[2])  # a Python float, as NumPy gives


def test_legacy_random_functions_follow_vmap_randomness():
    np.random.seed(4)
    out = vmap(lambda x: x + anp.random.gamma(2.0, size=2), randomness="different")(
        np.zeros((3, 2))
    )
    np.random.seed(4)
    np.testing.assert_array_equal(out, np.stack([np.random.gamma(2.0, size=2) for _ in range(3)]))
    same = vmap(lambda x: x + anp.random.rand(2), randomness="same")(np.zeros((3, 2)))
    assert (same == same[0]).all()
    with pytest.raises(TransformValueError, match="randomness='error'"):
        vmap(lambda x: x + anp.random.rand(2))(np.zeros((3, 2)))


def test_legacy_normal_and_uniform_are_differentiable_in_their_parameters():
    np.random.seed(5)
    z = np.random.standard_normal(3)
    np.random.seed(5)
    g = grad(lambda s: (anp.random.normal(1.0, s, 3) * np.arange(3.0)).sum())(2.0)
    np.testing.assert_allclose(g, (z * np.arange(3.0)).sum())
    np.random.seed(6)
    u = np.random.random_sample()
    np.random.seed(6)
    assert grad(lambda lo: anp.random.uniform(lo, 5.0))(1.0) == pytest.approx(
        1 - u
    )  # lo + (5 - lo) u
    with pytest.raises(UnsupportedFunctionError, match=r"anp\.random\.gamma"):
        grad(lambda k: anp.random.gamma(k))(2.0)
