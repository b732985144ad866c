"""Compositions of the shape primitives (``autodiff/rules/shape.py``) and of indexing:
flips, rotations, tiles and repeats, the atleast/*stack/*split families, diagonals and
traces, differences and gradients, ``append``/``insert``/``delete``/``resize``,
``block``, and the shape queries ``shape``, ``ndim``, ``size``.

All are linear in the array, so their derivatives and batching come from the
primitives they call.
"""

from __future__ import annotations

import builtins
import itertools
import math
import operator
from typing import Any

import numpy as np

from autodiff.core.arrays import fresh, ndim_of, shape_of
from autodiff.core.loading import load
from autodiff.core.overrides import register_numpy
from autodiff.core.tracer import Tracer
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import indexing as _idx
from autodiff.rules import reductions as _red
from autodiff.rules.compositions import flip, moveaxis, ravel, swapaxes
from autodiff.rules.shape import (
    _along,
    _axis_param,
    broadcast_to,
    concatenate,
    expand_dims,
    pad,
    reshape,
    transpose,
)

__all__ = [
    "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "column_stack", "diag", "diagflat",
    "diagonal", "dstack", "fliplr", "flipud", "hstack", "ndim", "repeat", "rollaxis", "rot90",
    "shape", "size", "split", "tile", "trace", "vstack", "dsplit", "hsplit", "vsplit", "block",
    "append", "insert", "delete", "resize", "diff", "ediff1d", "gradient", "matrix_transpose",
    "unstack",
]  # fmt: skip


@register_numpy(np.rollaxis)
def rollaxis(a, axis, start=0):
    """Like numpy.rollaxis: move ``axis`` to stand before position ``start``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.rollaxis(np.zeros((2, 3, 4)), 2).shape
    (4, 2, 3)
    """
    n = ndim_of(a)
    axis = _axis_param(axis, n)
    start = start + n if start < 0 else start
    if not 0 <= start <= n:
        raise np.exceptions.AxisError(
            f"'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in"
        )
    order = [i for i in range(n) if i != axis]
    order.insert(start - (axis < start), axis)
    return transpose(a, order)


@register_numpy(np.matrix_transpose)
def matrix_transpose(x, /):
    """Like numpy.matrix_transpose: swap the last two axes.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.matrix_transpose(np.zeros((4, 2, 3))).shape
    (4, 3, 2)
    """
    if ndim_of(x) < 2:
        raise ValueError("Input array must be at least 2-dimensional")
    return swapaxes(x, -1, -2)


@register_numpy(np.fliplr)
def fliplr(m):
    """Like numpy.fliplr: flip axis 1."""
    return flip(m, 1)


@register_numpy(np.flipud)
def flipud(m):
    """Like numpy.flipud: flip axis 0."""
    return flip(m, 0)


@register_numpy(np.rot90)
def rot90(m, k=1, axes=(0, 1)):
    """Like numpy.rot90: rotate by 90 degrees ``k`` times in the plane of ``axes``."""
    n = ndim_of(m)
    a0, a1 = (_axis_param(ax, n) for ax in axes)
    k %= 4
    if k == 0:
        return m
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(n))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    return transpose(flip(m, a1), perm) if k == 1 else flip(transpose(m, perm), a1)


@register_numpy(np.tile)
def tile(A, reps):
    """Like numpy.tile: repeat the whole array ``reps`` times along each axis.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.tile(np.array([1.0, 2.0]), 2)
    array([1., 2., 1., 2.])
    """
    reps = tuple(np.atleast_1d(reps).tolist())
    n = max(len(reps), ndim_of(A))
    reps = (1,) * (n - len(reps)) + reps
    A = reshape(A, (1,) * (n - ndim_of(A)) + shape_of(A))
    shape = shape_of(A)
    # (r0, s0, r1, s1, ...): a broadcast copy per repetition, then merged.
    interleaved = tuple(v for pair in zip(reps, shape) for v in pair)
    expanded = broadcast_to(reshape(A, tuple(v for s in shape for v in (1, s))), interleaved)
    return reshape(expanded, tuple(r * s for r, s in zip(reps, shape)))


