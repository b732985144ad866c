"""Reductions: sum, max, min, argmax, argmin; and mean (a composition).

The public functions normalise ``axis`` to a sorted tuple of non-negative
axes, so every rule sees one form.  Ties in max/min share the cotangent
equally among the tied elements (JAX's and PyTorch's convention).
"""

from __future__ import annotations

import math

import numpy as np

from autodiff._core import Primitive
from autodiff._tracer import register_numpy
from autodiff.rules._helpers import move_to_front, ndim_of, normalize_axes, shape_of

__all__ = ["amax", "amin", "argmax", "argmin", "max", "mean", "min", "sum"]


def _reduction_batch(prim):
    """Reduce the same logical axes; the batch axis shifts left past reduced ones."""

    def batch(args, dims, *, axis, keepdims):
        d = dims[0]
        physical = tuple(a + (a >= d) for a in axis)
        out_dim = d if keepdims else d - len([a for a in axis if a < d])
        return prim.bind(args[0], axis=physical, keepdims=keepdims), out_dim

    return batch


def _expand_reduced(x, axis, keepdims):
    """Undo the removal of reduced axes (so ``x`` broadcasts against the input)."""
    return x if keepdims else _shp.expand_dims(x, axis)


def _check_supported(name, out=None, initial=None, where=None):
    for kw, value in (("out", out), ("initial", initial), ("where", where)):
        if value is not None:
            raise NotImplementedError(f"{name}(..., {kw}=...) is not supported on traced values")


# --- sum ------------------------------------------------------------------------------

sum_p = Primitive(
    "sum",
    lambda x, *, axis, keepdims: np.sum(x, axis=axis, keepdims=keepdims),
    vjp=[
        lambda ct, ans, x, *, axis, keepdims: _shp.broadcast_to(
            _expand_reduced(ct, axis, keepdims), shape_of(x)
        )
    ],
    jvp=[lambda t, ans, x, *, axis, keepdims: sum_p.bind(t, axis=axis, keepdims=keepdims)],
)
sum_p.def_batch(_reduction_batch(sum_p))


@register_numpy(np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.sum over ``axis`` (None, int or tuple; negatives allowed)."""
    _check_supported("sum", out, initial, where)
    if dtype is not None:
        a = _elt.astype(a, dtype)
    axis = normalize_axes(axis, ndim_of(a))
    return sum_p.bind(a, axis=axis, keepdims=bool(keepdims)) if axis or keepdims else a


@register_numpy(np.mean)
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=None):
    """Like numpy.mean: the sum over ``axis`` divided by the number of elements."""
    _check_supported("mean", out, None, where)
    shape = shape_of(a)
    axis = normalize_axes(axis, len(shape))
    count = math.prod(shape[i] for i in axis)
    return sum(a, axis, dtype=dtype, keepdims=keepdims) / count


# --- max and min ----------------------------------------------------------------------


def _tie_weights(x, ans, axis, keepdims):
    """1/k at each of the k positions attaining the extreme, 0 elsewhere."""
    hit = _elt.astype(_elt.equal(x, _expand_reduced(ans, axis, keepdims)), x.dtype)
    return hit / sum(hit, axis, keepdims=True)


def _chooser(name, impl):
    prim = Primitive(
        name,
        impl,
        vjp=[
            lambda ct, ans, x, *, axis, keepdims: (
                _expand_reduced(ct, axis, keepdims) * _tie_weights(x, ans, axis, keepdims)
            )
        ],
        jvp=[
            lambda t, ans, x, *, axis, keepdims: sum(
                t * _tie_weights(x, ans, axis, keepdims), axis, keepdims=keepdims
            )
        ],
    )
    prim.def_batch(_reduction_batch(prim))
    return prim


max_p = _chooser("max", lambda x, *, axis, keepdims: np.max(x, axis=axis, keepdims=keepdims))
min_p = _chooser("min", lambda x, *, axis, keepdims: np.min(x, axis=axis, keepdims=keepdims))


@register_numpy(np.max, np.amax)
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.max; tied maxima share the derivative equally."""
    _check_supported("max", out, initial, where)
    return max_p.bind(a, axis=normalize_axes(axis, ndim_of(a)), keepdims=bool(keepdims))


@register_numpy(np.min, np.amin)
def min(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.min; tied minima share the derivative equally."""
    _check_supported("min", out, initial, where)
    return min_p.bind(a, axis=normalize_axes(axis, ndim_of(a)), keepdims=bool(keepdims))


amax, amin = max, min


# --- argmax and argmin (not differentiable) -------------------------------------------


def _arg_batch(prim):
    def batch(args, dims, *, axis, keepdims):
        x, d = args[0], dims[0]
        if axis is None:  # over all logical axes: flatten each example
            x = move_to_front(x, d)
            shape = shape_of(x)
            flat = _shp.reshape(x, (shape[0], math.prod(shape[1:])))  # no -1: B may be 0
            out = prim.bind(flat, axis=1, keepdims=False)
            if keepdims:
                out = _shp.reshape(out, (shape[0],) + (1,) * (len(shape) - 1))
            return out, 0
        out_dim = d if keepdims or axis >= d else d - 1
        return prim.bind(x, axis=axis + (axis >= d), keepdims=keepdims), out_dim

    return batch


argmax_p = Primitive(
    "argmax",
    lambda x, *, axis, keepdims: np.argmax(x, axis=axis, keepdims=keepdims),
    differentiable=False,
)
argmax_p.def_batch(_arg_batch(argmax_p))
argmin_p = Primitive(
    "argmin",
    lambda x, *, axis, keepdims: np.argmin(x, axis=axis, keepdims=keepdims),
    differentiable=False,
)
argmin_p.def_batch(_arg_batch(argmin_p))


def _arg_axis(a, axis):
    return None if axis is None else normalize_axes(axis, ndim_of(a))[0]


@register_numpy(np.argmax)
def argmax(a, axis=None, out=None, *, keepdims=False):
    """Like numpy.argmax (not differentiable; batchable)."""
    _check_supported("argmax", out)
    return argmax_p.bind(a, axis=_arg_axis(a, axis), keepdims=bool(keepdims))


@register_numpy(np.argmin)
def argmin(a, axis=None, out=None, *, keepdims=False):
    """Like numpy.argmin (not differentiable; batchable)."""
    _check_supported("argmin", out)
    return argmin_p.bind(a, axis=_arg_axis(a, axis), keepdims=bool(keepdims))


# Rules here call shape and elementwise primitives, which import these helpers.
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
