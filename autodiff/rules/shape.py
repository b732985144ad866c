"""Shape primitives: reshape, transpose, broadcast_to, expand_dims, squeeze,
concatenate, stack, pad; and compositions of them and of indexing (moveaxis,
swapaxes, ravel, flip, roll, rot90, tile, repeat, the *stack and *split
functions, diag, diagonal, trace, triu, tril).

Each block: the primitive (implementation + VJP + JVP + batching rule), then
the public function, which normalises arguments (axes non-negative, shapes
resolved) so the rules only ever see canonical static parameters.  All of
these are linear, so each JVP is the primitive applied to the tangent.
"""

from __future__ import annotations

import builtins
import itertools
import math
from typing import Any

import numpy as np

from autodiff._core import Primitive
from autodiff._tracer import register_numpy
from autodiff.rules._helpers import (
    array_like,
    bring_to_front,
    implements,
    move_to_front,
    ndim_of,
    normalize_axes,
    numpy_impl,
    shape_of,
    to_front_padded,
    unbroadcast,
)

__all__ = [
    "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_arrays",
    "broadcast_to", "column_stack", "concatenate", "diag", "diagflat", "diagonal", "dstack",
    "expand_dims", "flip", "fliplr", "flipud", "hstack", "moveaxis", "ndim", "pad", "ravel",
    "repeat", "reshape", "roll", "rot90", "shape", "size", "split", "squeeze", "stack",
    "swapaxes", "tile", "trace", "transpose", "tril", "triu", "vstack",
    # the array API standard's spellings
    "concat", "permute_dims", "matrix_transpose", "unstack",
]  # fmt: skip


def _axis_param(axis: Any, ndim: int) -> int:
    return normalize_axes(axis, ndim)[0]


# --- reshape -------------------------------------------------------------------


def _reshape_batch(args, dims, *, shape):
    x = move_to_front(args[0], dims[0])
    return reshape_p.bind(x, shape=(shape_of(x)[0], *shape)), 0


reshape_p = Primitive(
    "reshape",
    lambda x, *, shape: np.reshape(x, shape),
    vjp=[lambda ct, ans, x, *, shape: reshape_p.bind(ct, shape=shape_of(x))],
    jvp=[lambda t, ans, x, *, shape: reshape_p.bind(t, shape=shape)],
    batch=_reshape_batch,
)


