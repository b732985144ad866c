"""Reductions and scans: sum, prod, max, min, cumsum, all, any, argmax, argmin.
Their compositions (mean, var, std, average, ptp, count_nonzero, trapezoid, the
nan-versions and the ufunc methods ``np.add.reduce``, ``np.maximum.accumulate``, ...)
are in ``autodiff/numpy/_reductions.py``; ``cumprod``, which prod's rules call, in
``compositions.py``.

The public functions normalise ``axis`` to a sorted tuple of non-negative
axes, so every rule sees one form.  Ties in max/min share the cotangent
equally among the tied elements (JAX's and PyTorch's convention).  The
derivatives of prod and cumprod are exact also where entries are 0 (no
division by the entries).
"""

from __future__ import annotations

import math

import numpy as np

from autodiff.core.arrays import dtype_of, ndim_of, normalize_axes, shape_of
from autodiff.core.lowering import Reduction
from autodiff.core.overrides import register_numpy
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import jvp_taylor, linear_taylor
from autodiff.core.tracer import Tracer
from autodiff.rules._helpers import (
    example_dtype,
    implements,
    move_to_front,
    shaped_like,
    sparsity_kit,
)

__all__ = ["all", "amax", "amin", "any", "argmax", "argmin", "cumsum", "max", "min", "prod", "sum"]


def _reduction_batch(prim):
    """Reduce the same logical axes; the batch axis shifts left past reduced ones."""

    def batch(args, dims, *, axis, keepdims):
        d = dims[0]
        physical = tuple(a + (a >= d) for a in axis)
        out_dim = d if keepdims else d - len([a for a in axis if a < d])
        return prim.bind(args[0], axis=physical, keepdims=keepdims), out_dim

    return batch


def _expand_reduced(x, axis, keepdims):
    """Undo the removal of reduced axes (so ``x`` broadcasts against the input): none to
    undo where they were the leading ones (``axis=None``, ``axis=0``), which broadcasting
    adds back by itself."""
    if keepdims or axis == tuple(range(len(axis))):
        return x
    return _shp.expand_dims(x, axis)


def _broadcast_back(ct, x, axis, keepdims):
    """A reduction's cotangent spread back over the input's shape (a read-only view)."""
    ct = _expand_reduced(ct, axis, keepdims)
    shape = shape_of(x)
    return ct if shape_of(ct) == shape else _shp.broadcast_to_p.bind(ct, shape=shape)


def _reduced_shape(x, axis, keepdims):
    if keepdims:
        return tuple(1 if i in axis else n for i, n in enumerate(x.shape))
    return tuple(n for i, n in enumerate(x.shape) if i not in axis)


def _reduction_shape(numpy_fn):
    """The shape rule of a reduction: its dtype is NumPy's (a sum of int8 is int64)."""

    def rule(x, *, axis, keepdims):
        dtype = example_dtype(numpy_fn, x.dtype, axis=0)
        return shaped_like(x, _reduced_shape(x, axis, keepdims), dtype)

    return rule


def _check_supported(name, out=None, initial=None, where=None):
    for kw, value in (("out", out), ("initial", initial), ("where", where)):
        if value is not None:
            raise NotImplementedError(f"{name}(..., {kw}=...) is not supported on traced values")


# --- sum ------------------------------------------------------------------------------


def _reducing(ufunc, numpy_fn):
    """The implementation of the reduction ``numpy_fn``: for an ndarray, ``ufunc.reduce``,
    which ``np.sum``, ``np.max``, ... call through three Python frames of their own
    (every loss sums); other arrays (Dask, CuPy) go to ``numpy_fn``, their method."""

    def impl(x, *, axis, keepdims):
        if type(x) is np.ndarray:
            return ufunc.reduce(x, axis=axis, keepdims=keepdims)
        return numpy_fn(x, axis=axis, keepdims=keepdims)

    return impl


sum_p = Primitive(
    "sum",
    _reducing(np.add, np.sum),
    vjp=[lambda ct, ans, x, *, axis, keepdims: _broadcast_back(ct, x, axis, keepdims)],
    jvp=[lambda t, ans, x, *, axis, keepdims: sum_p.bind(t, axis=axis, keepdims=keepdims)],
    vjp_reads=[()],
)
sum_p.def_batch(_reduction_batch(sum_p))
sum_p.def_sparsity(sparsity_kit.reduction(linear=True))
sum_p.def_lowering(Reduction(np.add))  # NumPy's pairwise order, bit for bit
sum_p.def_shape(_reduction_shape(np.sum))
sum_p.def_taylor(linear_taylor(sum_p))  # linear


