"""Statistics: order statistics (``median``, ``quantile``, ``percentile`` and their
nan-versions), covariance (``cov``, ``corrcoef``), and histograms (``digitize``,
``histogram``, ``histogram_bin_edges``, ``histogram2d``, ``histogramdd``).

Order statistics are compositions: a stable ``argsort`` finds the order and
``take_along_axis`` gathers the one or two entries each quantile interpolates
between, so the derivative flows to exactly those entries, weighted by the
interpolation, and (for the continuous methods) to ``q`` through the weight.  Tied
entries are not shared: the derivative goes to the tied entry the stable sort puts
at the selected position.

Histograms count with ``bincount`` (the primitive of ``autodiff/rules/statistics.py``)
at bin indices found by ``searchsorted``; their edges are ``linspace`` between the
data's ``min`` and ``max``, so edges and densities are differentiable in the data, and
weighted histograms in the weights, where NumPy's results are.

Values are read (to check an argument or to size an output) only where reading them
is free: NumPy arrays, also under ``grad`` and ``jvp``.  Under ``vmap``, or for other
array libraries, the checks that cannot run are listed in each function's docstring.
With nothing traced, the order statistics, histograms and ``digitize`` call NumPy's own
functions (NumPy partitions where the composition sorts).
"""

from __future__ import annotations

import builtins
import math
import operator
from typing import Any

import numpy as np

from autodiff.core.arrays import (
    array_like,
    dtype_of,
    eye_like,
    is_complex,
    ndim_of,
    normalize_axes,
    shape_of,
)
from autodiff.core.numpy_args import reads_its_lists, warn_caller
from autodiff.core.overrides import register_numpy
from autodiff.core.tracer import Tracer
from autodiff.errors import ConcretizationError
from autodiff.numpy import _creation, _products, _reductions, _shape
from autodiff.rules import compositions as _comp
from autodiff.rules import elementwise as _elt
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules import sorting as _srt
from autodiff.rules._helpers import known_values
from autodiff.rules.statistics import _as_array, bincount_p, weighted_bincount_p

__all__ = [
    "corrcoef", "cov", "digitize", "histogram", "histogram2d", "histogram_bin_edges",
    "histogramdd", "median", "nanmedian", "nanpercentile", "nanquantile", "percentile",
    "quantile",
]  # fmt: skip


def _constant_like(c: Any, ref: Any) -> Any:
    """``c``, a NumPy constant (an array or a number), as an array of ``ref``'s library
    when ``ref`` is another library's (NumPy's ``like=``: CuPy copies it to the device),
    so that it can meet ``ref``'s data; otherwise as it is."""
    like = array_like(ref)
    if like is None or isinstance(c, Tracer) or array_like(c) is not None:
        return c
    return np.asarray(c, like=like)


def _float_dtype(x: Any) -> np.dtype:
    dt = dtype_of(x)
    return dt if dt.kind in "fc" else np.dtype(np.float64)


def _weighted_counts(idx, w, length):
    """Sums of ``w`` per bin, in ``w``'s dtype (complex weights part by part)."""
    if is_complex(w):
        re = weighted_bincount_p.bind(idx, _elt.real(w), length=length)
        return re + 1j * weighted_bincount_p.bind(idx, _elt.imag(w), length=length)
    return weighted_bincount_p.bind(idx, w, length=length)


# --- digitize (not differentiable) --------------------------------------------------------


@register_numpy(np.digitize)
def digitize(x, bins, right=False):
    """Like numpy.digitize: the index of the bin of each entry of ``x``, for
    monotonic ``bins`` (not differentiable; batchable).

    Under ``vmap`` over ``bins`` their monotonicity is not checked (that would read
    every example's values); the direction is that of the first and last edge.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.digitize(np.array([0.5, 1.5, 3.0]), np.array([1.0, 2.0]))
    array([0, 1, 2])
    """
    if _creation._numpy_can([x, bins]):
        return np.digitize(x, bins, right)
    x, bins = _as_array(x), _as_array(bins)
    if is_complex(x):
        raise TypeError("x may not be complex")
    if ndim_of(bins) != 1:
        raise ValueError("object of too small depth for desired array")
    side = "left" if right else "right"
    n = shape_of(bins)[0]
    known = known_values(bins)
    if known is not None:
        rising, falling = np.all(known[1:] >= known[:-1]), np.all(known[1:] <= known[:-1])
        if not (rising or falling):
            raise ValueError("bins must be monotonically increasing or decreasing")
        if rising:
            return _srt.searchsorted(bins, x, side=side)
        return n - _srt.searchsorted(_comp.flip(bins, 0), x, side=side)
    up = _srt.searchsorted(bins, x, side=side)
    down = n - _srt.searchsorted(_comp.flip(bins, 0), x, side=side)
    return _elt.where(_elt.greater_equal(bins[-1], bins[0]), up, down) if n else up


