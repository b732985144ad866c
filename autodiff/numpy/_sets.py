"""Sets: ``unique`` and its array-API spellings, ``union1d``, ``intersect1d``,
``setdiff1d``, ``setxor1d`` (compositions; ``isin`` is a primitive of
``autodiff/rules/sets.py``).

Every set function here is one idea: sort the flattened input (stably, so equal values
keep their order and the first occurrence comes first), flag the entries to keep (the
first of each run of equal values, and for two sets whether the value is in the other
one), and gather them.  The gathered values are entries of the input, so derivatives
flow through the gather to the *first occurrence* of each value (JAX's convention).

How many entries are kept depends on the values.  Under ``grad`` and ``jvp`` those are
concrete, and the flags are read.  Under ``vmap`` they differ from example to example:
JAX's ``size=k`` keeps the first k (or pads with ``fill_value``, by default the
smallest value kept), with no concrete flags, so it batches.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from autodiff.core.arrays import array_like, ndim_of, normalize_axes, shape_of
from autodiff.core.overrides import register_numpy
from autodiff.numpy import _indexing
from autodiff.rules import compositions as _comp
from autodiff.rules import elementwise as _elt
from autodiff.rules import indexing as _idx
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules import sorting as _srt
from autodiff.rules.sets import isin

__all__ = [
    "unique", "unique_all", "unique_counts", "unique_inverse", "unique_values", "union1d",
    "intersect1d", "setdiff1d", "setxor1d",
]  # fmt: skip


# --- the one idea: sorted runs, flags, a gather -----------------------------------------------


class _Runs(NamedTuple):
    """A flattened array sorted stably: ``values = flat[order]``; ``first`` flags the
    first entry of each run of equal values (NaNs form one run if ``equal_nan``)."""

    values: Any
    order: Any
    first: Any


def _runs(x: Any, equal_nan: bool) -> _Runs:
    flat = _comp.ravel(_idx.operand(x))
    order = _srt.argsort(flat, stable=True)
    values = _comp.take(flat, order)
    if not shape_of(flat)[0]:
        return _Runs(values, order, _elt.not_equal(values, values))
    after, before = values[1:], values[:-1]
    differs = _elt.not_equal(after, before)
    if equal_nan and values.dtype.kind in "fc":
        differs = _elt.logical_and(
            differs, _elt.logical_not(_elt.logical_and(_elt.isnan(after), _elt.isnan(before)))
        )
    head = np.ones(1, bool, like=array_like(values))
    return _Runs(values, order, _shp.concatenate([head, differs]))


def _kept(flags: Any, size: int | None, name: str) -> tuple[Any, Any]:
    """Positions of the flagged entries, and which are real (None: all of them): every
    one, from the concrete flags, or JAX's first ``size`` (padded), which batches."""
    if size is None:
        concrete = _idx.concrete_for_shape(flags, name, _indexing.SIZE_HINT.format(name=name))
        return np.flatnonzero(concrete), None
    return _indexing.first_true(flags, size)


def _count(x: Any) -> int:
    return math.prod(shape_of(x))


def _gathered(runs: _Runs, positions: Any, valid: Any, fill_value: Any) -> Any:
    """The kept values; padded entries are ``fill_value`` (default: the smallest value
    kept, which padded positions already point at; JAX's default for ``unique``)."""
    values = _comp.take(runs.values, positions)
    if valid is None or fill_value is None:
        return values
    return _elt.where(valid, values, _indexing.constant_in(fill_value, values.dtype))


def _empty_input(x: Any, size: int | None, fill_value: Any, name: str) -> Any:
    """The values of a set function of empty input: none, or ``size`` fill values."""
    flat = _comp.ravel(_idx.operand(x))
    if not size:
        return flat
    if fill_value is None:
        raise ValueError(f"{name}: for empty input with a nonzero size, give fill_value")
    return _elt.astype(_shp.pad(flat, ((0, size),)) + fill_value, flat.dtype)


# --- unique ----------------------------------------------------------------------------------


