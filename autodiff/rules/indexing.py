"""Indexing: ``x[index]`` (getitem) and its transpose, scatter-add (index_add); the
other index updates behind ``x.at[i]``; ``take`` and ``take_along_axis``.

An index is normalised once, in the public function, into a static tuple of
ints, slices, ``None`` and ``ARRAY`` placeholders, plus the integer index
arrays as positional operands (so ``vmap`` can batch them).  Boolean masks
become integer arrays (``nonzero``); ``...`` becomes explicit slices.

NumPy places the dimensions produced by advanced indices (arrays, and ints
when arrays are present) where the first of them stands if they are adjacent,
and in front otherwise; the batching rules below track that.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from autodiff._core import Primitive
from autodiff._tracer import INDEX_UPDATE, SET_ITEM, Tracer, register_numpy
from autodiff.rules._helpers import (
    array_library,
    array_like,
    backend_error,
    batch_size_of,
    bring_to_front,
    implements,
    move_to_front,
    ndim_of,
    normalize_axes,
    shape_of,
    to_front_padded,
)

__all__ = ["at", "getitem", "take", "take_along_axis"]


class _ArraySlot:
    """Marks where an index array stands in a static index."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ARRAY"


ARRAY = _ArraySlot()


def _rebuild(index: tuple, arrays: tuple) -> tuple:
    it = iter(arrays)
    return tuple(next(it) if c is ARRAY else c for c in index)


def _normalize_index(shape: tuple[int, ...], index: Any) -> tuple[tuple, list]:
    comps = list(index) if isinstance(index, tuple) else [index]
    out: list = []
    arrays: list = []
    consumed = sum(
        ndim_of(c) if _is_mask(c) else 1 for c in comps if c is not None and c is not Ellipsis
    )
    if consumed > len(shape):
        raise IndexError(
            f"too many indices for array: array is {len(shape)}-dimensional, but "
            f"{consumed} were indexed"
        )
    if sum(c is Ellipsis for c in comps) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    dim = 0
    for c in comps:
        if c is Ellipsis:
            n = len(shape) - consumed
            out += [slice(None)] * n
            dim += n
        elif c is None:
            out.append(None)
        elif isinstance(c, slice):
            out.append(c)
            dim += 1
        elif isinstance(c, (bool, np.bool_)):
            raise IndexError("indexing with a Python bool is not supported; use a boolean array")
        elif isinstance(c, (int, np.integer)):
            out.append(int(c))
            dim += 1
        elif _is_mask(c):
            mask = c._concrete_value("boolean mask indexing") if isinstance(c, Tracer) else c
            if shape_of(mask) != shape[dim : dim + ndim_of(mask)]:
                raise IndexError(
                    f"boolean index of shape {shape_of(mask)} does not match the indexed "
                    f"dimensions {shape[dim : dim + ndim_of(mask)]}"
                )
            for positions in np.nonzero(mask):
                out.append(ARRAY)
                arrays.append(positions)
            dim += ndim_of(mask)
        else:
            c = _as_index_array(c)
            if isinstance(c, np.ndarray) and c.ndim == 0:
                out.append(int(c))  # a 0-d array acts as an int
            else:
                out.append(ARRAY)
                arrays.append(c)
            dim += 1
    return tuple(out), arrays


def _is_mask(c: Any) -> bool:
    dtype = getattr(c, "dtype", None)
    if dtype is None and isinstance(c, list):
        dtype = np.asarray(c).dtype
    return dtype is not None and np.dtype(dtype).kind == "b" and not isinstance(c, np.bool_)


def _as_index_array(c: Any) -> Any:
    if isinstance(c, (list, tuple)):
        c = np.asarray(c)
    dtype = getattr(c, "dtype", None)
    if dtype is None or np.dtype(dtype).kind not in "iu":
        raise IndexError(
            "only integers, slices (`:`), ellipsis (`...`), None (`numpy.newaxis`) and "
            f"integer or boolean arrays are valid indices, got {type(c).__name__}"
            + (f" of dtype {dtype}" if dtype is not None else "")
        )
    return c


def _advanced(index: tuple) -> tuple[int, bool]:
    """Position of the first advanced component, and whether they are adjacent."""
    adv = [i for i, c in enumerate(index) if c is ARRAY or isinstance(c, int)]
    return adv[0], adv[-1] - adv[0] + 1 == len(adv)


