"""Shape primitives: reshape, transpose, broadcast_to, expand_dims, squeeze,
concatenate, stack, pad, roll.  Their compositions are in
``autodiff/numpy/_shape.py`` (rot90, tile, repeat, the *stack and *split functions,
diag, diagonal, trace, diff, insert, delete, ...), except those rules call
(moveaxis, swapaxes, ravel, flip, broadcast_arrays, tril, triu: ``compositions.py``).

Each block: the primitive (implementation and every rule), then the public function,
which normalises arguments (axes non-negative, shapes resolved) so the rules only
ever see canonical static parameters.  All of these are linear, so each JVP is the
primitive applied to the tangent.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autodiff.core.arrays import ndim_of, normalize_axes, shape_of
from autodiff.core.lowering import Emitter, NotLowered, View
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import linear_taylor
from autodiff.rules._helpers import (
    bring_to_front,
    implements,
    move_to_front,
    numpy_impl,
    shaped_like,
    sparsity_kit,
    to_front_padded,
    unbroadcast,
)

__all__ = [
    "broadcast_to", "concatenate", "expand_dims", "pad", "reshape", "roll", "squeeze", "stack",
    "transpose", "concat", "permute_dims",
]  # fmt: skip


def _axis_param(axis: Any, ndim: int) -> int:
    return normalize_axes(axis, ndim)[0]


# --- reshape -------------------------------------------------------------------


def _reshape_batch(args, dims, *, shape):
    x = move_to_front(args[0], dims[0])
    return reshape_p.bind(x, shape=(shape_of(x)[0], *shape)), 0


reshape_p = Primitive(
    "reshape",
    # (an ndarray's own method: np.reshape reaches it through Python frames of its own)
    lambda x, *, shape: x.reshape(shape) if type(x) is np.ndarray else np.reshape(x, shape),
    vjp=[lambda ct, ans, x, *, shape: reshape_p.bind(ct, shape=shape_of(x))],
    jvp=[lambda t, ans, x, *, shape: reshape_p.bind(t, shape=shape)],
    batch=_reshape_batch,
)
reshape_p.def_sparsity(sparsity_kit.moves(reshape_p.impl))
reshape_p.def_taylor(linear_taylor(reshape_p))  # moves elements: linear


reshape_p.def_lowering(View())  # a view, as NumPy's (a copy first where NumPy copies)
reshape_p.def_shape(lambda x, *, shape: shaped_like(x, shape))


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


# --- transpose (moveaxis and swapaxes are transposes) -------------------------------


def _inverse_perm(axes: tuple[int, ...]) -> tuple[int, ...]:
    inverse = [0] * len(axes)  # (in Python: NumPy's argsort of a short tuple costs 3 us)
    for i, a in enumerate(axes):
        inverse[a] = i
    return tuple(inverse)


def _transpose_batch(args, dims, *, axes):
    d = dims[0]
    return transpose_p.bind(args[0], axes=(d, *(a + (a >= d) for a in axes))), 0


transpose_p = Primitive(
    "transpose",
    lambda x, *, axes: x.transpose(axes) if type(x) is np.ndarray else np.transpose(x, axes),
    vjp=[lambda ct, ans, x, *, axes: transpose_p.bind(ct, axes=_inverse_perm(axes))],
    jvp=[lambda t, ans, x, *, axes: transpose_p.bind(t, axes=axes)],
    batch=_transpose_batch,
)
transpose_p.def_sparsity(sparsity_kit.moves(transpose_p.impl))
transpose_p.def_taylor(linear_taylor(transpose_p))  # moves elements: linear


transpose_p.def_lowering(View())
transpose_p.def_shape(lambda x, *, axes: shaped_like(x, tuple(x.shape[a] for a in axes)))


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


permute_dims = transpose  # the array API's name (axes required there)


def swap_last_two(x):
    """``x`` (at least 2-D) with its last two axes exchanged, for rules: the primitive
    itself, without ``swapaxes``' reading of its arguments (~40 K instructions, each
    gradient through a matrix product runs it)."""
    n = ndim_of(x)
    return transpose_p.bind(x, axes=(*range(n - 2), n - 1, n - 2))


# --- broadcast_to -------------------------------------------------------------------


def _broadcast_to_batch(args, dims, *, shape):
    x = to_front_padded(args[0], dims[0], len(shape) - (ndim_of(args[0]) - 1))
    return broadcast_to_p.bind(x, shape=(shape_of(x)[0], *shape)), 0


def _broadcast_to_impl(x, *, shape):
    """np.broadcast_to's read-only view; a 0-d ndarray's (a reduction's cotangent, at
    every gradient through a sum or a mean) made directly, all strides zero: NumPy's
    own goes through an iterator, ~3x the cost."""
    if type(x) is np.ndarray and not x.ndim and x.dtype.kind in "biufc" and 0 not in shape:
        view = np.ndarray(shape, x.dtype, x, 0, (0,) * len(shape))
        view.flags.writeable = False
        return view
    return np.broadcast_to(x, shape)


broadcast_to_p = Primitive(
    "broadcast_to",
    _broadcast_to_impl,
    vjp=[lambda ct, ans, x, *, shape: unbroadcast(ct, shape_of(x))],
    jvp=[lambda t, ans, x, *, shape: broadcast_to_p.bind(t, shape=shape)],
    batch=_broadcast_to_batch,
)
broadcast_to_p.def_sparsity(sparsity_kit.moves(broadcast_to_p.impl))
broadcast_to_p.def_taylor(linear_taylor(broadcast_to_p))  # moves elements: linear


broadcast_to_p.def_lowering(View())
broadcast_to_p.def_shape(lambda x, *, shape: shaped_like(x, shape))


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
expand_dims_p.def_sparsity(sparsity_kit.moves(expand_dims_p.impl))
expand_dims_p.def_lowering(View())
expand_dims_p.def_taylor(linear_taylor(expand_dims_p))  # moves elements: linear


@expand_dims_p.def_shape
def _expand_dims_shape(x, *, axis):
    shape = list(x.shape)
    for a in sorted(axis):
        shape.insert(a, 1)
    return shaped_like(x, tuple(shape))


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
squeeze_p.def_sparsity(sparsity_kit.moves(squeeze_p.impl))
squeeze_p.def_lowering(View())
squeeze_p.def_shape(
    lambda x, *, axis: shaped_like(x, tuple(n for i, n in enumerate(x.shape) if i not in axis))
)
squeeze_p.def_taylor(linear_taylor(squeeze_p))  # moves elements: linear


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
concatenate_p.def_sparsity(sparsity_kit.moves(concatenate_p.impl, data=None))
concatenate_p.def_taylor(linear_taylor(concatenate_p))  # moves elements: linear


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


def _joined(xs: tuple) -> np.dtype:
    return np.result_type(*(x.dtype for x in xs))


@concatenate_p.def_shape
def _concatenate_shape(*xs, axis):
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return shaped_like(xs[0], tuple(shape), _joined(xs))


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
        arrays, axis = [_comp.ravel(a) for a in arrays], 0
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
stack_p.def_sparsity(sparsity_kit.moves(stack_p.impl, data=None))
stack_p.def_lowering(
    _joining_lowering(lambda avals, axis: [(slice(None),) * axis + (k,) for k in range(len(avals))])
)
stack_p.def_taylor(linear_taylor(stack_p))  # moves elements: linear


@stack_p.def_shape
def _stack_shape(*xs, axis):
    shape = list(xs[0].shape)
    shape.insert(axis, len(xs))
    return shaped_like(xs[0], tuple(shape), _joined(xs))


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
pad_p.def_sparsity(sparsity_kit.moves(pad_p.impl, params=lambda **p: {**p, "constant_values": 0}))
pad_p.def_shape(
    lambda x, *, pad_width, constant_values: shaped_like(
        x, tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pad_width))
    )
)
pad_p.def_taylor(linear_taylor(pad_p))  # moves elements: linear


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


# --- roll ------------------------------------------------------------------------------------


def _along(axis, n_dims, index):
    """An index applying ``index`` along ``axis`` only."""
    return (slice(None),) * axis + (index,) + (slice(None),) * (n_dims - axis - 1)


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
roll_p.def_sparsity(sparsity_kit.moves(_roll_impl))
roll_p.def_taylor(linear_taylor(roll_p))  # moves elements: linear


@implements(roll_p, np.roll)
def roll(a, shift, axis=None):
    """Like numpy.roll: shift entries along ``axis`` cyclically (``None``: flattened).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.roll(np.array([1.0, 2.0, 3.0]), 1)
    array([3., 1., 2.])
    """
    if axis is None:
        return reshape(roll(_comp.ravel(a), shift, 0), shape_of(a))
    shape = shape_of(a)
    total = {}
    for s, ax in np.broadcast(shift, axis):  # shifts along one axis add up, as in NumPy
        ax = _axis_param(int(ax), len(shape))
        total[ax] = total.get(ax, 0) + int(s)
    kept = {ax: s % shape[ax] for ax, s in total.items() if shape[ax] and s % shape[ax]}
    if not kept:
        return a
    return roll_p.bind(a, shifts=tuple(kept.values()), axes=tuple(kept))


# Slicing cotangents needs the indexing primitives, which are built on these.
from autodiff.rules import compositions as _comp  # noqa: E402
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import indexing as _idx  # noqa: E402
