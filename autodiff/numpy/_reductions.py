"""Compositions of the reductions: ``mean``, ``var``, ``std``, ``average``, ``ptp``,
``count_nonzero``, ``trapezoid``, ``cumulative_sum``/``cumulative_prod``, the
nan-versions (``nansum``, ``nanmean``, ``nanvar``, ``nanstd``, ``nanprod``,
``nanmax``, ``nanmin``, ``nanargmax``, ``nanargmin``, ``nancumsum``, ``nancumprod``) and
NumPy's ufunc methods (``np.add.reduce``, ``np.maximum.accumulate``, ...), written with
the primitives of ``autodiff/rules/reductions.py``.

std at zero spread has derivative 0 (torch's and autograd's convention; the square
root's is infinite there).  The nan-versions give NaN entries derivative 0.
"""

from __future__ import annotations

import math

import numpy as np

from autodiff.core.arrays import dtype_of, is_complex, ndim_of, normalize_axes, shape_of
from autodiff.core.numpy_args import warn_caller
from autodiff.core.overrides import register_numpy
from autodiff.rules import compositions as _comp
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import indexing as _idx
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import known_values
from autodiff.rules.compositions import _scan, cumprod, scalar_if_0d
from autodiff.rules.reductions import (
    _check_supported,
    _in_dtype,
    _scan_axis,
    all,
    any,
    argmax,
    argmin,
    cumsum,
    max,
    min,
    prod,
    sum,
)
from autodiff.rules.shape import _along

__all__ = [
    "average", "count_nonzero", "mean", "nanargmax", "nanargmin", "nancumprod", "nancumsum",
    "nanmax", "nanmean", "nanmin", "nanprod", "nanstd", "nansum", "nanvar", "ptp", "std",
    "trapezoid", "var", "cumulative_sum", "cumulative_prod",
]  # fmt: skip


# --- mean, the array API's scans, cumulative max and min -----------------------------------


@register_numpy(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Like numpy.mean: the sum over ``axis`` divided by the number of elements."""
    _check_supported("mean", out, None, where)
    shape = shape_of(a)
    axis = normalize_axes(axis, len(shape))
    count = math.prod(shape[i] for i in axis)
    if len(axis) == len(shape):  # every axis: sum's None, which it reads without a tuple
        axis = None
    return _in_dtype(sum(a, axis, dtype=dtype, keepdims=keepdims) / count, dtype)


def _cumulative(name, scan, initial, example):
    """The array API's scans: an axis is required beyond 1-d, and ``include_initial``
    puts the scan's identity first."""

    def cumulative(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
        _check_supported(name, out)
        if ndim_of(x) == 0:  # NumPy's scan of a 0-d array: its 1-d array of one entry
            x = _comp.ravel(x)
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


# --- moments and friends ---------------------------------------------------------------------


def _count(a, axis):
    shape = shape_of(a)
    return math.prod(shape[i] for i in axis)


def _as_array(a):
    """Arrays (of any library) and traced values as they are; lists and numbers as arrays."""
    return a if hasattr(a, "shape") and hasattr(a, "dtype") else _comp.asarray(a)


def _moment_args(name, a, dtype, out, where, mean, ddof, correction):
    _check_supported(name, out, None, where)
    if mean is not None:
        raise NotImplementedError(f"{name}(..., mean=...) is not supported on traced values")
    a = _as_array(a)
    if dtype is not None and name.startswith("nan"):
        _inexact_dtype(a, dtype)
        a = _elt.astype(a, dtype)
    return a, (correction if correction is not None else ddof)


def _inexact_dtype(a, dtype):
    """NumPy's nan-functions compute an inexact ``a`` in an inexact ``dtype`` only."""
    if dtype_of(a).kind in "fc" and np.dtype(dtype).kind not in "fc":
        raise TypeError("If a is inexact, then dtype must be inexact")


def _squared(centered):
    if is_complex(centered):
        return _elt.real(centered * _elt.conj(centered))
    return centered * centered


def _root(v):
    """sqrt(v), with derivative 0 where v is 0 (a standard deviation at zero spread:
    torch's and autograd's convention) instead of sqrt's infinite one."""
    zero = _elt.equal(v, 0)
    return _elt.where(zero, 0.0, _elt.sqrt(_elt.where(zero, 1.0, v)))


@register_numpy(np.var)
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):  # fmt: skip
    """Like numpy.var: the mean squared deviation, divided by ``n - ddof``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.var(np.array([1.0, 2.0, 3.0, 4.0])))
    1.25
    """
    a, ddof = _moment_args("var", a, dtype, out, where, mean, ddof, correction)
    axis = normalize_axes(axis, ndim_of(a))
    # NumPy's steps: the mean and the sum of squares each computed in dtype (when given)
    mean_in = _in_dtype(sum(a, axis, dtype=dtype, keepdims=True) / _count(a, axis), dtype)
    total = sum(_squared(a - mean_in), axis, dtype=dtype, keepdims=keepdims)
    return _in_dtype(total / (_count(a, axis) - ddof), dtype)


@register_numpy(np.std)
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None, mean=None,
        correction=None):  # fmt: skip
    """Like numpy.std: the square root of var; at zero spread its derivative is 0
    (as in torch and autograd), not the square root's infinity.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> float(anp.std(np.array([1.0, 3.0])))
    1.0
    >>> autodiff.grad(anp.std)(np.array([2.0, 2.0]))
    array([0., 0.])
    """
    spread = var(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                 correction=correction)  # fmt: skip
    return scalar_if_0d(_in_dtype(_root(spread), dtype))


