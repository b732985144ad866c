"""Every sample of ``tests/registry`` under every transform.

For each sample, with ``autodiff.numpy`` functions and again with the plain
NumPy/SciPy function called on traced values:

* grad to order 2, forward and reverse mode, against central finite
  differences (``autodiff.testing.check_grads``: random direction v and
  cotangent ct; compares <vjp(ct), v>, <ct, jvp(v)> and the central difference
  of <ct, f(x + t v)>, eps 1e-6 and relative tolerance 1e-6 in float64,
  beyond an explicit round-off estimate; complex samples too);
* the transposition identity Re sum(ct * jvp(v)) == Re sum(vjp(ct) * v);
* vmap against a Python loop for every combination of in_dims 0, -1 and
  None per argument (not all None), at batch sizes 3, 1 and 0.

With ``autodiff.numpy`` only: vmap(vmap), vmap(grad), vmap(jvp), and float32
(outputs, tangents and gradients stay float32 and agree with float64).

Failures that are expected are listed, with reasons, in
``tests/registry.EXPECTED_FAILURES``; they run as strict xfails.
"""

import itertools

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import grad, jvp, vjp, vmap
from autodiff._core import Primitive
from autodiff.testing import check_grads, check_vmap
from tests.registry import EXPECTED_FAILURES, OPS

CASES = [(op, sample, i) for op in OPS for i, sample in enumerate(op.samples)]


def _cases(test, *, differentiable=False, libs=("anp",), extra=None):
    """pytest params for (op, sample, lib[, extra]) with expected failures marked."""
    params = []
    for op, sample, i in CASES:
        if differentiable and (not op.differentiable or not sample.diff_positions()):
            continue
        for lib in libs:
            if lib == "np" and not op.has_numpy:
                continue
            for more in extra(op, sample) if extra else [()]:
                label = sample.label or str(i)
                ident = f"{op.name}[{label}]-{lib}" + (f"-{more}" if more else "")
                reason = EXPECTED_FAILURES.get((op.name, test))
                marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
                params.append(pytest.param(op, sample, lib, *more, id=ident, marks=marks))
    return params


def _diff_function(op, sample, lib):
    """The sample as a function of its differentiable arguments only."""
    fn = op.bound(sample, lib)
    positions = sample.diff_positions()

    def f(*diff_args):
        args = list(sample.args)
        for i, a in zip(positions, diff_args):
            args[i] = a
        return fn(*args)

    return f, tuple(sample.args[i] for i in positions)


@pytest.mark.parametrize(
    ("op", "sample", "lib"), _cases("grad", differentiable=True, libs=("anp", "np"))
)
def test_grad_against_finite_differences(op, sample, lib):
    f, args = _diff_function(op, sample, lib)
    check_grads(f, args, order=2, modes=("fwd", "rev"), rtol=sample.rtol)


@pytest.mark.parametrize(
    ("op", "sample", "lib"), _cases("transpose", differentiable=True, libs=("anp", "np"))
)
def test_jvp_vjp_transposition(op, sample, lib):
    f, args = _diff_function(op, sample, lib)
    rng = np.random.default_rng(0)
    v = tuple(_random_like(a, rng) for a in args)
    out, t = jvp(f, args, v)
    ct = optree.tree_map(lambda o: _random_like(o, rng), out)
    (_, vjp_fn) = vjp(f, *args)
    lhs = _pair(ct, t)
    rhs = _pair(vjp_fn(ct), v)
    leaves = [*args, *optree.tree_leaves(out)]
    double = all(np.asarray(x).dtype in (np.float64, np.complex128) for x in leaves)
    assert np.isclose(lhs, rhs, rtol=1e-10 if double else 1e-5, atol=1e-10)


def _pair(a, b):
    """Re sum(a * b) over matching pytrees (the bilinear pairing)."""
    return sum(np.real(np.sum(x * y)) for x, y in zip(optree.tree_leaves(a), optree.tree_leaves(b)))


def _random_like(x, rng):
    x = np.asarray(x)
    out = rng.standard_normal(x.shape)
    if x.dtype.kind == "c":
        out = out + 1j * rng.standard_normal(x.shape)
    return out.astype(x.dtype)


def _variant(arg, k):
    """The k-th example like ``arg``, in the same input domain."""
    arg = np.asarray(arg)
    if arg.dtype.kind in "fc":
        return arg * (1 + 0.05 * k)
    return np.roll(arg.ravel(), k).reshape(arg.shape)  # index arrays, masks: stay valid


def _batched(arg, dim, size=3, start=0):
    """``size`` different examples of ``arg`` stacked along ``dim``."""
    return np.stack([_variant(arg, start + k) for k in range(size)], axis=dim)


def _in_dims(op, sample):
    combos = itertools.product([0, -1, None], repeat=len(sample.args))
    return [(dims,) for dims in combos if any(d is not None for d in dims)]


