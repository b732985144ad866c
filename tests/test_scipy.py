"""``autodiff.scipy`` beyond the registry's transform matrix (``tests/test_primitives.py``).

* (Forward values against SciPy on plain arrays, for every record, are the registry's
  ``reference`` test in ``tests/test_primitives.py``.)
* Every public function of ``autodiff.scipy``'s modules has a registry record.
* float32 in, float32 out, when every argument is float32 (the registry's float32
  test makes only the differentiated arguments float32).
* The conventions at edges and the refusals: derivatives where SciPy's domain ends,
  arguments without a derivative, closures in ``odeint``, foreign arrays.

The registry's vmap tests take every in_dims combination of the positional
arguments; to keep them few, the stats records pass ``loc``/``scale`` as static
keywords except where a distribution has no shape parameter (tests/registry/stats.py).
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy")

import scipy.linalg
import scipy.special as sp
import scipy.stats as st

import autodiff
import autodiff.numpy as anp
import autodiff.scipy.integrate as si
import autodiff.scipy.linalg as sla
import autodiff.scipy.signal as sig
import autodiff.scipy.special as ss
import autodiff.scipy.stats as ast
from autodiff import grad, jvp, vmap
from autodiff.errors import MissingRuleError, UnsupportedFunctionError
from tests.backends import strict
from tests.registry import OPS


def test_every_public_function_has_a_registry_record():
    names = {op.name for op in OPS}
    wanted = [f"scipy.{m.__name__.split('.')[-1]}.{n}" for m in (sla, sig, si) for n in m.__all__]
    for dist in ast.__all__:
        obj = getattr(ast, dist)
        methods = [m for m in dir(obj) if not m.startswith("_") and callable(getattr(obj, m))]
        wanted += [f"scipy.stats.{dist}.{m}" for m in methods]
    missing = [n for n in wanted if n not in names]
    assert not missing, f"functions without a record in tests/registry: {missing}"


# --- float32 -----------------------------------------------------------------------------


def _float32_cases():
    """Records whose float32 registry test is skipped because a float64 order or shape
    parameter promotes: here every floating-point argument is float32."""
    return [
        pytest.param(op, sample, id=f"{op.name}[{sample.label or i}]")
        for op in OPS
        if op.name.startswith(("special.", "scipy.stats.")) and not op.keeps_float32
        for i, sample in enumerate(op.samples)
        if all(a.dtype.kind == "f" for a in sample.args)
    ]  # fmt: skip


@pytest.mark.parametrize(("op", "sample"), _float32_cases())
def test_float32_in_float32_out(op, sample):
    args = [a.astype(np.float32) for a in sample.args]
    fn = op.bound(sample)
    out = fn(*args)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, fn(*sample.args), rtol=1e-4, atol=1e-5)
    x = sample.diff_positions()[-1]

    def total(v):
        return anp.sum(fn(*args[:x], v, *args[x + 1 :]))

    assert grad(total)(args[x]).dtype == np.float32


def test_odeint_float32_at_float32_tolerances():
    def decay(y, t, k):
        return -k * y

    y0, t, k = np.ones(2, np.float32), np.array([0.0, 0.5, 1.0], np.float32), np.float32(0.7)

    def final(y0, k):
        return si.odeint(decay, y0, t, args=(k,), rtol=1e-6, atol=1e-6)[-1].sum()

    out = si.odeint(decay, y0, t, args=(k,), rtol=1e-6, atol=1e-6)
    assert out.dtype == np.float32
    g_y0, g_k = grad(final, argnums=(0, 1))(y0, k)
    assert g_y0.dtype == np.float32 and g_k.dtype == np.float32
    np.testing.assert_allclose(g_k, -2 * np.exp(-0.7), rtol=1e-4)


# --- odeint against closed forms ------------------------------------------------------------


def test_odeint_derivatives_match_the_closed_form():
    """y' = -k y: y(t) = y0 exp(-k (t - t0)), with derivatives in y0, t (all of them) and k."""
    t = np.array([0.3, 0.8, 1.5])
    tight = {"rtol": 1e-12, "atol": 1e-12}

    def ys(y0, t, k):
        return si.odeint(lambda y, s, k: -k * y, y0, t, args=(k,), **tight)

    def exact(y0, t, k):
        return y0 * anp.exp(-k * (t - t[0]))

    y0, k = 1.7, 0.9
    np.testing.assert_allclose(ys(y0, t, k), exact(y0, t, k)[:, None], rtol=1e-10)
    for argnum in range(3):
        got = autodiff.jacrev(lambda *a: ys(*a)[:, 0], argnums=argnum)(y0, t, k)
        want = autodiff.jacrev(exact, argnums=argnum)(y0, t, k)
        np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-10)
        fwd = autodiff.jacfwd(lambda *a: ys(*a)[:, 0], argnums=argnum)(y0, t, k)
        np.testing.assert_allclose(fwd, want, rtol=1e-8, atol=1e-10)


