"""Registry records: statistics (order statistics, covariance, counting into bins).

Samples keep the data free of ties (``distinct``) and the quantiles away from the
points where the interpolation switches neighbours, also for the scaled copies the
vmap tests draw (``q`` times up to 1.1).  ``q`` is positional (so differentiated and
batched) where its derivative is not 0; other static arguments are keywords.
Forward values against NumPy for every ``method`` and the records without a NumPy
counterpart are in ``tests/test_statistics.py``.
"""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import cplx, distinct, ints, positive, real
from tests.registry.reductions import nans


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


def _weighted(name):
    """``name(a, q, weights=w)``: the weights positional, so vmap batches them."""
    return lambda lib, a, w, **kw: getattr(lib, name)(a, weights=w, **kw)


OPS = [
    OpInfo(
        "quantile",
        [
            s(distinct(3, 4, 5), np.array(0.3), axis=1, label="q 0-d"),
            s(
                distinct(2, 6),
                np.array([0.15, 0.6]),
                axis=-1,
                keepdims=True,
                method="hazen",
                label="hazen",
            ),
            s(distinct(2, 3, 4), axis=(0, 2), q=0.5, method="midpoint", label="midpoint"),
            s(distinct(3, 4), np.array([0.2, 0.7]), method="lower", diff=(0,), label="lower"),
        ],
    ),
    OpInfo(
        "quantile",
        [
            s(
                distinct(3, 5),
                positive(3, 5),
                axis=1,
                q=0.4,
                method="inverted_cdf",
                diff=(0,),
                label="weights",
            )
        ],
        call=_weighted("quantile"),
    ),
    OpInfo(
        "percentile",
        [
            s(distinct(4, 5), np.array([20.0, 70.0]), axis=0),
            s(distinct(6), q=40.0, method="nearest", label="nearest"),
        ],
    ),
    OpInfo(
        "median",
        [
            s(distinct(5)),
            s(distinct(3, 4), axis=1, keepdims=True),
            s(distinct(2, 3, 4), axis=(0, 2)),
        ],
    ),
    OpInfo(
        "nanquantile",
        [
            s(nans(3, 5), np.array([0.3, 0.8]), axis=1),
            s(nans(4, 3), q=0.5, method="weibull", label="weibull"),
        ],
    ),
    OpInfo("nanpercentile", [s(nans(3, 5), np.array(30.0), axis=1)]),
    OpInfo("nanmedian", [s(nans(3, 5), axis=1), s(nans(4, 3))]),
    OpInfo(
        "cov",
        [
            s(real(3, 6)),
            s(real(5, 2), rowvar=False, ddof=0, label="rowvar=False"),
            s(real(2, 5), real(5), label="y"),
            s(cplx(2, 4), label="complex"),
        ],
        keeps_float32=False,  # float64 at least, as NumPy's
    ),
    OpInfo(
        "cov",
        [s(real(2, 5), positive(5), label="aweights")],
        call=lambda lib, m, aw, **kw: lib.cov(m, aweights=aw, **kw),
        keeps_float32=False,
    ),
    OpInfo(
        "corrcoef",
        [s(real(3, 6)), s(real(4), real(4), label="y"), s(real(5, 3), rowvar=False)],
        keeps_float32=False,
    ),
    OpInfo(
        "bincount",
        [s(ints(5, 8), length=6), s(ints(4, 7), length=3, label="dropped")],
        differentiable=False,
        numpy_name=None,  # NumPy has no length=: its counts cut to length are the reference
        reference=lambda x, *w, length: np.bincount(x, *w, minlength=length)[:length],
    ),
    OpInfo(
        "bincount",
        [s(ints(5, 8), real(8), length=6, diff=(1,), label="weights")],
        numpy_name=None,
        reference=lambda x, *w, length: np.bincount(x, *w, minlength=length)[:length],
        keeps_float32=False,  # float64, as NumPy's
    ),
    OpInfo(
        "bincount",  # x a constant: NumPy's own spelling, lengths from x's values
        [s(real(8), x=ints(5, 8), label="x static"), s(real(8), x=ints(5, 8), minlength=7)],
        call=lambda lib, w, *, x, **kw: lib.bincount(x, w, **kw),
        keeps_float32=False,
    ),
    OpInfo(
        "digitize",
        [
            s(real(7), np.array([-1.0, -0.2, 0.4, 1.5])),
            s(real(3, 4), np.array([1.5, 0.4, -0.2, -1.0]), right=True, label="decreasing"),
        ],
        differentiable=False,
    ),
    OpInfo(
        "histogram", [s(real(20)), s(real(4, 5), bins=4, range=(-1.0, 1.0))], differentiable=False
    ),
    OpInfo(
        "histogram",
        [s(real(20), positive(20), bins=5, label="weights")],
        call=_weighted("histogram"),
    ),
    OpInfo(
        "histogram",
        [s(real(20), bins=4, density=True, label="density")],
        keeps_float32=False,  # integer counts over float32 widths: float64, as in NumPy
    ),
    OpInfo(
        "histogram",
        [s(real(20), np.array([-2.5, -0.5, 0.3, 2.5]), label="edges, density")],
        call=lambda lib, a, edges, **kw: lib.histogram(a, bins=edges, density=True, **kw),
        keeps_float32=False,
    ),
    OpInfo(
        "histogram_bin_edges",
        [s(real(10)), s(real(10), bins=3, range=(-1.0, 2.0), label="range")],
    ),
    OpInfo(
        "histogramdd",
        [
            s(real(20, 2), bins=3),
            s(real(20, 3), positive(20), bins=(2, 3, 2), density=True, label="weights, density"),
        ],
        call=lambda lib, sample, w=None, **kw: lib.histogramdd(sample, weights=w, **kw),
        keeps_float32=False,  # float64, as NumPy's
    ),
    OpInfo(
        "histogram2d",
        [
            s(real(20), real(20), bins=3),
            s(real(20), real(20), positive(20), bins=(3, 2), density=True, label="weights"),
        ],
        call=lambda lib, x, y, w=None, **kw: lib.histogram2d(x, y, weights=w, **kw),
        keeps_float32=False,
    ),
]