@pytest.mark.parametrize(
    ("op", "sample", "lib", "in_dims"), _cases("vmap", libs=("anp", "np"), extra=_in_dims)
)
def test_vmap_against_loop(op, sample, lib, in_dims):
    if lib == "np" and op.numpy_dispatch and all(in_dims[i] is None for i in op.numpy_dispatch):
        pytest.skip(f"numpy.{op.name} dispatches only on arguments {op.numpy_dispatch}")
    args = [a if d is None else _batched(a, d) for a, d in zip(sample.args, in_dims)]
    check_vmap(op.bound(sample, lib), in_dims, args)


@pytest.mark.parametrize(
    ("op", "sample", "lib", "inner_dim"), _cases("vmap_vmap", extra=lambda o, s: [(0,), (-1,)])
)
def test_vmap_of_vmap_against_double_loop(op, sample, lib, inner_dim):
    """Two batch axes on the first argument: outer at 0, inner at ``inner_dim``."""
    fn, rest = op.bound(sample, lib), (None,) * (len(sample.args) - 1)
    x = np.stack([_batched(sample.args[0], inner_dim, start=3 * i) for i in range(2)])
    got = vmap(vmap(fn, in_dims=(inner_dim, *rest)), in_dims=(0, *rest))(x, *sample.args[1:])
    for i in range(2):
        for j in range(3):
            want = fn(np.take(x[i], j, axis=inner_dim), *sample.args[1:])
            for g, w in zip(optree.tree_leaves(got), optree.tree_leaves(want)):
                np.testing.assert_allclose(np.asarray(g)[i, j], w, rtol=1e-12, atol=1e-12)


def _scalar(f):
    """The sum of the real parts of every output: a scalar to take gradients of."""

    def total(*a):
        leaves = optree.tree_leaves(f(*a))
        return sum(anp.sum(anp.real(leaf)) for leaf in leaves[1:]) + anp.sum(anp.real(leaves[0]))

    return total