def test_odeint_differentiates_a_closure_over_a_traced_value_as_args():
    t = np.array([0.0, 1.0])

    def closing_over(k):
        return si.odeint(lambda y, s: -k * y, 1.0, t, rtol=1e-10)[-1, 0]

    def through_args(k):
        return si.odeint(lambda y, s, k: -k * y, 1.0, t, args=(k,), rtol=1e-10)[-1, 0]

    for f in (closing_over, through_args):
        assert np.isclose(grad(f)(0.5), -np.exp(-0.5), rtol=1e-6)


def test_odeint_batches_per_example_times():
    def decay(y, t, k):
        return -k * y

    times = np.array([[0.0, 0.5, 1.0], [0.2, 0.4, 1.1]])
    got = vmap(lambda t: si.odeint(decay, 1.0, t, args=(0.8,), rtol=1e-11, atol=1e-11))(times)
    np.testing.assert_allclose(got[..., 0], np.exp(-0.8 * (times - times[:, :1])), rtol=1e-9)


# --- no derivative where there is none -------------------------------------------------------


@pytest.mark.parametrize(
    ("f", "args", "argnum", "what"),
    [
        (ss.iv, (0.5, 1.2), 0, "order v"),
        (ss.ive, (0.5, 1.2), 0, "order v"),
        (ss.jv, (0.5, 1.2), 0, "order v"),
        (ss.yv, (0.5, 1.2), 0, "order v"),
        (ss.gammainc, (1.5, 1.2), 0, "shape parameter a"),
        (ss.gammaincc, (1.5, 1.2), 0, "shape parameter a"),
        (ss.betainc, (1.5, 2.0, 0.3), 1, "shape parameter b"),
        (ss.stdtr, (3.0, 0.3), 0, "degrees of freedom"),
        (lambda x, a: ast.gamma.cdf(x, a), (1.0, 2.0), 1, "shape parameter a"),
    ],
)
def test_arguments_without_a_derivative_say_so(f, args, argnum, what):
    def of_it(v):
        return f(*args[:argnum], v, *args[argnum + 1 :])

    with pytest.raises(MissingRuleError, match=what):
        grad(of_it)(args[argnum])
    with pytest.raises(MissingRuleError, match=what):
        jvp(of_it, (np.asarray(args[argnum]),), (np.ones(()),))
    # in the other argument they differentiate; batching needs no derivative
    other = len(args) - 1 if argnum != len(args) - 1 else 0
    assert np.isfinite(grad(f, argnums=other)(*args))
    batch = np.stack([np.asarray(args[argnum])] * 2)
    assert vmap(f, in_dims=tuple(0 if i == argnum else None for i in range(len(args))))(
        *[batch if i == argnum else a for i, a in enumerate(args)]
    ).shape == (2,)


# --- conventions at the edges (docs/coverage.md) --------------------------------------------


@pytest.mark.parametrize(
    ("f", "x", "value", "derivative"),
    [
        (lambda x: ast.gamma.logpdf(x, 2.0), -1.0, -np.inf, 0.0),
        (lambda a: ast.gamma.logpdf(-1.0, a), 2.0, -np.inf, 0.0),
        (lambda x: ast.beta.cdf(x, 2.0, 3.0), 1.5, 1.0, 0.0),
        (lambda x: ast.expon.logcdf(x), -0.5, -np.inf, 0.0),
        (lambda mu: ast.poisson.logpmf(2.5, mu), 1.5, -np.inf, 0.0),
        (lambda p: ast.bernoulli.logpmf(3, p), 0.4, -np.inf, 0.0),
        (lambda x: ast.laplace.logpdf(x), 0.0, -np.log(2.0), 0.0),
        (lambda y: ss.xlogy(0.0, y), 0.0, 0.0, 0.0),
        (lambda x: ss.entr(x), 0.0, 0.0, np.inf),
    ],
    ids=[
        "gamma.logpdf below the support",
        "gamma.logpdf's shape there",
        "beta.cdf above the support",
        "expon.logcdf below the support",
        "poisson.logpmf off the integers",
        "bernoulli.logpmf above the support",
        "laplace.logpdf at loc (its kink)",
        "xlogy(0, y) at y = 0",
        "entr at 0",
    ],
)
def test_edge_conventions(f, x, value, derivative):
    assert f(x) == value
    with np.errstate(divide="ignore"):
        assert grad(f)(x) == derivative