def _advanced_ndim(arrays, dims) -> int:
    return max((ndim_of(a) - (d is not None) for a, d in zip(arrays, dims)), default=0)


def _front_perm(nd: int, first: int, ndim: int) -> tuple[int, ...]:
    """From (B, advanced[nd], sliced[first], rest) to (B, sliced[first], advanced, rest)."""
    return (0, *range(nd + 1, nd + 1 + first), *range(1, nd + 1), *range(nd + 1 + first, ndim))


def _batched_arrays(arrays, dims, nd):
    """Batched index arrays as (B, 1..., shape), so they broadcast against the rest."""
    return [
        a if d is None else to_front_padded(a, d, nd - (ndim_of(a) - 1))
        for a, d in zip(arrays, dims)
    ]


def _iota(size: int, nd: int) -> np.ndarray:
    return np.arange(size).reshape((size,) + (1,) * nd)


# --- getitem --------------------------------------------------------------------------


def _getitem_batch(args, dims, *, index):
    (x, *arrays), (xd, *adims) = args, dims
    nd = _advanced_ndim(arrays, adims)
    first, adjacent = _advanced(index) if arrays else (0, True)
    if all(d is None for d in adims):
        out = getitem_p.bind(move_to_front(x, xd), *arrays, index=(slice(None), *index))
        return out, (0 if adjacent else nd)
    arrays = _batched_arrays(arrays, adims, nd)
    if xd is None:  # e.g. a lookup table indexed by batched positions: don't copy x
        return getitem_p.bind(x, *arrays, index=index), (first if adjacent else 0)
    size = batch_size_of(args, dims)
    x = move_to_front(x, xd)
    out = getitem_p.bind(x, _iota(size, nd), *arrays, index=(ARRAY, *index))
    if adjacent and first:
        out = _shp.transpose(out, _front_perm(nd, first, ndim_of(out)))
    return out, 0


def _getitem_vjp(ct, ans, x, *arrays, index):
    zeros = _cre.zeros_like(x)
    return (index_add_p.bind(zeros, ct, *arrays, index=index), *[None] * len(arrays))


def _foreign_safe(x: Any, index: tuple, arrays: tuple) -> tuple:
    """``index``, unless ``x`` is a Dask array and the index has ints apart from its
    index arrays (``x[0, :, i]``): NumPy puts the dimensions of such an index first,
    Dask does not, so the result would silently come out in another order."""
    if type(x) is np.ndarray or not arrays or _advanced(index)[1]:
        return index
    if array_library(x) == "dask" and any(isinstance(c, int) for c in index):
        raise backend_error(
            f"indexing x[{_describe(index)}]",
            x,
            " in NumPy's order (for ints apart from index arrays, the indexed dimensions go "
            "first; Dask keeps them in place)",
        )
    return index


def _getitem_impl(x, *arrays, index):
    if type(x) is np.ndarray:  # the common case, first
        return x[_rebuild(index, arrays)]
    try:
        return x[_rebuild(_foreign_safe(x, index, arrays), arrays)]
    except (TypeError, NotImplementedError, AssertionError) as e:  # e.g. Dask's nd fancy indexing
        if array_library(x) is None:
            raise
        raise backend_error(f"indexing x[{_describe(index)}]", x, f" ({e})") from e


def _describe(index: tuple) -> str:
    """A static index as a user would write it (array operands as ARRAY)."""
    parts = []
    for c in index:
        if isinstance(c, slice):
            text = f"{'' if c.start is None else c.start}:{'' if c.stop is None else c.stop}"
            parts.append(text if c.step is None else f"{text}:{c.step}")
        else:
            parts.append(str(c))
    return ", ".join(parts) if parts else "()"


getitem_p = Primitive(
    "getitem",
    _getitem_impl,
    vjp=_getitem_vjp,
    jvp=[lambda t, ans, x, *arrays, index: getitem_p.bind(t, *arrays, index=index)],
    batch=_getitem_batch,
)