@pytest.mark.parametrize(("op", "sample", "lib"), _cases("vmap_grad", differentiable=True))
def test_vmap_of_grad_against_loop(op, sample, lib):
    """Per-example gradients of the summed (real part of the) output."""
    f, args = _diff_function(op, sample, lib)
    g = grad(_scalar(f), argnums=tuple(range(len(args))))
    batched = [_batched(args[0], 0), *args[1:]]
    got = vmap(g, in_dims=(0,) + (None,) * (len(args) - 1))(*batched)
    for i in range(3):
        for gi, wi in zip(got, g(batched[0][i], *args[1:])):
            np.testing.assert_allclose(gi[i], wi, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize(("op", "sample", "lib"), _cases("vmap_jvp", differentiable=True))
def test_vmap_of_jvp_against_loop(op, sample, lib):
    """Forward-mode Jacobian columns: jvp batched over tangents of argument 0."""
    f, args = _diff_function(op, sample, lib)
    rng = np.random.default_rng(1)
    tangents = np.stack([_random_like(args[0], rng) for _ in range(3)])
    rest = tuple(np.zeros_like(a) for a in args[1:])
    got = vmap(lambda t: jvp(f, args, (t, *rest))[1])(tangents)
    for i in range(3):
        want = jvp(f, args, (tangents[i], *rest))[1]
        for g, w in zip(optree.tree_leaves(got), optree.tree_leaves(want)):
            np.testing.assert_allclose(g[i], w, rtol=1e-7, atol=1e-9)


def _single(x):
    x = np.asarray(x)
    if x.dtype == np.float64:
        return x.astype(np.float32)
    return x.astype(np.complex64) if x.dtype == np.complex128 else x


@pytest.mark.parametrize(("op", "sample", "lib"), _cases("float32", differentiable=True))
def test_float32_stays_float32(op, sample, lib):
    f, args = _diff_function(op, sample, lib)
    if not op.keeps_float32:
        pytest.skip(f"{op.name} returns float64 by design, as in NumPy")
    args32 = tuple(_single(a) for a in args)
    out64, out32 = optree.tree_leaves(f(*args)), optree.tree_leaves(f(*args32))
    for o64, o32 in zip(out64, out32):
        assert np.asarray(o32).dtype == _single(o64).dtype
        np.testing.assert_allclose(o32, o64, rtol=2e-4, atol=2e-4)
    v = tuple(np.ones_like(a) for a in args32)
    _, t = jvp(f, args32, v)
    for t32, o32 in zip(optree.tree_leaves(t), out32):
        assert np.asarray(t32).dtype == np.asarray(o32).dtype
    grads = grad(_scalar(f), argnums=tuple(range(len(args32))))(*args32)
    assert [g.dtype for g in grads] == [a.dtype for a in args32]


# --- conventions at kinks, ties and domain edges (documented in rules/elementwise.py) -------


@pytest.mark.parametrize(
    ("f", "x", "expected"),
    [
        (anp.abs, 0.0, 0.0),
        (anp.fabs, 0.0, 0.0),
        (lambda x: anp.maximum(x, 1.0), 1.0, 0.5),
        (lambda x: anp.minimum(x, 1.0), 1.0, 0.5),
        (lambda x: anp.clip(x, 0.0, 1.0), 1.0, 0.5),
        (lambda x: anp.max(anp.stack([x, x, 2.0 * x - 1.0])), 1.0, 4 / 3),
        (lambda x: x**2, 0.0, 0.0),
        (lambda x: x**0.5, 0.0, np.inf),
        (lambda x: 0.0**x, 2.0, 0.0),
        (anp.sqrt, 0.0, np.inf),
        (anp.sinc, 0.0, 0.0),
        (anp.nan_to_num, np.inf, 0.0),
        (anp.sign, 0.5, 0.0),
    ],
    ids=[
        "abs",
        "fabs",
        "maximum tie",
        "minimum tie",
        "clip at bound",
        "max 3-way tie",
        "x**2 at 0",
        "sqrt(x) as x**0.5 at 0",
        "exponent of 0**x",
        "sqrt at 0",
        "sinc at 0",
        "nan_to_num at inf",
        "sign (no derivative)",
    ],
)
def test_subgradient_conventions(f, x, expected):
    with np.errstate(divide="ignore", invalid="ignore"):
        assert grad(f)(x) == expected


def test_max_tie_shares_the_cotangent_equally():
    g = grad(lambda x: anp.max(x))(np.array([1.0, 3.0, 3.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.5, 0.5, 0.0])


# --- the registry itself --------------------------------------------------------------------------


def _all_primitives():
    import importlib
    import pkgutil

    import autodiff.rules

    found = {}
    for info in pkgutil.iter_modules(autodiff.rules.__path__):
        module = importlib.import_module(f"autodiff.rules.{info.name}")
        for value in vars(module).values():
            prim = getattr(value, "primitive", value)
            if isinstance(prim, Primitive):
                found[prim.name] = prim
    return found


def test_every_primitive_has_all_rules_or_is_declared_nondifferentiable():
    prims = _all_primitives()
    assert len(prims) >= 30
    for name, prim in prims.items():
        assert prim.batch is not None, f"{name} has no batching rule"
        if prim.differentiable:
            assert prim.vjp is not None, f"{name} has no VJP rule"
            assert prim.jvp is not None, f"{name} has no JVP rule"


def _own_functions(namespace):
    """The functions a namespace of autodiff.numpy defines (not NumPy's borrowed ones,
    nor its types, submodules and shorthands)."""
    names = []
    for name in sorted(namespace._own):
        value = getattr(namespace, name)
        if callable(value) and not isinstance(value, type) and name not in ("r_", "c_"):
            names.append(name)
    return names


# Public names that are not functions of arrays (questions about shapes and dtypes are
# tested in tests/test_namespace.py).
_NOT_FUNCTIONS = {"shape", "ndim", "size", "at", "result_type", "can_cast", "common_type",
                  "iscomplexobj", "isrealobj"}  # fmt: skip


def test_every_public_function_has_a_registry_record():
    names = {op.name for op in OPS}
    missing = [n for n in _own_functions(anp) if n not in names and n not in _NOT_FUNCTIONS]
    missing += [f"linalg.{n}" for n in _own_functions(anp.linalg) if f"linalg.{n}" not in names]
    missing += [f"fft.{n}" for n in _own_functions(anp.fft) if f"fft.{n}" not in names]
    special = pytest.importorskip("autodiff.scipy.special", reason="SciPy is not installed")
    missing += [f"special.{n}" for n in special.__all__ if f"special.{n}" not in names]
    assert not missing, f"functions without a record in tests/registry: {missing}"


def test_expected_failures_name_real_tests():
    names = {op.name for op in OPS}
    tests = {"grad", "transpose", "vmap", "vmap_vmap", "vmap_grad", "vmap_jvp", "float32"}
    for name, test in EXPECTED_FAILURES:
        assert name in names and test in tests, (name, test)


@pytest.mark.parametrize(
    ("op", "sample", "lib"), [p for p in _cases("forward") if p.values[0].has_numpy]
)
def test_forward_agrees_with_numpy(op, sample, lib):
    """anp.f on plain arrays gives NumPy's (or SciPy's) f: an independent reference."""
    got, want = op.bound(sample, "anp")(*sample.args), op.bound(sample, "np")(*sample.args)
    got_leaves, want_leaves = optree.tree_leaves(got), optree.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)
        assert np.asarray(g).dtype == np.asarray(w).dtype