@pytest.mark.parametrize(
    "f",
    [
        lambda: ast.norm.logpdf(1.0, 0.0, -1.0),
        lambda: ast.t.cdf(1.0, -2.0),
        lambda: ast.beta.logpdf(0.5, 0.0, 1.0),
        lambda: ast.poisson.pmf(1, -1.0),
        lambda: ast.bernoulli.logpmf(1, 1.5),
    ],
    ids=["scale < 0", "df < 0", "a = 0", "mu < 0", "p > 1"],
)
def test_parameters_outside_their_domain_give_nan(f):
    assert np.isnan(f())


def test_triangular_solves_read_one_triangle():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 3)) + 3 * np.eye(3)
    b = rng.standard_normal(3)
    g = grad(lambda a: sla.solve_triangular(a, b, lower=True, unit_diagonal=True).sum())(a)
    np.testing.assert_array_equal(g[np.triu_indices(3)], 0.0)
    g = grad(lambda m: sla.cholesky(m).sum())(a @ a.T)
    np.testing.assert_array_equal(np.tril(g, -1), 0.0)  # upper factor: reads the upper triangle


def test_multivariate_normal_reads_cov_symmetrically():
    rng = np.random.default_rng(1)
    m = rng.standard_normal((3, 3))
    cov = m @ m.T + np.eye(3)
    x = rng.standard_normal(3)
    g = grad(ast.multivariate_normal.logpdf, argnums=2)(x, np.zeros(3), cov)
    np.testing.assert_allclose(g, g.T, rtol=1e-12)
    inv = np.linalg.inv(cov)  # d/dcov of log N(x; 0, cov): (inv x x^T inv - inv) / 2
    np.testing.assert_allclose(g, 0.5 * (inv @ np.outer(x, x) @ inv - inv), rtol=1e-10)


@pytest.mark.parametrize("shape", [(2,), (1, 2), (5, 2), (3, 1, 2), (1, 1, 2)])
@pytest.mark.parametrize("cov", ["full", "diagonal", "scalar"])
def test_multivariate_normal_shapes_and_values_are_scipys(shape, cov):
    # the full covariance's primitive (Cholesky of cov + cov^T, one inverse for all the
    # points, the points reshaped around it) and the squeeze, against SciPy on every layout
    rng = np.random.default_rng(3)
    m = rng.standard_normal((2, 2))
    c = {"full": m @ m.T + np.eye(2), "diagonal": np.array([0.5, 2.0]), "scalar": 1.7}[cov]
    x, mean = rng.standard_normal(shape), rng.standard_normal(2)
    got = ast.multivariate_normal.logpdf(x, mean, c)
    want = scipy.stats.multivariate_normal.logpdf(x, mean, np.diag(c) if cov == "diagonal" else c)
    assert np.shape(got) == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_multivariate_normal_names_a_covariance_that_does_not_fit():
    from autodiff.rules.stats import multivariate_normal_logpdf

    with pytest.raises(ValueError, match=r"x of shape \(4, 2\) has no 3 components"):
        ast.multivariate_normal.logpdf(np.ones((4, 2)), cov=np.eye(3))
    with pytest.raises(ValueError, match=r"\(4, 2\) have no 3 components"):
        ast.multivariate_normal.logpdf(np.ones((4, 2)), np.zeros(2), np.eye(3))
    with pytest.raises(ValueError, match=r"the same stack B, got \(2, 4, 3\) and \(3, 3\)"):
        multivariate_normal_logpdf(np.ones((2, 4, 3)), np.eye(3))


def test_lu_factor_pivots_vmap_like_scipy():
    a = np.random.default_rng(2).standard_normal((4, 3, 3))
    lu, piv = vmap(sla.lu_factor)(a)
    want_lu, want_piv = zip(*(scipy.linalg.lu_factor(x) for x in a))
    np.testing.assert_allclose(lu, np.stack(want_lu), rtol=1e-12)
    np.testing.assert_array_equal(piv, np.stack(want_piv))


