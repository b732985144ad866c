"""NumPy's ``array_like`` arguments and ``dtype=`` spellings, against NumPy itself.

* **Generated from NumPy's own signatures** (``test_lists_of_traced_values``): for every
  registry record with a NumPy (or SciPy) counterpart, each array argument of its first
  sample that the counterpart accepts as a nested list (called with ``.tolist()`` on plain
  values, it gives the same result: NumPy's ``array_like``, named by NumPy's signature)
  is given to autodiff as a nested list of *traced* scalars, under ``grad`` and under
  ``vmap``, and must give what the array form gives.  Plain nested lists too.
* ``dtype=`` in every spelling NumPy takes (a Python type, a string, a NumPy type, an
  ``anp`` casting class, None) for every ``anp`` function with a ``dtype`` parameter:
  values and dtypes as NumPy's, errors where NumPy raises, plain and traced.
* The spellings of issue 23 and the errors for NumPy's own functions, which cannot take
  a list of traced values and say which ``anp`` function can.
"""

import inspect
import warnings

import numpy as np
import optree
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import grad, jit, vmap
from autodiff.errors import ConcretizationError
from tests.registry import OPS, resolve

# --- lists holding traced values, for every function NumPy gives an array_like --------------

MAX_ELEMENTS = 64  # larger arguments would cost a traced scalar each: not needed to test


def _nested(x):
    """A traced array as nested lists of its traced scalars (as a user writes [x, y])."""
    return [_nested(x[i]) for i in range(x.shape[0])] if np.ndim(x) else x


def _leaves(out):
    return [np.asarray(leaf) for leaf in optree.tree_leaves(out)]


def _total(out):
    """A scalar of every floating output, to differentiate."""
    parts = [anp.sum(anp.real(leaf) + anp.imag(leaf)) for leaf in optree.tree_leaves(out)
             if anp.result_type(leaf).kind in "fc"]  # fmt: skip
    return sum(parts[1:], parts[0])


def _accepts_list(reference, args, position):
    """Whether ``reference`` (NumPy/SciPy) takes argument ``position`` as a nested list:
    the same result as with the array."""
    listed = [*args[:position], args[position].tolist(), *args[position + 1 :]]
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            want, got = reference(*args), reference(*listed)
        want, got = _leaves(want), _leaves(got)
    except Exception:
        return False
    return len(want) == len(got) and all(
        w.shape == g.shape and np.allclose(w, g, equal_nan=True) for w, g in zip(want, got)
    )


def _parameter_name(op, position):
    """The parameter's name in NumPy's signature (for the test's id)."""
    try:
        func = resolve(op.numpy_name_resolved, "np") if op.has_numpy and op.call is None else None
        params = list(inspect.signature(func).parameters) if func is not None else []
    except (TypeError, ValueError, AttributeError):
        params = []
    return params[position] if position < len(params) else f"arg{position}"


def _list_cases():
    params = []
    for op in OPS:
        sample = op.samples[0]
        reference = op.reference_for(sample)
        if reference is None or op.call is not None:
            continue  # no counterpart to say what it accepts, or another spelling (x @ y)
        for p, arg in enumerate(sample.args):
            if not 0 < arg.size <= MAX_ELEMENTS or not _accepts_list(reference, sample.args, p):
                continue
            ident = f"{op.name}[{sample.label or 0}]-{_parameter_name(op, p)}"
            params.append(pytest.param(op, sample, p, id=ident))
    return params


LIST_CASES = _list_cases()


def test_the_generated_cases_cover_numpy():
    """The generation found the array_likes of most of the registry (a NumPy upgrade
    that broke ``_accepts_list`` would otherwise empty the test quietly)."""
    assert len(LIST_CASES) > 400
    names = {case.values[0].name for case in LIST_CASES}
    assert {"mean", "sum", "linalg.norm", "append", "dot", "where", "special.erf"} <= names