# --- histograms -------------------------------------------------------------------------------


def _outer_edges(a, range_):
    """The first and last edge: ``range`` or the data's min and max (an empty range
    widened by 0.5 each way), as NumPy finds them; differentiable in the data."""
    if range_ is not None:
        first, last = range_
        if first > last:
            raise ValueError("max must be larger than min in range parameter.")
        if not (np.isfinite(first) and np.isfinite(last)):
            raise ValueError(f"supplied range of [{first}, {last}] is not finite")
        if first == last:
            first, last = first - 0.5, last + 0.5
        return first, last
    if 0 in shape_of(a):
        return 0, 1
    first, last = _red.min(a), _red.max(a)
    ends = known_values(first), known_values(last)
    if ends[0] is not None and ends[1] is not None and not np.all(np.isfinite(ends)):
        raise ValueError(f"autodetected range of [{ends[0]}, {ends[1]}] is not finite")
    empty = _elt.equal(first, last)
    return _elt.where(empty, first - 0.5, first), _elt.where(empty, last + 0.5, last)


def _edges(a, bins, range_, weights, *, dim=""):
    """The bin edges for ``bins`` (a count, an estimator's name or the edges themselves)."""
    if isinstance(bins, str):
        known = known_values(a)
        if known is None:
            raise ConcretizationError(
                f"histogram(bins={bins!r}): the number of bins depends on the data's values, "
                "which are not known here (batched by vmap, or an array of another library). "
                "Pass the number of bins or the edges instead."
            )
        bins = len(np.histogram_bin_edges(known, bins, range_, known_values(weights))) - 1
    if np.ndim(bins) == 0:
        try:
            n = operator.index(bins)
        except TypeError as e:
            raise TypeError(f"`bins{dim}` must be an integer, when a scalar") from e
        if n < 1:
            raise ValueError(f"`bins{dim}` must be positive, when an integer")
        first, last = _outer_edges(a, range_)
        weak = (e if isinstance(e, (int, float)) else dtype_of(e) for e in (first, last, a))
        dtype = np.result_type(*weak)  # Python numbers weak, as in NumPy
        dtype = dtype if dtype.kind in "fc" else np.result_type(dtype, float)
        first, last = _constant_like(first, a), _constant_like(last, a)
        return _creation.linspace(first, last, n + 1, endpoint=True, dtype=dtype)
    edges = _as_array(bins)
    if ndim_of(edges) != 1:
        raise ValueError(f"`bins{dim}` must be 1d, when an array")
    known = known_values(edges)
    if known is not None and np.any(known[:-1] > known[1:]):
        raise ValueError(f"`bins{dim}` must increase monotonically, when an array")
    return edges


def _bin_index(a, edges):
    """Each entry's bin: ``[e_i, e_i+1)``, the last one closed; -1 outside (dropped)."""
    n = shape_of(edges)[0] - 1
    i = _srt.searchsorted(edges, a, side="right") - 1
    i = _elt.where(_elt.equal(a, edges[-1]), n - 1, i)
    inside = _elt.logical_and(_elt.greater_equal(a, edges[0]), _elt.less_equal(a, edges[-1]))
    return _elt.where(inside, i, -1)


def _widths(edges):
    return edges[1:] - edges[:-1]


@register_numpy(np.histogram_bin_edges)
def histogram_bin_edges(a, bins=10, range=None, weights=None):
    """Like numpy.histogram_bin_edges; with a number of bins and no ``range`` the
    edges run from ``min(a)`` to ``max(a)`` and are differentiable in ``a``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.histogram_bin_edges(np.array([0.0, 1.0, 4.0]), bins=2)
    array([0., 2., 4.])
    """
    if _creation._numpy_can([a, bins, range, weights]):
        return np.histogram_bin_edges(a, bins, range, weights)
    a = _comp.ravel(_as_array(a))
    return _edges(a, bins, range, weights)