# --- what SciPy itself refuses, and what autodiff cannot read -------------------------------


def test_plain_arguments_are_checked_as_scipy_checks_them():
    with pytest.raises(ValueError, match="sum to 1"):
        ast.dirichlet.logpdf(np.array([0.5, 0.6]), np.ones(2))
    with pytest.raises(ValueError, match=r"a > 0\.5 \* \(d-1\)"):
        ss.multigammaln(0.5, 3)
    with pytest.raises(ValueError, match="valid"):
        sig.convolve(np.ones((2, 3)), np.ones((3, 2)), mode="valid")
    with pytest.raises(ValueError, match="same dimensionality"):
        sig.correlate(np.ones(3), np.ones((1, 3)))
    with pytest.raises(np.linalg.LinAlgError, match="square"):
        sla.expm(np.ones((2, 3)))
    assert np.isnan(vmap(lambda a: ss.multigammaln(a, 3))(np.array([0.5, 2.0]))[0])


def test_scipy_implementations_name_themselves_on_foreign_arrays():
    for f, args, name in [
        (sla.expm, (np.eye(2),), r"scipy\.linalg\.expm"),
        (sla.solve_triangular, (np.eye(2), np.ones(2)), r"scipy\.linalg\.solve_triangular"),
        (sig.convolve, (np.ones(3), np.ones(2)), r"scipy\.signal\.convolve"),
    ]:
        with pytest.raises(UnsupportedFunctionError, match=f"{name} is not implemented by"):
            f(*strict(args))
    # the compositions of ufuncs run on any array library
    out = ast.norm.logpdf(strict(np.zeros(2)))
    np.testing.assert_allclose(np.asarray(out._a), st.norm.logpdf(np.zeros(2)))
    np.testing.assert_allclose(np.asarray(ss.gamma(strict(np.ones(2)))._a), sp.gamma(np.ones(2)))


@pytest.mark.parametrize(
    "assume_a",
    [None, "gen", "sym", "her", "pos", "diagonal", "tridiagonal", "banded",
     "upper triangular", "lower triangular"],
)  # fmt: skip
@pytest.mark.parametrize(("lower", "transposed"), [(False, False), (True, False), (True, True)])
def test_linalg_solve_reads_the_entries_scipy_reads(assume_a, lower, transposed):
    """scipy.linalg.solve's value, and its gradient in ``a`` against central differences
    of SciPy's own function: zero exactly where SciPy does not read ``a`` (the other
    triangle, off the diagonal or the three diagonals)."""
    rng = np.random.default_rng(0)
    n = 4
    a = rng.standard_normal((n, n)) + n * np.eye(n)
    if assume_a == "pos":
        a = a @ a.T + np.triu(rng.standard_normal((n, n)), 1)  # garbage above: read below
    b, ct = rng.standard_normal((n, 2)), rng.standard_normal((n, 2))
    kw = dict(lower=lower, assume_a=assume_a, transposed=transposed)
    np.testing.assert_allclose(sla.solve(a, b, **kw), scipy.linalg.solve(a, b, **kw), rtol=1e-10)
    g = grad(lambda a: anp.sum(sla.solve(a, b, **kw) * ct))(a)
    fd, eps = np.zeros_like(a), 1e-6
    for i, j in np.ndindex(n, n):
        e = np.zeros_like(a)
        e[i, j] = eps
        plus, minus = (np.sum(scipy.linalg.solve(a + s * e, b, **kw) * ct) for s in (1, -1))
        fd[i, j] = (plus - minus) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)
    assert np.all((g == 0) == (np.abs(fd) < 1e-12))


def test_linalg_solve_refuses_what_scipy_refuses():
    a, b = np.eye(3), np.ones(3)
    with pytest.raises(ValueError, match="assume_a must be one of"):
        sla.solve(a, b, assume_a="triangular")
    with pytest.raises(NotImplementedError, match="complex"):
        sla.solve(a + 0j, b, transposed=True)
    with pytest.raises(ValueError, match="incompatible"):
        sla.solve(a, np.ones(4))
    with pytest.raises(np.linalg.LinAlgError):
        sla.solve(np.zeros((3, 3)), b)