@pytest.mark.parametrize(("op", "sample", "p"), LIST_CASES)
def test_lists_of_traced_values(op, sample, p):
    fn = op.bound(sample)
    args = list(sample.args)

    def at(value):
        return [*args[:p], value, *args[p + 1 :]]

    # plain nested lists, as NumPy takes them
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        want = _leaves(fn(*args))
        for w, g in zip(want, _leaves(fn(*at(args[p].tolist()))), strict=True):
            assert w.dtype == g.dtype
            np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
    # under grad: the list's items are traced values
    if op.differentiable and p in sample.diff_positions():
        array_grad = grad(lambda x: _total(fn(*at(x))))(args[p])
        list_grad = grad(lambda x: _total(fn(*at(_nested(x)))))(args[p])
        np.testing.assert_allclose(list_grad, array_grad, rtol=1e-10, atol=1e-12)
    # under vmap: batched items, two examples drawn independently
    rng = np.random.default_rng(len(op.name) + p)
    batch = np.stack([sample.draw(rng, p) for _ in range(2)])
    want = vmap(lambda x: fn(*at(x)))(batch)
    got = vmap(lambda x: fn(*at(_nested(x))))(batch)
    for w, g in zip(_leaves(want), _leaves(got), strict=True):
        assert w.dtype == g.dtype
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


# --- the spellings of issue 23 --------------------------------------------------------------


@pytest.mark.parametrize(
    ("f", "g"),
    [
        (lambda x: anp.mean([x, 2 * x]), lambda x: 1.5),
        (lambda x: anp.sum([x, x * x]), lambda x: 1 + 2 * x),
        (lambda x: anp.linalg.norm([x, x + 2]), lambda x: (2 * x + 2) / np.hypot(x, x + 2)),
        (lambda x: anp.sum(anp.append([1.0, 2.0], x) ** 2), lambda x: 2 * x),
        (lambda x: anp.dot([x, 1.0], [3.0, x]), lambda x: 3.0 + 1.0),
        (lambda x: anp.sin([[x], [2 * x]]).sum(), lambda x: np.cos(x) + 2 * np.cos(2 * x)),
        (lambda x: anp.concatenate([[x, 1.0], [x * x]]).sum(), lambda x: 1 + 2 * x),
        (lambda x: anp.einsum("i,i", [x, 1.0], [x, 2.0]), lambda x: 2 * x),
    ],
    ids=["mean", "sum", "linalg.norm", "append", "dot", "sin", "concatenate", "einsum"],
)
def test_issue_spellings_under_every_transform(f, g):
    x = 0.7
    assert np.isclose(grad(f)(x), g(x))
    assert np.isclose(jit(grad(f))(x), g(x))
    xs = np.array([0.3, 0.7, 1.1])
    np.testing.assert_allclose(vmap(grad(f))(xs), [g(v) for v in xs])
    np.testing.assert_allclose(vmap(f)(xs), [f(v) for v in xs])
    assert np.isclose(autodiff.jvp(f, (x,), (1.0,))[1], g(x))


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda x: np.mean([x, 2 * x]), "mean"),
        (lambda x: np.sum([x, 2 * x]), "sum"),
        (lambda x: np.linalg.norm([x, x + 2]), "linalg.norm"),
        (lambda x: np.append([x, 2 * x], 1.0).sum(), "append"),
    ],
)
def test_numpy_own_function_names_the_anp_one(call, name):
    """NumPy's function cannot take a list of traced values (a list has no
    __array_function__ for NumPy to hand the call over): the error says which anp
    function can, under grad and under vmap."""
    pattern = rf"converts a value traced by (grad|vmap) \(level \d+\).*: write anp\.{name}\("
    with pytest.raises(ConcretizationError, match=pattern):
        grad(call)(0.5)
    with pytest.raises(ConcretizationError, match=pattern):
        vmap(call)(np.ones(2))