@implements(getitem_p, operator.getitem)
def getitem(x, index):
    """``x[index]`` with NumPy's basic and advanced indexing (ints, slices,
    ``None``, ``...``, integer arrays, boolean masks)."""
    index, arrays = _normalize_index(shape_of(x), index)
    return getitem_p.bind(x, *arrays, index=index)


# --- scatters: out = x.copy(); out[index] (op)= y ----------------------------------------
#
# One primitive per update mode.  The public entry is ``x.at[index].<mode>(y)``;
# ``y`` is first broadcast to the shape of ``x[index]`` and cast to x's dtype.


def _scatter_impl(write):
    def impl(x, y, *arrays, index):
        out = x.copy()
        if not arrays and None in index:  # Dask's x[index] = y takes no None (newaxis)
            index, y = _without_new_axes(index, y, ndim_of(x))
        try:
            write(out, _rebuild(_foreign_safe(out, index, arrays), arrays), y, bool(arrays))
        except (TypeError, NotImplementedError) as e:  # e.g. Dask arrays have no ufunc.at
            if array_library(out) is None:
                raise
            what = (
                f"x[{_describe(index)}] = y" if write is _set_write or not arrays else write.__doc__
            )
            raise backend_error(what, out, f" ({e})") from e
        return out

    return impl


def _without_new_axes(index: tuple, y: Any, x_ndim: int) -> tuple[tuple, Any]:
    """A basic ``index`` without its None entries, and ``y`` without the unit axes
    they give ``x[index]``: writing the one into the other writes the same elements."""
    new_axes, axis = [], 0
    for c in index:
        if c is None:
            new_axes.append(axis)
        if c is None or isinstance(c, slice):
            axis += 1
    consumed = sum(c is not None for c in index)
    lacking = axis + x_ndim - consumed - ndim_of(y)  # leading axes y broadcasts along
    squeeze = tuple(a - lacking for a in new_axes if a >= lacking)
    return tuple(c for c in index if c is not None), np.squeeze(y, axis=squeeze)


def _scatter_batch(prim):
    """Scatter into x batched at the front, y laid out like getitem's batched result."""

    def batch(args, dims, *, index):
        (x, y, *arrays), (xd, yd, *adims) = args, dims
        size = batch_size_of(args, dims)
        x = bring_to_front(x, xd, size)
        y = bring_to_front(y, yd, size)
        nd = _advanced_ndim(arrays, adims)
        first, adjacent = _advanced(index) if arrays else (0, True)
        if all(d is None for d in adims):
            if not adjacent:
                y = _shp.moveaxis(y, 0, nd)
            return prim.bind(x, y, *arrays, index=(slice(None), *index)), 0
        arrays = _batched_arrays(arrays, adims, nd)
        if adjacent and first:
            perm = _front_perm(nd, first, ndim_of(y))
            y = _shp.transpose(y, tuple(int(i) for i in np.argsort(perm)))
        return prim.bind(x, y, _iota(size, nd), *arrays, index=(ARRAY, *index)), 0

    return batch


def _scatter(name, write, vjp, jvp, impl=None):
    prim = Primitive(name, impl or _scatter_impl(write), vjp=vjp, jvp=jvp)
    prim.def_batch(_scatter_batch(prim))
    return prim


def _get(x, arrays, index):
    return getitem_p.bind(x, *arrays, index=index)


def _last_writes(x, y, arrays, index):
    """Where repeated indices write one position several times, NumPy keeps the
    last value: a mask of the elements of ``y`` that survive."""
    if not arrays:
        return None  # slices and ints never repeat a position
    ids = np.arange(math.prod(shape_of(y)), dtype=np.intp, like=array_like(y))
    ids = ids.reshape(shape_of(y))
    owner = index_set_p.bind(_cre.zeros_like(x, dtype=np.intp) - 1, ids, *arrays, index=index)
    return _elt.equal(_get(owner, arrays, index), ids)


def _masked(value, mask):
    return value if mask is None else _elt.where(mask, value, 0.0)


def _set_write(out, position, y, has_arrays):
    """x[index] = y"""
    out[position] = y


