"""The compositions rules call: the only public functions of ``rules/`` that are not
primitives.

``asarray`` (lists and tuples that hold traced values), ``clip``, ``take``,
``take_along_axis``, ``cumprod``, ``broadcast_arrays``, ``flip``, ``moveaxis``,
``ravel``, ``swapaxes``, ``tril`` and ``triu`` are written with primitives, like every
composition, and are here rather than in ``autodiff/numpy/`` because a rule, a
primitive's public function or a transform calls them (``move_to_front`` is a
``moveaxis``, ``prod``'s VJP a ``cumprod``, ``lu_factor``'s a ``tril``...), and those
may not import the namespaces above them.  ``tests/test_layers.py`` checks that each
one here has such a caller; every other composition lives beside its namespace.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autodiff.core import numpy_args
from autodiff.core.arrays import (
    array_like,
    dtype_of,
    fresh,
    ndim_of,
    normalize_axes,
    shape_of,
)
from autodiff.core.overrides import register_numpy
from autodiff.core.tracer import Tracer

__all__ = [
    "asarray", "clip", "take", "take_along_axis", "cumprod", "broadcast_arrays", "flip",
    "moveaxis", "ravel", "swapaxes", "tril", "triu",
]  # fmt: skip


# --- asarray: nested lists that hold traced values --------------------------------------------


def scalar_if_0d(x: Any) -> Any:
    """A 0-d answer as NumPy's scalar of its dtype, which NumPy's reductions and norms
    return (``np.std(v)`` is an ``np.float64``, not an array), for compositions whose
    last step (``where``, a reshape) leaves a 0-d array; anything else as it is.  A
    traced value is indexed with ``()``, so that ``jit`` answers the same scalar.

    >>> import numpy as np
    >>> type(scalar_if_0d(np.array(2.5))).__name__, scalar_if_0d(np.ones(2))
    ('float64', array([1., 1.]))
    """
    is_0d = (type(x) is np.ndarray or isinstance(x, Tracer)) and not x.shape
    return x[()] if is_0d else x


def _holds_tracer(obj: Any) -> bool:
    """Whether ``obj`` is a tracer or a (nested) list or tuple holding one."""
    if isinstance(obj, Tracer):
        return True
    if isinstance(obj, (list, tuple)):
        return any(_holds_tracer(item) for item in obj)
    return False


def _placeholder(obj: Any) -> Any:
    """``obj`` with each tracer replaced by zeros of its shape and dtype, for NumPy to
    check the nesting and work out the dtype exactly as it would for arrays."""
    if isinstance(obj, Tracer):
        return np.zeros(shape_of(obj), dtype_of(obj))
    if isinstance(obj, (list, tuple)):
        return [_placeholder(item) for item in obj]
    return obj


def _first_tracer(obj: Any) -> Any:
    """The first tracer in ``obj``, which holds one."""
    if isinstance(obj, Tracer):
        return obj
    return _first_tracer(next(item for item in obj if _holds_tracer(item)))


def constant_like(obj: Any, dtype: Any, x: Any) -> Any:
    """``obj`` (nested lists, scalars, arrays) as a constant array of ``dtype`` in the
    array library of traced value ``x`` (NumPy, CuPy, Dask...), to combine with it."""
    like = array_like(x)
    return np.asarray(obj, dtype) if like is None else np.asarray(obj, dtype, like=like)


def _assemble(obj: Any, dtype: np.dtype, x: Any) -> Any:
    """The array ``obj`` stands for: traced parts cast to ``dtype`` and stacked, the
    constant parts made by ``x``'s array library."""
    if isinstance(obj, Tracer):
        return _elt.astype(obj, dtype)
    if isinstance(obj, (list, tuple)) and _holds_tracer(obj):
        return _shp.stack([_assemble(item, dtype, x) for item in obj])
    return constant_like(obj, dtype, x)


