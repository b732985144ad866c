"""Indexing: ``x[index]`` (getitem) and its transpose, scatter-add (index_add).

An index is normalised once, in the public function, into a static tuple of
ints, slices, ``None`` and ``ARRAY`` placeholders, plus the integer index
arrays as positional operands (so ``vmap`` can batch them).  Boolean masks
become integer arrays (``nonzero``); ``...`` becomes explicit slices.

NumPy places the dimensions produced by advanced indices (arrays, and ints
when arrays are present) where the first of them stands if they are adjacent,
and in front otherwise; the batching rules below track that.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from autodiff._core import Primitive
from autodiff._tracer import Tracer, register_numpy
from autodiff.rules._helpers import (
    batch_size_of,
    bring_to_front,
    move_to_front,
    ndim_of,
    shape_of,
    to_front_padded,
)

__all__ = ["getitem"]


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


getitem_p = Primitive(
    "getitem",
    lambda x, *arrays, index: x[_rebuild(index, arrays)],
    vjp=_getitem_vjp,
    jvp=[lambda t, ans, x, *arrays, index: getitem_p.bind(t, *arrays, index=index)],
    batch=_getitem_batch,
)


@register_numpy(operator.getitem)
def getitem(x, index):
    """``x[index]`` with NumPy's basic and advanced indexing (ints, slices,
    ``None``, ``...``, integer arrays, boolean masks)."""
    index, arrays = _normalize_index(shape_of(x), index)
    return getitem_p.bind(x, *arrays, index=index)


# --- index_add: out = x; out[index] += y (repeated positions accumulate) --------------


def _index_add_impl(x, y, *arrays, index):
    out = x.copy()
    position = _rebuild(index, arrays)
    if arrays:
        np.add.at(out, position, y)
    else:
        out[position] += y
    return out


def _index_add_batch(args, dims, *, index):
    (x, y, *arrays), (xd, yd, *adims) = args, dims
    size = batch_size_of(args, dims)
    x = bring_to_front(x, xd, size)
    y = bring_to_front(y, yd, size)  # laid out like getitem's batched result
    nd = _advanced_ndim(arrays, adims)
    first, adjacent = _advanced(index) if arrays else (0, True)
    if all(d is None for d in adims):
        if not adjacent:
            y = _shp.moveaxis(y, 0, nd)
        return index_add_p.bind(x, y, *arrays, index=(slice(None), *index)), 0
    arrays = _batched_arrays(arrays, adims, nd)
    if adjacent and first:
        perm = _front_perm(nd, first, ndim_of(y))
        y = _shp.transpose(y, tuple(int(i) for i in np.argsort(perm)))
    return index_add_p.bind(x, y, _iota(size, nd), *arrays, index=(ARRAY, *index)), 0


index_add_p = Primitive(
    "index_add",
    _index_add_impl,
    vjp=lambda ct, ans, x, y, *arrays, index: (
        ct,
        getitem_p.bind(ct, *arrays, index=index),
        *[None] * len(arrays),
    ),
    jvp=[
        lambda t, ans, x, y, *arrays, index: t,
        lambda t, ans, x, y, *arrays, index: index_add_p.bind(
            _cre.zeros_like(x), t, *arrays, index=index
        ),
    ],
    batch=_index_add_batch,
)


from autodiff.rules import creation as _cre  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