@register_numpy(np.repeat)
def repeat(a, repeats, axis=None):
    """Like numpy.repeat: repeat each entry ``repeats`` times (an int or, per entry, ints).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.repeat(np.array([1.0, 2.0]), 2)
    array([1., 1., 2., 2.])
    """
    if axis is None:
        a, axis = ravel(a), 0
    axis = _axis_param(axis, ndim_of(a))
    if np.ndim(repeats) == 0:  # a broadcast copy per repetition, merged: no index array
        shape, r = shape_of(a), int(repeats)
        copies = broadcast_to(expand_dims(a, axis + 1), (*shape[: axis + 1], r, *shape[axis + 1 :]))
        return reshape(copies, (*shape[:axis], shape[axis] * r, *shape[axis + 1 :]))
    positions = np.repeat(np.arange(shape_of(a)[axis]), repeats)
    return _idx.getitem(a, _along(axis, ndim_of(a), positions))


# --- atleast, stacks and splits ----------------------------------------------------------------


def _atleast(n, arrays):
    def one(a):
        shape = shape_of(a)
        if len(shape) >= n:
            return a
        if n == 3 and len(shape) == 2:
            return reshape(a, (*shape, 1))
        if n == 3 and len(shape) == 1:
            return reshape(a, (1, *shape, 1))
        return reshape(a, (1,) * (n - len(shape)) + shape)

    out = [one(a) for a in arrays]
    return out[0] if len(out) == 1 else tuple(out)


@register_numpy(np.atleast_1d)
def atleast_1d(*arys):
    """Like numpy.atleast_1d."""
    return _atleast(1, arys)


@register_numpy(np.atleast_2d)
def atleast_2d(*arys):
    """Like numpy.atleast_2d (new axes go in front)."""
    return _atleast(2, arys)


@register_numpy(np.atleast_3d)
def atleast_3d(*arys):
    """Like numpy.atleast_3d (a 1-D array becomes (1, n, 1), a 2-D one (m, n, 1))."""
    return _atleast(3, arys)


