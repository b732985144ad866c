"""Indexing: ``x[index]`` (getitem) and its transpose, scatter-add (index_add); the
other index updates behind ``x.at[i]`` (``autodiff/numpy/_index_update.py``).  The
compositions are in ``compositions.py`` (``take``, ``take_along_axis``) and
``autodiff/numpy/_indexing.py`` (``compress``, ``choose``, ``put``, ``nonzero``...).

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

from autodiff.core.arrays import (
    array_library,
    array_like,
    backend_error,
    batch_size_of,
    ndim_of,
    shape_of,
)
from autodiff.core.lowering import Emitter, NotLowered, View
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import jvp_taylor, linear_taylor
from autodiff.core.tracer import Tracer
from autodiff.errors import ConcretizationError
from autodiff.rules._helpers import (
    bring_to_front,
    evaluated_shape,
    implements,
    move_to_front,
    shaped_like,
    sparsity_kit,
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
            mask = concrete_for_shape(c, "x[mask] (boolean mask indexing)", _MASK_HINT)
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


_MASK_HINT = (
    "Keep the shape with anp.where(mask, x, fill), or select a fixed number of entries "
    "as in JAX: x[anp.nonzero(mask, size=k)] or anp.extract(mask, x, size=k, fill_value=0)."
)


def concrete_for_shape(x: Any, what: str, hint: str = "") -> Any:
    """The value of ``x`` for a function whose output shape depends on it: ``x`` itself,
    or a traced value's concrete value (grad and jvp have one).  Under ``vmap`` the
    examples differ, so there is no one shape: ConcretizationError, with ``hint``."""
    if not isinstance(x, Tracer):
        return x
    try:
        return x._concrete_value(what)
    except ConcretizationError as e:
        raise ConcretizationError(
            f"{what}: the shape of the result depends on the values, and under vmap they "
            f"differ from example to example. {hint or 'It cannot be batched.'}\n({e})"
        ) from None


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
    spread = untake_p.bind(ct, *arrays, index=index, shape=shape_of(x))
    return (spread, *[None] * len(arrays))


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
        if not arrays:  # basic indexing: the index as it is
            return x[index]
        if len(arrays) > 1 and (taken := _merged_take(x, index, arrays)) is not None:
            return taken
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
    sparsity=sparsity_kit.moves(_getitem_impl),
)
getitem_p.def_taylor(linear_taylor(getitem_p))  # linear in the data


getitem_p.def_lowering(View())  # a static index (integer arrays and masks stay NumPy's)
getitem_p.def_shape(evaluated_shape(getitem_p))  # its errors (out of range) as they are


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
    into = _scatter_into(write)
    return lambda x, y, *arrays, index: into(x.copy(), y, *arrays, index=index)


def _scatter_into(write):
    """The scatter ``write`` into ``out`` itself (a new array: impls copy x first)."""

    def impl(out, y, *arrays, index):
        if not arrays and None in index:  # Dask's x[index] = y takes no None (newaxis)
            index, y = _without_new_axes(index, y, ndim_of(out))
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
                y = _comp.moveaxis(y, 0, nd)
            return prim.bind(x, y, *arrays, index=(slice(None), *index)), 0
        arrays = _batched_arrays(arrays, adims, nd)
        if adjacent and first:
            perm = _front_perm(nd, first, ndim_of(y))
            y = _shp.transpose(y, tuple(int(i) for i in np.argsort(perm)))
        return prim.bind(x, y, _iota(size, nd), *arrays, index=(ARRAY, *index)), 0

    return batch


def _written(shape, y_shape, arrays, index):
    """For sparsity: the position in ``x`` (of ``shape``) each element of ``x[index]``
    is, and the element of ``y`` written there; None where an index array is unknown."""
    # sparsity detection's kit, loaded at its first use (rules/_helpers.py's sparsity_kit)
    from autodiff.rules._sparsity import is_known, numbered

    if not all(is_known(a) for a in arrays):
        return None
    positions = _getitem_impl(numbered(shape), *arrays, index=index)
    try:
        return positions, np.broadcast_to(numbered(y_shape), np.shape(positions))
    except ValueError:  # y laid out otherwise (new axes dropped): any position
        return None


def _scatter_sparsity(mode):
    """Each element of the result reads its element of x (unless ``set`` overwrites it)
    and the elements of y written there (``set``: the last one); ``x.at[i].multiply(y)``
    multiplies them."""

    def rule(x, y, *arrays, index):
        from autodiff.core.index_sets import ALL, Edges, Gather, Sparsity  # (see _written)
        from autodiff.rules._sparsity import numbered, shape_of_operand

        shape = shape_of_operand(x)
        written = _written(shape, shape_of_operand(y), arrays, index)
        keep = numbered(shape)
        pairs = [(0, 1)] if mode == "multiply" else []
        if written is None:
            return Sparsity([Gather(keep), ALL, *(None for _ in arrays)], pairs)
        positions, sources = written
        if mode == "set":
            keep = keep.ravel().copy()
            keep[np.ravel(positions)] = -1
            # a position written several times keeps the last write (as _last_writes)
            positions, sources = np.ravel(positions), np.ravel(sources)
            owner = np.full(keep.size, -1)
            owner[positions] = sources
            positions, sources = (a[owner[positions] == sources] for a in (positions, sources))
        return Sparsity([Gather(keep), Edges(positions, sources), *(None for _ in arrays)], pairs)

    return rule


def _scatter(name, write, vjp, jvp, impl=None):
    prim = Primitive(name, impl or _scatter_impl(write), vjp=vjp, jvp=jvp)
    prim.def_batch(_scatter_batch(prim))
    prim.def_sparsity(_scatter_sparsity(name.removeprefix("index_")))
    prim.def_shape(lambda x, y, *arrays, index: shaped_like(x))  # a copy of x, updated
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
index_set_p.def_taylor(linear_taylor(index_set_p))  # linear in the data


def _add_write(out, position, y, has_arrays):
    """numpy.add.at (behind x.at[index].add and the derivative of x[index_array])"""
    if has_arrays:
        np.add.at(out, position, y)  # repeated positions accumulate
    else:
        out[position] += y


# --- scatter-add along one flat index ----------------------------------------------------------
#
# The VJP of every gather x[i] is a scatter-add of its cotangent, so its speed is the
# speed of reverse mode through indexing (take, take_along_axis, sort, lookups, the
# fluid benchmark W7).  NumPy's add.at is fast for one index array into a 1-D array
# and 5-10x slower for anything else (several index arrays, or rows of a 2-D array:
# measured with NumPy 2.4 on 4,096 to 262,144 updates).  So an index of whole slices
# around adjacent index arrays becomes the flat position of every updated element,
# and add.at runs on the flat view: the same sums, in the same order.  (NumPy's
# multi-array gathers are as slow, so getitem takes the same route forward.)


def _merged_positions(shape, index, arrays):
    """For an index of whole slices around adjacent index arrays (ints count as 0-d
    arrays), all NumPy's: ``(first, k, flat)``, where the ``k`` indexed axes start at
    ``first`` and ``flat`` (the arrays' broadcast shape) holds positions in those axes
    merged into one.  None for any other index, or a position out of bounds (NumPy's
    own indexing then raises its IndexError)."""
    it = iter(arrays)
    advanced = []
    for i, c in enumerate(index):
        if c is ARRAY:
            a = next(it)
            if type(a) is not np.ndarray or a.dtype.kind not in "iu":
                return None
            advanced.append((i, a.astype(np.intp, copy=False)))  # (uint64 + int64: float)
        elif isinstance(c, int):
            advanced.append((i, np.intp(c)))
        elif c != slice(None):
            return None
    first, k = advanced[0][0], len(advanced)
    if advanced[-1][0] - first + 1 != k:
        return None  # NumPy puts the dimensions of split index arrays first
    flat = 0
    for (_, a), n in zip(advanced, shape[first : first + k]):
        lo, hi = (a.min(), a.max()) if a.size else (0, 0)
        if not -n <= lo <= hi < n:
            return None
        flat = flat * n + (a % n if lo < 0 else a)
    return first, k, np.asarray(flat)


def _flat_positions(shape, index, arrays):
    """The flat position in an array of ``shape`` of every element of ``x[index]``, in
    its order, for the indices ``_merged_positions`` takes (else None)."""
    merged = _merged_positions(shape, index, arrays)
    if merged is None:
        return None
    first, k, flat = merged
    pre, rows, post = (
        math.prod(shape[:first]),
        math.prod(shape[first : first + k]),
        math.prod(shape[first + k :]),
    )
    flat = flat.ravel()
    if pre != 1:
        flat = (np.arange(pre)[:, None] * rows + flat).ravel()
    if post != 1:
        flat = (flat[:, None] * post + np.arange(post)).ravel()
    return flat


def _merged_take(x, index, arrays):
    """``x[index]`` for several index arrays as one ``np.take`` along their axes
    merged (NumPy's indexing with several arrays is 5-10x slower), or None."""
    merged = _merged_positions(x.shape, index, arrays)
    if merged is None:
        return None
    first, k, flat = merged
    shape = x.shape
    grouped = x.reshape(
        math.prod(shape[:first]), math.prod(shape[first : first + k]), math.prod(shape[first + k :])
    )
    taken = np.take(grouped, flat.ravel(), axis=1)
    return taken.reshape(shape[:first] + flat.shape + shape[first + k :])


def _flat_add(out, y, arrays, index):
    """Add ``y`` into ``out`` at ``index`` through one flat index array, if that applies
    (True), else leave ``out`` alone (False: the general scatter runs)."""
    if type(out) is not np.ndarray or type(y) is not np.ndarray or not arrays or out.ndim == 1:
        return False  # (for a 1-D out NumPy's add.at already has one flat index)
    positions = _flat_positions(out.shape, index, arrays)
    if positions is None:
        return False
    np.add.at(out.reshape(-1), positions, y.reshape(-1))  # (out is C-contiguous: a view)
    return True


_add_into = _scatter_into(_add_write)


def _index_add_impl(x, y, *arrays, index):
    return _added_into(x.copy(), y, arrays, index)


def _added_into(out, y, arrays, index):
    return out if _flat_add(out, y, arrays, index) else _add_into(out, y, *arrays, index=index)


def _index_add_lowering(ctx, x, y, *arrays, index):
    """A static index: ``x`` copied, ``y`` added into the indexed view (no repeats)."""
    if arrays:
        raise NotLowered("index_add with integer arrays or masks")
    out = ctx.copy(x)
    part = ctx.view(out, lambda a: a[index])
    ctx.apply(np.add, part, y, out=part)
    return out


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
index_add_p.def_lowering(Emitter(_index_add_lowering))
index_add_p.def_taylor(linear_taylor(index_add_p))  # linear in the data


# The VJP of x[index]: the cotangent added into zeros of x's shape.  A primitive of its
# own so the zeros are np.zeros (pages the OS maps on first write) rather than a
# zeros_like that index_add would copy: two passes over x fewer per gather.


def _untake_impl(y, *arrays, index, shape):
    if not arrays and isinstance(y, (np.ndarray, np.generic)):  # basic indexing: no repeats
        out = np.zeros(shape, y.dtype)
        out[index] += y  # (as the general path adds: 0 + -0.0 is 0.0)
        return out
    return _added_into(np.zeros(shape, y.dtype, like=array_like(y)), y, arrays, index)


def _untake_batch(args, dims, *, index, shape):
    (y, *arrays), (yd, *adims) = args, dims
    zeros = np.zeros(shape, y.dtype, like=array_like(y))  # the same for every example
    return _scatter_batch(index_add_p)([zeros, y, *arrays], [None, yd, *adims], index=index)


untake_p = Primitive(
    "untake",
    _untake_impl,
    vjp=[lambda ct, ans, y, *arrays, index, shape: _get(ct, arrays, index)],
    jvp=[
        lambda t, ans, y, *arrays, index, shape: untake_p.bind(t, *arrays, index=index, shape=shape)
    ],
    batch=_untake_batch,
)
untake_p.def_taylor(linear_taylor(untake_p))  # linear in the data


def _untake_lowering(ctx, y, *arrays, index, shape):
    """A static index: zeros, ``y`` added into the indexed view (0.0 + -0.0 is 0.0, as
    the implementation adds)."""
    if arrays or not shape:
        raise NotLowered("untake with integer arrays or masks")
    out = ctx.full(ctx.out_avals[0], 0)
    part = ctx.view(out, lambda a: a[index])
    ctx.apply(np.add, part, y, out=part)
    return out


untake_p.def_lowering(Emitter(_untake_lowering))


@untake_p.def_sparsity
def _untake_sparsity(y, *arrays, index, shape):
    from autodiff.core.index_sets import ALL, Edges, Sparsity  # (see _written)
    from autodiff.rules._sparsity import shape_of_operand

    written = _written(shape, shape_of_operand(y), arrays, index)
    read = ALL if written is None else Edges(*written)
    return Sparsity([read, *(None for _ in arrays)])


def _mul_write(out, position, y, has_arrays):
    """numpy.multiply.at (behind x.at[index].multiply)"""
    if has_arrays:
        np.multiply.at(out, position, y)
    else:
        out[position] *= y


def _require_unique(x, y, arrays, index):
    """The derivative of a multiplying scatter in y is only simple without repeats.

    The writes to each position are counted with primitives from the index arrays
    alone (in their library), so under ``vmap`` each example counts its own indices
    and x's and y's values are never read; the counts of every example are then read
    at once (the array under the tracers, batch axes included)."""
    if not arrays:
        return
    like = array_like(arrays[0])
    zeros = np.zeros(shape_of(x), dtype=np.intp, like=like)
    ones = np.ones(shape_of(y), dtype=np.intp, like=like)
    counts = index_add_p.bind(zeros, ones, *arrays, index=index)
    repeated = _red.any(_elt.greater(counts, 1))
    while isinstance(repeated, Tracer):  # every example's answer
        repeated = repeated._inner
    if bool(np.any(repeated)):
        raise NotImplementedError(
            "the derivative of x.at[index].multiply(y) with respect to y is implemented "
            "only when index names every position at most once; combine repeated "
            "factors first (e.g. multiply them with anp.prod) and scatter once."
        )


def _mul_vjp_y(ct, ans, x, y, *arrays, index):
    _require_unique(x, y, arrays, index)
    return _get(ct * x, arrays, index)


def _mul_jvp_y(t, ans, x, y, *arrays, index):
    _require_unique(x, y, arrays, index)
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
index_mul_p.def_taylor(jvp_taylor(index_mul_p))  # times 1 where unwritten: from its JVP


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
index_min_p.def_taylor(linear_taylor(index_min_p))  # piecewise linear
index_max_p = _chooser_scatter("index_max", np.maximum)
index_max_p.def_taylor(linear_taylor(index_max_p))  # piecewise linear


# --- operands of the public functions ----------------------------------------------------------


def operand(x: Any) -> Any:
    """A traced value or an array of any library as it is; a list or a scalar as a
    NumPy array (so that it has a shape and a dtype)."""
    return x if isinstance(x, Tracer) or hasattr(type(x), "__array_function__") else np.asarray(x)


from autodiff.rules import compositions as _comp  # noqa: E402
from autodiff.rules import creation as _cre  # noqa: E402
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import reductions as _red  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
