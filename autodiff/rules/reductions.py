"""Reductions and scans: sum, prod, max, min, cumsum, all, any, argmax,
argmin as primitives; mean, var, std, average, ptp, nansum, nanmean,
cumprod and the ufunc methods (``np.add.reduce``, ``np.maximum.accumulate``,
...) as compositions of them.

The public functions normalise ``axis`` to a sorted tuple of non-negative
axes, so every rule sees one form.  Ties in max/min share the cotangent
equally among the tied elements (JAX's and PyTorch's convention).  The
derivatives of prod and cumprod are exact also where entries are 0 (no
division by the entries).
"""

from __future__ import annotations

import math

import numpy as np

from autodiff._core import Primitive
from autodiff._tracer import register_numpy
from autodiff.rules._helpers import (
    dtype_of,
    implements,
    is_complex,
    move_to_front,
    ndim_of,
    normalize_axes,
    shape_of,
)

__all__ = [
    "all", "amax", "amin", "any", "argmax", "argmin", "average", "cumprod", "cumsum", "max",
    "mean", "min", "nanmean", "nansum", "prod", "ptp", "std", "sum", "var",
    "cumulative_sum", "cumulative_prod",
]  # fmt: skip


def _reduction_batch(prim):
    """Reduce the same logical axes; the batch axis shifts left past reduced ones."""

    def batch(args, dims, *, axis, keepdims):
        d = dims[0]
        physical = tuple(a + (a >= d) for a in axis)
        out_dim = d if keepdims else d - len([a for a in axis if a < d])
        return prim.bind(args[0], axis=physical, keepdims=keepdims), out_dim

    return batch


def _expand_reduced(x, axis, keepdims):
    """Undo the removal of reduced axes (so ``x`` broadcasts against the input)."""
    return x if keepdims else _shp.expand_dims(x, axis)


def _check_supported(name, out=None, initial=None, where=None):
    for kw, value in (("out", out), ("initial", initial), ("where", where)):
        if value is not None:
            raise NotImplementedError(f"{name}(..., {kw}=...) is not supported on traced values")


# --- sum ------------------------------------------------------------------------------

sum_p = Primitive(
    "sum",
    lambda x, *, axis, keepdims: np.sum(x, axis=axis, keepdims=keepdims),
    vjp=[
        lambda ct, ans, x, *, axis, keepdims: _shp.broadcast_to(
            _expand_reduced(ct, axis, keepdims), shape_of(x)
        )
    ],
    jvp=[lambda t, ans, x, *, axis, keepdims: sum_p.bind(t, axis=axis, keepdims=keepdims)],
    vjp_reads=[()],
)
sum_p.def_batch(_reduction_batch(sum_p))


@implements(sum_p, np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.sum over ``axis`` (None, int or tuple; negatives allowed)."""
    _check_supported("sum", out, initial, where)
    if dtype is not None:
        a = _elt.astype(a, dtype)
    axis = normalize_axes(axis, ndim_of(a))
    return sum_p.bind(a, axis=axis, keepdims=bool(keepdims)) if axis or keepdims else a


@register_numpy(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Like numpy.mean: the sum over ``axis`` divided by the number of elements."""
    _check_supported("mean", out, None, where)
    shape = shape_of(a)
    axis = normalize_axes(axis, len(shape))
    count = math.prod(shape[i] for i in axis)
    return sum(a, axis, dtype=dtype, keepdims=keepdims) / count


# --- max and min ----------------------------------------------------------------------


def _tie_weights(x, ans, axis, keepdims):
    """1/k at each of the k positions attaining the extreme, 0 elsewhere."""
    hit = _elt.astype(_elt.equal(x, _expand_reduced(ans, axis, keepdims)), x.dtype)
    return hit / sum(hit, axis, keepdims=True)


def _chooser(name, impl):
    prim = Primitive(
        name,
        impl,
        vjp=[
            lambda ct, ans, x, *, axis, keepdims: (
                _expand_reduced(ct, axis, keepdims) * _tie_weights(x, ans, axis, keepdims)
            )
        ],
        jvp=[
            lambda t, ans, x, *, axis, keepdims: sum(
                t * _tie_weights(x, ans, axis, keepdims), axis, keepdims=keepdims
            )
        ],
    )
    prim.def_batch(_reduction_batch(prim))
    return prim


max_p = _chooser("max", lambda x, *, axis, keepdims: np.max(x, axis=axis, keepdims=keepdims))
min_p = _chooser("min", lambda x, *, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims))