@register_numpy(np.histogram)
def histogram(a, bins=10, range=None, density=None, weights=None):
    """Like numpy.histogram: ``(hist, bin_edges)``.  Counts have no derivative;
    sums of ``weights`` are differentiable in the weights, and edges (with a number
    of bins and no ``range``) and densities in ``a`` and in given edges.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> anp.histogram(np.array([0.0, 1.0, 1.5, 4.0]), bins=2)
    (array([3, 1]), array([0., 2., 4.]))
    >>> a = np.array([0.0, 1.0, 1.5, 4.0])
    >>> autodiff.grad(lambda w: anp.histogram(a, 2, weights=w)[0][0])(np.ones(4))
    array([1., 1., 1., 0.])
    """
    if _creation._numpy_can([a, bins, range, weights]):  # nothing traced: NumPy's own (faster)
        return np.histogram(a, bins, range, density, weights)
    a = _comp.ravel(_as_array(a))
    if weights is not None:
        weights = _comp.ravel(_as_array(weights))
        if shape_of(weights) != shape_of(a):
            raise ValueError("weights should have the same shape as a.")
    edges = _edges(a, bins, range, weights)
    idx, n = _bin_index(a, edges), shape_of(edges)[0] - 1
    hist = bincount_p.bind(idx, length=n) if weights is None else _weighted_counts(idx, weights, n)
    if density:
        hist = hist / _widths(edges) / _red.sum(hist)
    return hist, edges


def _as_sample(sample):
    """An (N, D) array of N points, from one, a 1-D array, or a sequence of D coordinates."""
    if isinstance(sample, (list, tuple)):
        return _shp.transpose(_creation.array(sample), (1, 0)) if sample else _comp.asarray(sample)
    sample = _as_array(sample)
    if ndim_of(sample) == 1:
        return _shp.reshape(sample, (shape_of(sample)[0], 1))
    if ndim_of(sample) != 2:
        raise ValueError(f"histogramdd: sample must be (N, D), got shape {shape_of(sample)}")
    return sample


@register_numpy(np.histogramdd)
@reads_its_lists  # a list of coordinates, and bins and range per coordinate
def histogramdd(sample, bins=10, range=None, density=None, weights=None):
    """Like numpy.histogramdd: ``(hist, edges)`` of N points in D dimensions, with
    the derivatives of ``histogram`` (the histogram is float64, as NumPy's).

    >>> import numpy as np, autodiff.numpy as anp
    >>> hist, edges = anp.histogramdd(np.array([[0.0, 0.0], [1.0, 2.0]]), bins=2)
    >>> hist
    array([[1., 0.],
           [0., 1.]])
    """
    if _creation._numpy_can([sample, bins, range, weights]):
        return np.histogramdd(sample, bins, range, density, weights)
    sample = _as_sample(sample)
    dims = shape_of(sample)[1]
    if weights is not None:
        weights = _as_array(weights)
    try:
        per_dim = list(bins)
    except TypeError:
        per_dim = [bins] * dims
    if isinstance(bins, str):
        per_dim = [bins] * dims
    if len(per_dim) != dims:
        raise ValueError("The dimension of bins must be equal to the dimension of the sample x.")
    ranges = [None] * dims if range is None else list(range)
    if len(ranges) != dims:
        raise ValueError("range argument must have one entry per dimension")
    flat, sizes, edges = None, [], []
    for i in builtins.range(dims):
        column = sample[:, i]
        if isinstance(per_dim[i], str) or np.ndim(per_dim[i]) > 1:
            raise ValueError(f"`bins[{i}]` must be a scalar or 1d array")
        e = _edges(column, per_dim[i], ranges[i], None, dim=f"[{i}]")
        idx, n = _bin_index(column, e), shape_of(e)[0] - 1
        # One flat bin number per point, row-major as NumPy's; -1 if outside in any axis.
        if flat is None:
            flat = idx
        else:
            outside = _elt.logical_or(_elt.less(flat, 0), _elt.less(idx, 0))
            flat = _elt.where(outside, -1, flat * n + idx)
        edges.append(e)
        sizes.append(n)
    total = math.prod(sizes)
    if weights is None:
        hist = bincount_p.bind(flat, length=total)
    else:
        if is_complex(weights):
            raise TypeError("histogramdd: weights must be real (NumPy returns float64)")
        hist = weighted_bincount_p.bind(flat, weights, length=total)
    hist = _shp.reshape(_elt.astype(hist, np.float64), tuple(sizes))
    if density:
        s = _red.sum(hist)
        for i, e in enumerate(edges):
            shape = [1] * dims
            shape[i] = sizes[i]
            hist = hist / _shp.reshape(_widths(e), tuple(shape))
        hist = hist / s
    return hist, edges