@register_numpy(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    """Like numpy.hstack: concatenate along axis 1 (axis 0 for 1-D arrays).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.hstack([np.ones(2), np.zeros(1)])
    array([1., 1., 0.])
    """
    arrays = [_atleast(1, [a]) for a in tup]
    axis = 0 if ndim_of(arrays[0]) == 1 else 1
    return concatenate(arrays, axis=axis, dtype=dtype, casting=casting)


@register_numpy(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    """Like numpy.vstack: concatenate along axis 0 after atleast_2d."""
    return concatenate([_atleast(2, [a]) for a in tup], axis=0, dtype=dtype, casting=casting)


@register_numpy(np.dstack)
def dstack(tup):
    """Like numpy.dstack: concatenate along axis 2 after atleast_3d."""
    return concatenate([_atleast(3, [a]) for a in tup], axis=2)


@register_numpy(np.column_stack)
def column_stack(tup):
    """Like numpy.column_stack: 1-D arrays (and scalars) become columns, then they are
    joined along axis 1.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.column_stack([np.ones(2), np.zeros(2)])
    array([[1., 0.],
           [1., 0.]])
    """
    columns = [_idx.operand(a) for a in tup]
    columns = [reshape(a, (math.prod(shape_of(a)), 1)) if ndim_of(a) < 2 else a for a in columns]
    return concatenate(columns, axis=1)


@register_numpy(np.array_split)
def array_split(ary, indices_or_sections, axis=0):
    """Like numpy.array_split: a list of sub-arrays (sections may differ in size by one)."""
    axis = _axis_param(axis, ndim_of(ary))
    n = shape_of(ary)[axis]
    if np.ndim(indices_or_sections) == 0:
        sections = int(indices_or_sections)
        if sections <= 0:
            raise ValueError("number sections must be larger than 0.")
        sizes = [n // sections + 1] * (n % sections) + [n // sections] * (sections - n % sections)
        bounds = np.cumsum([0, *sizes]).tolist()
    else:
        bounds = [0, *np.asarray(indices_or_sections, dtype=int).tolist(), n]
    return [
        _idx.getitem(ary, _along(axis, ndim_of(ary), slice(lo, hi)))
        for lo, hi in itertools.pairwise(bounds)
    ]


@register_numpy(np.split)
def split(ary, indices_or_sections, axis=0):
    """Like numpy.split: like array_split, but sections must divide the axis evenly.

    >>> import numpy as np, autodiff.numpy as anp
    >>> [p.tolist() for p in anp.split(np.arange(4.0), 2)]
    [[0.0, 1.0], [2.0, 3.0]]
    """
    if np.ndim(indices_or_sections) == 0:
        n = shape_of(ary)[_axis_param(axis, ndim_of(ary))]
        if n % int(indices_or_sections):
            raise ValueError("array split does not result in an equal division")
    return array_split(ary, indices_or_sections, axis)


@register_numpy(np.vsplit)
def vsplit(ary, indices_or_sections):
    """Like numpy.vsplit: split along axis 0 (arrays of 2 or more dimensions)."""
    if ndim_of(ary) < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


@register_numpy(np.hsplit)
def hsplit(ary, indices_or_sections):
    """Like numpy.hsplit: split along axis 1 (axis 0 for 1-D arrays).

    >>> import numpy as np, autodiff.numpy as anp
    >>> [p.shape for p in anp.hsplit(np.zeros((2, 4)), 2)]
    [(2, 2), (2, 2)]
    """
    if ndim_of(ary) == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, 1 if ndim_of(ary) > 1 else 0)


@register_numpy(np.dsplit)
def dsplit(ary, indices_or_sections):
    """Like numpy.dsplit: split along axis 2 (arrays of 3 or more dimensions)."""
    if ndim_of(ary) < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, 2)


@register_numpy(np.unstack)
def unstack(x, /, *, axis=0):
    """Like numpy.unstack: the slices of ``x`` along ``axis``, as a tuple.

    >>> import numpy as np, autodiff.numpy as anp
    >>> [a.shape for a in anp.unstack(np.zeros((2, 3)), axis=1)]
    [(2,), (2,), (2,)]
    """
    if ndim_of(x) == 0:
        raise ValueError("Input array must be at least 1-d.")
    axis = _axis_param(axis, ndim_of(x))
    return tuple(_idx.getitem(x, _along(axis, ndim_of(x), i)) for i in range(shape_of(x)[axis]))


# --- diagonals and triangles -------------------------------------------------------------------


def _diagonal_positions(rows, cols, offset):
    """Row and column positions of diagonal ``offset`` of a rows x cols matrix."""
    start_row, start_col = (0, offset) if offset >= 0 else (-offset, 0)
    length = max(0, min(rows - start_row, cols - start_col))
    return np.arange(length) + start_row, np.arange(length) + start_col


@register_numpy(np.diagonal)
def diagonal(a, offset=0, axis1=0, axis2=1):
    """Like numpy.diagonal: the diagonal of the (axis1, axis2) planes, as a new last axis.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.diagonal(np.arange(4.0).reshape(2, 2))
    array([0., 3.])
    """
    n = ndim_of(a)
    a1, a2 = _axis_param(axis1, n), _axis_param(axis2, n)
    a = moveaxis(a, (a1, a2), (n - 2, n - 1))
    rows, cols = _diagonal_positions(*shape_of(a)[-2:], offset)
    return _idx.getitem(a, (Ellipsis, rows, cols))


@register_numpy(np.trace)
def trace(a, offset=0, axis1=0, axis2=1, dtype=None, out=None):
    """Like numpy.trace: the sum of a diagonal.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.trace(np.arange(4.0).reshape(2, 2)))
    3.0
    """
    if out is not None:
        raise NotImplementedError("trace(..., out=...) is not supported; use the returned value")
    return _red.sum(diagonal(a, offset, axis1, axis2), -1, dtype=dtype)


@register_numpy(np.diag)
def diag(v, k=0):
    """Like numpy.diag: a 2-D array's diagonal ``k``, or a square matrix with 1-D ``v`` on it.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.diag(np.array([1.0, 2.0]))
    array([[1., 0.],
           [0., 2.]])
    """
    if ndim_of(v) == 2:
        return diagonal(v, k)
    if ndim_of(v) != 1:
        raise ValueError("Input must be 1- or 2-d.")
    n = shape_of(v)[0] + builtins.abs(k)
    rows, cols = _diagonal_positions(n, n, k)
    square = _cre.zeros_like(broadcast_to(_idx.getitem(v, (slice(0, 1),)), (n * n,)))
    at = load("autodiff.numpy._index_update").at  # (loaded here: only this needs it)
    return at(reshape(square, (n, n)))[rows, cols].set(v)


@register_numpy(np.diagflat)
def diagflat(v, k=0):
    """Like numpy.diagflat: ``diag(ravel(v), k)``."""
    return diag(ravel(v), k)


# --- differences ---------------------------------------------------------------------------------


def _slice_along(a: Any, axis: int, start: int | None, stop: int | None) -> Any:
    return _idx.getitem(a, _along(axis, ndim_of(a), slice(start, stop)))


def _with_ends(a: Any, axis: int, before: Any, after: Any) -> Any:
    """``a`` with ``before`` and ``after`` joined on along ``axis``; a scalar end is
    broadcast to one slice, as numpy.diff's ``prepend``/``append`` are."""
    parts: list[Any] = []
    for end in (before, after):
        if end is None or end is np._NoValue:
            parts.append(None)
            continue
        end = _idx.operand(end)
        if ndim_of(end) == 0:
            shape = list(shape_of(a))
            shape[axis] = 1
            end = broadcast_to(end, tuple(shape))
        parts.append(end)
    pieces = [p for p in (parts[0], a, parts[1]) if p is not None]
    return concatenate(pieces, axis=axis) if len(pieces) > 1 else a


@register_numpy(np.diff)
def diff(a, n=1, axis=-1, prepend=np._NoValue, append=np._NoValue):
    """Like numpy.diff: the ``n``-th differences ``a[i + 1] - a[i]`` along ``axis``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.diff(np.array([1.0, 4.0, 9.0, 16.0]), n=2)
    array([2., 2.])
    """
    if n == 0:
        return a
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}")
    a = _idx.operand(a)
    if ndim_of(a) == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    axis = _axis_param(axis, ndim_of(a))
    a = _with_ends(a, axis, prepend, append)
    # Booleans differ where they change (NumPy's not_equal); numbers subtract.
    step = _elt.not_equal if a.dtype == np.bool_ else _elt.subtract
    for _ in range(n):
        a = step(_slice_along(a, axis, 1, None), _slice_along(a, axis, None, -1))
    return a