def _traced_array(obj: Any, dtype: Any, ndmin: int) -> Any:
    # NumPy itself, on stand-ins, validates the nesting (ragged lists raise its own
    # error) and promotes dtypes exactly as np.array would for the same arrays.
    reference = np.array(_placeholder(obj), dtype=dtype, ndmin=ndmin)
    out = _assemble(obj, reference.dtype, _first_tracer(obj))
    if ndim_of(out) < ndmin:
        out = _shp.reshape(out, (1,) * (ndmin - ndim_of(out)) + shape_of(out))
    return out


def asarray(a, dtype=None, order=None, *, device=None, copy=None, like=None):
    """Like numpy.asarray; nested lists and tuples may hold traced values (see ``array``).
    Arrays of other libraries (CuPy, Dask) stay theirs, as traced values do.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.asarray([1, 2.5]).dtype
    dtype('float64')
    """
    if not _holds_tracer(a):
        if like is None and array_like(a) is not None:  # stays in its own library
            return a if dtype is None or np.dtype(dtype) == a.dtype else a.astype(dtype)
        kwargs = {} if like is None else {"like": like}
        if device is not None:
            kwargs["device"] = device
        return np.asarray(a, dtype, order, copy=copy, **kwargs)
    return _traced_array(a, dtype, 0)


# NumPy's functions convert their array_like arguments with this (core/numpy_args.py).
numpy_args.as_array = asarray


# --- clip -------------------------------------------------------------------------------------


@register_numpy(np.clip)
def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None):
    """Like numpy.clip: ``minimum(maximum(a, a_min), a_max)``; either bound may be None.

    At a bound the derivative is split like maximum/minimum ties (0.5).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.clip(np.array([-2.0, 0.5, 3.0]), -1.0, 1.0)
    array([-1. ,  0.5,  1. ])
    """
    if out is not None:
        raise NotImplementedError("clip(..., out=...) is not supported; use the returned value")
    low = a_min if a_min is not None else min
    high = a_max if a_max is not None else max
    if low is None and high is None:  # NumPy's answer: a new array (for a 0-d a, a scalar)
        return scalar_if_0d(fresh(a, a))
    if low is not None:
        a = _elt.maximum(a, low)
    if high is not None:
        a = _elt.minimum(a, high)
    return a


# --- take, take_along_axis --------------------------------------------------------------------


def _along(axis, n_dims, index):
    return (slice(None),) * axis + (index,) + (slice(None),) * (n_dims - axis - 1)


@register_numpy(np.take)
def take(a, indices, axis=None, out=None, mode="raise"):
    """Like numpy.take (mode='raise'): entries at ``indices`` along ``axis``
    (of the flattened array for None).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.take(np.array([5.0, 6.0, 7.0]), [2, 0])
    array([7., 5.])
    """
    if out is not None or mode != "raise":
        raise NotImplementedError("take: only out=None and mode='raise' are supported")
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axes(axis, ndim_of(a))[0]
    return _idx.getitem(a, _along(axis, ndim_of(a), indices))


def _along_grids(arr, indices, axis):
    """The index ``arr[grids]`` of take_along_axis: ``indices`` along ``axis``, ranges
    along the other axes (broadcast against it)."""
    n = ndim_of(arr)
    if ndim_of(indices) != n:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    grids = []
    for i, size in enumerate(shape_of(arr)):
        shape = [1] * n
        shape[i] = size
        grids.append(indices if i == axis else np.arange(size).reshape(shape))
    return tuple(grids)