@register_numpy(np.histogram2d)
@reads_its_lists  # bins=[edges, 3]: per coordinate
def histogram2d(x, y, bins=10, range=None, density=None, weights=None):
    """Like numpy.histogram2d: ``(hist, xedges, yedges)``, with the derivatives of
    ``histogram``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.histogram2d(np.array([0.0, 1.0]), np.array([0.0, 2.0]), bins=2)[0]
    array([[1., 0.],
           [0., 1.]])
    """
    try:
        n = len(bins)
    except TypeError:
        n = 1
    if n not in (1, 2):
        bins = [bins, bins]
    points = _shp.stack([_as_array(x), _as_array(y)], axis=1)
    hist, edges = histogramdd(points, bins, range, density, weights)
    return hist, edges[0], edges[1]


# --- order statistics: quantile, percentile, median and their nan-versions ----------------------

# The continuous methods of Hyndman & Fan: (alpha, beta) in the virtual index
# n q + alpha + q (1 - alpha - beta) - 1 of the sorted entries ('linear' is (1, 1)).
_CONTINUOUS = {
    "interpolated_inverted_cdf": (0.0, 1.0),
    "hazen": (0.5, 0.5),
    "weibull": (0.0, 0.0),
    "linear": (1.0, 1.0),
    "median_unbiased": (1 / 3.0, 1 / 3.0),
    "normal_unbiased": (3 / 8.0, 3 / 8.0),
}


# Methods that select one sorted entry (no interpolation; an integer array stays one).
_SELECTING = ("inverted_cdf", "closest_observation", "lower", "higher", "nearest")


METHODS = (*_CONTINUOUS, "averaged_inverted_cdf", "midpoint", *_SELECTING)


def _virtual_index(method, n, q):
    """Where quantile ``q`` lies among ``n`` sorted entries, NumPy's way (its order of
    operations, so the same floats come out)."""
    if method == "linear":
        return (n - 1) * q
    alpha, beta = _CONTINUOUS[method]
    return n * q + (alpha + q * (1 - alpha - beta)) - 1


def _selected(method, n, q):
    """The one sorted position a selecting method takes."""
    if method in ("lower", "higher", "nearest"):
        rounding = {"lower": _elt.floor, "higher": _elt.ceil, "nearest": _elt.round}[method]
        return rounding((n - 1) * q)
    # inverted_cdf: the first entry whose empirical cdf reaches q; closest_observation:
    # the nearest order statistic, the even one (1-based) at a tie.
    index = n * q - 1 if method == "inverted_cdf" else n * q - 1 - 0.5
    below = _elt.floor(index)
    exact = _elt.equal(index - below, 0)
    if method == "closest_observation":
        exact = _elt.logical_and(exact, _elt.equal(_elt.remainder(below, 2), 1))
    return _elt.maximum(_elt.where(exact, below, below + 1), 0)


def _neighbours(method, n, q):
    """The two sorted positions an interpolating method combines, and the weight of
    the second (differentiable in ``q`` for the continuous methods)."""
    if method == "midpoint":
        v = (n - 1) * q
        v = 0.5 * (_elt.floor(v) + _elt.ceil(v))
    elif method == "averaged_inverted_cdf":
        v = n * q - 1
    else:
        v = _virtual_index(method, n, q)
    below = _elt.floor(v)
    gamma = v - below
    if method == "midpoint":
        gamma = _elt.where(_elt.equal(_elt.remainder(v, 1), 0), 0.0, 0.5)
    elif method == "averaged_inverted_cdf":
        gamma = _elt.where(_elt.equal(gamma, 0), 0.5, 1.0)
    top = n - 1
    high = _elt.logical_or(_elt.greater_equal(v, top), _elt.isnan(v))
    low = _elt.less(v, 0)
    lo = _elt.where(high, top, _elt.where(low, 0, below))
    hi = _elt.where(high, top, _elt.where(low, 0, below + 1))
    return lo, hi, gamma


def _python(v):
    """A NumPy scalar (or 0-d array) as a Python number."""
    return v.item() if isinstance(v, (np.ndarray, np.generic)) else v