index_set_p = _scatter(
    "index_set",
    _set_write,
    vjp=[
        lambda ct, ans, x, y, *arrays, index: index_set_p.bind(
            ct, _cre.zeros_like(y), *arrays, index=index
        ),
        lambda ct, ans, x, y, *arrays, index: _masked(
            _get(ct, arrays, index), _last_writes(x, y, arrays, index)
        ),
    ],
    jvp=[
        lambda t, ans, x, y, *arrays, index: index_set_p.bind(
            t, _cre.zeros_like(y), *arrays, index=index
        ),
        lambda t, ans, x, y, *arrays, index: index_set_p.bind(
            _cre.zeros_like(x),
            _masked(t, _last_writes(x, y, arrays, index)),
            *arrays,
            index=index,
        ),
    ],
)


def _add_write(out, position, y, has_arrays):
    """numpy.add.at (behind x.at[index].add and the derivative of x[index_array])"""
    if has_arrays:
        np.add.at(out, position, y)  # repeated positions accumulate
    else:
        out[position] += y


# --- scatter-add by counting -------------------------------------------------------------
#
# The VJP of every gather x[i] is a scatter-add of its cotangent, so its speed is the
# speed of reverse mode through indexing (take, take_along_axis, sort, lookups, the
# fluid benchmark W7).  numpy.add.at is general but slow; np.bincount over the flat
# positions of the output accumulates the same sums 3-6x faster (measured on 4,096 to
# 100,000 updates with NumPy 2.4).  It makes one array of out's size, so it is used
# only where y is at least 1/8 of out; a sparse update keeps np.add.at.


def _flat_positions(shape, index, arrays):
    """For an index of whole slices and adjacent index arrays (ints count as 0-d
    arrays) on a NumPy array: the flat position in an array of ``shape`` of every
    element of ``x[index]``, in its order.  None for any other index, or an index
    array out of bounds (np.add.at then raises NumPy's IndexError)."""
    it = iter(arrays)
    advanced = []
    for i, c in enumerate(index):
        if c is ARRAY or isinstance(c, int):
            advanced.append((i, np.asarray(next(it)) if c is ARRAY else np.intp(c)))
        elif c != slice(None):
            return None
    first, k = advanced[0][0], len(advanced)
    if advanced[-1][0] - first + 1 != k:
        return None  # NumPy puts the dimensions of split index arrays first
    flat: Any = 0
    for (_, a), n in zip(advanced, shape[first : first + k]):
        if a.dtype.kind not in "iu" or (a.size and not -n <= a.min() <= a.max() < n):
            return None
        flat = flat * n + (a % n if a.size and a.min() < 0 else a)
    pre, rows = math.prod(shape[:first]), math.prod(shape[first : first + k])
    post = math.prod(shape[first + k :])
    flat = np.reshape(flat, (1, -1, 1)) * post
    return (np.arange(pre).reshape(-1, 1, 1) * (rows * post) + flat + np.arange(post)).ravel()


def _dense_add(x, y, arrays, index):
    """``x`` with ``y`` added at ``index`` by counting, or None where that does not
    pay or does not apply (then the general scatter runs)."""
    if (
        type(x) is not np.ndarray
        or type(y) is not np.ndarray
        or x.dtype != y.dtype
        or x.dtype.kind not in "fc"
        or not arrays
        or 8 * y.size < x.size
        or not all(type(a) is np.ndarray for a in arrays)
    ):
        return None
    positions = _flat_positions(x.shape, index, arrays)
    if positions is None:
        return None
    y = y.ravel()
    if x.dtype.kind == "c":
        total = np.empty(x.size, x.dtype)
        total.real = np.bincount(positions, y.real, x.size)
        total.imag = np.bincount(positions, y.imag, x.size)
    else:
        total = np.bincount(positions, y, x.size).astype(x.dtype, copy=False)
    total = total.reshape(x.shape)
    total += x
    return total


def _index_add_impl(x, y, *arrays, index):
    out = _dense_add(x, y, arrays, index)
    return out if out is not None else _scatter_add(x, y, *arrays, index=index)


_scatter_add = _scatter_impl(_add_write)

index_add_p = _scatter(
    "index_add",
    _add_write,
    vjp=[
        lambda ct, ans, x, y, *arrays, index: ct,
        lambda ct, ans, x, y, *arrays, index: _get(ct, arrays, index),
    ],
    jvp=[
        lambda t, ans, x, y, *arrays, index: t,
        lambda t, ans, x, y, *arrays, index: index_add_p.bind(
            _cre.zeros_like(x), t, *arrays, index=index
        ),
    ],
    impl=_index_add_impl,
)