@register_numpy(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):  # fmt: skip
    """Like numpy.nanvar: var of the entries that are not NaN (NaN where ``n - ddof``
    is not positive); NaNs get derivative 0.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.nanvar(np.array([1.0, np.nan, 3.0])))
    1.0
    """
    a, ddof = _moment_args("nanvar", a, dtype, out, where, mean, ddof, correction)
    axis = normalize_axes(axis, ndim_of(a))
    if dtype_of(a).kind not in "fc":  # nothing can be NaN
        return var(a, axis, ddof=ddof, keepdims=keepdims)
    present = _elt.logical_not(_elt.isnan(a))
    count = sum(_elt.astype(present, np.finfo(dtype_of(a)).dtype), axis, keepdims=True)
    a = _elt.where(present, a, 0.0)
    centered = _elt.where(present, a - sum(a, axis, keepdims=True) / count, 0.0)
    total = sum(_squared(centered), axis, keepdims=keepdims)
    dof = _shp.reshape(count, shape_of(total)) - ddof
    positive = _elt.greater(dof, 0)
    if not _all_known_true(positive):
        warn_caller("Degrees of freedom <= 0 for slice.", RuntimeWarning)
    ans = _elt.where(positive, total / _elt.where(positive, dof, 1.0), np.nan)
    return scalar_if_0d(_in_dtype(ans, dtype))


@register_numpy(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=None,
           mean=None, correction=None):  # fmt: skip
    """Like numpy.nanstd: the square root of nanvar, with derivative 0 at zero spread.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.nanstd(np.array([1.0, np.nan, 3.0])))
    1.0
    """
    spread = nanvar(a, axis, dtype, out, ddof, keepdims, where=where, mean=mean,
                    correction=correction)  # fmt: skip
    return scalar_if_0d(_in_dtype(_root(spread), dtype))


def _all_known_true(mask):
    """False only where ``mask`` has known values (see _helpers.known_values) not all true."""
    known = known_values(mask)
    return known is None or bool(np.all(known))


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
    return sum(_nan_filled(a, 0.0), axis, dtype=dtype, keepdims=keepdims)  # ints stay ints


@register_numpy(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Like numpy.nanmean: the mean of the entries that are not NaN.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.nanmean(np.array([1.0, np.nan, 2.0])))
    1.5
    """
    _check_supported("nanmean", out, None, where)
    if dtype is not None:
        _inexact_dtype(a, dtype)
    present = _elt.logical_not(_elt.isnan(a))
    count = sum(_elt.astype(present, dtype_of(a)), axis, keepdims=keepdims)
    return _in_dtype(nansum(a, axis, dtype=dtype, keepdims=keepdims) / count, dtype)


def _nan_filled(a, fill):
    """``a`` with its NaNs replaced by ``fill`` (arrays that cannot hold NaN as they are)."""
    a = _as_array(a)
    if dtype_of(a).kind not in "fc":
        return a
    return _elt.where(_elt.isnan(a), fill, a)


@register_numpy(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.nanprod: NaNs count as 1 (and get derivative 0).

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.nanprod(np.array([2.0, np.nan, 3.0])))
    6.0
    """
    _check_supported("nanprod", out, initial, where)
    return prod(_nan_filled(a, 1.0), axis, dtype=dtype, keepdims=keepdims)