def _lerp(a, b, t):
    """NumPy's interpolation between neighbours (from the nearer end, so t=1 gives b)."""
    diff = b - a
    if isinstance(t, float):
        return b - diff * (1 - t) if t >= 0.5 else a + diff * t
    return _elt.where(_elt.greater_equal(t, 0.5), b - diff * (1 - t), a + diff * t)


def _gather(x, order, positions, size):
    """The entries of ``x`` (last axis) at sorted ``positions`` (an array, or one
    Python number for every slice)."""
    if isinstance(positions, (int, float)):
        k = min(max(int(positions), 0), size - 1)
        return _comp.take_along_axis(x, order[..., k : k + 1], -1)
    positions = _elt.astype(_comp.clip(positions, 0, size - 1), np.intp)
    return _comp.take_along_axis(x, _comp.take_along_axis(order, positions, -1), -1)


def _quantile_weights(weights, a, axis):
    """``weights`` shaped like ``a`` (NumPy also takes them shaped like the reduced
    axes, in the order ``axis`` names them)."""
    w = _as_array(weights)
    if shape_of(w) != shape_of(a):
        if axis is None:
            raise TypeError("Axis must be specified when shapes of a and weights differ.")
        named = axis if isinstance(axis, (tuple, list)) else (axis,)
        named = [normalize_axes(ax, ndim_of(a))[0] for ax in named]
        if shape_of(w) != tuple(shape_of(a)[ax] for ax in named):
            raise ValueError(
                "Shape of weights must be consistent with shape of a along specified axis."
            )
        w = _shp.transpose(w, tuple(int(i) for i in np.argsort(named)))
        shape = tuple(n if i in named else 1 for i, n in enumerate(shape_of(a)))
        w = _shp.broadcast_to(_shp.reshape(w, shape), shape_of(a))
    known = known_values(w)
    if known is not None and np.any(known < 0):
        raise ValueError("Weights must be non-negative.")
    return w