def _mul_write(out, position, y, has_arrays):
    """numpy.multiply.at (behind x.at[index].multiply)"""
    if has_arrays:
        np.multiply.at(out, position, y)
    else:
        out[position] *= y


def _require_unique(arrays, index, shape):
    """The derivative of a multiplying scatter in y is only simple without repeats."""
    if not arrays:
        return
    concrete = [
        a._concrete_value("checking for repeated indices")
        if isinstance(a, Tracer)
        else np.asarray(a)
        for a in arrays
    ]
    dummy = np.arange(math.prod(shape)).reshape(shape)
    positions = dummy[_rebuild(index, concrete)].ravel()
    if len(np.unique(positions)) != len(positions):
        raise NotImplementedError(
            "the derivative of x.at[index].multiply(y) with respect to y is implemented "
            "only when index names every position at most once; combine repeated "
            "factors first (e.g. multiply them with anp.prod) and scatter once."
        )


def _mul_vjp_y(ct, ans, x, y, *arrays, index):
    _require_unique(arrays, index, shape_of(x))
    return _get(ct * x, arrays, index)


def _mul_jvp_y(t, ans, x, y, *arrays, index):
    _require_unique(arrays, index, shape_of(x))
    return index_add_p.bind(_cre.zeros_like(x), _get(x, arrays, index) * t, *arrays, index=index)


index_mul_p = _scatter(
    "index_mul",
    _mul_write,
    vjp=[
        lambda ct, ans, x, y, *arrays, index: index_mul_p.bind(ct, y, *arrays, index=index),
        _mul_vjp_y,
    ],
    jvp=[
        lambda t, ans, x, y, *arrays, index: index_mul_p.bind(t, y, *arrays, index=index),
        _mul_jvp_y,
    ],
)


def _chooser_scatter(name, ufunc):
    """min/max scatters: the derivative goes to the winners, shared equally on ties."""

    def write(out, position, y, has_arrays):
        if has_arrays:
            ufunc.at(out, position, y)
        else:
            out[position] = ufunc(out[position], y)

    def weights(ans, x, y, arrays, index):
        x_wins = _elt.astype(_elt.equal(x, ans), ans.dtype)
        y_wins = _elt.astype(_elt.equal(y, _get(ans, arrays, index)), ans.dtype)
        count = x_wins + index_add_p.bind(_cre.zeros_like(x_wins), y_wins, *arrays, index=index)
        # count >= 1 wherever x_wins or y_wins is 1; elsewhere the weight is 0 anyway
        return x_wins / _elt.maximum(count, 1.0), y_wins, _elt.maximum(count, 1.0)

    def vjp_x(ct, ans, x, y, *arrays, index):
        return ct * weights(ans, x, y, arrays, index)[0]

    def vjp_y(ct, ans, x, y, *arrays, index):
        _, y_wins, count = weights(ans, x, y, arrays, index)
        return _get(ct / count, arrays, index) * y_wins

    def jvp_y(t, ans, x, y, *arrays, index):
        _, y_wins, count = weights(ans, x, y, arrays, index)
        spread = index_add_p.bind(_cre.zeros_like(x), t * y_wins, *arrays, index=index)
        return spread / count

    write.__doc__ = f"numpy.{ufunc.__name__}.at (behind x.at[index].{name[6:]})"
    return _scatter(
        name,
        write,
        vjp=[vjp_x, vjp_y],
        jvp=[lambda t, ans, x, y, *arrays, index: vjp_x(t, ans, x, y, *arrays, index=index), jvp_y],
    )


index_min_p = _chooser_scatter("index_min", np.minimum)
index_max_p = _chooser_scatter("index_max", np.maximum)


def _target_shape(shape, index, arrays):
    """The shape of x[index], computed on a zero-strided stand-in for x."""
    stand_in = np.broadcast_to(np.zeros((), dtype=bool), shape)
    return stand_in[_rebuild(index, [np.zeros(shape_of(a), np.intp) for a in arrays])].shape