def test_a_list_meaning_something_else_is_read_as_numpy_reads_it():
    """np.histogramdd reads a list as coordinate arrays (D lists of N values), not as the
    (D, N) array: so does anp's, traced items included."""
    xs, ys = np.array([0.1, 0.5, 0.9]), np.array([0.2, 0.4, 0.8])
    want = np.histogramdd([xs, ys], bins=2)[0]
    np.testing.assert_array_equal(anp.histogramdd([xs, ys], bins=2)[0], want)
    got = vmap(lambda x: anp.histogramdd([x, ys], bins=2, range=[(0, 1), (0, 1)])[0])(xs[None])
    np.testing.assert_array_equal(got[0], np.histogramdd([xs, ys], 2, [(0, 1), (0, 1)])[0])


# --- dtype= as NumPy takes it ------------------------------------------------------------------

X = np.array([[1.5, 2.0], [3.0, 4.5]])
DTYPES = [int, float, complex, bool, "float32", "i8", np.int32, np.float64, None, anp.float32]
DTYPE_IDS = ["int", "float", "complex", "bool", "'float32'", "'i8'", "np.int32", "np.float64",
             "None", "anp.float32"]  # fmt: skip
# How to call each function with dtype= (the rest take X first).
DTYPE_CALLS = {
    "array": lambda m, x, d: m.array([[x, 2.0]], dtype=d),
    "asarray": lambda m, x, d: m.asarray([[x, 2.0]], dtype=d),
    "asanyarray": lambda m, x, d: m.asanyarray([[x, 2.0]], dtype=d),
    "ascontiguousarray": lambda m, x, d: m.ascontiguousarray([[x, 2.0]], dtype=d),
    "asfortranarray": lambda m, x, d: m.asfortranarray([[x, 2.0]], dtype=d),
    "full": lambda m, x, d: m.full((2,), x, dtype=d),
    "full_like": lambda m, x, d: m.full_like(X, x, dtype=d),
    "linspace": lambda m, x, d: m.linspace(0.0, x * 5, 4, dtype=d),
    "logspace": lambda m, x, d: m.logspace(0.0, x * 2, 3, dtype=d),
    "geomspace": lambda m, x, d: m.geomspace(1.0, x * 8, 4, dtype=d),
    "concatenate": lambda m, x, d: m.concatenate([x * X, X], dtype=d),
    "concat": lambda m, x, d: m.concat([x * X, X], dtype=d),
    "stack": lambda m, x, d: m.stack([x * X, X], dtype=d),
    "hstack": lambda m, x, d: m.hstack([x * X, X], dtype=d),
    "vstack": lambda m, x, d: m.vstack([x * X, X], dtype=d),
    "einsum": lambda m, x, d: m.einsum("ij->i", x * X, dtype=d),
    "astype": lambda m, x, d: m.astype(x * X, d) if d is not None else x * X,
    "empty_like": lambda m, x, d: m.zeros_like(x * X, dtype=d),  # values unspecified
    "cumulative_sum": lambda m, x, d: m.cumulative_sum(x * X, axis=0, dtype=d),
    "cumulative_prod": lambda m, x, d: m.cumulative_prod(x * X, axis=0, dtype=d),
}


def _dtype_functions():
    names = []
    for name in sorted(anp.__all__):
        f = getattr(anp, name)
        if not callable(f) or isinstance(f, type) or f is getattr(np, name, None):
            continue  # (NumPy's own functions, borrowed: no rules, nothing to compare)
        try:
            if "dtype" in inspect.signature(f).parameters:
                names.append(name)
        except (TypeError, ValueError):
            continue
    return names


DTYPE_FUNCTIONS = _dtype_functions()


def test_the_dtype_functions_are_found():
    assert {"sum", "prod", "cumsum", "mean", "var", "zeros_like", "full", "einsum"} <= set(
        DTYPE_FUNCTIONS
    )


def _call(name):
    return DTYPE_CALLS.get(name, lambda m, x, d: getattr(m, name)(x * X, dtype=d))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", DTYPE_FUNCTIONS)