def _quantiles(a, q, axis, keepdims, method, *, skip_nan, weights=None, scale=1):
    """Quantiles ``q / scale`` of ``a`` over ``axis``: NumPy's quantile (``skip_nan``:
    nanquantile), as a composition of argsort and gathers."""
    a = _as_array(a)
    if is_complex(a):
        raise TypeError("a must be an array of real numbers")
    weak = type(q) in (int, float)  # a Python number takes a's precision, as in NumPy
    if scale != 1:  # NumPy's true_divide: a Python number stays one (and weak)
        q = q / scale if weak else _as_array(q) / scale
    q = _as_array(q)
    if ndim_of(q) > 2:
        raise ValueError("q must be a scalar or 1d")
    if method not in METHODS:
        raise ValueError(f"{method!r} is not a valid method. Use one of: {METHODS}")
    if weights is not None and method != "inverted_cdf":
        raise ValueError(f"Only method 'inverted_cdf' supports weights. Got: {method}.")
    known_q = known_values(q)
    if known_q is not None and not np.all((known_q >= 0) & (known_q <= 1)):
        what = "Quantiles" if scale == 1 else "Percentiles"
        raise ValueError(f"{what} must be in the range [0, {scale}]")
    q_dtype, q_shape = dtype_of(q), shape_of(q)
    if known_q is not None and known_q.ndim == 0 and not isinstance(q, Tracer):
        q = known_q.item()  # the common case: positions and weights as Python numbers
    else:
        q = _constant_like(q, a)
    if weights is not None:
        weights = _quantile_weights(weights, a, axis)

    # The reduced axes last, as one axis of n entries, after the kept ones.
    shape = shape_of(a)
    axes = normalize_axes(axis, len(shape))
    kept = [i for i in range(len(shape)) if i not in axes]
    n = math.prod(shape[i] for i in axes)
    kept_shape = tuple(shape[i] for i in kept)
    if axes != tuple(range(len(kept), len(shape))):
        a = _shp.transpose(a, (*kept, *axes))
        weights = None if weights is None else _shp.transpose(weights, (*kept, *axes))
    x = _shp.reshape(a, (*kept_shape, n))
    weights = None if weights is None else _shp.reshape(weights, (*kept_shape, n))
    order = _srt.argsort(x, axis=-1, stable=True)  # NaNs sort last

    # The quantiles along a last axis of their own, broadcasting against the kept axes.
    if isinstance(q, (int, float)):
        qs = q
    else:
        qs = _shp.reshape(q, (1,) * len(kept_shape) + (math.prod(q_shape),))
    inexact = dtype_of(x).kind == "f"
    missing = _elt.isnan(x) if inexact else None
    count = n
    if skip_nan and inexact:
        count = _red.sum(_elt.astype(_elt.logical_not(missing), np.float64), -1, keepdims=True)
    plain = isinstance(qs, (int, float)) and isinstance(count, int)  # positions in Python

    if weights is not None:
        if missing is not None and skip_nan:
            weights = _elt.where(missing, 0, weights)  # NaNs weigh nothing
        result = _weighted_inverted_cdf(x, order, weights, qs, q_dtype, n)
    elif method in _SELECTING or (method == "linear" and q_dtype.kind in "iub"):
        # (NumPy takes an entry, keeping a's dtype, also for integer q with 'linear')
        position = _selected(method, count, qs)
        result = _gather(x, order, _python(position) if plain else position, n)
    else:
        lo, hi, gamma = _neighbours(method, count, qs)
        if plain:
            lo, hi, gamma = _python(lo), _python(hi), _python(gamma)
        out_dtype = _float_dtype(x) if weak else np.result_type(_float_dtype(x), q_dtype)
        below = _elt.astype(_gather(x, order, lo, n), out_dtype)
        above = _elt.astype(_gather(x, order, hi, n), out_dtype)
        result = _lerp(below, above, gamma if plain else _elt.astype(gamma, out_dtype))

    if inexact:
        if skip_nan:
            empty = _elt.equal(count, 0)
            known_empty = known_values(empty)
            if known_empty is not None and np.any(known_empty):
                warn_caller("All-NaN slice encountered", RuntimeWarning)
            result = _elt.where(empty, np.nan, result)
        else:  # a NaN anywhere in a slice makes its quantiles NaN
            last = _comp.take_along_axis(x, order[..., -1:], -1)
            result = _elt.where(_elt.isnan(last), np.nan, result)
    if known_q is None and dtype_of(result).kind == "f":  # q out of [0, 1] under vmap
        result = _elt.where(_elt.logical_and(qs >= 0, qs <= 1), result, np.nan)

    out_kept = tuple(1 if i in axes else shape[i] for i in range(len(shape)))
    out_kept = out_kept if keepdims else kept_shape
    if q_shape:
        result = _comp.moveaxis(result, -1, 0)
    return _comp.scalar_if_0d(_shp.reshape(result, (*q_shape, *out_kept)))  # as NumPy's


def _weighted_inverted_cdf(x, order, weights, qs, q_dtype, n):
    """The first sorted entry whose share of the total weight reaches q."""
    w = _comp.take_along_axis(weights, order, -1)
    cdf = _red.cumsum(_elt.astype(w, np.float64), axis=-1)
    cdf = cdf / cdf[..., -1:]
    known = known_values(cdf[..., -1])
    if known is not None and np.any(np.isnan(known)):
        raise ValueError("Weights included NaN, inf or were all zero.")
    if q_dtype.kind == "f":  # compared in q's precision, as NumPy does
        cdf = _elt.astype(cdf, q_dtype)
    # Leading zero weights: their entries are never the first to reach q.
    cdf = _elt.where(_elt.equal(cdf, 0), -1, cdf)
    if isinstance(qs, (int, float)):
        position = _red.sum(_elt.astype(_elt.less(cdf, qs), np.intp), -1, keepdims=True)
    else:
        below = _elt.less(_shp.expand_dims(cdf, -2), _shp.expand_dims(qs, -1))
        position = _red.sum(_elt.astype(below, np.intp), -1)
    return _gather(x, order, _elt.minimum(position, n - 1), n)