@register_numpy(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    """Like numpy.ediff1d: differences of the flattened array, with values to put
    before and after them (cast to the array's dtype).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.ediff1d(np.array([1.0, 2.0, 4.0]), to_begin=-1.0)
    array([-1.,  1.,  2.])
    """
    ary = ravel(_idx.operand(ary))
    steps = _elt.subtract(_slice_along(ary, 0, 1, None), _slice_along(ary, 0, None, -1))
    parts = [_end(to_begin, "to_begin", ary.dtype), steps, _end(to_end, "to_end", ary.dtype)]
    parts = [p for p in parts if p is not None]
    return concatenate(parts) if len(parts) > 1 else steps


def _end(values: Any, name: str, dtype: Any) -> Any:
    """ediff1d's ``to_begin``/``to_end``, flattened and cast to the input's dtype."""
    if values is None:
        return None
    values = ravel(_idx.operand(values))
    if not np.can_cast(values.dtype, dtype, casting="same_kind"):
        raise TypeError(
            f"dtype of `{name}` must be compatible with input `ary` under the `same_kind` rule."
        )
    return _elt.astype(values, dtype)


def _edge_and_inner(f, axis, h, edge_order):
    """numpy.gradient along one axis: central differences inside, one-sided ones of
    order ``edge_order`` at the ends; ``h`` is a scalar spacing or the coordinates."""
    n = shape_of(f)[axis]
    if n < edge_order + 1:
        raise ValueError(
            "Shape of array too small to calculate a numerical gradient, at least "
            "(edge_order + 1) elements are required."
        )

    def at(start, stop=None):
        return _slice_along(f, axis, start, stop)

    def along(c):  # coordinate weights, shaped to broadcast along ``axis``
        return reshape(c, (-1,) + (1,) * (ndim_of(f) - axis - 1)) if ndim_of(c) else c

    if ndim_of(h) == 0:  # uniform spacing
        inner = (at(2, None) - at(None, -2)) / (2.0 * h)
        if edge_order == 1:
            first, last = (at(1, 2) - at(0, 1)) / h, (at(-1, None) - at(-2, -1)) / h
        else:
            first = -(1.5 * at(0, 1) - 2.0 * at(1, 2) + 0.5 * at(2, 3)) / h
            last = (0.5 * at(-3, -2) - 2.0 * at(-2, -1) + 1.5 * at(-1, None)) / h
        return concatenate([first, inner, last], axis=axis)
    dx = diff(h)
    d1, d2 = _slice_along(dx, 0, None, -1), _slice_along(dx, 0, 1, None)
    a, b, c = -d2 / (d1 * (d1 + d2)), (d2 - d1) / (d1 * d2), d1 / (d2 * (d1 + d2))
    inner = along(a) * at(None, -2) + along(b) * at(1, -1) + along(c) * at(2, None)
    if edge_order == 1:
        first = (at(1, 2) - at(0, 1)) / along(_slice_along(dx, 0, 0, 1))
        last = (at(-1, None) - at(-2, -1)) / along(_slice_along(dx, 0, -1, None))
    else:
        d1, d2 = _slice_along(dx, 0, 0, 1), _slice_along(dx, 0, 1, 2)
        a, b, c = -(2.0 * d1 + d2) / (d1 * (d1 + d2)), (d1 + d2) / (d1 * d2), -d1 / (d2 * (d1 + d2))
        first = along(a) * at(0, 1) + along(b) * at(1, 2) + along(c) * at(2, 3)
        d1, d2 = _slice_along(dx, 0, -2, -1), _slice_along(dx, 0, -1, None)
        a, b, c = d2 / (d1 * (d1 + d2)), -(d2 + d1) / (d1 * d2), (2.0 * d2 + d1) / (d2 * (d1 + d2))
        last = along(a) * at(-3, -2) + along(b) * at(-2, -1) + along(c) * at(-1, None)
    return concatenate([first, inner, last], axis=axis)


@register_numpy(np.gradient)
def gradient(f, *varargs, axis=None, edge_order=1):
    """Like numpy.gradient: second-order central differences inside, one-sided
    differences of order ``edge_order`` (1 or 2) at the boundaries.  Spacings are
    scalars or coordinate arrays, one per axis; both may be traced.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.gradient(np.array([1.0, 2.0, 4.0, 7.0]))
    array([1. , 1.5, 2.5, 3. ])
    """
    f = _idx.operand(f)
    nd = ndim_of(f)
    axes = tuple(range(nd)) if axis is None else tuple(
        _axis_param(ax, nd) for ax in (axis if isinstance(axis, (tuple, list)) else (axis,))
    )  # fmt: skip
    if len(set(axes)) != len(axes):
        raise ValueError("duplicate value in 'axis'")
    if len(varargs) == 0:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and ndim_of(varargs[0]) == 0:
        spacings = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError("invalid number of arguments")
    if edge_order not in (1, 2):
        raise ValueError("'edge_order' greater than 2 not supported")
    # Integers and booleans give float64, as in NumPy; floating dtypes are kept.
    dtype = f.dtype if f.dtype.kind in "fc" else np.dtype(np.float64)
    outs = []
    for ax, h in zip(axes, spacings):
        # A scalar spacing stays a Python number: it combines with any library's arrays.
        h = float(h) if np.ndim(h) == 0 and not isinstance(h, Tracer) else _idx.operand(h)
        if ndim_of(h) == 1 and shape_of(h)[0] != shape_of(f)[ax]:
            raise ValueError(
                "when 1d, distances must match the length of the corresponding dimension"
            )
        if ndim_of(h) > 1:
            raise ValueError("distances must be either scalars or 1d")
        if ndim_of(h) and h.dtype.kind in "iub":
            h = _elt.astype(h, np.float64)
        outs.append(_elt.astype(_edge_and_inner(_elt.astype(f, dtype), ax, h, edge_order), dtype))
    return outs[0] if len(outs) == 1 else tuple(outs)


# --- appending, inserting, deleting, resizing, blocks ------------------------------------------


@register_numpy(np.append)
def append(arr, values, axis=None):
    """Like numpy.append: ``values`` joined on after ``arr`` (both flattened for None).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.append(np.array([1.0, 2.0]), [[3.0]])
    array([1., 2., 3.])
    """
    arr, values = _idx.operand(arr), _idx.operand(values)
    if axis is None:
        return concatenate([ravel(arr), ravel(values)])
    return concatenate([arr, values], axis=axis)


def _labelled(*shapes: tuple[int, ...]) -> list[np.ndarray]:
    """Arrays of these shapes numbered consecutively across all of them: NumPy's own
    insert/delete applied to the numbers says where every element goes."""
    out, start = [], 0
    for shape in shapes:
        size = math.prod(shape)
        out.append(np.arange(start, start + size).reshape(shape))
        start += size
    return out


def _static_positions(obj: Any, what: str) -> Any:
    if isinstance(obj, Tracer):
        return obj._concrete_value(f"the positions given to {what}")
    return obj


@register_numpy(np.insert)
def insert(arr, obj, values, axis=None):
    """Like numpy.insert: ``values`` placed before the positions ``obj`` along ``axis``
    (of the flattened array for None).  ``values`` is cast to ``arr``'s dtype.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.insert(np.array([1.0, 2.0, 3.0]), 1, 9.0)
    array([1., 9., 2., 3.])
    """
    arr, values = _idx.operand(arr), _idx.operand(values)
    if axis is None:
        arr, axis = ravel(arr), 0
    values = _elt.astype(values, arr.dtype)
    # The result is a gather from arr and values: NumPy's insert on their element
    # numbers gives every position's source, with NumPy's own broadcasting rules.
    arr_ids, value_ids = _labelled(shape_of(arr), shape_of(values))
    ids = np.insert(arr_ids, _static_positions(obj, "insert"), value_ids, axis=axis)
    return _idx.getitem(concatenate([ravel(arr), ravel(values)]), ids)


@register_numpy(np.delete)
def delete(arr, obj, axis=None):
    """Like numpy.delete: ``arr`` without the entries at ``obj`` along ``axis``
    (of the flattened array for None).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.delete(np.array([1.0, 2.0, 3.0]), [0, 2])
    array([2.])
    """
    arr = _idx.operand(arr)
    if axis is None:
        arr, axis = ravel(arr), 0
    axis = _axis_param(axis, ndim_of(arr))
    kept = np.delete(np.arange(shape_of(arr)[axis]), _static_positions(obj, "delete"))
    if len(kept) == shape_of(arr)[axis]:
        return arr
    return _idx.getitem(arr, _along(axis, ndim_of(arr), kept))


@register_numpy(np.resize)
def resize(a, new_shape):
    """Like numpy.resize: the flattened ``a`` repeated cyclically to fill ``new_shape``
    (zeros if either is empty).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.resize(np.array([1.0, 2.0, 3.0]), (2, 2))
    array([[1., 2.],
           [3., 1.]])
    """
    a = ravel(_idx.operand(a))
    new_shape = (new_shape,) if isinstance(new_shape, (int, np.integer)) else tuple(new_shape)
    new_shape = tuple(operator.index(n) for n in new_shape)
    if any(n < 0 for n in new_shape):
        raise ValueError("all elements of `new_shape` must be non-negative")
    new_size, size_ = math.prod(new_shape), shape_of(a)[0]
    if not size_ or not new_size:
        return reshape(pad(_idx.getitem(a, slice(0, 0)), ((0, new_size),)), new_shape)
    repeats = -(-new_size // size_)
    return fresh(reshape(_idx.getitem(tile(a, repeats), slice(0, new_size)), new_shape), a)


def _block_depth(arrays: Any, where: str = "arrays") -> tuple[int, int]:
    """(the nesting depth of ``arrays``, the most dimensions of any leaf), with
    NumPy's errors for tuples, empty lists and mismatched depths."""
    if isinstance(arrays, tuple):
        raise TypeError(
            f"{where} is a tuple. Only lists can be used to arrange blocks, and np.block "
            "does not allow implicit conversion from tuple to ndarray."
        )
    if not isinstance(arrays, list):
        return 0, ndim_of(arrays)
    if not arrays:
        raise ValueError(f"List at {where} cannot be empty")
    found = [_block_depth(item, f"{where}[{i}]") for i, item in enumerate(arrays)]
    depths = {d for d, _ in found}
    if len(depths) > 1:
        first = found[0][0]
        other = next(i for i, (d, _) in enumerate(found) if d != first)
        raise ValueError(
            f"List depths are mismatched. First element was at depth {first + 1}, but "
            f"there is an element at depth {found[other][0] + 1} ({where}[{other}])"
        )
    return found[0][0] + 1, max(n for _, n in found)


@register_numpy(np.block)
def block(arrays):
    """Like numpy.block: assemble an array from nested lists of blocks; the innermost
    lists are joined along the last axis, the next ones along the one before.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.block([[np.eye(2), np.zeros((2, 1))], [np.ones((1, 3))]])
    array([[1., 0., 0.],
           [0., 1., 0.],
           [1., 1., 1.]])
    """
    depth, most = _block_depth(arrays)
    ndim = max(depth, most)

    def assemble(item, level):
        if isinstance(item, list):
            return concatenate([assemble(x, level + 1) for x in item], axis=level - depth)
        item = _idx.operand(item)
        return reshape(item, (1,) * (ndim - ndim_of(item)) + shape_of(item))

    out = assemble(arrays, 0)
    return out if depth or isinstance(out, Tracer) else np.array(out)


# --- shape queries (logical shapes of traced values) ----------------------------------


@register_numpy(np.shape)
def shape(a):
    """Like numpy.shape; for a traced value, its logical (per-example) shape."""
    return shape_of(a)


@register_numpy(np.ndim)
def ndim(a):
    """Like numpy.ndim; for a traced value, its logical number of dimensions."""
    return ndim_of(a)


@register_numpy(np.size)
def size(a, axis=None):
    """Like numpy.size; for a traced value, its logical number of elements."""
    s = shape_of(a)
    return math.prod(s) if axis is None else s[axis]