def test_dtype_as_numpy_takes_it(name, dtype):
    call = _call(name)
    numpy_dtype = np.float32 if dtype is anp.float32 else dtype
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            want = call(np, 1.0, numpy_dtype)
        except Exception as e:  # NumPy refuses: so must autodiff, with the same kind
            with pytest.raises(TypeError if isinstance(e, TypeError) else type(e)):
                call(anp, 1.0, dtype)
            return
        got = call(anp, 1.0, dtype)
    for w, g in zip(_leaves(want), _leaves(got), strict=True):
        assert g.dtype == w.dtype, (name, dtype)
        np.testing.assert_allclose(g, w, rtol=1e-6 if g.dtype == np.float32 else 1e-12)
    # traced: the same dtype under grad (where floating) and jit
    out = _leaves(want)[0]
    if out.dtype.kind == "f":
        dx = grad(lambda x: anp.sum(_leaves_of(call(anp, x, dtype))[0]))(1.0)
        assert np.isfinite(dx)
    staged = jit(lambda x: call(anp, x, dtype))(1.0)
    for w, g in zip(_leaves(want), _leaves(staged), strict=True):
        assert g.dtype == w.dtype, (name, dtype, "jit")


def _leaves_of(out):
    return optree.tree_leaves(out)


def test_prod_of_a_tuple_with_a_python_type():
    assert anp.prod((16, 5, 5), dtype=int) == 400
    assert anp.prod((16, 5, 5), dtype=int).dtype == np.prod((16, 5, 5), dtype=int).dtype
    assert anp.sum(np.ones(3, np.int32), dtype=np.int32).dtype == np.int32
    assert anp.cumsum([True, False, True], dtype=bool).tolist() == [True, True, True]


# --- what NumPy's documentation said, written down for a first gradient ---------------------


def test_the_documentation_written_down_is_what_numpy_says(monkeypatch):
    # numpy_args._WRITTEN_DOWN spares a first call reading these signatures and docstrings
    # (up to ~2 ms each); it must say what reading them says, with this NumPy.
    from autodiff.core import numpy_args

    written = dict(numpy_args._WRITTEN_DOWN)
    assert {"broadcast_to", "concatenate", "expand_dims", "sum", "transpose"} <= set(written)
    # (a NumPy it was not checked against reads instead: check it, then update _WRITTEN_FOR)
    assert np.__version__.startswith(numpy_args._WRITTEN_FOR), np.__version__
    monkeypatch.setattr(numpy_args, "_WRITTEN_DOWN", {})
    for name, said in written.items():
        assert numpy_args.array_likes_of.__wrapped__(getattr(np, name)) == said, name


def test_a_first_gradient_reads_no_docstring(monkeypatch):
    # The gradients of sum, mean, matmul and a broadcast call expand_dims, broadcast_to,
    # sum and transpose with tuples on traced values (second order: on tracers).
    from autodiff.core import numpy_args

    def read(func):
        raise AssertionError(f"the docstring of {func.__name__} was read")

    monkeypatch.setattr(numpy_args.inspect, "getdoc", read)
    numpy_args.array_likes_of.cache_clear()
    try:
        w = np.arange(6.0).reshape(3, 2) / 7

        def f(x):
            return anp.sum(anp.mean((x @ w) * x[:1, :2], axis=(0,), keepdims=True) ** 2)

        x = np.linspace(0.1, 1.0, 6).reshape(2, 3)
        h = autodiff.hessian(f)(x)
        eps, v = 1e-6, np.cos(np.arange(6.0)).reshape(2, 3)
        g = autodiff.grad(f)
        fd = (g(x + eps * v) - g(x - eps * v)) / (2 * eps)
        np.testing.assert_allclose(np.tensordot(h, v, axes=2), fd, rtol=1e-5, atol=1e-8)
    finally:
        numpy_args.array_likes_of.cache_clear()