def _quantile_function(name, *, scale, skip_nan, numpy_func, example):
    def quantile(a, q, axis=None, out=None, overwrite_input=False, method="linear",
                 keepdims=False, *, weights=None):  # fmt: skip
        if _creation._numpy_can([a, q, weights]):  # nothing traced: NumPy's own (it partitions)
            return numpy_func(a, q, axis, out, overwrite_input, method, keepdims, weights=weights)
        if out is not None:
            raise NotImplementedError(f"{name}(..., out=...) is not supported on traced values")
        return _quantiles(a, q, axis, keepdims, method, skip_nan=skip_nan, weights=weights,
                          scale=scale)  # fmt: skip

    what = "quantile q (in [0, 1])" if scale == 1 else "percentile q (in [0, 100])"
    nan = "NaNs are ignored (an all-NaN slice gives NaN)" if skip_nan else "a NaN gives NaN"
    quantile.__name__ = quantile.__qualname__ = name
    quantile.__doc__ = (
        f"Like numpy.{name}: the {what} of ``a`` over ``axis``, for every ``method`` of "
        f"NumPy; {nan}.\n\n"
        f"Differentiable in ``a`` (the derivative goes to the one or two sorted entries "
        f"each quantile interpolates between; at ties to the entry a stable sort puts "
        f"there) and, for the continuous methods, in ``q``.  ``weights`` (method "
        f"'inverted_cdf') select, so they get no derivative.  Under ``vmap`` over ``q`` "
        f"a ``q`` out of range gives NaN instead of an error.\n\n"
        f"    >>> import numpy as np, autodiff, autodiff.numpy as anp\n"
        f"    >>> x = np.array([3.0, 1.0, 4.0, 2.0])\n"
        f"    >>> {example}\n"
    )
    return register_numpy(numpy_func)(quantile)


quantile = _quantile_function(
    "quantile",
    scale=1,
    skip_nan=False,
    numpy_func=np.quantile,
    example="autodiff.grad(lambda x: anp.quantile(x, 0.5))(x)  # halfway between 2 and 3\n"
    "    array([0.5, 0. , 0. , 0.5])",
)


percentile = _quantile_function(
    "percentile",
    scale=100,
    skip_nan=False,
    numpy_func=np.percentile,
    example="float(anp.percentile(x, 25.0))\n    1.75",
)


nanquantile = _quantile_function(
    "nanquantile",
    scale=1,
    skip_nan=True,
    numpy_func=np.nanquantile,
    example="float(anp.nanquantile(np.array([1.0, np.nan, 3.0]), 0.5))\n    2.0",
)


nanpercentile = _quantile_function(
    "nanpercentile",
    scale=100,
    skip_nan=True,
    numpy_func=np.nanpercentile,
    example="float(anp.nanpercentile(np.array([1.0, np.nan, 3.0]), 50))\n    2.0",
)


