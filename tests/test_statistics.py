"""Order statistics, covariance, counting into bins, the nan-reductions: what the
registry (``tests/registry/statistics.py``, ``tests/registry/reductions.py``) does
not cover.

* Forward values against NumPy for every quantile ``method``, on plain arrays: each
  method meets every kind of ``q`` (a Python number, 0-d, 1-d, 2-d) and every kind of
  ``axis`` once, cycling through the combinations rather than taking their product
  (13 methods x 4 q x 4 axes would be 208 cases; the cycle is 52 and still puts each
  method on each q and each axis).  Sample sizes 1 to 6 against every q on a grid of
  13 cover the interpolation switches and the ends.
* Derivatives of every method (first order, both modes, and vmap against a loop) on
  one sample each; the registry runs the full transform matrix on five of them.
* The records with no NumPy call (``bincount(length=...)``), against NumPy.
* The conventions at kinks and ties (``tests/coverage.py``'s ``CONVENTIONS``), the
  errors and the warnings.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import grad, jvp, vmap
from autodiff.errors import ConcretizationError
from autodiff.numpy._statistics import METHODS
from autodiff.testing import check_grads, check_vmap

rng = np.random.default_rng(20261)
DATA = rng.permutation(60).reshape(3, 4, 5) * 0.31 - 9.0  # no ties
QS = [0.35, np.array(0.6), np.array([0.0, 0.25, 1.0]), np.array([[0.1, 0.5], [0.75, 0.9]])]
AXES = [None, 1, -1, (0, 2)]
CONTINUOUS = [
    "interpolated_inverted_cdf",
    "hazen",
    "weibull",
    "linear",
    "median_unbiased",
    "normal_unbiased",
]


def _same(got, want):
    for g, w in zip(optree.tree_leaves(got), optree.tree_leaves(want), strict=True):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g, w)
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def _agree(ours, numpys, a, *args, **kwargs):
    """``ours`` gives NumPy's values: on plain arrays (where it calls NumPy's own) and on
    traced ones (the composition: here batched, as one example under vmap)."""
    want = numpys(a, *args, **kwargs)
    _same(ours(a, *args, **kwargs), want)
    batched = vmap(lambda a: ours(a, *args, **kwargs))(np.asarray(a)[None])
    _same(optree.tree_map(lambda leaf: leaf[0], batched), want)


# --- forward values against NumPy -------------------------------------------------------------


def _cycled():
    """Each method with each q and each axis once (not their product), keepdims alternating."""
    combos = list(itertools.product(range(len(QS)), range(len(AXES))))
    for m, method in enumerate(METHODS):
        for k in range(4):
            qi, ai = combos[(4 * m + 5 * k) % len(combos)]
            yield pytest.param(method, qi, ai, k % 2 == 1, id=f"{method}-q{qi}-axis{ai}-{k}")


@pytest.mark.parametrize(("method", "qi", "ai", "keepdims"), list(_cycled()))
def test_quantile_agrees_with_numpy(method, qi, ai, keepdims):
    q, axis = QS[qi], AXES[ai]
    kw = dict(axis=axis, method=method, keepdims=keepdims)
    _agree(anp.quantile, np.quantile, DATA, q, **kw)
    _agree(anp.percentile, np.percentile, DATA, np.multiply(q, 100), **kw)
    ints = np.round(DATA).astype(np.int64)
    _agree(anp.quantile, np.quantile, ints, q, **kw)  # integers: dtypes too


@pytest.mark.parametrize("method", METHODS)
def test_quantile_of_small_samples_at_every_switch(method):
    for n in range(1, 7):
        x = DATA.ravel()[:n]
        for q in np.linspace(0, 1, 13):
            _agree(anp.quantile, np.quantile, x, q, method=method)


@pytest.mark.parametrize("method", ["linear", "inverted_cdf", "nearest", "hazen"])
def test_nanquantile_agrees_with_numpy(method):
    x = DATA.copy()
    x[0, 1, 2] = x[2, :3, 3] = np.nan
    for axis in (None, 1, (0, 2)):
        kw = dict(axis=axis, method=method)
        _agree(anp.nanquantile, np.nanquantile, x, [0.2, 0.5], **kw)
        _agree(anp.quantile, np.quantile, x, [0.2, 0.5], **kw)  # NaN
        _agree(anp.nanpercentile, np.nanpercentile, x, 30.0, **kw)
    _agree(anp.nanmedian, np.nanmedian, x, axis=1)
    _agree(anp.median, np.median, x, axis=1)


def test_weighted_quantiles_agree_with_numpy():
    w = rng.uniform(0, 2, DATA.shape)
    w[0, 0, 0] = 0.0  # a leading zero weight is never the first to reach q
    kw = dict(method="inverted_cdf")
    for axis in (None, 0, 2):
        q = [0.0, 0.3, 1.0]
        _agree(anp.quantile, np.quantile, DATA, q, axis=axis, weights=w, **kw)
    one_axis = w[0, :, 0]  # weights along the reduced axis only
    _agree(anp.quantile, np.quantile, DATA, 0.4, axis=1, weights=one_axis, **kw)
    two_axes = w[:, 0, :].T  # in the order axis names them
    _agree(anp.percentile, np.percentile, DATA, 40, axis=(2, 0), weights=two_axes, **kw)


def test_dtypes_follow_numpy():
    x32 = DATA.astype(np.float32)
    for q in (0.3, np.float64(0.3), np.array([0.3]), np.float32(0.3)):
        _agree(anp.quantile, np.quantile, x32, q)
    _agree(anp.median, np.median, np.arange(5))
    _agree(anp.quantile, np.quantile, np.arange(5), np.array([0, 1]))
    _agree(anp.median, np.median, [1, 2, 3, 4])


def test_bincount_with_a_length_agrees_with_numpy():
    """The registry's bincount(length=...) records: NumPy's counts, cut to length."""
    x, w = rng.integers(0, 7, 20), rng.standard_normal(20)
    for length in (3, 7, 10):
        _same(anp.bincount(x, length=length), np.bincount(x, minlength=length)[:length])
        _same(anp.bincount(x, w, length=length), np.bincount(x, w, minlength=length)[:length])
    _same(anp.bincount(x, w.astype(np.float32)), np.bincount(x, w.astype(np.float32)))
    _same(anp.bincount(np.array([], dtype=np.intp)), np.bincount(np.array([], dtype=np.intp)))


def test_bincount_batched_in_x_and_weights():
    x = rng.integers(0, 5, (4, 9))
    w = rng.standard_normal((4, 9))
    got = vmap(lambda x, w: anp.bincount(x, w, length=4))(x, w)
    want = [np.bincount(xi, wi, minlength=5)[:4] for xi, wi in zip(x, w)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    got = vmap(lambda x: anp.bincount(x, length=6))(x)
    np.testing.assert_array_equal(got, [np.bincount(xi, minlength=6) for xi in x])


def test_cov_and_corrcoef_with_weights_agree_with_numpy():
    m, y = rng.standard_normal((3, 6)), rng.standard_normal((2, 6))
    fw, aw = rng.integers(1, 4, 6), rng.uniform(0.5, 2, 6)
    for kw in [
        dict(bias=True),
        dict(ddof=2),
        dict(fweights=fw),
        dict(aweights=aw),
        dict(fweights=fw, aweights=aw),
        dict(aweights=aw, ddof=0),
    ]:
        _agree(anp.cov, np.cov, m, y, **kw)
    _agree(anp.cov, np.cov, m[0])
    _agree(anp.cov, np.cov, m.T, rowvar=False)
    _agree(anp.cov, np.cov, m.astype(np.float32))
    _agree(anp.corrcoef, np.corrcoef, m[0])
    z = m + 1j * m[::-1]
    _agree(anp.corrcoef, np.corrcoef, z)


def test_histograms_agree_with_numpy():
    a, w = rng.standard_normal(50), rng.uniform(0, 1, 50)
    edges = np.array([-1.0, 0.0, 0.5, 2.0])
    for bins in ("auto", "fd"):  # the number of bins from the data: not under vmap
        _same(anp.histogram(a, bins), np.histogram(a, bins))
        _same(jvp(lambda a, b=bins: anp.histogram(a, b), (a,), (a,))[0], np.histogram(a, bins))
    for kw in [
        dict(bins=3, range=(0.0, 0.0)),
        dict(bins=edges),
        dict(weights=w + 1j * w[::-1], bins=4),
        dict(weights=w, density=True, bins=7),
    ]:
        _agree(anp.histogram, np.histogram, a, **kw)
    _agree(anp.histogram, np.histogram, np.ones(4))  # no spread: widened by 0.5 each way
    _agree(anp.histogram, np.histogram, rng.integers(0, 9, 30), bins=3)
    sample = rng.standard_normal((40, 3))
    for kw in [
        dict(bins=(2, 3, 4)),
        dict(bins=[edges, 3, edges]),
        dict(range=[(-1, 1), None, (0, 2)]),
        dict(weights=w[:40], density=True),
    ]:
        _agree(anp.histogramdd, np.histogramdd, sample, **kw)
    columns = [a[:40], w[:40]]  # a list of coordinates (as an array it would be 40-d)
    _same(anp.histogramdd(columns), np.histogramdd(columns))
    _same(jvp(anp.histogramdd, (columns,), (columns,))[0], np.histogramdd(columns))
    _agree(anp.histogram2d, np.histogram2d, a, w, bins=[edges, 3])
    x = np.concatenate([rng.standard_normal(20), edges])  # entries on the edges too
    for right in (False, True):
        _agree(anp.digitize, np.digitize, x, edges, right=right)
        _agree(anp.digitize, np.digitize, x, edges[::-1], right=right)


# --- derivatives of every method -------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_every_method_differentiates_and_batches(method):
    x = DATA[0]  # 4 x 5, no ties; q away from every switch at n = 5 and n = 4
    q = np.array([0.13, 0.62])
    check_grads(lambda x: anp.quantile(x, q, axis=1, method=method), (x,), order=1)
    check_vmap(lambda x: anp.quantile(x, q, axis=0, method=method), (0,), (DATA,))
    if method in CONTINUOUS:  # and in q, through the interpolation weight
        check_grads(lambda q: anp.quantile(x, q, axis=1, method=method), (q,), order=2)
    else:  # piecewise constant in q
        np.testing.assert_array_equal(
            grad(lambda q: anp.quantile(x, q, method=method).sum())(q), 0.0
        )


def test_the_derivative_in_q_is_the_slope_between_neighbours():
    x = np.array([3.0, 1.0, 4.0, 2.0])  # sorted: 1 2 3 4; q = 0.5 lies between 2 and 3
    assert grad(lambda q: anp.quantile(x, q))(0.5) == pytest.approx(3.0)  # (3 - 2) * (n - 1)
    assert grad(lambda p: anp.percentile(x, p))(50.0) == pytest.approx(0.03)


# --- conventions at kinks and ties (CONVENTIONS in tests/coverage.py) -----------------------


@pytest.mark.parametrize(
    ("f", "x", "expected"),
    [
        (anp.std, [2.0, 2.0, 2.0], [0.0, 0.0, 0.0]),
        (anp.nanstd, [2.0, np.nan, 2.0], [0.0, 0.0, 0.0]),
        (lambda x: anp.std(x, ddof=1), [0.5, 0.5], [0.0, 0.0]),
        (anp.var, [2.0, 2.0], [0.0, 0.0]),
        (anp.median, [1.0, 2.0, 2.0], [0.0, 1.0, 0.0]),  # the tied entry a stable sort puts there
        (anp.median, [2.0, 2.0, 1.0, 2.0], [0.5, 0.5, 0.0, 0.0]),
        (lambda x: anp.quantile(x, 1.0), [1.0, 3.0, 3.0], [0.0, 0.0, 1.0]),
        (anp.nanmax, [1.0, 3.0, np.nan, 3.0], [0.0, 0.5, 0.0, 0.5]),  # ties share, as max
        (anp.nanmin, [np.nan, 1.0], [0.0, 1.0]),
        (anp.nanmedian, [np.nan, 1.0, 3.0], [0.0, 0.5, 0.5]),
        (anp.nansum, [np.nan, 1.0], [0.0, 1.0]),
        (anp.nanprod, [np.nan, 2.0, 3.0], [0.0, 3.0, 2.0]),
        (lambda x: anp.nancumsum(x)[-1], [np.nan, 2.0], [0.0, 1.0]),
        (lambda x: anp.nanvar(x), [1.0, np.nan, 3.0], [-1.0, 0.0, 1.0]),
    ],
    ids=[
        "std at zero spread",
        "nanstd at zero spread",
        "std ddof=1 at zero spread",
        "var at zero spread",
        "median tie (odd)",
        "median tie (even)",
        "quantile 1 tie",
        "nanmax tie",
        "nanmin NaN",
        "nanmedian NaN",
        "nansum NaN",
        "nanprod NaN",
        "nancumsum NaN",
        "nanvar NaN",
    ],
)
def test_conventions(f, x, expected):
    np.testing.assert_array_equal(grad(lambda x: anp.sum(f(x)))(np.array(x)), expected)


def test_std_at_zero_spread_is_zero_to_every_order_and_keeps_float32():
    x = np.full(3, 0.25, dtype=np.float32)
    g = grad(anp.std)(x)
    assert g.dtype == np.float32 and not np.any(g)
    assert not np.any(grad(lambda x: grad(anp.std)(x).sum())(x.astype(np.float64)))
    _, t = jvp(anp.std, (x,), (np.ones_like(x),))
    assert t == 0.0 and t.dtype == np.float32


def test_corrcoef_diagonal_has_derivative_zero():
    m = rng.standard_normal((2, 5))
    g = grad(lambda m: anp.trace(anp.corrcoef(m)))(m)
    np.testing.assert_allclose(g, 0.0, atol=1e-12)


def test_histogram_edges_follow_the_data_and_counts_have_no_derivative():
    a = np.array([0.0, 1.0, 1.5, 4.0])
    # edges = linspace(min, max, 3): d edges[1] / d a = 1/2 at the min and at the max
    np.testing.assert_allclose(grad(lambda a: anp.histogram(a, 2)[1][1])(a), [0.5, 0, 0, 0.5])
    # density 3 / (n width) with width (max - min) / 2: through the width only
    d = grad(lambda a: anp.histogram(a, 2, density=True)[0][0])(a)
    np.testing.assert_allclose(d, np.array([3, 0, 0, -3]) / 32)
    # a traced range moves the edges too: density 3 / (4 hi / 2)
    d = grad(lambda hi: anp.histogram(a, 2, range=(0.0, hi), density=True)[0][0])(4.0)
    assert d == pytest.approx(-3 / 32)


# --- errors and warnings ---------------------------------------------------------------------


def test_bincount_under_vmap_over_x_needs_a_length():
    x = np.array([[0, 1], [2, 2]])
    with pytest.raises(ConcretizationError, match=r"length="):
        vmap(anp.bincount)(x)
    with pytest.raises(ValueError, match="negative"):
        anp.bincount(np.array([1, -1]))
    with pytest.raises(TypeError, match="integers"):
        anp.bincount(np.array([1.0]))
    with pytest.raises(ValueError, match="same length"):
        anp.bincount(np.array([1, 2]), np.ones(3))


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: anp.quantile(DATA, 1.5), ValueError, r"Quantiles must be in the range \[0, 1\]"),
        (lambda: anp.percentile(DATA, -1), ValueError, r"Percentiles .* \[0, 100\]"),
        (lambda: anp.quantile(DATA, 0.5, method="cubic"), ValueError, "not a valid method"),
        (lambda: anp.quantile(DATA, 0.5, weights=np.ones(DATA.shape)), ValueError, "inverted_cdf"),
        (
            lambda: anp.quantile(DATA, 0.5, method="inverted_cdf", weights=np.ones(5)),
            TypeError,
            "Axis must be specified",
        ),
        (lambda: anp.quantile(DATA + 0j, 0.5), TypeError, "real numbers"),
        (lambda: anp.digitize(DATA[0, 0], np.array([1.0, 0.0, 2.0])), ValueError, "monotonically"),
        (
            lambda: vmap(lambda a: anp.histogram(a, "auto"))(DATA[0]),
            ConcretizationError,
            "number of bins",
        ),
        (lambda: anp.histogram(DATA, bins=np.array([1.0, 0.0])), ValueError, "monotonically"),
        (lambda: anp.histogram(np.array([1.0, np.nan])), ValueError, "not finite"),
        (
            lambda: anp.nanargmax(np.array([[np.nan, np.nan], [1.0, 2.0]]), axis=1),
            ValueError,
            "All-NaN slice",
        ),
    ],
    ids=[
        "q > 1",
        "percentile < 0",
        "method",
        "weights need inverted_cdf",
        "weights shape",
        "complex",
        "digitize bins",
        "bins='auto' under vmap",
        "histogram bins",
        "NaN range",
        "nanargmax all-NaN",
    ],
)
def test_bad_input_raises(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_under_vmap_unchecked_values_give_nan_or_minus_one():
    """Where vmap hides the values a check reads: q out of range gives NaN (NumPy
    raises), an all-NaN slice gives nanargmax -1 (JAX's answer; NumPy raises)."""
    q = np.array([0.5, 1.5])
    np.testing.assert_array_equal(np.isnan(vmap(lambda q: anp.quantile(DATA, q))(q)), [False, True])
    x = np.array([[np.nan, np.nan], [1.0, 2.0]])
    np.testing.assert_array_equal(vmap(anp.nanargmax)(x), [-1, 1])


def test_nan_reductions_warn_as_numpy_does():
    all_nan = np.array([[np.nan, np.nan], [1.0, 2.0]])
    for f in (
        anp.nanmax,
        anp.nanmin,
        anp.nanmedian,
        lambda x, axis: anp.nanquantile(x, 0.5, axis=axis),
    ):
        with pytest.warns(RuntimeWarning, match="All-NaN slice"):
            out = f(all_nan, axis=1)
        assert np.isnan(out[0]) and not np.isnan(out[1])
    with pytest.warns(RuntimeWarning, match="Degrees of freedom"):
        assert np.isnan(anp.nanvar(np.array([1.0, np.nan]), ddof=1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        anp.nanmax(np.array([1.0, np.nan]))  # a slice with a value: no warning
