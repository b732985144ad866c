"""Sorting: ``argsort`` and ``searchsorted`` (not differentiable), and ``sort``.

``sort`` is a composition, ``take_along_axis`` of ``argsort``, so the
derivative of each sorted entry flows back to the entry it came from, and it
needs no rules of its own.
"""

from __future__ import annotations

import numpy as np

from autodiff._core import Primitive
from autodiff._tracer import register_numpy
from autodiff.rules._helpers import (
    batch_size_of,
    bring_to_front,
    implements,
    move_to_front,
    ndim_of,
    normalize_axes,
    numpy_impl,
    shape_of,
)

__all__ = ["argsort", "searchsorted", "sort"]


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
    if axis is None:
        a, axis = _shp.ravel(a), 0
    stable = stable if stable is not None else kind == "stable" or None
    return argsort_p.bind(a, axis=normalize_axes(axis, ndim_of(a))[0], stable=stable)


@register_numpy(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """Like numpy.sort; the derivative of each sorted entry flows to the entry
    it came from.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> autodiff.grad(lambda x: anp.sort(x)[0])(np.array([3.0, 1.0, 2.0]))
    array([0., 1., 0.])
    """
    if axis is None:
        a, axis = _shp.ravel(a), 0
    order_ = argsort(a, axis, kind, order, stable=stable)
    return _idx.take_along_axis(a, order_, axis)


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


from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import indexing as _idx  # noqa: E402
from autodiff.rules import reductions as _red  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