@implements(max_p, np.max, np.amax)
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.max; tied maxima share the derivative equally."""
    _check_supported("max", out, initial, where)
    return max_p.bind(a, axis=normalize_axes(axis, ndim_of(a)), keepdims=bool(keepdims))


@implements(min_p, np.min, np.amin)
def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.min; tied minima share the derivative equally."""
    _check_supported("min", out, initial, where)
    return min_p.bind(a, axis=normalize_axes(axis, ndim_of(a)), keepdims=bool(keepdims))


amax, amin = max, min


# --- argmax and argmin (not differentiable) -------------------------------------------


def _arg_batch(prim):
    def batch(args, dims, *, axis, keepdims):
        x, d = args[0], dims[0]
        if axis is None:  # over all logical axes: flatten each example
            x = move_to_front(x, d)
            shape = shape_of(x)
            flat = _shp.reshape(x, (shape[0], math.prod(shape[1:])))  # no -1: B may be 0
            out = prim.bind(flat, axis=1, keepdims=False)
            if keepdims:
                out = _shp.reshape(out, (shape[0],) + (1,) * (len(shape) - 1))
            return out, 0
        out_dim = d if keepdims or axis >= d else d - 1
        return prim.bind(x, axis=axis + (axis >= d), keepdims=keepdims), out_dim

    return batch


argmax_p = Primitive(
    "argmax",
    lambda x, *, axis, keepdims: np.argmax(x, axis=axis, keepdims=keepdims),
    differentiable=False,
)
argmax_p.def_batch(_arg_batch(argmax_p))
argmin_p = Primitive(
    "argmin",
    lambda x, *, axis, keepdims: np.argmin(x, axis=axis, keepdims=keepdims),
    differentiable=False,
)
argmin_p.def_batch(_arg_batch(argmin_p))


def _arg_axis(a, axis):
    return None if axis is None else normalize_axes(axis, ndim_of(a))[0]


@implements(argmax_p, np.argmax)
def argmax(a, axis=None, out=None, *, keepdims=False):
    """Like numpy.argmax (not differentiable; batchable)."""
    _check_supported("argmax", out)
    return argmax_p.bind(a, axis=_arg_axis(a, axis), keepdims=bool(keepdims))


@implements(argmin_p, np.argmin)
def argmin(a, axis=None, out=None, *, keepdims=False):
    """Like numpy.argmin (not differentiable; batchable)."""
    _check_supported("argmin", out)
    return argmin_p.bind(a, axis=_arg_axis(a, axis), keepdims=bool(keepdims))


# --- prod ---------------------------------------------------------------------------------


def _prod_of_others(x, axis):
    """For each entry, the product of the other entries of its reduced group,
    from exclusive running products (exact where entries are 0)."""
    shape = shape_of(x)
    kept = [i for i in range(len(shape)) if i not in axis]
    perm = (*kept, *axis)
    group = math.prod(shape[i] for i in axis)
    flat = _shp.reshape(_shp.transpose(x, perm), (*tuple(shape[i] for i in kept), group))
    before = _exclusive_cumprod(flat)
    after = _shp.flip(_exclusive_cumprod(_shp.flip(flat, -1)), -1)
    others = _shp.reshape(before * after, tuple(shape[i] for i in perm))
    return _shp.transpose(others, tuple(int(i) for i in np.argsort(perm)))


def _exclusive_cumprod(x):
    """Products of the entries before each one along the last axis (1 for the first)."""
    ones = _cre.ones_like(x[..., :1])
    return _shp.concatenate([ones, cumprod(x[..., :-1], axis=-1)], axis=-1)