def _resolve_shape(shape: Any, size: int) -> tuple[int, ...]:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if shape.count(-1) > 1:
        raise ValueError("can only specify one unknown dimension")
    if -1 in shape:
        known = math.prod(s for s in shape if s != -1)
        if known and size % known == 0:
            shape = tuple(size // known if s == -1 else s for s in shape)
    if math.prod(shape) != size or -1 in shape:
        raise ValueError(f"cannot reshape array of size {size} into shape {shape}")
    return shape


@implements(reshape_p, np.reshape)
def reshape(a, shape=None, order="C", *, copy=None):
    """Like numpy.reshape (C order); ``-1`` infers one dimension."""
    if order != "C":
        raise NotImplementedError(f"reshape(order={order!r}): only order='C' is supported")
    shape = _resolve_shape(shape, math.prod(shape_of(a)))
    return a if shape == shape_of(a) else reshape_p.bind(a, shape=shape)


@register_numpy(np.ravel)
def ravel(a, order="C"):
    """Like numpy.ravel: a 1-D view of ``a`` (C order)."""
    return reshape(a, (-1,), order=order)


# --- transpose (moveaxis and swapaxes are transposes) -------------------------------


def _inverse_perm(axes: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.argsort(axes))


def _transpose_batch(args, dims, *, axes):
    d = dims[0]
    return transpose_p.bind(args[0], axes=(d, *(a + (a >= d) for a in axes))), 0


transpose_p = Primitive(
    "transpose",
    lambda x, *, axes: np.transpose(x, axes),
    vjp=[lambda ct, ans, x, *, axes: transpose_p.bind(ct, axes=_inverse_perm(axes))],
    jvp=[lambda t, ans, x, *, axes: transpose_p.bind(t, axes=axes)],
    batch=_transpose_batch,
)


@implements(transpose_p, np.transpose, np.permute_dims)
def transpose(a, axes=None):
    """Like numpy.transpose: reverse the axes, or permute them by ``axes``."""
    n = ndim_of(a)
    if axes is None:
        axes = tuple(range(n))[::-1]
    else:
        axes = tuple(int(ax) % n if -n <= ax < n else ax for ax in axes)
        if sorted(axes) != list(range(n)):
            raise ValueError(f"axes {axes} don't match an array with {n} dimensions")
    return a if axes == tuple(range(n)) else transpose_p.bind(a, axes=axes)


@register_numpy(np.moveaxis)
def moveaxis(a, source, destination):
    """Like numpy.moveaxis: move axes to new positions, keeping the others' order."""
    n = ndim_of(a)
    # In order, not sorted: source[i] goes to destination[i].
    source = tuple(_axis_param(ax, n) for ax in np.atleast_1d(source).tolist())
    destination = tuple(_axis_param(ax, n) for ax in np.atleast_1d(destination).tolist())
    if len(source) != len(destination):
        raise ValueError(
            "`source` and `destination` arguments must have the same number of elements"
        )
    order = [i for i in range(n) if i not in source]
    for dest, src in sorted(zip(destination, source)):
        order.insert(dest, src)
    return transpose(a, order)


@register_numpy(np.swapaxes)
def swapaxes(a, axis1, axis2):
    """Like numpy.swapaxes: exchange two axes."""
    n = ndim_of(a)
    order = list(range(n))
    i, j = _axis_param(axis1, n), _axis_param(axis2, n)
    order[i], order[j] = order[j], order[i]
    return transpose(a, order)


permute_dims = transpose  # the array API's name (axes required there)


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


# --- broadcast_to -------------------------------------------------------------------


def _broadcast_to_batch(args, dims, *, shape):
    x = to_front_padded(args[0], dims[0], len(shape) - (ndim_of(args[0]) - 1))
    return broadcast_to_p.bind(x, shape=(shape_of(x)[0], *shape)), 0


broadcast_to_p = Primitive(
    "broadcast_to",
    lambda x, *, shape: np.broadcast_to(x, shape),
    vjp=[lambda ct, ans, x, *, shape: unbroadcast(ct, shape_of(x))],
    jvp=[lambda t, ans, x, *, shape: broadcast_to_p.bind(t, shape=shape)],
    batch=_broadcast_to_batch,
)


@implements(broadcast_to_p, np.broadcast_to)
def broadcast_to(array, shape, subok=False):
    """Like numpy.broadcast_to (the result is a read-only view for NumPy arrays)."""
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
    if shape == shape_of(array):
        return array
    # np.broadcast_shapes raises NumPy's own error for incompatible shapes.
    if np.broadcast_shapes(shape_of(array), shape) != shape:
        raise ValueError(f"cannot broadcast an array of shape {shape_of(array)} to {shape}")
    return broadcast_to_p.bind(array, shape=shape)


# --- expand_dims and squeeze ----------------------------------------------------------


def _shifted_batch(prim):
    """Batch rule for primitives whose ``axis`` parameter shifts by one at the front."""

    def batch(args, dims, *, axis):
        x = move_to_front(args[0], dims[0])
        return prim.bind(x, axis=tuple(a + 1 for a in axis)), 0

    return batch


expand_dims_p = Primitive(
    "expand_dims",
    lambda x, *, axis: np.expand_dims(x, axis),
    vjp=[lambda ct, ans, x, *, axis: reshape_p.bind(ct, shape=shape_of(x))],
    jvp=[lambda t, ans, x, *, axis: expand_dims_p.bind(t, axis=axis)],
)
expand_dims_p.def_batch(_shifted_batch(expand_dims_p))


@implements(expand_dims_p, np.expand_dims)
def expand_dims(a, axis):
    """Like numpy.expand_dims: insert unit axes at ``axis`` (int or tuple)."""
    n_new = len(axis) if isinstance(axis, (tuple, list)) else 1
    axis = normalize_axes(axis, ndim_of(a) + n_new)
    return expand_dims_p.bind(a, axis=axis) if axis else a


squeeze_p = Primitive(
    "squeeze",
    lambda x, *, axis: np.squeeze(x, axis),
    vjp=[lambda ct, ans, x, *, axis: reshape_p.bind(ct, shape=shape_of(x))],
    jvp=[lambda t, ans, x, *, axis: squeeze_p.bind(t, axis=axis)],
)
squeeze_p.def_batch(_shifted_batch(squeeze_p))


@implements(squeeze_p, np.squeeze)
def squeeze(a, axis=None):
    """Like numpy.squeeze: remove unit axes (all of them, or those in ``axis``)."""
    shape = shape_of(a)
    if axis is None:
        axis = tuple(i for i, n in enumerate(shape) if n == 1)
    else:
        axis = normalize_axes(axis, len(shape))
        if any(shape[i] != 1 for i in axis):
            raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
    return squeeze_p.bind(a, axis=axis) if axis else a


# --- concatenate and stack ------------------------------------------------------------


def _concatenate_vjp(ct, ans, *xs, axis):
    cts, start = [], 0
    for x in xs:
        stop = start + shape_of(x)[axis]
        cts.append(_idx.getitem(ct, (slice(None),) * axis + (slice(start, stop),)))
        start = stop
    return cts


def _joining_batch(prim):
    """Batch rule for concatenate/stack: every operand batched at the front."""

    def batch(args, dims, *, axis):
        size = next(shape_of(a)[d] for a, d in zip(args, dims) if d is not None)
        moved = [bring_to_front(a, d, size) for a, d in zip(args, dims)]
        return prim.bind(*moved, axis=axis + 1), 0

    return batch


concatenate_p = Primitive(
    "concatenate",
    lambda *xs, axis: np.concatenate(xs, axis=axis),
    vjp=_concatenate_vjp,
    jvp=lambda tangents, ans, *xs, axis: concatenate_p.bind(*tangents, axis=axis),
)
concatenate_p.def_batch(_joining_batch(concatenate_p))


def _check_no_out(name: str, out: Any) -> None:
    if out is not None:
        raise NotImplementedError(f"{name}(..., out=...) is not supported; use the returned value")


@implements(concatenate_p, np.concatenate, np.concat)
def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """Like numpy.concatenate: join arrays along an existing axis (``None``: flatten first)."""
    _check_no_out("concatenate", out)
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    if axis is None:
        arrays, axis = [ravel(a) for a in arrays], 0
    if dtype is not None:
        arrays = [a.astype(dtype) if hasattr(a, "astype") else np.asarray(a, dtype) for a in arrays]
    axis = _axis_param(axis, ndim_of(arrays[0]))
    return arrays[0] if len(arrays) == 1 else concatenate_p.bind(*arrays, axis=axis)


def _stack_vjp(ct, ans, *xs, axis):
    return [_idx.getitem(ct, (slice(None),) * axis + (i,)) for i in range(len(xs))]


stack_p = Primitive(
    "stack",
    lambda *xs, axis: np.stack(xs, axis=axis),
    vjp=_stack_vjp,
    jvp=lambda tangents, ans, *xs, axis: stack_p.bind(*tangents, axis=axis),
)
stack_p.def_batch(_joining_batch(stack_p))


concat = concatenate  # the array API's name


@implements(stack_p, np.stack)
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """Like numpy.stack: join equally shaped arrays along a new axis."""
    _check_no_out("stack", out)
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to stack")
    if dtype is not None:
        arrays = [a.astype(dtype) if hasattr(a, "astype") else np.asarray(a, dtype) for a in arrays]
    shapes = {shape_of(a) for a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"all input arrays must have the same shape, got {sorted(shapes)}")
    axis = _axis_param(axis, ndim_of(arrays[0]) + 1)
    return stack_p.bind(*arrays, axis=axis)


# --- pad (constant mode) ----------------------------------------------------------------


def _unpad(x, pad_width):
    """The inverse of padding: the middle of ``x``."""
    return _idx.getitem(x, tuple(slice(lo, n - hi) for (lo, hi), n in zip(pad_width, shape_of(x))))


def _pad_batch(args, dims, *, pad_width, constant_values):
    d = dims[0]
    widths = (*pad_width[:d], (0, 0), *pad_width[d:])
    return pad_p.bind(args[0], pad_width=widths, constant_values=constant_values), d


pad_p = Primitive(
    "pad",
    lambda x, *, pad_width, constant_values: np.pad(x, pad_width, constant_values=constant_values),
    vjp=[lambda ct, ans, x, *, pad_width, constant_values: _unpad(ct, pad_width)],
    jvp=[
        lambda t, ans, x, *, pad_width, constant_values: pad_p.bind(
            t, pad_width=pad_width, constant_values=0
        )
    ],
    batch=_pad_batch,
)


@implements(pad_p, np.pad)
def pad(array, pad_width, mode="constant", *, constant_values=0):
    """Like numpy.pad in ``mode="constant"`` (the padding is a constant: no derivative).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.pad(np.array([1.0, 2.0]), 1)
    array([0., 1., 2., 0.])
    """
    if mode != "constant":
        raise NotImplementedError(f"pad(mode={mode!r}): only mode='constant' is supported")
    if not np.isscalar(constant_values):
        raise NotImplementedError("pad(constant_values=...): only a scalar is supported")
    widths = np.broadcast_to(np.asarray(pad_width, dtype=int), (ndim_of(array), 2))
    widths = tuple((int(lo), int(hi)) for lo, hi in widths)
    return pad_p.bind(array, pad_width=widths, constant_values=constant_values)


# --- compositions: flips, rolls, tiles --------------------------------------------------------


def _along(axis, n_dims, index):
    """An index applying ``index`` along ``axis`` only."""
    return (slice(None),) * axis + (index,) + (slice(None),) * (n_dims - axis - 1)


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


@register_numpy(np.fliplr)
def fliplr(m):
    """Like numpy.fliplr: flip axis 1."""
    return flip(m, 1)


@register_numpy(np.flipud)
def flipud(m):
    """Like numpy.flipud: flip axis 0."""
    return flip(m, 0)


def _roll_batch(args, dims, *, shifts, axes):
    d = dims[0]
    return roll_p.bind(args[0], shifts=shifts, axes=tuple(a + (a >= d) for a in axes)), d


# One primitive, not slices and a concatenate: its VJP is one roll back (HIPS autograd's
# rule), where the slices' VJPs were two scatters into zeros and a sum.
roll_p = Primitive(
    "roll",
    numpy_impl(np.roll, lambda x, *, shifts, axes: np.roll(x, shifts, axes)),
    vjp=[
        lambda ct, ans, x, *, shifts, axes: roll_p.bind(
            ct, shifts=tuple(-s for s in shifts), axes=axes
        )
    ],
    jvp=[lambda t, ans, x, *, shifts, axes: roll_p.bind(t, shifts=shifts, axes=axes)],
    batch=_roll_batch,
    vjp_reads=[()],
)


@implements(roll_p, np.roll)
def roll(a, shift, axis=None):
    """Like numpy.roll: shift entries along ``axis`` cyclically (``None``: flattened).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.roll(np.array([1.0, 2.0, 3.0]), 1)
    array([3., 1., 2.])
    """
    if axis is None:
        return reshape(roll(ravel(a), shift, 0), shape_of(a))
    shape = shape_of(a)
    total: dict[int, int] = {}
    for s, ax in np.broadcast(shift, axis):  # shifts along one axis add up, as in NumPy
        ax = _axis_param(int(ax), len(shape))
        total[ax] = total.get(ax, 0) + int(s)
    kept = {ax: s % shape[ax] for ax, s in total.items() if shape[ax] and s % shape[ax]}
    if not kept:
        return a
    return roll_p.bind(a, shifts=tuple(kept.values()), axes=tuple(kept))


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


@register_numpy(np.broadcast_arrays)
def broadcast_arrays(*args, subok=False):
    """Like numpy.broadcast_arrays: every argument broadcast to their common shape."""
    shape = np.broadcast_shapes(*(shape_of(a) for a in args))
    return tuple(broadcast_to(a, shape) for a in args)


@register_numpy(np.hstack)
def hstack(tup, *, dtype=None, casting="same_kind"):
    """Like numpy.hstack: concatenate along axis 1 (axis 0 for 1-D arrays).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.hstack([np.ones(2), np.zeros(1)])
    array([1., 1., 0.])
    """
    arrays = [_atleast(1, [a]) for a in tup]
    axis = 0 if ndim_of(arrays[0]) == 1 else 1
    return concatenate(arrays, axis=axis, dtype=dtype)


@register_numpy(np.vstack)
def vstack(tup, *, dtype=None, casting="same_kind"):
    """Like numpy.vstack: concatenate along axis 0 after atleast_2d."""
    return concatenate([_atleast(2, [a]) for a in tup], axis=0, dtype=dtype)


@register_numpy(np.dstack)
def dstack(tup):
    """Like numpy.dstack: concatenate along axis 2 after atleast_3d."""
    return concatenate([_atleast(3, [a]) for a in tup], axis=2)


@register_numpy(np.column_stack)
def column_stack(tup):
    """Like numpy.column_stack: 1-D arrays become columns, then hstack."""
    columns = [reshape(a, (shape_of(a)[0], 1)) if ndim_of(a) == 1 else a for a in tup]
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
    return _idx.at(reshape(square, (n, n)))[rows, cols].set(v)


@register_numpy(np.diagflat)
def diagflat(v, k=0):
    """Like numpy.diagflat: ``diag(ravel(v), k)``."""
    return diag(ravel(v), k)


def _triangle(m, k, lower):
    rows, cols = shape_of(m)[-2:]
    like = array_like(m)
    keep = (
        np.tri(rows, cols, k, dtype=bool, like=like)
        if lower
        else ~np.tri(rows, cols, k - 1, dtype=bool, like=like)
    )
    return _elt.where(keep, m, 0.0 * m)


@register_numpy(np.tril)
def tril(m, k=0):
    """Like numpy.tril: zero the entries above diagonal ``k`` (of the last two axes)."""
    return _triangle(m, k, lower=True)


@register_numpy(np.triu)
def triu(m, k=0):
    """Like numpy.triu: zero the entries below diagonal ``k`` (of the last two axes)."""
    return _triangle(m, k, lower=False)


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


# Slicing cotangents needs the indexing primitives, which are built on these.
from autodiff.rules import creation as _cre  # noqa: E402
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import indexing as _idx  # noqa: E402
from autodiff.rules import reductions as _red  # noqa: E402