def _unique(ar, size, fill_value, *, index, inverse, counts, equal_nan, name):
    """values, then indices / inverse / counts as asked (``unique`` along no axis)."""
    n = _count(ar)
    if n == 0:
        empty = _empty_input(ar, size and _indexing.size_param(size), fill_value, name)
        ints = np.zeros(shape_of(empty), np.intp)
        return [empty] + [ints] * (index + counts) + [np.zeros(shape_of(ar), np.intp)] * inverse
    runs = _runs(ar, equal_nan)
    positions, valid = _kept(runs.first, size, name)
    out = [_gathered(runs, positions, valid, fill_value)]
    if index:
        out.append(_comp.take(runs.order, positions))
    if inverse:  # each entry's run number, put back where the entry came from
        rank = _red.cumsum(_elt.astype(runs.first, np.intp)) - 1
        out.insert(
            1 + index, _shp.reshape(_comp.take(rank, _srt.argsort(runs.order)), shape_of(ar))
        )
    if counts:  # the distance from each run's start to the next one's (or the end)
        if size is None:
            out.append(np.diff(np.append(positions, n)))
        else:
            starts, real = _indexing.first_true(runs.first, _indexing.size_param(size) + 1)
            ends = _elt.where(real[1:], starts[1:], n)
            out.append(_elt.where(real[:-1], ends - starts[:-1], 0))
    return out


@register_numpy(np.unique)
def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True, size=None, fill_value=None):  # fmt: skip
    """Like numpy.unique: the sorted distinct values (and, as asked, the index of each
    one's first occurrence, every entry's index among them, and their counts).  The
    values carry the derivatives of their first occurrences.  JAX's ``size=k`` (no
    ``axis``) gives k values, padded with ``fill_value`` (default: the smallest),
    and batches under vmap.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.unique(np.array([3.0, 1.0, 3.0]), return_counts=True)
    (array([1., 3.]), array([1, 2]))
    >>> anp.unique(np.array([3.0, 1.0, 3.0]), size=3, fill_value=0.0)
    array([1., 3., 0.])
    """
    flags = dict(index=bool(return_index), inverse=bool(return_inverse),
                 counts=bool(return_counts))  # fmt: skip
    if axis is not None:
        if size is not None:
            raise NotImplementedError(
                "unique(..., axis=..., size=...) is not supported; give one of them"
            )
        out = _unique_along(ar, axis, equal_nan, **flags)
    else:
        out = _unique(ar, size, fill_value, equal_nan=equal_nan, name="unique", **flags)
    return out[0] if len(out) == 1 else tuple(out)


def _unique_along(ar, axis, equal_nan, *, index, inverse, counts):
    """Unique slices along ``axis``: NumPy finds them on the concrete value; they are
    gathered from ``ar`` at their first occurrences."""
    ar = _idx.operand(ar)
    axis = normalize_axes(axis, ndim_of(ar))[0]
    concrete = _idx.concrete_for_shape(ar, "unique(..., axis=...)")
    _, first, *rest = np.unique(concrete, True, inverse, counts, axis=axis, equal_nan=equal_nan)
    return [_comp.take(ar, first, axis=axis), *([first] if index else []), *rest]


class UniqueAllResult(NamedTuple):
    values: Any
    indices: Any
    inverse_indices: Any
    counts: Any


class UniqueCountsResult(NamedTuple):
    values: Any
    counts: Any


class UniqueInverseResult(NamedTuple):
    values: Any
    inverse_indices: Any


def _array_api_unique(x, size, fill_value, name, **flags):
    # The array API's unique functions count every NaN as distinct (equal_nan=False).
    return _unique(x, size, fill_value, equal_nan=False, name=name, **flags)


@register_numpy(np.unique_all)
def unique_all(x, /, *, size=None, fill_value=None):
    """Like numpy.unique_all: values, the index of each one's first occurrence, every
    entry's index among the values, and counts; NaNs are all distinct.  JAX's
    ``size=``/``fill_value=`` as in ``unique``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.unique_all(np.array([2.0, 1.0, 2.0])).counts
    array([1, 2])
    """
    flags = dict(index=True, inverse=True, counts=True)
    return UniqueAllResult(*_array_api_unique(x, size, fill_value, "unique_all", **flags))


@register_numpy(np.unique_counts)
def unique_counts(x, /, *, size=None, fill_value=None):
    """Like numpy.unique_counts: the values and their counts (NaNs all distinct).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.unique_counts(np.array([2.0, 1.0, 2.0])).values
    array([1., 2.])
    """
    flags = dict(index=False, inverse=False, counts=True)
    return UniqueCountsResult(*_array_api_unique(x, size, fill_value, "unique_counts", **flags))


@register_numpy(np.unique_inverse)
def unique_inverse(x, /, *, size=None, fill_value=None):
    """Like numpy.unique_inverse: the values and every entry's index among them.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.unique_inverse(np.array([2.0, 1.0, 2.0])).inverse_indices
    array([1, 0, 1])
    """
    flags = dict(index=False, inverse=True, counts=False)
    return UniqueInverseResult(*_array_api_unique(x, size, fill_value, "unique_inverse", **flags))