prod_p = Primitive(
    "prod",
    lambda x, *, axis, keepdims: np.prod(x, axis=axis, keepdims=keepdims),
    vjp=[
        lambda ct, ans, x, *, axis, keepdims: (
            _expand_reduced(ct, axis, keepdims) * _prod_of_others(x, axis)
        )
    ],
    jvp=[
        lambda t, ans, x, *, axis, keepdims: sum(
            t * _prod_of_others(x, axis), axis, keepdims=keepdims
        )
    ],
)
prod_p.def_batch(_reduction_batch(prod_p))


@implements(prod_p, np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.prod; exact derivatives also where entries are 0.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> autodiff.grad(anp.prod)(np.array([2.0, 0.0, 5.0]))
    array([ 0., 10.,  0.])
    """
    _check_supported("prod", out, initial, where)
    if dtype is not None:
        a = _elt.astype(a, dtype)
    axis = normalize_axes(axis, ndim_of(a))
    return prod_p.bind(a, axis=axis, keepdims=bool(keepdims)) if axis or keepdims else a


# --- scans: cumsum (a primitive), cumprod and cumulative max/min (compositions) ------------


def _scan_batch(prim):
    def batch(args, dims, *, axis):
        d = dims[0]
        return prim.bind(args[0], axis=axis + (axis >= d)), d

    return batch


cumsum_p = Primitive(
    "cumsum",
    lambda x, *, axis: np.cumsum(x, axis=axis),
    # The transpose of a running sum is a running sum from the other end.
    vjp=[
        lambda ct, ans, x, *, axis: _shp.flip(cumsum_p.bind(_shp.flip(ct, axis), axis=axis), axis)
    ],
    jvp=[lambda t, ans, x, *, axis: cumsum_p.bind(t, axis=axis)],
)
cumsum_p.def_batch(_scan_batch(cumsum_p))


def _scan_axis(a, axis):
    """Flatten for axis=None (as NumPy does), then a non-negative axis."""
    if axis is None:
        return _shp.ravel(a), 0
    return a, normalize_axes(axis, ndim_of(a))[0]


@implements(cumsum_p, np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    """Like numpy.cumsum (``axis=None`` flattens first).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.cumsum(np.array([1.0, 2.0, 3.0]))
    array([1., 3., 6.])
    """
    _check_supported("cumsum", out)
    if dtype is not None:
        a = _elt.astype(a, dtype)
    a, axis = _scan_axis(a, axis)
    return cumsum_p.bind(a, axis=axis)


def _scan(combine, x, axis, pad):
    """Inclusive scan of ``combine`` along ``axis`` in ceil(log2 n) steps
    (Hillis-Steele).  Built from primitives, so every derivative is exact
    and batchable; ``pad(block)`` is what combines as the identity."""
    n = shape_of(x)[axis]
    lead = (slice(None),) * axis
    shift = 1
    while shift < n:
        head, body = (*lead, slice(0, shift)), (*lead, slice(0, n - shift))
        shifted = _shp.concatenate([pad(x[head]), x[body]], axis=axis)
        x = combine(x, shifted)
        shift *= 2
    return x


@register_numpy(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    """Like numpy.cumprod (``axis=None`` flattens first); exact derivatives at zeros.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.cumprod(np.array([1.0, 2.0, 3.0]))
    array([1., 2., 6.])
    """
    _check_supported("cumprod", out)
    if dtype is not None:
        a = _elt.astype(a, dtype)
    a, axis = _scan_axis(a, axis)
    return _scan(_elt.multiply, a, axis, _cre.ones_like)


def _cumulative(name, scan, initial, example):
    """The array API's scans: an axis is required beyond 1-d, and ``include_initial``
    puts the scan's identity first."""

    def cumulative(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        _check_supported(name, out)
        if axis is None:
            if ndim_of(x) > 1:
                raise ValueError(
                    f"{name}: axis must be specified for arrays of more than one dimension"
                )
            axis = 0
        axis = normalize_axes(axis, ndim_of(x))[0]
        y = scan(x, axis=axis, dtype=dtype)
        if not include_initial:
            return y
        first = _shp.expand_dims(_idx.getitem(initial(y), (slice(None),) * axis + (0,)), axis)
        return _shp.concatenate([first, y], axis=axis)

    cumulative.__name__ = cumulative.__qualname__ = name
    cumulative.__doc__ = (
        f"Like numpy.{name}; differentiable and batchable.\n\n"
        f"    >>> import numpy as np, autodiff.numpy as anp\n"
        f"    >>> anp.{name}(np.array([1.0, 2.0, 3.0]), include_initial=True).tolist()\n"
        f"    {example}\n"
    )
    return register_numpy(getattr(np, name))(cumulative)


def _cumulative_extreme(combine):
    def accumulate(a, axis=0, dtype=None, out=None):
        _check_supported("accumulate", out)
        a, axis = _scan_axis(a, axis)
        # Padding with the entries themselves: combine(x, x) == x for max and min.
        return _scan(combine, a, axis, lambda block: block)

    return accumulate


# --- moments and friends (compositions) ----------------------------------------------------


def _count(a, axis):
    shape = shape_of(a)
    return math.prod(shape[i] for i in axis)


@register_numpy(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):  # fmt: skip
    """Like numpy.var: the mean squared deviation, divided by ``n - ddof``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.var(np.array([1.0, 2.0, 3.0, 4.0])))
    1.25
    """
    _check_supported("var", out, None, where)
    if mean is not None:
        raise NotImplementedError("var(..., mean=...) is not supported on traced values")
    ddof = correction if correction is not None else ddof
    if dtype is not None:
        a = _elt.astype(a, dtype)
    axis = normalize_axes(axis, ndim_of(a))
    centered = a - sum(a, axis, keepdims=True) / _count(a, axis)
    squared = _elt.real(centered * _elt.conj(centered)) if is_complex(a) else centered * centered
    return sum(squared, axis, keepdims=keepdims) / (_count(a, axis) - ddof)


@register_numpy(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):  # fmt: skip
    """Like numpy.std: the square root of var (its derivative is infinite where var is 0).

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.std(np.array([1.0, 3.0])))
    1.0
    """
    return _elt.sqrt(var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                         correction=correction))  # fmt: skip


@register_numpy(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    """Like numpy.average: ``sum(a * w) / sum(w)`` over ``axis``; weights may be
    shaped like ``a`` or 1-D along an int ``axis``; both are differentiable.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.average(np.array([1.0, 4.0]), weights=np.array([3.0, 1.0])))
    1.75
    """
    if weights is None:
        avg = mean(a, axis, keepdims=keepdims)
        scale = _cre.ones_like(avg) * _count(a, normalize_axes(axis, ndim_of(a)))
        return (avg, scale) if returned else avg
    axes = normalize_axes(axis, ndim_of(a))
    if shape_of(weights) != shape_of(a):
        if axis is None or ndim_of(weights) != 1 or len(axes) != 1:
            raise TypeError("1-D weights need an int axis (or give weights shaped like a)")
        shape = [1] * ndim_of(a)
        shape[axes[0]] = shape_of(weights)[0]
        weights = _shp.reshape(weights, tuple(shape))
    total = sum(_shp.broadcast_to(weights, shape_of(a)), axes, keepdims=keepdims)
    avg = sum(a * weights, axes, keepdims=keepdims) / total
    return (avg, _shp.broadcast_to(total, shape_of(avg))) if returned else avg


@register_numpy(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    """Like numpy.ptp: ``max - min`` over ``axis``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.ptp(np.array([3.0, -1.0, 2.0])))
    4.0
    """
    _check_supported("ptp", out)
    return max(a, axis, keepdims=keepdims) - min(a, axis, keepdims=keepdims)


@register_numpy(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.nansum: NaNs count as 0 (and get derivative 0).

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.nansum(np.array([1.0, np.nan, 2.0])))
    3.0
    """
    _check_supported("nansum", out, initial, where)
    return sum(_elt.where(_elt.isnan(a), 0.0, a), axis, dtype=dtype, keepdims=keepdims)


@register_numpy(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Like numpy.nanmean: the mean of the entries that are not NaN.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.nanmean(np.array([1.0, np.nan, 2.0])))
    1.5
    """
    _check_supported("nanmean", out, None, where)
    present = _elt.logical_not(_elt.isnan(a))
    count = sum(_elt.astype(present, dtype_of(a)), axis, keepdims=keepdims)
    return nansum(a, axis, dtype=dtype, keepdims=keepdims) / count


cumulative_sum = _cumulative(
    "cumulative_sum", cumsum, lambda y: _cre.zeros_like(y), [0.0, 1.0, 3.0, 6.0]
)
cumulative_prod = _cumulative(
    "cumulative_prod", cumprod, lambda y: _cre.ones_like(y), [1.0, 1.0, 2.0, 6.0]
)


# --- all and any (not differentiable) ------------------------------------------------------------


def _logical_reduction(name, impl):
    prim = Primitive(
        name,
        lambda x, *, axis, keepdims: impl(x, axis=axis, keepdims=keepdims),
        differentiable=False,
    )
    prim.def_batch(_reduction_batch(prim))

    def public(a, axis=None, out=None, keepdims=False, *, where=None):
        _check_supported(name, out, None, where)
        return prim.bind(a, axis=normalize_axes(axis, ndim_of(a)), keepdims=bool(keepdims))

    public.__name__ = public.__qualname__ = name
    public.__doc__ = f"Like numpy.{name} over ``axis`` (not differentiable; batchable)."
    public.primitive = prim  # type: ignore[attr-defined]
    return prim, register_numpy(impl)(public)


all_p, all = _logical_reduction("all", np.all)
any_p, any = _logical_reduction("any", np.any)


# --- NumPy's ufunc methods: np.add.reduce(x), np.maximum.accumulate(x), ... ---------------------


def _ufunc_reduce(reduction):
    def reduce(a, axis=0, dtype=None, out=None, keepdims=False, initial=None, where=None):
        return reduction(a, axis, dtype=dtype, out=out, keepdims=keepdims, initial=initial,
                         where=where)  # fmt: skip

    return reduce


def _extreme_reduce(reduction):
    def reduce(a, axis=0, dtype=None, out=None, keepdims=False, initial=None, where=None):
        return reduction(a, axis, out=out, keepdims=keepdims, initial=initial, where=where)

    return reduce


def _logical_reduce(reduction):
    def reduce(a, axis=0, dtype=None, out=None, keepdims=False, initial=None, where=None):
        _check_supported("reduce", out, initial, where)
        return reduction(a, axis, keepdims=keepdims)

    return reduce


def _ufunc_accumulate(scan):
    def accumulate(a, axis=0, dtype=None, out=None):
        return scan(a, axis, dtype=dtype, out=out)

    return accumulate


register_numpy((np.add, "reduce"))(_ufunc_reduce(sum))
register_numpy((np.multiply, "reduce"))(_ufunc_reduce(prod))
register_numpy((np.maximum, "reduce"))(_extreme_reduce(max))
register_numpy((np.minimum, "reduce"))(_extreme_reduce(min))
register_numpy((np.logical_and, "reduce"))(_logical_reduce(all))
register_numpy((np.logical_or, "reduce"))(_logical_reduce(any))
register_numpy((np.add, "accumulate"))(_ufunc_accumulate(cumsum))
register_numpy((np.multiply, "accumulate"))(_ufunc_accumulate(cumprod))
register_numpy((np.maximum, "accumulate"))(_cumulative_extreme(lambda x, y: _elt.maximum(x, y)))
register_numpy((np.minimum, "accumulate"))(_cumulative_extreme(lambda x, y: _elt.minimum(x, y)))


# Rules here call shape and elementwise primitives, which import these helpers.
from autodiff.rules import creation as _cre  # noqa: E402
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import indexing as _idx  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