class _IndexUpdate:
    """``x.at[index]``: functional updates returning new values (JAX's API)."""

    __slots__ = ("index", "x")

    def __init__(self, x, index):
        self.x, self.index = x, index

    def _apply(self, prim, value):
        selected = self._traced_mask_select(prim, value)
        if selected is not None:
            return selected
        static, arrays = _normalize_index(shape_of(self.x), self.index)
        target = _target_shape(shape_of(self.x), static, arrays)
        value = _elt.astype(value, self.x.dtype)
        value = _shp.broadcast_to(value, target)
        return prim.bind(self.x, value, *arrays, index=static)

    def _traced_mask_select(self, prim, value):
        """``x.at[mask].<mode>(v)`` for a traced boolean mask over x's leading axes and a
        ``v`` that is the same for every selected entry: a select (``where``), which
        needs no concrete mask, so it batches under ``vmap`` where the scatter cannot."""
        mask = (
            self.index[0] if isinstance(self.index, tuple) and len(self.index) == 1 else self.index
        )
        if not (isinstance(mask, Tracer) and _is_mask(mask)):
            return None
        x_shape, k = shape_of(self.x), ndim_of(mask)
        rest = x_shape[k:]
        if shape_of(mask) != x_shape[:k] or ndim_of(value) > len(rest):
            return None
        try:
            if np.broadcast_shapes(shape_of(value), rest) != rest:
                return None
        except ValueError:
            return None
        mask = _shp.expand_dims(mask, tuple(range(k, len(x_shape)))) if rest else mask
        value = _elt.astype(value, self.x.dtype)
        x = self.x
        if prim is index_set_p:
            return _elt.where(mask, value, x)
        if prim is index_add_p:
            return x + _elt.where(mask, value, _cre.zeros_like(value))
        if prim is index_mul_p:
            return x * _elt.where(mask, value, _cre.ones_like(value))
        chooser = _elt.minimum if prim is index_min_p else _elt.maximum
        return _elt.where(mask, chooser(x, value), x)

    def get(self):
        """``x[index]``."""
        return getitem(self.x, self.index)

    def set(self, value):
        """``x`` with ``x[index] = value``."""
        return self._apply(index_set_p, value)

    def add(self, value):
        """``x`` with ``x[index] += value``; repeated positions accumulate."""
        return self._apply(index_add_p, value)

    def multiply(self, value):
        """``x`` with ``x[index] *= value``; repeated positions multiply."""
        return self._apply(index_mul_p, value)

    def min(self, value):
        """``x`` with ``x[index] = minimum(x[index], value)``."""
        return self._apply(index_min_p, value)

    def max(self, value):
        """``x`` with ``x[index] = maximum(x[index], value)``."""
        return self._apply(index_max_p, value)


class at:
    """``anp.at(x)[index].set(v)``: index updates for any array (traced values
    also have them as ``x.at[index]``).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.at(np.zeros(3))[1].add(5.0)
    array([0., 5., 0.])
    """

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, index):
        return _IndexUpdate(self.x, index)


register_numpy(INDEX_UPDATE)(at)
register_numpy(SET_ITEM)(lambda x, index, value: at(x)[index].set(value))


# --- take, take_along_axis ----------------------------------------------------------------


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
        a, axis = _shp.ravel(a), 0
    axis = normalize_axes(axis, ndim_of(a))[0]
    return getitem(a, _along(axis, ndim_of(a), indices))


@register_numpy(np.take_along_axis)
def take_along_axis(arr, indices, axis=-1):
    """Like numpy.take_along_axis: pick along ``axis`` with ``indices`` shaped like ``arr``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.take_along_axis(np.array([[4.0, 5.0], [6.0, 7.0]]), np.array([[1], [0]]), 1)
    array([[5.],
           [6.]])
    """
    if axis is None:
        arr, axis = _shp.ravel(arr), 0
    n = ndim_of(arr)
    axis = normalize_axes(axis, n)[0]
    if ndim_of(indices) != n:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    grids = []
    for i, size in enumerate(shape_of(arr)):
        shape = [1] * n
        shape[i] = size
        grids.append(indices if i == axis else np.arange(size).reshape(shape))
    return getitem(arr, tuple(grids))


from autodiff.rules import creation as _cre  # noqa: E402
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