@implements(sum_p, np.sum)
def sum(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.sum over ``axis`` (None, int or tuple; negatives allowed)."""
    _check_supported("sum", out, initial, where)
    if dtype is not None:
        a = _elt.astype(a, dtype)
    axis = normalize_axes(axis, ndim_of(a))
    if not _reduces(a, axis, keepdims):
        return _over_no_axis(a, np.sum, dtype)
    return _in_dtype(sum_p.bind(a, axis=axis, keepdims=bool(keepdims)), dtype)


def _reduces(a, axis, keepdims):
    """Whether a sum or product over ``axis`` is a primitive: a traced value over no
    axis is not (``_over_no_axis``); a plain array goes to NumPy, whose answer is a new
    array (or, for a 0-d one, a scalar), never the argument."""
    return bool(axis) or keepdims or not isinstance(a, Tracer)


def _over_no_axis(a, reduce, dtype):
    """A traced value summed or multiplied (``reduce``: NumPy's) over no axis: itself, in
    the dtype NumPy's answer has (of int32s or bools, the default integer type; with
    ``dtype=``, ``a`` is in it already), and a 0-d one as the scalar NumPy answers
    (indexed with ``()``, so that ``jit`` answers one too)."""
    if dtype is None:
        a = _elt.astype(a, reduce(np.zeros(0, dtype_of(a))).dtype)
    return _comp.scalar_if_0d(a)


def _in_dtype(out, dtype):
    """A result computed in ``dtype`` is of ``dtype``, as NumPy's (a sum of int32s or of
    bools is of the default integer type unless ``dtype=`` says otherwise)."""
    return out if dtype is None else _elt.astype(out, dtype)


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
    prim.def_sparsity(sparsity_kit.reduction(linear=True))  # piecewise: one element's value
    return prim


max_p = _chooser("max", _reducing(np.maximum, np.max))
max_p.def_taylor(linear_taylor(max_p))  # piecewise linear
min_p = _chooser("min", _reducing(np.minimum, np.min))
max_p.def_lowering(Reduction(np.maximum))
min_p.def_lowering(Reduction(np.minimum))
max_p.def_shape(_reduction_shape(np.max))
min_p.def_shape(_reduction_shape(np.min))
min_p.def_taylor(linear_taylor(min_p))  # piecewise linear


@implements(max_p, np.max, np.amax)
def max(a, axis=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.max; tied maxima share the derivative equally."""
    _check_supported("max", out, initial, where)
    return max_p.bind(a, axis=normalize_axes(axis, ndim_of(a)), keepdims=bool(keepdims))


@implements(min_p, np.min, np.amin)
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


def _arg_shape(x, *, axis, keepdims):
    if axis is not None:
        return shaped_like(x, _reduced_shape(x, (axis,), keepdims), np.intp)
    return shaped_like(x, (1,) * x.ndim if keepdims else (), np.intp)


argmax_p.def_shape(_arg_shape)
argmin_p.def_shape(_arg_shape)


def _arg_axis(a, axis):
    return None if axis is None else normalize_axes(axis, ndim_of(a))[0]


@implements(argmax_p, np.argmax)
def argmax(a, axis=None, out=None, *, keepdims=False):
    """Like numpy.argmax (not differentiable; batchable)."""
    _check_supported("argmax", out)
    return argmax_p.bind(a, axis=_arg_axis(a, axis), keepdims=bool(keepdims))


@implements(argmin_p, np.argmin)
def argmin(a, axis=None, out=None, *, keepdims=False):
    """Like numpy.argmin (not differentiable; batchable)."""
    _check_supported("argmin", out)
    return argmin_p.bind(a, axis=_arg_axis(a, axis), keepdims=bool(keepdims))


# --- prod ---------------------------------------------------------------------------------


def _prod_of_others(x, axis):
    """For each entry, the product of the other entries of its reduced group,
    from exclusive running products (exact where entries are 0)."""
    shape = shape_of(x)
    kept = [i for i in range(len(shape)) if i not in axis]
    perm = (*kept, *axis)
    group = math.prod(shape[i] for i in axis)
    flat = _shp.reshape(_shp.transpose(x, perm), (*tuple(shape[i] for i in kept), group))
    before = _exclusive_cumprod(flat)
    after = _comp.flip(_exclusive_cumprod(_comp.flip(flat, -1)), -1)
    others = _shp.reshape(before * after, tuple(shape[i] for i in perm))
    return _shp.transpose(others, tuple(int(i) for i in np.argsort(perm)))


def _exclusive_cumprod(x):
    """Products of the entries before each one along the last axis (1 for the first)."""
    ones = _cre.ones_like(x[..., :1])
    return _shp.concatenate([ones, _comp.cumprod(x[..., :-1], axis=-1)], axis=-1)


