"""Compositions of indexing: the gathers ``compress`` and ``choose``, NumPy's in-place
functions (``put``, ``place``, ``putmask``, ``copyto``, ``fill_diagonal``,
``put_along_axis``: a plain array is written, a traced one refused with the
functional spelling), and the results whose shape depends on values (``nonzero``,
``argwhere``, ``flatnonzero``, ``extract``: ``size=k`` as in JAX).

Each gathers with ``getitem`` or scatters with ``x.at[...]`` (``_index_update.py``),
whose primitives are in ``autodiff/rules/indexing.py``.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from autodiff.core.arrays import (
    array_like,
    fresh,
    ndim_of,
    normalize_axes,
    shape_of,
)
from autodiff.core.overrides import register_numpy
from autodiff.core.tracer import Tracer
from autodiff.errors import ConcretizationError
from autodiff.numpy import _shape
from autodiff.numpy._index_update import at
from autodiff.rules import compositions as _comp
from autodiff.rules import elementwise as _elt
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules.compositions import _along, _along_grids, take, take_along_axis
from autodiff.rules.indexing import (
    concrete_for_shape,
    getitem,
    operand,
)

__all__ = [
    "compress", "choose", "put_along_axis", "fill_diagonal", "place", "put", "putmask",
    "copyto", "nonzero", "argwhere", "flatnonzero", "extract",
]  # fmt: skip


SIZE_HINT = (
    "Pass size=k as in JAX (anp.{name}(..., size=k, fill_value=...)): the result then "
    "has k entries, the first k or padded with fill_value, and batches."
)


def constant_in(value: Any, dtype: Any) -> Any:
    """``value`` cast to ``dtype``: a traced or array value by ``astype``, a scalar as
    a Python scalar (which combines with arrays of any library, in their dtype)."""
    if isinstance(value, Tracer) or hasattr(type(value), "__array_function__"):
        return _elt.astype(value, dtype)
    return np.asarray(value, dtype)[()].item() if np.ndim(value) == 0 else np.asarray(value, dtype)


def _fill(values: Any, valid: Any, fill_value: Any) -> Any:
    """``values`` where ``valid``, else ``fill_value`` (in values' dtype)."""
    return _elt.where(valid, values, constant_in(fill_value, values.dtype))


@register_numpy(np.compress)
def compress(condition, a, axis=None, out=None, *, size=None, fill_value=0):
    """Like numpy.compress: the slices of ``a`` along ``axis`` (of the flattened array
    for None) where the 1-D ``condition`` is true.  With JAX's ``size=k`` the result
    has k slices (truncated, or padded with ``fill_value``) and ``condition`` may be
    batched.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.compress([True, False, True], np.array([1.0, 2.0, 3.0]))
    array([1., 3.])
    >>> anp.compress([True, False, False], np.array([1.0, 2.0, 3.0]), size=2, fill_value=-1.0)
    array([ 1., -1.])
    """
    if out is not None:
        raise NotImplementedError("compress(..., out=...) is not supported; use the result")
    a, condition = operand(a), operand(condition)
    if axis is None:
        a, axis = _comp.ravel(a), 0
    axis = normalize_axes(axis, ndim_of(a))[0]
    if ndim_of(condition) != 1:
        raise ValueError("condition must be a 1-d array")
    if size is None:
        flags = concrete_for_shape(condition, "compress", SIZE_HINT.format(name="compress"))
        kept = np.flatnonzero(flags)
        if len(kept) and kept[-1] >= shape_of(a)[axis]:
            raise IndexError(
                f"index {kept[-1]} is out of bounds for axis {axis} with size {shape_of(a)[axis]}"
            )
        return getitem(a, _along(axis, ndim_of(a), kept))
    positions, valid = first_true(_elt.not_equal(condition, 0), size)
    picked = take(a, positions, axis=axis)
    valid = _shp.reshape(valid, (-1,) + (1,) * (ndim_of(a) - axis - 1))
    return _fill(picked, valid, fill_value)


@register_numpy(np.choose)
def choose(a, choices, out=None, mode="raise"):
    """Like numpy.choose: at each position, the entry of ``choices[a]`` (all broadcast
    together); ``mode`` is ``"raise"``, ``"wrap"`` or ``"clip"`` for entries of ``a``
    outside ``range(len(choices))``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.choose([1, 0, 1], [np.zeros(3), np.arange(3.0)])
    array([0., 0., 2.])
    """
    if out is not None:
        raise NotImplementedError("choose(..., out=...) is not supported; use the result")
    a = operand(a)
    choices = [operand(c) for c in choices]
    n = len(choices)
    a = _clipmode(a, n, mode)
    if mode == "raise":
        a = _checked_choice(a, n)
    shape = np.broadcast_shapes(shape_of(a), *[shape_of(c) for c in choices])
    stacked = _shp.stack([_shp.broadcast_to(c, shape) for c in choices])
    which = _shp.expand_dims(_shp.broadcast_to(a, shape), 0)
    return getitem(take_along_axis(stacked, which, 0), 0)


def _checked_choice(a: Any, n: int) -> Any:
    """``a``, whose entries must be in ``range(n)``: NumPy's error where ``a`` is known,
    else (batched, or lazy) negative entries made out of range, so that they fail as
    NumPy's do instead of counting from the end."""
    value = _numpy_value(a)
    if value is None:
        return _elt.where(_elt.less(a, 0), n, a)
    if np.size(value) and (np.min(value) < 0 or np.max(value) >= n):
        raise ValueError("invalid entry in choice array")
    return a


def _clipmode(index: Any, n: int, mode: str) -> Any:
    """Entries of ``index`` outside ``range(n)`` as NumPy's ``mode`` says: wrapped
    around, clipped (negative ones to 0), or left to raise."""
    if mode == "wrap":
        return _elt.remainder(index, n)
    if mode == "clip":
        return _comp.clip(index, 0, n - 1)
    if mode != "raise":
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    return index


def _numpy_value(x: Any) -> Any:
    """The NumPy array ``x`` is or stands for (a traced value's under grad and jvp), or
    None: a value batched by vmap, or another library's (whose values may be lazy)."""
    if isinstance(x, Tracer):
        try:
            x = x._concrete_value("a check")
        except ConcretizationError:
            return None
    return x if isinstance(x, (np.ndarray, np.generic)) else None


# --- NumPy's in-place functions ---------------------------------------------------------------
#
# np.put_along_axis(a, i, v, axis) writes into a and returns None.  A traced ``a`` is
# rebound to the result, as ``a[i] = v`` rebinds it; a plain array cannot hold traced
# values, so the error names the functional form, ``inplace=False`` (JAX's spelling),
# which returns the result.  With no traced value NumPy's own function runs.


def _in_place(name: str, numpy_func: Any, functional: str, dest: Any, *operands: Any,
              compute: Any, inplace: bool, **params: Any) -> Any:  # fmt: skip
    traced = any(isinstance(x, Tracer) for x in (dest, *operands))
    if inplace and not traced:
        return numpy_func(dest, *operands, **params)
    if inplace and not isinstance(dest, Tracer):
        raise ConcretizationError(
            f"numpy.{name} writes into its first argument, here a plain "
            f"{type(dest).__name__}, which cannot hold traced values (their derivatives "
            f"would be lost). Use the form that returns the result: {functional}."
        )
    new = compute(operand(dest), *[operand(x) for x in operands], **params)
    if not inplace:  # a new array, as JAX's, never a view of an argument (copyto's src)
        return fresh(new, dest, *operands)
    if dest._rebind(new) is dest:
        return None
    if not isinstance(new, Tracer) or new._interp.level < dest._interp.level:
        dest._rebind(_elt.where(True, new, dest))  # a constant, as dest's traced value
        return None
    raise TypeError(
        f"numpy.{name}(a, ...): the values are traced by a transform running inside "
        f"the one that traces a ({dest._interp.describe()}), so a cannot hold the "
        f"result; write a = {functional} instead."
    )


def _cycled(values: Any, n: int, dtype: Any) -> Any:
    """The first ``n`` entries of ``values`` (flattened) repeated cyclically, in ``dtype``."""
    values = _comp.ravel(values)
    if n and not shape_of(values)[0]:
        raise ValueError("Cannot insert from an empty array!")
    return _elt.astype(_shape.resize(values, n) if shape_of(values)[0] != n else values, dtype)


def _put_along_axis(arr, indices, values, *, axis):
    if axis is None:
        flat = _put_along_axis(_comp.ravel(arr), _comp.ravel(indices), values, axis=0)
        return _shp.reshape(flat, shape_of(arr))
    return at(arr)[_along_grids(arr, indices, axis)].set(values)


@register_numpy(np.put_along_axis)
def put_along_axis(arr, indices, values, axis, *, inplace=True):
    """Like numpy.put_along_axis: write ``values`` at ``indices`` along ``axis`` (the
    transpose of take_along_axis).  ``inplace=False`` returns the result instead.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.put_along_axis(np.zeros((2, 2)), np.array([[1], [0]]), 5.0, 1, inplace=False)
    array([[0., 5.],
           [5., 0.]])
    """
    return _in_place(
        "put_along_axis", np.put_along_axis,
        "anp.put_along_axis(arr, indices, values, axis, inplace=False)",
        arr, indices, values, compute=_put_along_axis, inplace=inplace, axis=axis,
    )  # fmt: skip


def _fill_diagonal(a, val, *, wrap):
    shape = shape_of(a)
    if len(shape) < 2:
        raise ValueError("array must be at least 2-d")
    if len(shape) == 2:
        step, end = shape[1] + 1, None if wrap else shape[1] * shape[1]
    else:
        if len(set(shape)) != 1:
            raise ValueError("All dimensions of input must be of equal length")
        step, end = 1 + int(np.cumprod(shape[:-1]).sum()), None
    positions = np.arange(math.prod(shape))[:end:step]
    flat = at(_comp.ravel(a))[positions].set(_cycled(val, len(positions), a.dtype))
    return _shp.reshape(flat, shape)


@register_numpy(np.fill_diagonal)
def fill_diagonal(a, val, wrap=False, *, inplace=True):
    """Like numpy.fill_diagonal: ``val`` (repeated as needed) on the main diagonal;
    ``inplace=False`` returns the result instead.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fill_diagonal(np.zeros((2, 2)), 3.0, inplace=False)
    array([[3., 0.],
           [0., 3.]])
    """
    return _in_place(
        "fill_diagonal", np.fill_diagonal, "anp.fill_diagonal(a, val, wrap, inplace=False)",
        a, val, compute=_fill_diagonal, inplace=inplace, wrap=wrap,
    )  # fmt: skip


def _place(arr, mask, vals):
    if math.prod(shape_of(mask)) != math.prod(shape_of(arr)):
        raise ValueError("place: mask and data must be the same size")
    flags = _shp.reshape(_elt.astype(mask, bool), shape_of(arr))
    n_vals = math.prod(shape_of(vals))
    if not n_vals:
        if np.any(concrete_for_shape(flags, "place with no values")):
            raise ValueError("Cannot insert from an empty array!")
        return arr
    # The k-th selected position takes vals[k % len(vals)]: a select, no concrete mask.
    rank = _red.cumsum(_comp.ravel(flags)) - 1
    chosen = take(_elt.astype(_comp.ravel(vals), arr.dtype), _elt.remainder(rank, n_vals))
    return _elt.where(flags, _shp.reshape(chosen, shape_of(arr)), arr)


@register_numpy(np.place)
def place(arr, mask, vals, *, inplace=True):
    """Like numpy.place: the entries of ``arr`` where ``mask`` is true take the values
    ``vals`` in order (repeated as needed); ``inplace=False`` returns the result.  The
    mask may be traced, also under vmap.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.place(np.zeros(4), np.array([True, False, True, True]), [1.0, 2.0], inplace=False)
    array([1., 0., 2., 1.])
    """
    return _in_place(
        "place", np.place, "anp.place(arr, mask, vals, inplace=False)",
        arr, mask, vals, compute=_place, inplace=inplace,
    )  # fmt: skip


def _put(a, ind, v, *, mode):
    n = math.prod(shape_of(a))
    ind = _clipmode(_comp.ravel(ind), n, mode)
    values = _cycled(v, shape_of(ind)[0], a.dtype)
    return _shp.reshape(at(_comp.ravel(a))[ind].set(values), shape_of(a))


@register_numpy(np.put)
def put(a, ind, v, mode="raise", *, inplace=True):
    """Like numpy.put: ``a.flat[ind] = v`` (``v`` repeated as needed; where ``ind``
    repeats a position, the last value wins); ``inplace=False`` returns the result.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.put(np.zeros(3), [0, 2], 7.0, inplace=False)
    array([7., 0., 7.])
    """
    return _in_place(
        "put", np.put, "anp.put(a, ind, v, mode, inplace=False)",
        a, ind, v, compute=_put, inplace=inplace, mode=mode,
    )  # fmt: skip


def _putmask(a, mask, values):
    if shape_of(mask) != shape_of(a):
        raise ValueError("putmask: mask and data must be the same size")
    # Position n takes values[n % len(values)], selected or not: a select.
    spread = _cycled(values, math.prod(shape_of(a)), a.dtype)
    return _elt.where(mask, _shp.reshape(spread, shape_of(a)), a)


@register_numpy(np.putmask)
def putmask(a, mask, values, *, inplace=True):
    """Like numpy.putmask: ``a.flat[n] = values[n % len(values)]`` where ``mask`` is
    true; ``inplace=False`` returns the result.  The mask may be traced, also under vmap.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.putmask(np.zeros(3), np.array([True, False, True]), [1.0, 2.0], inplace=False)
    array([1., 0., 1.])
    """
    return _in_place(
        "putmask", np.putmask, "anp.putmask(a, mask, values, inplace=False)",
        a, mask, values, compute=_putmask, inplace=inplace,
    )  # fmt: skip


def _copyto(dst, src, where, *, casting):
    where = where if isinstance(where, Tracer) else where.item() if where.ndim == 0 else where
    if not np.can_cast(src.dtype, dst.dtype, casting=casting):
        raise TypeError(
            f"Cannot cast array data from {src.dtype!r} to {dst.dtype!r} according to the "
            f"rule {casting!r}"
        )
    src = _shp.broadcast_to(_elt.astype(src, dst.dtype), shape_of(dst))
    return src if where is True else _elt.where(where, src, dst)


@register_numpy(np.copyto)
def copyto(dst, src, casting="same_kind", where=True, *, inplace=True):
    """Like numpy.copyto: ``src`` (broadcast, cast to ``dst``'s dtype) written into
    ``dst`` where ``where`` is true; ``inplace=False`` returns the result.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.copyto(np.zeros(3), 2.0, where=np.array([True, False, True]), inplace=False)
    array([2., 0., 2.])
    """
    return _in_place(
        "copyto",
        lambda d, s, w, *, casting: np.copyto(d, s, casting=casting, where=w),
        "anp.copyto(dst, src, casting, where, inplace=False)",
        dst, src, where, compute=_copyto, inplace=inplace, casting=casting,
    )  # fmt: skip


# --- shapes that depend on values: nonzero, argwhere, flatnonzero, extract ----------------------
#
# Under grad and jvp the values are concrete, so these are NumPy's own functions on them
# (positions carry no derivative; extract's values do).  Under vmap the number of entries
# differs from example to example: JAX's size=k fixes it (the first k, or padded with
# fill_value), which is a composition of argsort, so it batches like any other.


def first_true(flags: Any, size: int) -> tuple[Any, Any]:
    """The positions of the first ``size`` true entries of the 1-D boolean ``flags``, in
    order, and whether each is real; past the last one, the first position again (of a
    false entry if none is true).  A stable sort puts the true entries first, so no
    position depends on a concrete count."""
    from autodiff.rules import sorting as _srt  # a family loaded at first use (__init__.py)

    size, n = size_param(size), shape_of(flags)[0]
    if size > n:
        flags = _shp.pad(flags, ((0, size - n),), constant_values=False)
    order = getitem(_srt.argsort(_elt.logical_not(flags), stable=True), slice(0, size))
    count = _red.sum(_elt.astype(flags, np.intp))
    valid = _elt.less(np.arange(size, like=array_like(flags)), count)
    return (_elt.where(valid, order, getitem(order, 0)) if size else order), valid


def _unravel(flat: Any, shape: tuple[int, ...]) -> list:
    out = []
    for n in reversed(shape):
        out.append(_elt.remainder(flat, n))
        flat = _elt.floor_divide(flat, n)
    return out[::-1]


def _fill_values(fill_value: Any, ndim: int) -> list:
    if fill_value is None:
        return [0] * ndim
    if np.ndim(fill_value) == 0:
        return [fill_value] * ndim
    if len(fill_value) != ndim:
        raise ValueError(
            f"fill_value must be a scalar or a tuple of length {ndim}; got {fill_value!r}"
        )
    return list(fill_value)


def size_param(size: Any) -> int:
    """JAX's ``size=``, checked."""
    size = operator.index(size)
    if size < 0:
        raise ValueError(f"size must be non-negative, got {size}")
    return size


def _sized_nonzero(a: Any, size: int, fill_value: Any) -> tuple:
    positions, valid = first_true(_elt.not_equal(_comp.ravel(a), 0), size)
    return tuple(
        _elt.where(valid, p, constant_in(f, np.intp))
        for p, f in zip(_unravel(positions, shape_of(a)), _fill_values(fill_value, ndim_of(a)))
    )


@register_numpy(np.nonzero)
def nonzero(a, *, size=None, fill_value=None):
    """Like numpy.nonzero: the positions of the nonzero entries, one index array per
    axis (no derivative).  JAX's ``size=k``: the first k positions, padded with
    ``fill_value`` (default 0; or one per axis), which batches under vmap.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.nonzero(np.array([0.0, 3.0, 0.0, 4.0]))
    (array([1, 3]),)
    >>> anp.nonzero(np.array([0.0, 3.0, 0.0, 4.0]), size=3, fill_value=-1)
    (array([ 1,  3, -1]),)
    """
    if ndim_of(a) == 0:
        raise ValueError(
            "Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d(scalar).nonzero() "
            "instead."
        )
    if size is not None:
        return _sized_nonzero(operand(a), size, fill_value)
    return np.nonzero(concrete_for_shape(a, "nonzero", SIZE_HINT.format(name="nonzero")))


@register_numpy(np.flatnonzero)
def flatnonzero(a, *, size=None, fill_value=None):
    """Like numpy.flatnonzero: the positions of the nonzero entries of the flattened
    array (no derivative); JAX's ``size=``/``fill_value=`` as in ``nonzero``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.flatnonzero(np.array([[0.0, 1.0], [2.0, 0.0]]))
    array([1, 2])
    """
    if size is not None:
        return _sized_nonzero(_comp.ravel(operand(a)), size, fill_value)[0]
    return np.flatnonzero(
        concrete_for_shape(a, "flatnonzero", SIZE_HINT.format(name="flatnonzero"))
    )


@register_numpy(np.argwhere)
def argwhere(a, *, size=None, fill_value=None):
    """Like numpy.argwhere: the positions of the nonzero entries as rows (no
    derivative); JAX's ``size=``/``fill_value=`` as in ``nonzero``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.argwhere(np.array([[0.0, 1.0], [2.0, 0.0]]))
    array([[0, 1],
           [1, 0]])
    """
    if size is None:
        return np.argwhere(concrete_for_shape(a, "argwhere", SIZE_HINT.format(name="argwhere")))
    a = operand(a)
    if ndim_of(a) == 0:  # NumPy: one row (or none) with no columns
        return getitem(argwhere(_shp.reshape(a, (1,)), size=size), (slice(None), slice(0, 0)))
    return _shp.stack(_sized_nonzero(a, size, fill_value), axis=-1)


@register_numpy(np.extract)
def extract(condition, arr, *, size=None, fill_value=0):
    """Like numpy.extract: the entries of the flattened ``arr`` where ``condition`` is
    nonzero; they carry ``arr``'s derivatives.  JAX's ``size=k``: k entries,
    truncated or padded with ``fill_value``, which batches under vmap.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.extract(np.array([1, 0, 1]), np.array([5.0, 6.0, 7.0]))
    array([5., 7.])
    """
    arr, condition = operand(arr), operand(condition)
    if size is None:
        flags = concrete_for_shape(condition, "extract", SIZE_HINT.format(name="extract"))
        return take(_comp.ravel(arr), np.flatnonzero(flags))
    positions, valid = first_true(_elt.not_equal(_comp.ravel(condition), 0), size)
    return _fill(take(_comp.ravel(arr), positions), valid, fill_value)
