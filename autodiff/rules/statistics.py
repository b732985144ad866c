"""Counting into bins: ``bincount``, the one primitive of NumPy's statistics.

``bincount`` has a static number of bins (entries outside ``[0, length)`` are
dropped, as in JAX) and two forms: counts (not differentiable) and sums of weights
(linear in the weights: the VJP gathers the cotangent at each entry's bin).  The
order statistics, covariances and histograms are compositions
(``autodiff/numpy/_statistics.py``); the histograms count with this primitive.

Values are read (to size an output) only where reading them is free: NumPy arrays,
also under ``grad`` and ``jvp``.  Under ``vmap``, or for other array libraries, an
output size that depends on values needs ``bincount(length=...)``.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from autodiff.core.arrays import (
    array_like,
    batch_size_of,
    dtype_of,
    is_complex,
    ndim_of,
    shape_of,
)
from autodiff.core.index_sets import ALL, Groups, Sparsity
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import linear_taylor
from autodiff.core.tracer import Tracer
from autodiff.errors import ConcretizationError
from autodiff.rules import compositions as _comp
from autodiff.rules import elementwise as _elt
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import bring_to_front, implements, known_values
from autodiff.rules._sparsity import is_known

__all__ = ["bincount"]


def _as_array(x: Any) -> Any:
    """Arrays (of any library) and traced values as they are; lists and numbers as arrays."""
    return x if hasattr(x, "shape") and hasattr(x, "dtype") else _comp.asarray(x)


def _bins_like(x: Any, ref: Any, length: int) -> Any:
    """``x``, NumPy's bin numbers, as an array of ``ref``'s library when that is another
    library: an ``arange`` of it indexed by ``x`` (every library takes NumPy index
    arrays), entries outside ``[0, length)`` sent to the dropped bin ``length``."""
    like = array_like(ref)
    if like is None or isinstance(x, Tracer) or array_like(x) is not None:
        return x
    return np.arange(length + 1, like=like)[np.where((x >= 0) & (x < length), x, length)]


# --- bincount (a primitive, in two forms) ------------------------------------------------


def _bincount_impl(x, *weights, length):
    # Entries outside [0, length) go to one extra bin, which is cut off.
    kept = np.where((x >= 0) & (x < length), x, length)
    out = np.bincount(kept, *weights, minlength=length + 1)[:length]
    return out.astype(weights[0].dtype, copy=False) if weights else out


def _bincount_batch(prim):
    """Each example's bins shifted past the previous examples': one flat bincount."""

    def batch(args, dims, *, length):
        size = batch_size_of(args, dims)
        x, *weights = (bring_to_front(a, d, size) for a, d in zip(args, dims))
        shift = _shp.reshape(np.arange(size, like=array_like(x)) * length, (size, 1))
        inside = _elt.logical_and(_elt.greater_equal(x, 0), _elt.less(x, length))
        flat = _comp.ravel(_elt.where(inside, x + shift, -1))  # -1 stays dropped
        out = prim.bind(flat, *(_comp.ravel(w) for w in weights), length=size * length)
        return _shp.reshape(out, (size, length)), 0

    return batch


def _bincount_vjp_weights(ct, ans, x, w, *, length):
    """Each entry's weight went to its bin: the cotangent of that bin (0 if dropped)."""
    inside = _elt.logical_and(_elt.greater_equal(x, 0), _elt.less(x, length))
    return _elt.where(inside, _comp.take(ct, _elt.where(inside, x, 0)), 0)


bincount_p = Primitive("bincount", _bincount_impl, differentiable=False)
bincount_p.def_batch(_bincount_batch(bincount_p))
weighted_bincount_p = Primitive(
    "weighted_bincount",
    _bincount_impl,
    vjp=[None, _bincount_vjp_weights],
    jvp=[None, lambda t, ans, x, w, *, length: weighted_bincount_p.bind(x, t, length=length)],
    vjp_reads=[(), (0,)],
)
weighted_bincount_p.def_batch(_bincount_batch(weighted_bincount_p))


@weighted_bincount_p.def_sparsity
def _weighted_bincount_sparsity(x, w, *, length):
    # Each weight reaches the one bin its index names (none outside [0, length)); linear.
    # An index known only when the program runs (traced) may name any bin.
    if not is_known(x):
        return Sparsity([None, ALL])
    bins = np.asarray(x).ravel()
    inside = np.where((bins >= 0) & (bins < length), bins, -1)
    return Sparsity([None, Groups(inside, np.arange(length), n_groups=length)])


weighted_bincount_p.def_taylor(linear_taylor(weighted_bincount_p))  # linear in the weights


@implements(bincount_p, np.bincount)
def bincount(x, weights=None, minlength=0, *, length=None):
    """Like numpy.bincount: how often each value occurs in ``x`` (non-negative ints),
    or the sum of ``weights`` per value; differentiable in ``weights``.

    The output's length, ``max(x) + 1`` (at least ``minlength``), depends on ``x``'s
    values: under ``vmap`` over ``x`` pass ``length=`` (as in JAX), and entries
    outside ``[0, length)`` are dropped.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> anp.bincount(np.array([0, 2, 2]))
    array([1, 0, 2])
    >>> x = np.array([0, 2, 2])
    >>> autodiff.grad(lambda w: anp.bincount(x, w)[2])(np.array([1.0, 2.0, 3.0]))
    array([0., 1., 1.])
    """
    x = _as_array(x)
    if ndim_of(x) != 1:
        raise ValueError(f"bincount: x must be 1-D, got shape {shape_of(x)}")
    if dtype_of(x).kind not in "iub":
        raise TypeError(f"bincount: x must hold non-negative integers, got dtype {dtype_of(x)}")
    if operator.index(minlength) < 0:
        raise ValueError("'minlength' must not be negative")
    known = known_values(x)
    if known is not None and known.size and known.min() < 0:
        raise ValueError("'list' argument must have no negative elements")
    if length is None:
        if known is None:
            raise ConcretizationError(
                "bincount: the number of bins, max(x) + 1, depends on x's values, which "
                "are not known here (x is batched by vmap, or an array of another library). "
                "Pass length= (the number of bins, as in JAX; larger entries are dropped)."
            )
        length = max(int(minlength), int(known.max()) + 1 if known.size else 0)
    elif operator.index(length) < 0:
        raise ValueError(f"bincount: length must not be negative, got {length}")
    if weights is None:
        return bincount_p.bind(x, length=int(length))
    weights = _as_array(weights)
    x = _bins_like(x, weights, int(length))
    if shape_of(weights) != shape_of(x):
        raise ValueError("The weights and list don't have the same length.")
    if is_complex(weights):
        raise TypeError("bincount: weights must be real (NumPy sums them as float64)")
    # NumPy sums in float64 whatever the weights' precision.
    return weighted_bincount_p.bind(x, _elt.astype(weights, np.float64), length=int(length))


# Rules here call shape, indexing and elementwise primitives, which import these helpers.
