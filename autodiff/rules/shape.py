"""Shape primitives: reshape, transpose, broadcast_to, expand_dims, squeeze,
concatenate, stack; and the compositions moveaxis, swapaxes, ravel.

Each block: the primitive (implementation + VJP + JVP + batching rule), then
the public function, which normalises arguments (axes non-negative, shapes
resolved) so the rules only ever see canonical static parameters.  All of
these are linear, so each JVP is the primitive applied to the tangent.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from autodiff._core import Primitive
from autodiff._tracer import register_numpy
from autodiff.rules._helpers import (
    bring_to_front,
    move_to_front,
    ndim_of,
    normalize_axes,
    shape_of,
    to_front_padded,
    unbroadcast,
)

__all__ = [
    "broadcast_to",
    "concatenate",
    "expand_dims",
    "moveaxis",
    "ndim",
    "ravel",
    "reshape",
    "shape",
    "size",
    "squeeze",
    "stack",
    "swapaxes",
    "transpose",
]


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


@register_numpy(np.reshape)
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


@register_numpy(np.transpose, np.permute_dims)
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


@register_numpy(np.broadcast_to)
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


@register_numpy(np.expand_dims)
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


@register_numpy(np.squeeze)
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


@register_numpy(np.concatenate, np.concat)
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


@register_numpy(np.stack)
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
from autodiff.rules import indexing as _idx  # noqa: E402