@register_numpy(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    """Like numpy.nancumsum: NaNs count as 0 (and get derivative 0).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.nancumsum(np.array([1.0, np.nan, 2.0]))
    array([1., 1., 3.])
    """
    _check_supported("nancumsum", out)
    return cumsum(_nan_filled(a, 0.0), axis, dtype=dtype)


@register_numpy(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    """Like numpy.nancumprod: NaNs count as 1 (and get derivative 0).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.nancumprod(np.array([2.0, np.nan, 3.0]))
    array([2., 2., 6.])
    """
    _check_supported("nancumprod", out)
    return cumprod(_nan_filled(a, 1.0), axis, dtype=dtype)


def _skipping_nans(reduce, a, axis, keepdims, fill, all_nan):
    """``reduce`` of ``a`` with its NaNs replaced by ``fill``, and ``all_nan`` for the
    slices that were all NaN; and whether there are such slices (where that is known)."""
    a = _as_array(a)
    if dtype_of(a).kind not in "fc":
        return reduce(a, axis, keepdims=keepdims), False
    missing = _elt.isnan(a)
    result = reduce(_elt.where(missing, fill, a), axis, keepdims=keepdims)
    empty = all(missing, axis, keepdims=keepdims)
    ans = scalar_if_0d(_elt.where(empty, all_nan, result))
    return ans, not _all_known_true(_elt.logical_not(empty))


def _nan_extreme(name, reduce, fill):
    def extreme(a, axis=None, out=None, keepdims=False, initial=None, where=None):
        _check_supported(name, out, initial, where)
        result, some_all_nan = _skipping_nans(reduce, a, axis, keepdims, fill, np.nan)
        if some_all_nan:
            warn_caller("All-NaN slice encountered", RuntimeWarning)
        return result

    extreme.__name__ = extreme.__qualname__ = name
    word = "largest" if name == "nanmax" else "smallest"
    extreme.__doc__ = (
        f"Like numpy.{name}: the {word} entry that is not NaN (NaN for an all-NaN slice);\n"
        f"tied entries share the derivative equally, NaNs get 0.\n\n"
        f"    >>> import numpy as np, autodiff.numpy as anp\n"
        f"    >>> float(anp.{name}(np.array([1.0, np.nan, 3.0])))\n"
        f"    {3.0 if name == 'nanmax' else 1.0}\n"
    )
    return register_numpy(getattr(np, name))(extreme)


def _nan_arg(name, arg, fill):
    def nan_arg(a, axis=None, out=None, *, keepdims=False):
        _check_supported(name, out)
        result, some_all_nan = _skipping_nans(arg, a, axis, keepdims, fill, -1)  # -1: JAX's
        if some_all_nan:
            raise ValueError("All-NaN slice encountered")
        return result

    nan_arg.__name__ = nan_arg.__qualname__ = name
    nan_arg.__doc__ = (
        f"Like numpy.{name}, ignoring NaNs (not differentiable; batchable).  An all-NaN\n"
        f"slice raises ValueError, as in NumPy; under vmap, where values cannot be\n"
        f"checked, it gives -1, as in JAX.\n\n"
        f"    >>> import numpy as np, autodiff.numpy as anp\n"
        f"    >>> int(anp.{name}(np.array([1.0, np.nan, 3.0])))\n"
        f"    {2 if name == 'nanargmax' else 0}\n"
    )
    return register_numpy(getattr(np, name))(nan_arg)


nanmax = _nan_extreme("nanmax", lambda a, axis, keepdims: max(a, axis, keepdims=keepdims),
                      -np.inf)  # fmt: skip


nanmin = _nan_extreme("nanmin", lambda a, axis, keepdims: min(a, axis, keepdims=keepdims),
                      np.inf)  # fmt: skip


nanargmax = _nan_arg("nanargmax", lambda a, axis, keepdims: argmax(a, axis, keepdims=keepdims),
                     -np.inf)  # fmt: skip


nanargmin = _nan_arg("nanargmin", lambda a, axis, keepdims: argmin(a, axis, keepdims=keepdims),
                     np.inf)  # fmt: skip


@register_numpy(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    """Like numpy.count_nonzero over ``axis`` (not differentiable; batchable).

    >>> import numpy as np, autodiff.numpy as anp
    >>> int(anp.count_nonzero(np.array([[0.0, 1.5], [2.0, 0.0]])))
    2
    """
    a = _as_array(a)
    return sum(_elt.astype(_elt.not_equal(a, 0), np.intp), axis, keepdims=keepdims)


def _neighbours_sum(x, axis, sign):
    """``x[i + 1] + sign * x[i]`` along ``axis``."""
    n, nd = shape_of(x)[axis], ndim_of(x)
    after = _idx.getitem(x, _along(axis, nd, slice(1, n)))
    before = _idx.getitem(x, _along(axis, nd, slice(0, n - 1)))
    return after + before if sign > 0 else after - before


@register_numpy(np.trapezoid)
def trapezoid(y, x=None, dx=1.0, axis=-1):
    """Like numpy.trapezoid: the integral of ``y`` along ``axis`` by the trapezoidal
    rule, at sample points ``x`` (1-D, or shaped like ``y``) or spaced ``dx``;
    differentiable in ``y``, ``x`` and ``dx``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.trapezoid(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 3.0])))
    6.5
    """
    y = _as_array(y)
    nd = ndim_of(y)
    axis = normalize_axes(axis, nd)[0]
    if x is None:
        d = dx
    else:
        x = _as_array(x)
        if ndim_of(x) == 1:
            d = x[1:] - x[:-1]
            d = _shp.reshape(d, tuple(shape_of(d)[0] if i == axis else 1 for i in range(nd)))
        else:  # NumPy's diff(x, axis=axis)
            x_axis = normalize_axes(axis - nd, ndim_of(x))[0]
            d = _neighbours_sum(x, x_axis, -1)
    pairs = _neighbours_sum(y, axis, 1)
    return sum(d * pairs / 2.0, axis)


cumulative_sum = _cumulative(
    "cumulative_sum", cumsum, lambda y: _cre.zeros_like(y), [0.0, 1.0, 3.0, 6.0]
)


cumulative_prod = _cumulative(
    "cumulative_prod", cumprod, lambda y: _cre.ones_like(y), [1.0, 1.0, 2.0, 6.0]
)


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
