"""Sorting: ``argsort``, ``argpartition``, ``lexsort`` and ``searchsorted``, primitives
with no derivative.  ``sort``, ``partition`` and ``sort_complex`` are compositions of
them (``autodiff/numpy/_sorting.py``).
"""

from __future__ import annotations

import numpy as np

from autodiff.core.arrays import batch_size_of, ndim_of, normalize_axes, shape_of
from autodiff.core.primitive import Primitive
from autodiff.rules import compositions as _comp
from autodiff.rules import elementwise as _elt
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import (
    bring_to_front,
    implements,
    move_to_front,
    numpy_impl,
    shaped_like,
)

__all__ = ["argsort", "searchsorted", "argpartition", "lexsort"]


def _argsort_batch(args, dims, *, axis, stable):
    d = dims[0]
    return argsort_p.bind(args[0], axis=axis + (axis >= d), stable=stable), d


argsort_p = Primitive(
    "argsort",
    numpy_impl(
        np.argsort,  # stable= only when set: CuPy's argsort has no such keyword
        lambda x, *, axis, stable: np.argsort(
            x, axis=axis, **({} if stable is None else {"stable": stable})
        ),
    ),
    differentiable=False,
    batch=_argsort_batch,
    shape=lambda x, *, axis, stable: shaped_like(x, dtype=np.intp),
)


@implements(argsort_p, np.argsort)
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """Like numpy.argsort (not differentiable; batchable).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.argsort(np.array([3.0, 1.0, 2.0]))
    array([1, 2, 0])
    """
    if order is not None:
        raise NotImplementedError("argsort(order=...) is not supported")
    if axis is None or ndim_of(a) == 0:  # (NumPy's argsort of a 0-d array: array([0]))
        a, axis = _comp.ravel(a), 0
    stable = stable if stable is not None else kind == "stable" or None
    return argsort_p.bind(a, axis=normalize_axes(axis, ndim_of(a))[0], stable=stable)


def _axis_shifted_batch(prim):
    """Batch rule of a primitive of one array along a static ``axis`` (its other
    parameters pass through): the axis moves past the batch axis."""

    def batch(args, dims, *, axis, **params):
        d = dims[0]
        return prim.bind(args[0], axis=axis + (axis >= d), **params), d

    return batch


argpartition_p = Primitive(
    "argpartition",
    numpy_impl(np.argpartition, lambda x, *, kth, axis: np.argpartition(x, kth, axis=axis)),
    differentiable=False,
)
argpartition_p.def_batch(_axis_shifted_batch(argpartition_p))


def _kth(kth, n):
    """``kth`` as non-negative ints (NumPy accepts negatives and sequences)."""
    kths = np.atleast_1d(np.asarray(kth))
    if kths.dtype.kind not in "iu":
        raise TypeError("Partition index must be integer")
    if kths.size and not (-n <= kths.min() and kths.max() < n):
        bad = next(int(k) for k in kths.tolist() if not -n <= k < n)
        raise ValueError(f"kth(={bad}) out of bounds ({n})")
    out = tuple(int(k) % n for k in kths.tolist())
    return out[0] if np.ndim(kth) == 0 else out


@implements(argpartition_p, np.argpartition)
def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """Like numpy.argpartition (not differentiable; batchable): positions that put
    the ``kth`` entries where sorting would, the smaller ones before them.

    >>> import numpy as np, autodiff.numpy as anp
    >>> int(anp.argpartition(np.array([3.0, 1.0, 2.0]), 0)[0])
    1
    """
    if order is not None:
        raise NotImplementedError("argpartition(order=...) is not supported")
    if axis is None:
        a, axis = _comp.ravel(a), 0
    axis = normalize_axes(axis, ndim_of(a))[0]
    return argpartition_p.bind(a, kth=_kth(kth, shape_of(a)[axis]), axis=axis)


def _lexsort_batch(args, dims, *, axis):
    size = batch_size_of(args, dims)
    return lexsort_p.bind(*[bring_to_front(k, d, size) for k, d in zip(args, dims)], axis=axis), 0


lexsort_p = Primitive(
    "lexsort",
    numpy_impl(np.lexsort, lambda *keys, axis: np.lexsort(keys, axis=axis)),
    differentiable=False,
    batch=_lexsort_batch,
)


@implements(lexsort_p, np.lexsort)
def lexsort(keys, axis=-1):
    """Like numpy.lexsort (not differentiable; batchable): the order that sorts by
    the last key, then the one before, ...; ``keys`` is a sequence of arrays (or the
    rows of a 2-D array).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.lexsort([np.array([2.0, 1.0, 0.0]), np.array([1.0, 0.0, 1.0])])
    array([1, 2, 0])
    """
    keys = list(keys)
    if not keys:
        raise TypeError("need sequence of keys with len > 0 in lexsort")
    shape = shape_of(keys[0])
    if any(shape_of(k) != shape for k in keys):
        raise ValueError("all keys need to be the same shape")
    if not shape:
        raise np.exceptions.AxisError(axis, 0)
    # A negative axis: the batch rule puts batch axes in front, where it still counts right.
    return lexsort_p.bind(*keys, axis=normalize_axes(axis, len(shape))[0] - len(shape))


def _searchsorted_batch(args, dims, *, side):
    (a, v), (ad, vd) = args, dims
    if ad is None:  # v's shape, v's batch axis
        return searchsorted_p.bind(a, v, side=side), vd
    # A batch of sorted arrays: count the entries below each value.
    size = batch_size_of(args, dims)
    a, v = move_to_front(a, ad), bring_to_front(v, vd, size)
    v_nd = ndim_of(v) - 1
    a = _shp.reshape(a, (size,) + (1,) * v_nd + (shape_of(a)[1],))
    below = (_elt.less if side == "left" else _elt.less_equal)(a, _shp.expand_dims(v, -1))
    return _red.sum(_elt.astype(below, np.intp), -1), 0


searchsorted_p = Primitive(
    "searchsorted",
    lambda a, v, *, side: np.searchsorted(a, v, side=side),
    differentiable=False,
    batch=_searchsorted_batch,
    shape=lambda a, v, *, side: shaped_like(v, dtype=np.intp),
)


@implements(searchsorted_p, np.searchsorted)
def searchsorted(a, v, side="left", sorter=None):
    """Like numpy.searchsorted for a sorted 1-D ``a`` (not differentiable; batchable).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.searchsorted(np.array([1.0, 2.0, 3.0]), np.array([2.5, 0.0]))
    array([2, 0])
    """
    if sorter is not None:
        raise NotImplementedError("searchsorted(sorter=...) is not supported; sort a first")
    if ndim_of(a) != 1:
        raise ValueError("searchsorted: a must be 1-D")
    return searchsorted_p.bind(a, v, side=side)