@register_numpy(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Like numpy.median: the middle entry, or the mean of the two middle ones; a
    NaN gives NaN.  The derivative goes to the middle entries (at ties, to the
    entries a stable sort puts in the middle).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> autodiff.grad(anp.median)(np.array([3.0, 1.0, 2.0]))
    array([0., 0., 1.])
    """
    if _creation._numpy_can([a]):  # nothing traced: NumPy's own (it partitions)
        return np.median(a, axis, out, overwrite_input, keepdims)
    if out is not None:
        raise NotImplementedError("median(..., out=...) is not supported on traced values")
    return _quantiles(a, 0.5, axis, keepdims, "linear", skip_nan=False)


@register_numpy(np.nanmedian)
def nanmedian(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Like numpy.nanmedian: the median of the entries that are not NaN (NaN for an
    all-NaN slice); NaNs get derivative 0.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.nanmedian(np.array([3.0, np.nan, 1.0])))
    2.0
    """
    if _creation._numpy_can([a]):
        return np.nanmedian(a, axis, out, overwrite_input, keepdims)
    if out is not None:
        raise NotImplementedError("nanmedian(..., out=...) is not supported on traced values")
    return _quantiles(a, 0.5, axis, keepdims, "linear", skip_nan=True)


# --- covariance ---------------------------------------------------------------------------------


def _observations(m, rowvar, dtype, name):
    """The variables in rows, as NumPy reads ``m`` (or ``y``) for cov."""
    m = _as_array(m)
    if ndim_of(m) > 2:
        raise ValueError(f"{name} has more than 2 dimensions")
    x = _shape.atleast_2d(_elt.astype(m, dtype))
    # NumPy keeps a 1-D m (one variable) and a y of one row as they are.
    keep = rowvar or (ndim_of(m) == 1 if name == "m" else shape_of(x)[0] == 1)
    return x if keep else _shp.transpose(x, (1, 0))


def _frequency_weights(w, n):
    w = _as_array(w)
    known = known_values(w)
    if known is not None and not np.all(known == np.around(known)):
        raise TypeError("fweights must be integer")
    if ndim_of(w) > 1:
        raise RuntimeError("cannot handle multidimensional fweights")
    if shape_of(w)[0] != n:
        raise RuntimeError("incompatible numbers of samples and fweights")
    if known is not None and np.any(known < 0):
        raise ValueError("fweights cannot be negative")
    return _elt.astype(w, np.float64)


def _analytic_weights(w, n):
    w = _as_array(w)
    if ndim_of(w) > 1:
        raise RuntimeError("cannot handle multidimensional aweights")
    if shape_of(w)[0] != n:
        raise RuntimeError("incompatible numbers of samples and aweights")
    known = known_values(w)
    if known is not None and np.any(known < 0):
        raise ValueError("aweights cannot be negative")
    return _elt.astype(w, np.float64)


@register_numpy(np.cov)
def cov(m, y=None, rowvar=True, bias=False, ddof=None, fweights=None, aweights=None, *,
        dtype=None):  # fmt: skip
    """Like numpy.cov: the covariance matrix of the variables in the rows of ``m``
    (and ``y``); differentiable in ``m``, ``y`` and ``aweights`` (``fweights`` are
    counts).  Float64 at least, as NumPy's.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.cov(np.array([[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]]))
    array([[ 1., -1.],
           [-1.,  1.]])
    """
    if ddof is not None and ddof != int(ddof):
        raise ValueError("ddof must be integer")
    if dtype is not None and np.dtype(dtype).kind not in "fc":  # NumPy subtracts the mean in it
        raise TypeError(
            f"cov: cannot compute the covariance in {np.dtype(dtype)!r}: NumPy subtracts "
            f"the mean in dtype (cannot cast ufunc 'subtract' output from float64 with "
            f"casting rule 'same_kind'); give a floating dtype"
        )
    if dtype is None:
        operands = (m,) if y is None else (m, y)
        dtype = np.result_type(*(dtype_of(_as_array(v)) for v in operands), np.float64)
    x = _observations(m, rowvar, dtype, "m")
    if shape_of(x)[0] == 0:
        return x[:, :0]
    if y is not None:
        x = _shp.concatenate([x, _observations(y, rowvar, dtype, "y")], axis=0)
    if ddof is None:
        ddof = 0 if bias else 1
    n = shape_of(x)[1]
    w = None if fweights is None else _frequency_weights(fweights, n)
    if aweights is not None:
        aw = _analytic_weights(aweights, n)
        w = aw if w is None else w * aw
    avg, w_sum = _reductions.average(x, axis=1, weights=w, returned=True)
    w_sum = w_sum[0]
    if w is None:
        fact = n - ddof
    elif ddof == 0:
        fact = w_sum
    elif aweights is None:
        fact = w_sum - ddof
    else:
        fact = w_sum - ddof * _red.sum(w * aw) / w_sum
    known = known_values(fact)
    if known is not None and known <= 0:
        warn_caller("Degrees of freedom <= 0 for slice", RuntimeWarning)
        fact = 0.0
    x = x - avg[:, None]
    x_t = _shp.transpose(x if w is None else x * w, (1, 0))
    c = _products.dot(x, _elt.conj(x_t))
    c = c * np.true_divide(1, fact) if isinstance(fact, (int, float)) else c * (1 / fact)
    return _shp.squeeze(_elt.astype(c, dtype))  # in dtype, as NumPy's in-place steps keep it


@register_numpy(np.corrcoef)
def corrcoef(x, y=None, rowvar=True, *, dtype=None):
    """Like numpy.corrcoef: the covariance scaled to unit diagonal, clipped to
    [-1, 1] as NumPy clips it; differentiable in ``x`` and ``y``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.corrcoef(np.array([0.0, 1.0, 2.0]), np.array([1.0, 3.0, 5.0]))
    array([[1., 1.],
           [1., 1.]])
    """
    c = cov(x, y, rowvar, dtype=dtype)
    if ndim_of(c) == 0:
        return c / c
    n = shape_of(c)[0]
    d = _red.sum(c * eye_like(n, dtype_of(c), c), axis=1)  # the diagonal, of c's library
    stddev = _elt.sqrt(_elt.real(d))
    c = c / stddev[:, None]
    c = c / stddev[None, :]
    if is_complex(c):
        return _comp.clip(_elt.real(c), -1, 1) + 1j * _comp.clip(_elt.imag(c), -1, 1)
    return _comp.clip(c, -1, 1)