@register_numpy(np.unique_values)
def unique_values(x, /, *, size=None, fill_value=None):
    """Like numpy.unique_values: the distinct values, sorted (NumPy 2.3+ may give them
    in another order), NaNs all distinct.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.unique_values(np.array([2.0, 1.0, 2.0]))
    array([1., 2.])
    """
    flags = dict(index=False, inverse=False, counts=False)
    return _array_api_unique(x, size, fill_value, "unique_values", **flags)[0]


# --- two sets ------------------------------------------------------------------------------------


@register_numpy(np.union1d)
def union1d(ar1, ar2, *, size=None, fill_value=None):
    """Like numpy.union1d: the sorted values in either array (derivatives from each
    value's first occurrence in ``ar1``, then ``ar2``).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.union1d(np.array([3.0, 1.0]), np.array([1.0, 2.0]))
    array([1., 2., 3.])
    """
    both = _shp.concatenate([_comp.ravel(_idx.operand(ar1)), _comp.ravel(_idx.operand(ar2))])
    return unique(both, size=size, fill_value=fill_value)


def _kept_of(runs: _Runs, flags: Any, size, fill_value, name: str) -> tuple[Any, Any]:
    positions, valid = _kept(flags, size, name)
    return _gathered(runs, positions, valid, fill_value), positions


@register_numpy(np.intersect1d)
def intersect1d(ar1, ar2, assume_unique=False, return_indices=False, *, size=None,
                fill_value=None):  # fmt: skip
    """Like numpy.intersect1d: the sorted values in both arrays, with derivatives from
    their first occurrences in ``ar1`` (and, with ``return_indices``, the index of
    each one's first occurrence in both).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.intersect1d(np.array([3.0, 1.0, 2.0]), np.array([2.0, 3.0, 5.0]))
    array([2., 3.])
    """
    if not (_count(ar1) and _count(ar2)):
        empty = _empty_input(_idx.getitem(_comp.ravel(_idx.operand(ar1)), slice(0, 0)), size,
                             fill_value, "intersect1d")  # fmt: skip
        ints = np.zeros(shape_of(empty), np.intp)
        return (empty, ints, ints) if return_indices else empty
    runs1, runs2 = _runs(ar1, True), _runs(ar2, True)
    in_both = _elt.logical_and(runs1.first, isin(runs1.values, _idx.operand(ar2)))
    values, positions = _kept_of(runs1, in_both, size, fill_value, "intersect1d")
    if not return_indices:
        return values
    # The same values, in the same sorted order, among ar2's runs.
    in_both2 = _elt.logical_and(runs2.first, isin(runs2.values, _idx.operand(ar1)))
    positions2, _ = _kept(in_both2, size, "intersect1d")
    return values, _comp.take(runs1.order, positions), _comp.take(runs2.order, positions2)


@register_numpy(np.setdiff1d)
def setdiff1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Like numpy.setdiff1d: the sorted values of ``ar1`` that are not in ``ar2``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.setdiff1d(np.array([3.0, 1.0, 2.0]), np.array([2.0]))
    array([1., 3.])
    """
    if not _count(ar1):
        return _empty_input(ar1, size, fill_value, "setdiff1d")
    runs = _runs(ar1, True)
    only = _elt.logical_and(runs.first, isin(runs.values, _idx.operand(ar2), invert=True))
    return _kept_of(runs, only, size, fill_value, "setdiff1d")[0]


def _member(values: Any, of: Any) -> Any:
    """isin, with NaN a member of a set holding one (NumPy's setxor1d counts NaNs as one
    value, in one set or both)."""
    found = isin(values, of)
    if values.dtype.kind not in "fc":
        return found
    has_nan = _red.any(_elt.isnan(of))
    return _elt.logical_or(found, _elt.logical_and(_elt.isnan(values), has_nan))


@register_numpy(np.setxor1d)
def setxor1d(ar1, ar2, assume_unique=False, *, size=None, fill_value=None):
    """Like numpy.setxor1d: the sorted values in exactly one of the arrays.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.setxor1d(np.array([3.0, 1.0]), np.array([1.0, 2.0]))
    array([2., 3.])
    """
    a, b = _comp.ravel(_idx.operand(ar1)), _comp.ravel(_idx.operand(ar2))
    both = _shp.concatenate([a, b])
    if not _count(both):
        return _empty_input(both, size, fill_value, "setxor1d")
    runs = _runs(both, True)
    one = _elt.logical_and(
        runs.first, _elt.not_equal(_member(runs.values, a), _member(runs.values, b))
    )
    return _kept_of(runs, one, size, fill_value, "setxor1d")[0]