prod_p = Primitive(
    "prod",
    lambda x, *, axis, keepdims: np.prod(x, axis=axis, keepdims=keepdims),
    vjp=[
        lambda ct, ans, x, *, axis, keepdims: (
            _expand_reduced(ct, axis, keepdims) * _prod_of_others(x, axis)
        )
    ],
    jvp=[
        lambda t, ans, x, *, axis, keepdims: sum(
            t * _prod_of_others(x, axis), axis, keepdims=keepdims
        )
    ],
)
prod_p.def_batch(_reduction_batch(prod_p))
prod_p.def_sparsity(sparsity_kit.reduction(linear=False))
prod_p.def_shape(_reduction_shape(np.prod))
prod_p.def_taylor(jvp_taylor(prod_p))  # from its JVP rule (exact)


@implements(prod_p, np.prod)
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=None, where=None):
    """Like numpy.prod; exact derivatives also where entries are 0.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> autodiff.grad(anp.prod)(np.array([2.0, 0.0, 5.0]))
    array([ 0., 10.,  0.])
    """
    _check_supported("prod", out, initial, where)
    if dtype is not None:
        a = _elt.astype(a, dtype)
    axis = normalize_axes(axis, ndim_of(a))
    if not _reduces(a, axis, keepdims):
        return _over_no_axis(a, np.prod, dtype)
    return _in_dtype(prod_p.bind(a, axis=axis, keepdims=bool(keepdims)), dtype)


# --- cumsum ----------------------------------------------------------------------------------


def _scan_batch(prim):
    def batch(args, dims, *, axis):
        d = dims[0]
        return prim.bind(args[0], axis=axis + (axis >= d)), d

    return batch


cumsum_p = Primitive(
    "cumsum",
    lambda x, *, axis: np.cumsum(x, axis=axis),
    # The transpose of a running sum is a running sum from the other end.
    vjp=[
        lambda ct, ans, x, *, axis: _comp.flip(cumsum_p.bind(_comp.flip(ct, axis), axis=axis), axis)
    ],
    jvp=[lambda t, ans, x, *, axis: cumsum_p.bind(t, axis=axis)],
)
cumsum_p.def_batch(_scan_batch(cumsum_p))
cumsum_p.def_sparsity(sparsity_kit.plain("running"))
cumsum_p.def_shape(
    lambda x, *, axis: shaped_like(x, dtype=example_dtype(np.cumsum, x.dtype, axis=0))
)
cumsum_p.def_taylor(linear_taylor(cumsum_p))  # linear


def _scan_axis(a, axis):
    """Flatten for axis=None (as NumPy does), then a non-negative axis."""
    if axis is None:
        return _comp.ravel(a), 0
    return a, normalize_axes(axis, ndim_of(a))[0]


@implements(cumsum_p, np.cumsum)
def cumsum(a, axis=None, dtype=None, out=None):
    """Like numpy.cumsum (``axis=None`` flattens first).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.cumsum(np.array([1.0, 2.0, 3.0]))
    array([1., 3., 6.])
    """
    _check_supported("cumsum", out)
    if dtype is not None:
        a = _elt.astype(a, dtype)
    a, axis = _scan_axis(a, axis)
    return _in_dtype(cumsum_p.bind(a, axis=axis), dtype)


# --- all and any (not differentiable) ------------------------------------------------------------


def _logical_reduction(name, impl):
    prim = Primitive(
        name,
        lambda x, *, axis, keepdims: impl(x, axis=axis, keepdims=keepdims),
        differentiable=False,
    )
    prim.def_batch(_reduction_batch(prim))

    def public(a, axis=None, out=None, keepdims=False, *, where=None):
        _check_supported(name, out, None, where)
        return prim.bind(a, axis=normalize_axes(axis, ndim_of(a)), keepdims=bool(keepdims))

    public.__name__ = public.__qualname__ = name
    public.__doc__ = f"Like numpy.{name} over ``axis`` (not differentiable; batchable)."
    public.primitive = prim  # type: ignore[attr-defined]
    return prim, register_numpy(impl)(public)


all_p, all = _logical_reduction("all", np.all)
any_p, any = _logical_reduction("any", np.any)
all_p.def_lowering(Reduction(np.logical_and))
any_p.def_lowering(Reduction(np.logical_or))
all_p.def_shape(_reduction_shape(np.all))
any_p.def_shape(_reduction_shape(np.any))


# Rules here call shape and elementwise primitives, which import these helpers.
from autodiff.rules import compositions as _comp  # noqa: E402
from autodiff.rules import creation as _cre  # noqa: E402
from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
