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
import operator
from typing import Any

import numpy as np

from autodiff.core.arrays import array_like, ndim_of, normalize_axes, shape_of
from autodiff.core.lowering import Emitter, NotLowered, View
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import linear_taylor
from autodiff.core.tracer import Tracer, register_numpy
from autodiff.rules._helpers import (
    bring_to_front,
    implements,
    move_to_front,
    numpy_impl,
    to_front_padded,
    unbroadcast,
)
from autodiff.rules._sparsity import moves

__all__ = [
    "array_split", "atleast_1d", "atleast_2d", "atleast_3d", "broadcast_arrays",
    "broadcast_to", "column_stack", "concatenate", "diag", "diagflat", "diagonal", "dstack",
    "expand_dims", "flip", "fliplr", "flipud", "hstack", "moveaxis", "ndim", "pad", "ravel",
    "repeat", "reshape", "roll", "rollaxis", "rot90", "shape", "size", "split", "squeeze",
    "stack", "swapaxes", "tile", "trace", "transpose", "tril", "triu", "vstack",
    "dsplit", "hsplit", "vsplit", "block", "append", "insert", "delete", "resize",
    "diff", "ediff1d", "gradient",
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
reshape_p.def_sparsity(moves(reshape_p.impl))


reshape_p.def_lowering(View())  # a view, as NumPy's (a copy first where NumPy copies)


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
transpose_p.def_sparsity(moves(transpose_p.impl))


transpose_p.def_lowering(View())


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
broadcast_to_p.def_sparsity(moves(broadcast_to_p.impl))


broadcast_to_p.def_lowering(View())


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
expand_dims_p.def_sparsity(moves(expand_dims_p.impl))
expand_dims_p.def_lowering(View())


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
squeeze_p.def_sparsity(moves(squeeze_p.impl))
squeeze_p.def_lowering(View())


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
concatenate_p.def_sparsity(moves(concatenate_p.impl, data=None))


def _joining_lowering(parts):
    """concatenate's and stack's lowering: each operand copied into its part of a new
    array (``parts(in_avals, axis)``: the static indices of the parts)."""

    def lowering(ctx, *xs, axis):
        out = ctx.empty(ctx.out_avals[0])
        for x, index in zip(xs, parts(ctx.in_avals, axis), strict=True):
            ctx.copy_into(ctx.view(out, lambda a, index=index: a[index]), x)
        return out

    return Emitter(lowering)


def _concatenated_parts(avals, axis):
    start = 0
    for aval in avals:
        if aval.ndim == 0:
            raise NotLowered("concatenate of 0-d values")
        yield (slice(None),) * axis + (slice(start, start + aval.shape[axis]),)
        start += aval.shape[axis]


concatenate_p.def_lowering(_joining_lowering(_concatenated_parts))


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
        arrays = [_elt.cast(a, dtype, casting, "concatenate") for a in arrays]
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
stack_p.def_sparsity(moves(stack_p.impl, data=None))
stack_p.def_lowering(
    _joining_lowering(lambda avals, axis: [(slice(None),) * axis + (k,) for k in range(len(avals))])
)


concat = concatenate  # the array API's name


@implements(stack_p, np.stack)
def stack(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
    """Like numpy.stack: join equally shaped arrays along a new axis."""
    _check_no_out("stack", out)
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to stack")
    if dtype is not None:
        arrays = [_elt.cast(a, dtype, casting, "stack") for a in arrays]
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
pad_p.def_sparsity(moves(pad_p.impl, params=lambda **p: {**p, "constant_values": 0}))


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


def _roll_impl(x, *, shifts, axes):
    if type(x) is not np.ndarray or len(axes) != 1:
        return _numpy_roll(x, shifts, axes)
    # Along one axis: the two pieces, joined (np.roll's general loop costs 4x as much on
    # small arrays, and a fluid simulation rolls small arrays many times).
    (s,), (axis,) = shifts, axes
    n = x.shape[axis]
    cut = n - s % n if n else 0  # (the VJP rolls back: a negative shift)
    head, tail = _along(axis, x.ndim, slice(cut, None)), _along(axis, x.ndim, slice(None, cut))
    return np.concatenate((x[head], x[tail]), axis)


_numpy_roll = numpy_impl(np.roll)

# One primitive, not slices and a concatenate: its VJP is one roll back (HIPS autograd's
# rule), where the slices' VJPs were two scatters into zeros and a sum.
roll_p = Primitive(
    "roll",
    _roll_impl,
    vjp=[
        lambda ct, ans, x, *, shifts, axes: roll_p.bind(
            ct, shifts=tuple(-s for s in shifts), axes=axes
        )
    ],
    jvp=[lambda t, ans, x, *, shifts, axes: roll_p.bind(t, shifts=shifts, axes=axes)],
    batch=_roll_batch,
    vjp_reads=[()],
)
roll_p.def_sparsity(moves(_roll_impl))


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
    total = {}
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
    return _elt.where(keep, m, _cre.zeros_like(m))  # +0.0, as NumPy's, also beside NaN or inf


@register_numpy(np.tril)
def tril(m, k=0):
    """Like numpy.tril: zero the entries above diagonal ``k`` (of the last two axes)."""
    return _triangle(m, k, lower=True)


@register_numpy(np.triu)
def triu(m, k=0):
    """Like numpy.triu: zero the entries below diagonal ``k`` (of the last two axes)."""
    return _triangle(m, k, lower=False)


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
    return reshape(_idx.getitem(tile(a, repeats), slice(0, new_size)), new_shape)


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


# Taylor mode: moving elements is linear, so each coefficient moves alike (the JVP).
for _p in (reshape_p, transpose_p, broadcast_to_p, expand_dims_p, squeeze_p, concatenate_p,
           stack_p, pad_p, roll_p):  # fmt: skip
    _p.def_taylor(linear_taylor(_p))


# Slicing cotangents needs the indexing primitives, which are built on these.
from autodiff.rules import creation as _cre  # noqa: E402
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import indexing as _idx  # noqa: E402
from autodiff.rules import reductions as _red  # noqa: E402