@register_numpy(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    """Like numpy.take_along_axis: pick along ``axis`` with ``indices`` shaped like ``arr``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.take_along_axis(np.array([[4.0, 5.0], [6.0, 7.0]]), np.array([[1], [0]]), 1)
    array([[5.],
           [6.]])
    """
    if axis is None:
        arr, axis = ravel(arr), 0
    axis = normalize_axes(axis, ndim_of(arr))[0]
    return _idx.getitem(arr, _along_grids(arr, indices, axis))


# --- cumprod: a scan of multiplications -------------------------------------------------------


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
    return x if shift > 1 else fresh(x, x)  # a scan of one entry: a new array, as NumPy's


@register_numpy(np.cumprod)
def cumprod(a, axis=None, dtype=None, out=None):
    """Like numpy.cumprod (``axis=None`` flattens first); exact derivatives at zeros.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.cumprod(np.array([1.0, 2.0, 3.0]))
    array([1., 2., 6.])
    """
    _red._check_supported("cumprod", out)
    if dtype is not None:
        a = _elt.astype(a, dtype)
    a, axis = _red._scan_axis(a, axis)
    return _red._in_dtype(_scan(_elt.multiply, a, axis, _cre.ones_like), dtype)


# --- axes: ravel, moveaxis, swapaxes, flip, broadcast_arrays ----------------------------------


@register_numpy(np.ravel)
def ravel(a, order="C"):
    """Like numpy.ravel: a 1-D view of ``a`` (C order)."""
    return _shp.reshape(a, (-1,), order=order)


@register_numpy(np.moveaxis)
def moveaxis(a, source, destination):
    """Like numpy.moveaxis: move axes to new positions, keeping the others' order."""
    n = ndim_of(a)
    # In order, not sorted: source[i] goes to destination[i].
    source = tuple(_shp._axis_param(ax, n) for ax in np.atleast_1d(source).tolist())
    destination = tuple(_shp._axis_param(ax, n) for ax in np.atleast_1d(destination).tolist())
    if len(source) != len(destination):
        raise ValueError(
            "`source` and `destination` arguments must have the same number of elements"
        )
    order = [i for i in range(n) if i not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return _shp.transpose(a, order)


@register_numpy(np.swapaxes)
def swapaxes(a, axis1, axis2):
    """Like numpy.swapaxes: exchange two axes."""
    n = ndim_of(a)
    order = list(range(n))
    i, j = _shp._axis_param(axis1, n), _shp._axis_param(axis2, n)
    order[i], order[j] = order[j], order[i]
    return _shp.transpose(a, order)


@register_numpy(np.flip)
def flip(m, axis=None):
    """Like numpy.flip: reverse the order of entries along ``axis`` (all axes for None).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.flip(np.array([1.0, 2.0, 3.0]))
    array([3., 2., 1.])
    """
    n = ndim_of(m)
    axes = normalize_axes(axis, n)
    return _idx.getitem(
        m, tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(n))
    )


@register_numpy(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    """Like numpy.broadcast_arrays: every argument broadcast to their common shape."""
    shape = np.broadcast_shapes(*(shape_of(a) for a in args))
    return tuple(_shp.broadcast_to(a, shape) for a in args)


# --- triangles: tril, triu --------------------------------------------------------------------


def _triangle(m, k, lower):
    if ndim_of(m) == 1:  # NumPy's: the vector repeated as the rows of a square matrix
        m = _shp.broadcast_to(m, shape_of(m) * 2)
    rows, cols = shape_of(m)[-2:]
    like = array_like(m)
    keep = (
        np.tri(rows, cols, k, dtype=bool, like=like)
        if lower
        else ~np.tri(rows, cols, k - 1, dtype=bool, like=like)
    )
    return _elt.where(keep, m, _cre.zeros_like(m))  # +0.0, as NumPy's, also beside NaN or inf


@register_numpy(np.tril)
def tril(m, k=0):
    """Like numpy.tril: zero the entries above diagonal ``k`` (of the last two axes)."""
    return _triangle(m, k, lower=True)


@register_numpy(np.triu)
def triu(m, k=0):
    """Like numpy.triu: zero the entries below diagonal ``k`` (of the last two axes)."""
    return _triangle(m, k, lower=False)


from autodiff.rules import creation as _cre  # noqa: E402
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import indexing as _idx  # noqa: E402
from autodiff.rules import reductions as _red  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
