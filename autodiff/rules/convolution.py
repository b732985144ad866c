"""Convolution and windowed reductions, N-dimensional (``autodiff.lax``): JAX's
``lax.conv_general_dilated`` and ``lax.reduce_window`` (sum, max, min).

Primitives: ``conv_general_dilated`` (any number of spatial axes, strides, explicit
padding (negative pads crop), input and kernel dilation, any layout through
dimension numbers, feature and batch groups), ``reduce_window_sum``,
``reduce_window_max``, ``reduce_window_min`` (windows over every axis: strides,
padding, base and window dilation), and the pair behind the derivatives of a
windowed maximum or minimum, ``window_gather`` (each window's tangent at its chosen
element) and ``window_scatter`` (its transpose: each window's cotangent added at
that element).  The public functions here normalise their arguments (a padding
string becomes pairs, a layout string becomes dimension numbers) and check them
with messages that name the argument; ``autodiff.lax`` adds JAX's conveniences.

Derivatives (as JAX's, so results agree to rounding):

* conv is bilinear: the JVP is ``conv(dlhs, rhs) + conv(lhs, drhs)``; each VJP is a
  convolution again, of the cotangent with the flipped kernel (``lhs``) or with the
  input (``rhs``), the strides and dilations trading places and groups moving between
  features and batch; so every order and nesting of transforms works.
* a windowed sum is linear: its VJP spreads each cotangent over its window (a windowed
  sum of the padded, stride-dilated cotangent).
* a windowed max (min) passes each window's derivative to one element: the first
  maximum of the window in row-major order (JAX's ``select_and_scatter_add``), not
  shared among ties as ``anp.max`` does; padding never receives one.

Batching folds the ``vmap`` axis into the batch or feature axis of a convolution (a
batched kernel becomes a feature group per example), and adds a window axis of size 1
to a windowed reduction; no rule loops over examples.

The implementation is NumPy slicing and one matrix product: the input, padded and
dilated once into a channels-last copy, is cut into the columns of an ``im2col``
matrix by one strided slice per kernel position (or per output position, whichever
is fewer: the VJP in the kernel convolves with a window as large as the image), and
BLAS multiplies it by the kernel.  Only indexing, ``stack``, ``reshape``,
``transpose`` and ``matmul`` are used, so another array library runs it too.

Compiled (``jit``'s compiling tier), each primitive writes these same steps as compiled
code (its lowering, below each block): the same padded copy and columns, the same chunks
of examples and NumPy's own matmul loop on the same matrices with the same strides, the
windows combined in the same order; so a compiled convolution gives the implementation's
values to the bit, and JAX's to rounding (XLA sums in another order).
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.lib.stride_tricks import as_strided

from autodiff.core.arrays import array_like, dtype_of, ndim_of, shape_of
from autodiff.core.graph import ShapedArray
from autodiff.core.index_sets import Edges, Sparsity
from autodiff.core.lowering import Emitter, NotLowered
from autodiff.core.precision import check_precision
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import linear_taylor, multilinear_taylor
from autodiff.rules import compositions as _comp
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import implements, move_to_front
from autodiff.rules._sparsity import numbered, shape_of_operand

__all__ = [
    "ConvDimensionNumbers",
    "conv_dimension_numbers",
    "conv_general_dilated",
    "conv_general_permutations",
    "padtype_to_pads",
    "reduce_window_max",
    "reduce_window_min",
    "reduce_window_sum",
]


# --- the vocabulary: layouts, padding, output sizes -----------------------------------------


class ConvDimensionNumbers(NamedTuple):
    """Where the batch, feature and spatial axes are: ``lhs_spec`` lists the input's
    (batch, feature, spatial...) axes, ``rhs_spec`` the kernel's (output feature, input
    feature, spatial...), ``out_spec`` the output's (batch, feature, spatial...)."""

    lhs_spec: tuple[int, ...]
    rhs_spec: tuple[int, ...]
    out_spec: tuple[int, ...]


def conv_general_permutations(dimension_numbers: Sequence[str]) -> tuple[tuple[int, ...], ...]:
    """The axis permutations of a layout given as three strings (``('NHWC', 'HWIO',
    'NHWC')``): 'N' batch and 'C' feature of the input and output, 'O' and 'I' of the
    kernel, any other letters the spatial axes, ordered as the kernel's string orders them.

    >>> conv_general_permutations(("NHWC", "HWIO", "NHWC"))
    ((0, 3, 1, 2), (3, 2, 0, 1), (0, 3, 1, 2))
    """
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    pairs = (("N", "C"), ("O", "I"), ("N", "C"))
    for i, ((a, b), spec) in enumerate(zip(pairs, dimension_numbers)):
        if not spec.count(a) == spec.count(b) == 1:
            raise TypeError(f"conv: dimension_numbers[{i}] must contain the characters "
                            f"{a!r} and {b!r} exactly once, got {spec!r}")  # fmt: skip
        if len(spec) != len(set(spec)):
            raise TypeError(f"conv: dimension_numbers[{i}] repeats a character: {spec!r}")
    if not set(lhs_spec) - {"N", "C"} == set(rhs_spec) - {"O", "I"} == set(out_spec) - {"N", "C"}:
        raise TypeError(f"conv: the three dimension_numbers strings must name the same spatial "
                        f"axes, got {tuple(dimension_numbers)}")  # fmt: skip

    def perm(spec: str, pair: tuple[str, str]) -> tuple[int, ...]:
        spatial = sorted((i for i, c in enumerate(spec) if c not in pair),
                         key=lambda i: rhs_spec.index(spec[i]))  # fmt: skip
        return (spec.index(pair[0]), spec.index(pair[1]), *spatial)

    return tuple(perm(s, p) for s, p in zip(dimension_numbers, pairs))


def conv_dimension_numbers(lhs_shape: Sequence[int], rhs_shape: Sequence[int],
                           dimension_numbers: Any) -> ConvDimensionNumbers:  # fmt: skip
    """``dimension_numbers`` (None: ``NC...``, ``OI...``, ``NC...``; three strings; or
    a ``ConvDimensionNumbers``) as a ``ConvDimensionNumbers`` of tuples.

    >>> conv_dimension_numbers((1, 5, 5, 3), (3, 3, 3, 8), ("NHWC", "HWIO", "NHWC"))
    ConvDimensionNumbers(lhs_spec=(0, 3, 1, 2), rhs_spec=(3, 2, 0, 1), out_spec=(0, 3, 1, 2))
    """
    nd = len(lhs_shape)
    if len(rhs_shape) != nd:
        raise TypeError(f"conv: lhs and rhs must have the same number of axes, got shapes "
                        f"{tuple(lhs_shape)} and {tuple(rhs_shape)}")  # fmt: skip
    if nd < 2:
        raise TypeError(f"conv: lhs needs a batch and a feature axis at least, got shape "
                        f"{tuple(lhs_shape)}")  # fmt: skip
    if dimension_numbers is None:
        iota = tuple(range(nd))
        return ConvDimensionNumbers(iota, iota, iota)
    if isinstance(dimension_numbers, ConvDimensionNumbers):
        specs = [tuple(operator.index(a) for a in spec) for spec in dimension_numbers]
        for name, spec in zip(ConvDimensionNumbers._fields, specs):
            if sorted(spec) != list(range(nd)):
                raise TypeError(f"conv: dimension_numbers.{name} must be a permutation of "
                                f"range({nd}), got {spec}")  # fmt: skip
        return ConvDimensionNumbers(*specs)
    if not isinstance(dimension_numbers, (tuple, list)) or len(dimension_numbers) != 3 \
            or not all(isinstance(s, str) for s in dimension_numbers):  # fmt: skip
        raise TypeError(f"conv: dimension_numbers must be None, three layout strings such as "
                        f"('NHWC', 'HWIO', 'NHWC'), or a ConvDimensionNumbers, got "
                        f"{dimension_numbers!r}")  # fmt: skip
    for i, spec in enumerate(dimension_numbers):
        if len(spec) != nd:
            raise TypeError(f"conv: dimension_numbers[{i}] = {spec!r} must have one character "
                            f"per axis of lhs and rhs (shapes {tuple(lhs_shape)}, "
                            f"{tuple(rhs_shape)})")  # fmt: skip
    return ConvDimensionNumbers(*conv_general_permutations(dimension_numbers))


def padtype_to_pads(
    in_shape: Sequence[int],
    window_shape: Sequence[int],
    window_strides: Sequence[int],
    padding: str,
) -> list[tuple[int, int]]:
    """The ``(low, high)`` pads of a padding string: ``'VALID'`` none; ``'SAME'`` (and
    ``'SAME_LOWER'``) as many as make the output ``ceil(in / stride)`` long, the odd one
    at the end (at the start).

    >>> padtype_to_pads((5, 6), (3, 2), (1, 2), "SAME")
    [(1, 1), (0, 0)]
    """
    kind = padding.upper() if isinstance(padding, str) else padding
    if kind == "VALID":
        return [(0, 0)] * len(in_shape)
    if kind not in ("SAME", "SAME_LOWER"):
        raise ValueError(f"padding must be 'SAME', 'SAME_LOWER', 'VALID' or a sequence of "
                         f"(low, high) pairs, got {padding!r}")  # fmt: skip
    pads = []
    for n, k, s in zip(in_shape, window_shape, window_strides):
        total = max((-(-n // s) - 1) * s + k - n, 0)
        small, large = total // 2, total - total // 2
        pads.append((small, large) if kind == "SAME" else (large, small))
    return pads


def _dilated(n: int, d: int) -> int:
    return 0 if n == 0 else (n - 1) * d + 1


def _out_size(n: int, lo: int, hi: int, dilation: int, k: int, k_dilation: int, s: int) -> int:
    """How many windows fit: ``n`` elements dilated and padded, windows of ``k`` dilated."""
    padded = _dilated(n, dilation) + lo + hi
    return max(padded - _dilated(k, k_dilation) + s, 0) // s


def _ints(values: Any, n: int, what: str, name: str, *, positive: bool = True) -> tuple[int, ...]:
    """``values`` (None: ones) as ``n`` Python ints, checked."""
    if values is None:
        return (1,) * n
    try:
        out = tuple(operator.index(v) for v in values)
    except TypeError:
        raise TypeError(f"{name}: {what} must be a sequence of {n} integers, got {values!r}") \
            from None  # fmt: skip
    if len(out) != n:
        raise ValueError(f"{name}: {what} must have {n} entries (one per spatial axis), got "
                         f"{values!r}")  # fmt: skip
    if positive and any(v < 1 for v in out):
        raise ValueError(f"{name}: {what} must be positive, got {values!r}")
    return out


def _pairs(padding: Any, n: int, name: str) -> tuple[tuple[int, int], ...]:
    try:
        pads = tuple((operator.index(lo), operator.index(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name}: padding must be 'SAME', 'SAME_LOWER', 'VALID' or a sequence of {n} "
            f"(low, high) integer pairs, got {padding!r}"
        ) from None
    if len(pads) != n:
        raise ValueError(f"{name}: padding must have {n} (low, high) pairs (one per spatial "
                         f"axis), got {len(pads)}: {padding!r}")  # fmt: skip
    return pads


# --- the implementation's kit: pad once, cut windows by slicing -------------------------------


def _placement(shape: Sequence[int], dilation, padding, axes: Sequence[int]):
    """Where ``x`` of ``shape`` lands when ``axes`` are dilated and padded: the padded shape,
    the index of its elements there and which of them land (a negative pad crops), or
    None where none does."""
    out, index, source = list(shape), [slice(None)] * len(shape), [slice(None)] * len(shape)
    landed = True
    for a, d, (lo, hi) in zip(axes, dilation, padding):
        n = shape[a]
        out[a] = max(_dilated(n, d) + lo + hi, 0)
        start = (-lo + d - 1) // d if lo < 0 else 0  # the first element inside
        stop = min(n, (out[a] - 1 - lo) // d + 1) if out[a] else 0  # one past the last
        landed = landed and stop > start
        index[a] = slice(lo + start * d, lo + (stop - 1) * d + 1, d)
        source[a] = slice(start, stop)
    return tuple(out), (tuple(index), tuple(source)) if landed else None


def _padded(x, fill, dilation, padding, axes: Sequence[int], order=None):
    """``x`` with each of ``axes`` dilated (``fill`` between elements) and padded (``fill``
    outside; a negative pad crops), its axes then permuted by ``order``: one copy (none
    where nothing changes)."""
    if order is not None:
        x = np.transpose(x, order)
        axes = [list(order).index(a) for a in axes]
    shape, where = _placement(x.shape, dilation, padding, axes)
    if where is not None and shape == x.shape:
        return x
    out = np.full(shape, fill, dtype=x.dtype, like=array_like(x))
    if where is not None:
        out[where[0]] = x[where[1]]
    return out


def _unpadded(y, shape, dilation, padding, axes: Sequence[int]):
    """The elements of ``y`` (padded and dilated) that came from an array of ``shape``: the
    transpose of ``_padded`` (zeros where a negative pad cropped)."""
    padded, where = _placement(shape, dilation, padding, axes)
    if where is not None and padded == tuple(shape):
        return y
    out = np.zeros(shape, dtype=y.dtype, like=array_like(y))
    if where is not None:
        out[where[1]] = y[where[0]]
    return out


def _cut(x, first: int, out: Sequence[int], window: Sequence[int], dilation: Sequence[int],
         strides: Sequence[int]) -> tuple[bool, list]:  # fmt: skip
    """The windows of ``x`` along its axes ``first, first + 1, ...`` as strided slices:
    one per window position (each of the ``out`` shape, windows at ``strides``), or, where
    windows are fewer than their positions, one per window (each of the ``window`` shape,
    its positions ``dilation`` apart).  Returns ``(by_position, pieces)``."""
    lead = (slice(None),) * first
    if math.prod(window) <= math.prod(out):
        return True, [x[lead + tuple(slice(k * r, k * r + (o - 1) * s + 1, s)
                                      for k, r, o, s in zip(at, dilation, out, strides))]
                       for at in np.ndindex(*window)]  # fmt: skip
    return False, [x[lead + tuple(slice(p * s, p * s + (k - 1) * r + 1, r)
                                   for p, k, r, s in zip(at, window, dilation, strides))]
                    for at in np.ndindex(*out)]  # fmt: skip


def _columns(x, first: int, out: Sequence[int], window: Sequence[int], dilation: Sequence[int],
             strides: Sequence[int]):  # fmt: skip
    """``im2col``: the windows of ``x`` along the ``len(window)`` axes from ``first`` on,
    shape ``lead + out + (window size,) + trail``."""
    d = len(window)
    lead, trail = tuple(x.shape[:first]), tuple(x.shape[first + d :])
    by_position, pieces = _cut(x, first, out, window, dilation, strides)
    if by_position:
        return np.stack(pieces, axis=first + d)
    cols = np.stack(pieces, axis=first)  # lead + (positions,) + window + trail: one copy
    return np.reshape(cols, (*lead, *out, math.prod(window), *trail))


# --- conv_general_dilated -------------------------------------------------------------------


def _spatial(shape: Sequence[int], spec: Sequence[int]) -> list[int]:
    return [shape[a] for a in spec[2:]]


def _conv_out_shape(lhs_shape, rhs_shape, *, window_strides, padding, lhs_dilation,
                    rhs_dilation, dimension_numbers, feature_group_count,
                    batch_group_count) -> tuple[int, ...]:  # fmt: skip
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    sizes = [_out_size(n, lo, hi, ld, k, rd, s) for n, (lo, hi), ld, k, rd, s in zip(
        _spatial(lhs_shape, lhs_spec), padding, lhs_dilation, _spatial(rhs_shape, rhs_spec),
        rhs_dilation, window_strides)]  # fmt: skip
    logical = [lhs_shape[lhs_spec[0]] // batch_group_count, rhs_shape[rhs_spec[0]], *sizes]
    out = [0] * len(logical)
    for j, axis in enumerate(out_spec):
        out[axis] = logical[j]
    return tuple(out)


_COLUMNS = 1 << 20  # elements of im2col columns built at once (8 MB of float64)


def _conv_impl(lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
               dimension_numbers, feature_group_count, batch_group_count):  # fmt: skip
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    groups, batches = feature_group_count, batch_group_count
    d = len(window_strides)
    dtype = np.result_type(dtype_of(lhs), dtype_of(rhs))
    params = dict(window_strides=window_strides, padding=padding, lhs_dilation=lhs_dilation,
                  rhs_dilation=rhs_dilation, dimension_numbers=dimension_numbers,
                  feature_group_count=groups, batch_group_count=batches)  # fmt: skip
    out_shape = _conv_out_shape(lhs.shape, rhs.shape, **params)
    kernel = _spatial(rhs.shape, rhs_spec)
    if 0 in out_shape or 0 in kernel or lhs.shape[lhs_spec[1]] == 0:
        return np.zeros(out_shape, dtype, like=array_like(lhs))
    n, o, i = lhs.shape[lhs_spec[0]] // batches, rhs.shape[rhs_spec[0]], rhs.shape[rhs_spec[1]]
    out = [out_shape[a] for a in out_spec[2:]]
    # the input channels-last, padded and dilated: (batch groups, n, *spatial, groups, i)
    x = _padded(lhs, 0, lhs_dilation, padding, lhs_spec[2:],
                order=(lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))  # fmt: skip
    x = np.reshape(x, (batches, n, *x.shape[1 : d + 1], groups, i))
    k, per = math.prod(kernel), o // (batches * groups)
    w = np.transpose(rhs, (rhs_spec[0], *rhs_spec[2:], rhs_spec[1]))  # (o, *kernel, i)
    w = np.swapaxes(np.reshape(w, (batches * groups, per, k * i)), 1, 2)
    # the examples a few at a time: the columns of all of them at once can be gigabytes
    # (25 per pixel for a 5x5 kernel), and ones that stay in cache multiply faster
    chunk = max(1, _COLUMNS // (batches * math.prod(out) * k * groups * i))
    parts = []
    for start in range(0, n, chunk):
        part = x[:, start : start + chunk]
        cols = _columns(part, 2, out, kernel, rhs_dilation, window_strides)  # (b, n, *out, k, g, i)
        rows = part.shape[1] * math.prod(out)
        cols = np.reshape(cols, (batches, rows, k, groups, i))
        if groups > 1:
            cols = np.transpose(cols, (0, 3, 1, 2, 4))
        res = np.matmul(np.reshape(cols, (batches * groups, rows, k * i)), w)  # per group
        res = np.reshape(res, (batches * groups, part.shape[1], *out, per))
        parts.append(np.reshape(np.moveaxis(res, 0, -2), (part.shape[1], *out, o)))
    res = parts[0] if len(parts) == 1 else np.concatenate(parts)  # features last, group-major
    where = [0, d + 1, *range(1, d + 1)]  # (batch, feature, spatial) in res
    perm = [0] * (d + 2)
    for j, axis in enumerate(out_spec):
        perm[axis] = where[j]
    return np.transpose(res, perm).astype(dtype, copy=False)


def _conv_shape(lhs, rhs, **params):
    return ShapedArray(_conv_out_shape(lhs.shape, rhs.shape, **params),
                       np.result_type(lhs.dtype, rhs.dtype))  # fmt: skip


# The derivatives are JAX's (jax/_src/lax/convolution.py): in features and batch, a
# convolution is a matrix product [m, j] [j, k] -> [m, k], transposed as one; groups of
# features become groups of the batch in the kernel's cotangent, and back.


def _reshape_axis_into(src: int, dst: int, x):
    """Axis ``src`` merged into axis ``dst`` (numbered without ``src``) as its major part."""
    shape = list(shape_of(x))
    perm = [i for i in range(len(shape)) if i != src]
    perm.insert(dst, src)
    size = shape.pop(src)
    shape[dst] *= size
    return _shp.reshape(_shp.transpose(x, perm), shape)


def _reshape_axis_out_of(src: int, size: int, x):
    """Axis ``src`` split into ``(size, rest)``."""
    shape = list(shape_of(x))
    shape[src : src + 1] = [size, shape[src] // size]
    return _shp.reshape(x, shape)


def _dilated_shape(shape: Sequence[int], dilation: Sequence[int]) -> list[int]:
    return [_dilated(n, d) for n, d in zip(shape, dilation)]


def _conv_vjp_lhs(ct, ans, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                  dimension_numbers, feature_group_count, batch_group_count):  # fmt: skip
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    kernel = _spatial(shape_of(rhs), rhs_spec)
    groups = feature_group_count
    if feature_group_count > 1 or batch_group_count > 1:
        groups = max(feature_group_count, batch_group_count)
        rhs = _reshape_axis_into(
            rhs_spec[0], rhs_spec[1], _reshape_axis_out_of(rhs_spec[0], groups, rhs)
        )
    # pads that put every input position under the flipped kernel's windows
    lhs_d = _dilated_shape(_spatial(shape_of(lhs), lhs_spec), lhs_dilation)
    rhs_d = _dilated_shape(kernel, rhs_dilation)
    out_d = _dilated_shape(_spatial(shape_of(ct), out_spec), window_strides)
    before = [k - lo - 1 for k, (lo, _) in zip(rhs_d, padding)]
    pads = tuple((b, n + k - 1 - o - b) for b, n, k, o in zip(before, lhs_d, rhs_d, out_d))
    swapped = (rhs_spec[1], rhs_spec[0], *rhs_spec[2:])
    out = conv_general_dilated_p.bind(
        ct, _comp.flip(rhs, tuple(rhs_spec[2:])), window_strides=lhs_dilation, padding=pads,
        lhs_dilation=window_strides, rhs_dilation=rhs_dilation,
        dimension_numbers=ConvDimensionNumbers(out_spec, swapped, lhs_spec),
        feature_group_count=groups, batch_group_count=1)  # fmt: skip
    if batch_group_count > 1:
        out = _reshape_axis_out_of(lhs_spec[1], batch_group_count, out)
        out = _reshape_axis_into(lhs_spec[1], lhs_spec[0], out)
    return out


def _conv_vjp_rhs(ct, ans, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                  dimension_numbers, feature_group_count, batch_group_count):  # fmt: skip
    if math.prod(shape_of(ct)) == 0:
        return _cre.zeros_like(rhs)
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    lhs_d = _dilated_shape(_spatial(shape_of(lhs), lhs_spec), lhs_dilation)
    rhs_d = _dilated_shape(_spatial(shape_of(rhs), rhs_spec), rhs_dilation)
    out_d = _dilated_shape(_spatial(shape_of(ct), out_spec), window_strides)
    pads = tuple((lo, o - n + k - lo - 1) for (lo, _), n, k, o in zip(padding, lhs_d, rhs_d, out_d))
    swap = lambda spec: (spec[1], spec[0], *spec[2:])
    return conv_general_dilated_p.bind(
        lhs, ct, window_strides=rhs_dilation, padding=pads, lhs_dilation=lhs_dilation,
        rhs_dilation=window_strides,
        dimension_numbers=ConvDimensionNumbers(swap(lhs_spec), swap(out_spec), swap(rhs_spec)),
        feature_group_count=batch_group_count, batch_group_count=feature_group_count)  # fmt: skip


def _conv_batch(args, dims, **params):
    (lhs, rhs), (ld, rd) = args, dims
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    groups, batches = params["feature_group_count"], params["batch_group_count"]
    size = shape_of(lhs)[ld] if ld is not None else shape_of(rhs)[rd]
    if size == 0:  # an empty batch: nothing to fold into the convolution's axes
        shapes = [list(shape_of(x)) for x in (lhs, rhs)]
        for shape, d in zip(shapes, dims):
            if d is not None:
                del shape[d]
        out = _conv_out_shape(*shapes, **params)
        dtype = np.result_type(dtype_of(lhs), dtype_of(rhs))
        return np.zeros((0, *out), dtype, like=array_like(lhs)), 0
    if ld is not None and rd is not None:  # one kernel per example: a feature group each
        if batches > 1:
            lhs = _reshape_axis_into(ld, lhs_spec[0], lhs)
            params = {**params, "batch_group_count": batches * size}
        else:
            lhs = _reshape_axis_into(ld, lhs_spec[1], lhs)
            params = {**params, "feature_group_count": groups * size}
        out = conv_general_dilated_p.bind(lhs, _reshape_axis_into(rd, rhs_spec[0], rhs), **params)
        return _reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    if ld is not None:  # examples join the batch
        if batches == 1:
            out = conv_general_dilated_p.bind(_reshape_axis_into(ld, lhs_spec[0], lhs), rhs,
                                              **params)  # fmt: skip
            return _reshape_axis_out_of(out_spec[0], size, out), out_spec[0]
        lhs = _reshape_axis_out_of(lhs_spec[0] + (ld <= lhs_spec[0]), batches, lhs)
        lhs = _reshape_axis_into(ld + (lhs_spec[0] < ld), lhs_spec[0] + 1, lhs)
        lhs = _reshape_axis_into(lhs_spec[0], lhs_spec[0], lhs)
        out = conv_general_dilated_p.bind(lhs, rhs, **params)
        return _reshape_axis_out_of(out_spec[0], size, out), out_spec[0]
    if groups == 1 and batches == 1:  # kernels join the output features
        out = conv_general_dilated_p.bind(lhs, _reshape_axis_into(rd, rhs_spec[0], rhs), **params)
        return _reshape_axis_out_of(out_spec[1], size, out), out_spec[1]
    # groups stay outermost: the examples go inside each group's output features
    count = max(groups, batches)
    rhs = _reshape_axis_out_of(rhs_spec[0] + (rd <= rhs_spec[0]), count, rhs)
    rhs = _reshape_axis_into(rd + (rhs_spec[0] < rd), rhs_spec[0] + 1, rhs)
    rhs = _reshape_axis_into(rhs_spec[0], rhs_spec[0], rhs)
    out = conv_general_dilated_p.bind(lhs, rhs, **params)
    out = _reshape_axis_out_of(out_spec[1], count, out)
    out = _reshape_axis_out_of(out_spec[1] + 1, size, out)
    return _reshape_axis_into(out_spec[1], out_spec[1] + 1, out), out_spec[1]


conv_general_dilated_p = Primitive(
    "conv_general_dilated",
    _conv_impl,
    vjp=[_conv_vjp_lhs, _conv_vjp_rhs],
    jvp=[
        lambda t, ans, lhs, rhs, **params: conv_general_dilated_p.bind(t, rhs, **params),
        lambda t, ans, lhs, rhs, **params: conv_general_dilated_p.bind(lhs, t, **params),
    ],
    batch=_conv_batch,
    shape=_conv_shape,
    vjp_reads=[(1,), (0,)],  # each cotangent reads the other operand
)
conv_general_dilated_p.def_taylor(multilinear_taylor(conv_general_dilated_p))  # bilinear


@conv_general_dilated_p.def_sparsity
def _conv_sparsity(lhs, rhs, **params):
    """Output element ``(n, o, p)`` reads the input elements under its window (in the
    features of ``o``'s group) and the kernel elements of feature ``o``; for Hessians each
    product ``lhs[e] * rhs[w]`` is a term of its own."""
    lhs_spec, rhs_spec, out_spec = params["dimension_numbers"]
    groups, batches = params["feature_group_count"], params["batch_group_count"]
    lhs_shape, rhs_shape = shape_of_operand(lhs), shape_of_operand(rhs)
    out_shape = _conv_out_shape(lhs_shape, rhs_shape, **params)
    kernel = _spatial(rhs_shape, rhs_spec)
    n, o, i = lhs_shape[lhs_spec[0]] // batches, rhs_shape[rhs_spec[0]], rhs_shape[rhs_spec[1]]
    out, d = [out_shape[a] for a in out_spec[2:]], len(kernel)
    if 0 in out_shape or 0 in kernel or i == 0:
        return Sparsity([None, None])
    per = o // (groups * batches)
    ids = _padded(numbered(lhs_shape), -1, params["lhs_dilation"], params["padding"],
                  lhs_spec[2:], order=(lhs_spec[0], *lhs_spec[2:], lhs_spec[1]))  # fmt: skip
    ids = np.reshape(ids, (batches, n, *ids.shape[1 : d + 1], groups, i))
    cols = _columns(ids, 2, out, kernel, params["rhs_dilation"], params["window_strides"])
    k = math.prod(kernel)
    # every product on axes (batch groups, groups, n, *out, o per group, k, i)
    lhs_ids = np.moveaxis(np.reshape(cols, (batches, n, *out, k, groups, i)), d + 3, 1)
    lhs_ids = np.expand_dims(lhs_ids, d + 3)
    rhs_ids = np.transpose(numbered(rhs_shape), (rhs_spec[0], *rhs_spec[2:], rhs_spec[1]))
    rhs_ids = np.reshape(rhs_ids, (batches, groups, 1, *(1,) * d, per, k, i))
    out_ids = np.transpose(numbered(out_shape), (out_spec[0], *out_spec[2:], out_spec[1]))
    out_ids = np.moveaxis(
        np.reshape(out_ids, (n, *out, batches, groups, per)), (d + 1, d + 2), (0, 1)
    )
    full = np.broadcast_shapes(lhs_ids.shape, rhs_ids.shape, (*out_ids.shape, 1, 1))
    lhs_ids, rhs_ids = np.broadcast_to(lhs_ids, full), np.broadcast_to(rhs_ids, full)
    out_ids = np.broadcast_to(out_ids[..., None, None], full)
    real = lhs_ids >= 0  # not padding, not a hole of the dilation
    lhs_ids, rhs_ids, out_ids = lhs_ids[real], rhs_ids[real], out_ids[real]
    terms = np.arange(len(out_ids))
    reads = [Edges(out_ids, lhs_ids), Edges(out_ids, rhs_ids)]
    products = [Edges(terms, lhs_ids), Edges(terms, rhs_ids)]
    return Sparsity(reads, [(0, 1)], terms=products, n_terms=len(terms))


# --- the lowering: the implementation's steps as compiled code ------------------------------
#
# A compiled convolution is the implementation above step for step: the same padded
# channels-last copy, the same im2col columns, the same chunks of examples and NumPy's own
# matmul loop called on the same matrices with the same strides (``ctx.matmul``: the BLAS
# call np.matmul makes).  So its values are the implementation's to the bit, and the
# result's layout is NumPy's (a later sum sees the strides NumPy's would).  What is saved
# is every NumPy call's overhead and the copies between them; the arithmetic is BLAS's.


def _rolled(lowering):
    """``lowering`` as an ``Emitter`` whose loops LLVM leaves as written (``ctx.rolled``:
    neither unrolled nor vectorised): its nests of small strided copies would take
    seconds to compile unrolled and vectorised, for little."""

    def emit(ctx, *args, **params):
        with ctx.rolled():
            return lowering(ctx, *args, **params)

    emit.__name__ = lowering.__name__
    return Emitter(emit)


def _padded_lowered(ctx, x, fill, dilation, padding, axes: Sequence[int], order=None,
                    scratch=None):  # fmt: skip
    """``_padded`` as compiled code (in the kernel's shared area ``scratch``, if given:
    for a copy dead once the equation is written)."""
    if order is not None:
        x = ctx.view(x, lambda a: np.transpose(a, order))
        axes = [list(order).index(a) for a in axes]
    shape, where = _placement(x.shape, dilation, padding, axes)
    if where is not None and shape == x.shape:
        return x
    aval = ShapedArray(shape, x.dtype)
    if scratch is None:
        out = ctx.full(aval, fill)
    else:
        out = ctx.scratch(scratch, aval)
        ctx.copy_into(out, ctx.full(ShapedArray((), x.dtype), fill))
    if where is not None:
        ctx.copy_into(ctx.view(out, lambda a: a[where[0]]), ctx.view(x, lambda a: a[where[1]]))
    return out


_PIECES = 64  # the most window positions a windowed reduction combines in one loop


def _windows(x, first: int, out, window, dilation, strides):
    """Every window of ``x`` along its axes from ``first`` on, as one strided view of
    shape ``lead + out + window + trail``: what ``_columns`` stacks, in its order (by
    position or by window, the columns are this view in C order)."""
    d = len(window)
    steps = x.strides[first : first + d]
    return as_strided(x, (*x.shape[:first], *out, *window, *x.shape[first + d :]),
                      (*x.strides[:first], *(s * t for s, t in zip(strides, steps)),
                       *(r * t for r, t in zip(dilation, steps)), *x.strides[first + d :]),
                      writeable=False)  # fmt: skip


def _columns_lowered(ctx, x, first, out, window, dilation, strides):
    """``_columns`` as compiled code: the windows copied in one loop nest (the values and
    layout of the implementation's stacked slices)."""
    d = len(window)
    lead, trail = tuple(x.shape[:first]), tuple(x.shape[first + d :])
    windows = ctx.view(x, lambda a: _windows(a, first, out, window, dilation, strides))
    cols = ctx.scratch("conv.columns", ShapedArray(windows.shape, x.dtype))  # (dead after)
    ctx.copy_into(cols, windows)
    return ctx.view(cols, lambda a: np.reshape(a, (*lead, *out, math.prod(window), *trail)))


class _Slices:
    """A stand-in for the array ``_cut`` slices: each slice of it is its index."""

    def __getitem__(self, index):
        return index


def _conv_lowering(ctx, lhs, rhs, *, window_strides, padding, lhs_dilation, rhs_dilation,
                   dimension_numbers, feature_group_count, batch_group_count):  # fmt: skip
    lhs_spec, rhs_spec, out_spec = dimension_numbers
    groups, batches = feature_group_count, batch_group_count
    d = len(window_strides)
    out_aval = ctx.out_avals[0]
    if lhs.dtype != rhs.dtype or lhs.dtype.kind not in "fiu":
        raise NotLowered(f"a convolution of {lhs.dtype} and {rhs.dtype}")
    kernel = _spatial(rhs.shape, rhs_spec)
    if 0 in out_aval.shape or 0 in kernel or lhs.shape[lhs_spec[1]] == 0:
        return ctx.full(out_aval, 0)
    n, o, i = lhs.shape[lhs_spec[0]] // batches, rhs.shape[rhs_spec[0]], rhs.shape[rhs_spec[1]]
    out = [out_aval.shape[a] for a in out_spec[2:]]
    x = _padded_lowered(ctx, lhs, 0, lhs_dilation, padding, lhs_spec[2:],
                        order=(lhs_spec[0], *lhs_spec[2:], lhs_spec[1]),
                        scratch="conv.padded")  # fmt: skip
    x = ctx.view(x, lambda a: np.reshape(a, (batches, n, *a.shape[1 : d + 1], groups, i)))
    k, per = math.prod(kernel), o // (batches * groups)
    w = ctx.view(rhs, lambda a: np.transpose(a, (rhs_spec[0], *rhs_spec[2:], rhs_spec[1])))
    w = ctx.view(w, lambda a: np.reshape(a, (batches * groups, per, k * i)))  # (a copy)
    w = ctx.view(w, lambda a: np.swapaxes(a, 1, 2))
    chunk = max(1, _COLUMNS // (batches * math.prod(out) * k * groups * i))
    res = ctx.empty(ShapedArray((n, *out, o), lhs.dtype))  # the parts, concatenated

    def part(piece, into):  # the implementation's loop body on one chunk of examples
        m = piece.shape[1]
        cols = _columns_lowered(ctx, piece, 2, out, kernel, rhs_dilation, window_strides)
        rows = m * math.prod(out)
        cols = ctx.view(cols, lambda a: np.reshape(a, (batches, rows, k, groups, i)))
        if groups > 1:
            cols = ctx.view(cols, lambda a: np.transpose(a, (0, 3, 1, 2, 4)))
        cols = ctx.view(cols, lambda a: np.reshape(a, (batches * groups, rows, k * i)))
        if batches * groups == 1:  # the product is the part itself: written in place
            ctx.matmul(cols, w, out=ctx.view(into, lambda a: np.reshape(a, (1, rows, per))))
            return
        products = ctx.scratch("conv.products", ShapedArray((batches * groups, rows, per),
                                                            lhs.dtype))  # fmt: skip
        prod = ctx.view(ctx.matmul(cols, w, out=products), lambda a: np.moveaxis(
            np.reshape(a, (batches * groups, m, *out, per)), 0, -2))  # fmt: skip
        ctx.copy_into(ctx.view(into, lambda a: np.reshape(a, prod.shape)), prod)

    whole, rest = divmod(n, chunk)
    if whole == 1 and not rest:
        part(x, res)
    else:
        if whole:
            with ctx.loop(whole) as step:
                part(ctx.block(x, 1, step, chunk), ctx.block(res, 0, step, chunk))
        if rest:
            start = whole * chunk
            part(ctx.view(x, lambda a: a[:, start:]), ctx.view(res, lambda a: a[start:]))
    where = [0, d + 1, *range(1, d + 1)]  # (batch, feature, spatial) in res
    perm = [0] * (d + 2)
    for j, axis in enumerate(out_spec):
        perm[axis] = where[j]
    return ctx.view(res, lambda a: np.transpose(a, perm))


conv_general_dilated_p.def_lowering(_rolled(_conv_lowering))


def _check_groups(lhs_shape, rhs_shape, dnums: ConvDimensionNumbers, groups: Any,
                  batches: Any) -> tuple[int, int]:  # fmt: skip
    """JAX's checks of the feature and batch group counts, with its messages."""
    name = "conv_general_dilated"
    for what, count in (("feature_group_count", groups), ("batch_group_count", batches)):
        if not isinstance(count, (int, np.integer)) or isinstance(count, bool) or count < 1:
            raise ValueError(f"{name}: {what} must be a positive integer, got {count!r}")
    groups, batches = int(groups), int(batches)
    if groups > 1 and batches > 1:
        raise ValueError(f"{name}: at most one of batch_group_count and feature_group_count "
                         f"may be > 1, got {batches} and {groups}")  # fmt: skip
    features, batch = lhs_shape[dnums.lhs_spec[1]], lhs_shape[dnums.lhs_spec[0]]
    out_features, in_features = rhs_shape[dnums.rhs_spec[0]], rhs_shape[dnums.rhs_spec[1]]
    if features % groups:
        raise ValueError(f"{name}: feature_group_count must divide the lhs feature dimension, "
                         f"but {groups} does not divide {features}")  # fmt: skip
    if features // groups != in_features:
        raise ValueError(
            f"{name}: the lhs feature dimension divided by feature_group_count must equal the "
            f"rhs input feature dimension, but {features} // {groups} != {in_features} (shapes "
            f"{tuple(lhs_shape)}, {tuple(rhs_shape)})"
        )
    if out_features % groups or out_features % batches:
        raise ValueError(f"{name}: the rhs output feature dimension ({out_features}) must be a "
                         f"multiple of feature_group_count and batch_group_count ({groups}, "
                         f"{batches})")  # fmt: skip
    if batch % batches:
        raise ValueError(f"{name}: batch_group_count must divide the lhs batch dimension, but "
                         f"{batches} does not divide {batch}")  # fmt: skip
    return groups, batches


@implements(conv_general_dilated_p)
def conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=None, rhs_dilation=None,
                         dimension_numbers=None, feature_group_count=1, batch_group_count=1,
                         precision=None, preferred_element_type=None):  # fmt: skip
    """Like jax.lax.conv_general_dilated: the N-dimensional convolution (a correlation: the
    kernel is not flipped) of ``lhs`` with the kernel ``rhs``.

    ``window_strides``: one stride per spatial axis; ``padding``: ``'SAME'``,
    ``'SAME_LOWER'``, ``'VALID'`` or one ``(low, high)`` pair per spatial axis (negative
    pads crop); ``lhs_dilation`` (a transposed convolution) and ``rhs_dilation`` (an atrous
    one): the gaps between input and kernel elements; ``dimension_numbers``: the layout,
    ``None`` (``('NCHW', 'OIHW', 'NCHW')`` and its N-d kin), three strings such as
    ``('NHWC', 'HWIO', 'NHWC')``, or a ``ConvDimensionNumbers``; ``feature_group_count``
    (grouped and depthwise convolutions) and ``batch_group_count``.  ``precision`` is
    checked and changes nothing (NumPy computes in the operands' dtype);
    ``preferred_element_type`` is the result's dtype.  Differentiable in both operands to
    every order, and batchable.

    >>> import numpy as np, autodiff
    >>> x, k = np.arange(8.0).reshape(1, 1, 8), np.array([[[1.0, 0.0, -1.0]]])
    >>> conv_general_dilated(x, k, (1,), "VALID")
    array([[[-2., -2., -2., -2., -2., -2.]]])
    >>> autodiff.grad(lambda k: conv_general_dilated(x, k, (2,), "SAME").sum())(k)
    array([[[12., 16., 12.]]])
    """
    check_precision(precision, "conv_general_dilated")
    name = "conv_general_dilated"
    lhs_shape, rhs_shape = shape_of(lhs), shape_of(rhs)
    dnums = conv_dimension_numbers(lhs_shape, rhs_shape, dimension_numbers)
    d = len(lhs_shape) - 2
    strides = _ints(window_strides, d, "window_strides", name)
    lhs_dilation = _ints(lhs_dilation, d, "lhs_dilation", name)
    rhs_dilation = _ints(rhs_dilation, d, "rhs_dilation", name)
    if isinstance(padding, str):
        if lhs_dilation != (1,) * d:
            raise ValueError(f"{name}: a padding string with lhs_dilation (a transposed "
                             f"convolution) is ambiguous: give (low, high) pairs, or use "
                             f"autodiff.lax.conv_transpose")  # fmt: skip
        window = _dilated_shape(_spatial(rhs_shape, dnums.rhs_spec), rhs_dilation)
        padding = padtype_to_pads(_spatial(lhs_shape, dnums.lhs_spec), window, strides, padding)
    pads = _pairs(padding, d, name)
    groups, batches = _check_groups(lhs_shape, rhs_shape, dnums, feature_group_count,
                                    batch_group_count)  # fmt: skip
    for n, (lo, hi), ld in zip(_spatial(lhs_shape, dnums.lhs_spec), pads, lhs_dilation):
        if _dilated(n, ld) + lo + hi < 0:
            raise ValueError(f"{name}: negative padding {pads} is larger than the lhs spatial "
                             f"shape {_spatial(lhs_shape, dnums.lhs_spec)}")  # fmt: skip
    out = conv_general_dilated_p.bind(
        lhs, rhs, window_strides=strides, padding=pads, lhs_dilation=lhs_dilation,
        rhs_dilation=rhs_dilation, dimension_numbers=dnums, feature_group_count=groups,
        batch_group_count=batches)  # fmt: skip
    if preferred_element_type is not None:
        out = _elt.astype(out, preferred_element_type)
    return out


# --- windowed reductions: sum, max, min ---------------------------------------------------------
#
# Parameters (one entry per axis of the operand, normalised by the public functions):
# window_dimensions, window_strides, padding ((low, high) pairs), base_dilation (gaps
# between the operand's elements), window_dilation (gaps between a window's elements).
# Padding and the gaps of a base dilation hold the reduction's identity.

_UFUNCS = {"sum": np.add, "max": np.maximum, "min": np.minimum}


def _identity(kind: str, dtype: np.dtype) -> Any:
    """What padding holds: the reduction's identity (0, the lowest or highest value)."""
    if kind == "sum":
        return 0
    if dtype.kind == "b":
        return kind == "min"
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return info.min if kind == "max" else info.max
    return -np.inf if kind == "max" else np.inf


def _window_out_shape(shape, *, window_dimensions, window_strides, padding, base_dilation,
                      window_dilation) -> tuple[int, ...]:  # fmt: skip
    axes = zip(shape, window_dimensions, window_strides, padding, base_dilation, window_dilation)
    return tuple(_out_size(n, lo, hi, bd, k, wd, s) for n, k, s, (lo, hi), bd, wd in axes)


def _window_pieces(x, fill, out, *, window_dimensions, window_strides, padding, base_dilation,
                   window_dilation):  # fmt: skip
    """``x`` padded and dilated, cut into windows (``_cut``)."""
    padded = _padded(x, fill, base_dilation, padding, range(ndim_of(x)))
    return _cut(padded, 0, out, window_dimensions, window_dilation, window_strides)


def _reduce_window_impl(kind: str):
    ufunc = _UFUNCS[kind]

    def impl(x, **window):
        out = _window_out_shape(x.shape, **window)
        if 0 in out:
            return np.zeros(out, x.dtype, like=array_like(x))
        by_position, pieces = _window_pieces(x, _identity(kind, x.dtype), out, **window)
        if by_position:  # one slice per window position, combined in order
            acc = pieces[0]
            for piece in pieces[1:]:
                acc = ufunc(acc, piece)
            return np.copy(acc) if len(pieces) == 1 else acc  # (a view of x otherwise)
        k = math.prod(window["window_dimensions"])
        rows = np.stack([np.reshape(p, (k,)) for p in pieces])
        return np.reshape(ufunc.reduce(rows, axis=1, dtype=x.dtype), out)

    return impl


_UNIT = {"window_dimensions": 1, "window_strides": 1, "padding": (0, 0), "base_dilation": 1,
         "window_dilation": 1}  # fmt: skip


def _window_batch(prim: Primitive, operands: int = 1):
    """A batched windowed reduction: the ``vmap`` axis (first, in every operand) is one
    more axis whose windows are one element wide."""

    def batch(args, dims, **window):
        size = next(shape_of(a)[d] for a, d in zip(args, dims) if d is not None)
        args = [
            _shp.broadcast_to(_shp.expand_dims(a, 0), (size, *shape_of(a))) if d is None
            else move_to_front(a, d)
            for a, d in zip(args[:operands], dims[:operands])
        ]  # fmt: skip
        window = {name: (_UNIT[name], *value) if name in _UNIT else value
                  for name, value in window.items()}  # fmt: skip
        return prim.bind(*args, **window), 0

    return batch


def _window_shape(x, **window):
    return ShapedArray(_window_out_shape(x.shape, **window), x.dtype)


def _window_edges(shape, **window) -> tuple[np.ndarray, np.ndarray]:
    """``(out_idx, in_idx)``: every (output element, operand element under its window)."""
    out = _window_out_shape(shape, **window)
    ids = numbered(out)
    by_position, pieces = _window_pieces(numbered(shape), -1, out, **window)
    if by_position:
        pairs = [(ids, piece) for piece in pieces]
    else:
        pairs = [(np.full(piece.shape, p), piece) for p, piece in zip(ids.ravel(), pieces)]
    outs = np.concatenate([np.ravel(o) for o, _ in pairs] or [np.zeros(0, np.int64)])
    ins = np.concatenate([np.ravel(i) for _, i in pairs] or [np.zeros(0, np.int64)])
    real = ins >= 0
    return outs[real], ins[real]


def _window_sparsity(x, **window):
    """Each output element reads its window; piecewise linear (a sum, or one element)."""
    return Sparsity([Edges(*_window_edges(shape_of_operand(x), **window))])


def _reduce_window_sum_vjp(ct, ans, x, *, window_dimensions, window_strides, padding,
                           base_dilation, window_dilation):  # fmt: skip
    """Each cotangent spread over its window: a windowed sum of the cotangent with the
    strides as gaps, padded so that every operand position sees the windows holding it."""
    shape = shape_of(x)
    x_d = _dilated_shape(shape, base_dilation)
    w_d = _dilated_shape(window_dimensions, window_dilation)
    ct_d = _dilated_shape(shape_of(ct), window_strides)
    before = [k - lo - 1 for k, (lo, _) in zip(w_d, padding)]
    pads = tuple((b, n + k - 1 - c - b) for b, n, k, c in zip(before, x_d, w_d, ct_d))
    return reduce_window_sum_p.bind(
        ct, window_dimensions=window_dimensions, window_strides=base_dilation, padding=pads,
        base_dilation=window_strides, window_dilation=window_dilation)  # fmt: skip


reduce_window_sum_p = Primitive(
    "reduce_window_sum",
    _reduce_window_impl("sum"),
    vjp=[_reduce_window_sum_vjp],
    jvp=[lambda t, ans, x, **window: reduce_window_sum_p.bind(t, **window)],
    shape=_window_shape,
    sparsity=_window_sparsity,
    vjp_reads=[()],
)
reduce_window_sum_p.def_batch(_window_batch(reduce_window_sum_p))
reduce_window_sum_p.def_taylor(linear_taylor(reduce_window_sum_p))


def _chosen(x, kind: str, **window):
    """Which element of each window is its first maximum (``kind='max'``) or minimum in
    row-major window order: its number in the window (padding included)."""
    out = _window_out_shape(x.shape, **window)
    if 0 in out:
        return np.zeros(out, np.int64, like=array_like(x))
    by_position, values = _window_pieces(x, _identity(kind, x.dtype), out, **window)
    if by_position:
        best, chosen = values[0], np.zeros(out, np.int64, like=array_like(x))
        for k, value in enumerate(values[1:], 1):
            better = value > best if kind == "max" else value < best  # ties: the first stays
            best, chosen = _UFUNCS[kind](best, value), np.where(better, k, chosen)
        return chosen
    k = math.prod(window["window_dimensions"])
    rows = np.stack([np.reshape(v, (k,)) for v in values])
    return np.reshape((np.argmax if kind == "max" else np.argmin)(rows, axis=1), out)


def _window_gather_impl(t, x, *, kind, **window):
    chosen = _chosen(x, kind, **window)
    if 0 in chosen.shape:
        return np.zeros(chosen.shape, t.dtype, like=array_like(t))
    by_position, pieces = _window_pieces(t, 0, chosen.shape, **window)
    if by_position:  # padding holds zeros: a window that chose it gets zero
        out = np.zeros(chosen.shape, t.dtype, like=array_like(t))
        for k, piece in enumerate(pieces):
            out = np.where(chosen == k, piece, out)
        return out
    k = math.prod(window["window_dimensions"])
    rows = np.stack([np.reshape(p, (k,)) for p in pieces])
    which = np.arange(k, like=array_like(t)) == np.reshape(chosen, (-1, 1))
    return np.reshape(np.sum(np.where(which, rows, 0), axis=1), chosen.shape)


def _window_scatter_impl(ct, x, *, kind, **window):
    chosen = _chosen(x, kind, **window)
    out = chosen.shape
    sizes = window["window_dimensions"]
    dilation, strides = window["window_dilation"], window["window_strides"]
    axes = range(len(sizes))
    shape, _ = _placement(x.shape, window["base_dilation"], window["padding"], axes)
    y = np.zeros(shape, ct.dtype, like=array_like(ct))  # the padded operand's cotangent
    if 0 in out:
        pass
    elif math.prod(sizes) <= math.prod(out):  # each window position, added where it was chosen
        disjoint = all(s >= _dilated(k, r) for k, r, s in zip(sizes, dilation, strides))
        for k, at in enumerate(np.ndindex(*sizes)):
            where = tuple(slice(i * r, i * r + (o - 1) * s + 1, s)
                          for i, r, o, s in zip(at, dilation, out, strides))  # fmt: skip
            mine = np.where(chosen == k, ct, 0)
            y[where] = mine if disjoint else y[where] + mine  # (windows that do not overlap)
    else:  # each window, its cotangent at its chosen element
        which = np.arange(math.prod(sizes), like=array_like(ct))
        flat_ct, flat_chosen = np.reshape(ct, (-1,)), np.reshape(chosen, (-1,))
        for p, at in enumerate(np.ndindex(*out)):
            where = tuple(slice(i * s, i * s + (k - 1) * r + 1, r)
                          for i, k, r, s in zip(at, sizes, dilation, strides))  # fmt: skip
            one = np.where(which == flat_chosen[p], flat_ct[p], 0)
            y[where] = y[where] + np.reshape(one, tuple(sizes))
    return _unpadded(y, x.shape, window["base_dilation"], window["padding"], axes)


def _gather_sparsity(t, x, **params):
    window = {k: v for k, v in params.items() if k != "kind"}
    return Sparsity([Edges(*_window_edges(shape_of_operand(x), **window)), None])


def _scatter_sparsity(ct, x, **params):
    window = {k: v for k, v in params.items() if k != "kind"}
    outs, ins = _window_edges(shape_of_operand(x), **window)
    return Sparsity([Edges(ins, outs), None])


# Each window's derivative at its chosen element (the JVP of a windowed max or min), and its
# transpose, each window's cotangent added there (the VJP): linear in their first operand,
# which element is chosen read from the second (not differentiated: piecewise constant).
window_gather_p = Primitive(
    "window_gather",
    _window_gather_impl,
    vjp=[lambda ct, ans, t, x, **p: window_scatter_p.bind(ct, x, **p), None],
    jvp=[lambda dt, ans, t, x, **p: window_gather_p.bind(dt, x, **p), None],
    shape=lambda t, x, *, kind, **window: ShapedArray(
        _window_out_shape(x.shape, **window), t.dtype
    ),
    sparsity=_gather_sparsity,
    vjp_reads=[(1,), ()],
)
window_gather_p.def_batch(_window_batch(window_gather_p, operands=2))
window_gather_p.def_taylor(linear_taylor(window_gather_p))
window_scatter_p = Primitive(
    "window_scatter",
    _window_scatter_impl,
    vjp=[lambda ct, ans, c, x, **p: window_gather_p.bind(ct, x, **p), None],
    jvp=[lambda dc, ans, c, x, **p: window_scatter_p.bind(dc, x, **p), None],
    shape=lambda c, x, *, kind, **window: ShapedArray(x.shape, c.dtype),
    sparsity=_scatter_sparsity,
    vjp_reads=[(1,), ()],
)
window_scatter_p.def_batch(_window_batch(window_scatter_p, operands=2))
window_scatter_p.def_taylor(linear_taylor(window_scatter_p))


def _chooser(kind: str) -> Primitive:
    prim = Primitive(
        f"reduce_window_{kind}",
        _reduce_window_impl(kind),
        vjp=[lambda ct, ans, x, **window: window_scatter_p.bind(ct, x, kind=kind, **window)],
        jvp=[lambda t, ans, x, **window: window_gather_p.bind(t, x, kind=kind, **window)],
        shape=_window_shape,
        sparsity=_window_sparsity,  # piecewise linear: one element's value
        vjp_reads=[(0,)],
    )
    prim.def_batch(_window_batch(prim))
    prim.def_taylor(linear_taylor(prim))  # piecewise linear: the chosen elements' series
    return prim


reduce_window_max_p = _chooser("max")
reduce_window_min_p = _chooser("min")


# --- the windowed reductions' lowerings: the implementations' steps as compiled code ----------
#
# As the convolution's: the same padded copy, the same windows combined in the same order
# (a window position at a time, as one fused loop instead of one NumPy call each; or, for
# windows fewer than their positions, NumPy's pairwise reduction of the same rows), so the
# implementations' values to the bit.  The first maximum (minimum) of each window is
# chosen by the implementation's comparisons, in one loop with what reads it.


def _window_pieces_lowered(ctx, x, fill, out, **window):
    """``_window_pieces`` as compiled code: ``(True, pieces)``, one view per window
    position; or, where windows are fewer than their positions, ``(False, windows)``, the
    padded operand's windows as one view (``_windows``)."""
    sizes, dilation = window["window_dimensions"], window["window_dilation"]
    strides = window["window_strides"]
    padded = _padded_lowered(ctx, x, fill, window["base_dilation"], window["padding"],
                             range(len(x.shape)))  # fmt: skip
    by_position, slices = _cut(_Slices(), 0, out, sizes, dilation, strides)
    if not by_position:
        return False, ctx.view(padded, lambda a: _windows(a, 0, out, sizes, dilation, strides))
    if len(slices) > _PIECES:
        raise NotLowered(f"{len(slices)} window positions combined in one loop")
    return True, [ctx.view(padded, lambda a, i=i: a[i]) for i in slices]


def _no_windows(out_aval, what: str) -> bool:
    """Whether a windowed lowering's result is empty (the caller fills it); a 0-d one is
    not lowered."""
    if not out_aval.shape:
        raise NotLowered(f"{what} of a 0-d value")
    return 0 in out_aval.shape


def _reduce_window_lowering(kind: str):
    ufunc = _UFUNCS[kind]

    def lowering(ctx, x, **window):
        out_aval = ctx.out_avals[0]
        if _no_windows(out_aval, "a windowed reduction"):
            return ctx.full(out_aval, 0)
        fill = _identity(kind, x.dtype)
        by_position, pieces = _window_pieces_lowered(ctx, x, fill, out_aval.shape, **window)
        if by_position:  # the implementation's ufunc calls, in order, in one loop
            return ctx.elementwise(lambda *v: functools.reduce(ufunc, v), *pieces)
        size = math.prod(window["window_dimensions"])  # its rows, reduced as NumPy reduces
        rows = ctx.view(ctx.copy(pieces), lambda a: np.reshape(a, (-1, size)))
        return ctx.view(ctx.reduce(ufunc, rows, (1,)), lambda a: np.reshape(a, out_aval.shape))

    return _rolled(lowering)


def _choosing(kind: str, values, by_position: bool):
    """The scalar function of ``_chosen``'s loop: which of ``values`` (a window's, in
    order) is the first maximum (``kind='max'``) or minimum.  By position, the
    implementation's comparisons; else ``np.argmax``'s (``argmin``'s) rule: a later value
    replaces the best where it is not ``<=`` (``>=``) it, until the best is a NaN."""
    best, chosen = values[0], np.int64(0)
    for k, value in enumerate(values[1:], 1):
        if by_position:
            better = value > best if kind == "max" else value < best  # ties: the first stays
        else:
            better = np.logical_not(value <= best if kind == "max" else value >= best)
            if best.dtype.kind in "fc":
                better = np.logical_and(better, best == best)
        chosen = np.where(better, np.int64(k), chosen)
        if k < len(values) - 1:  # (the last best is not read: no loop of its own)
            best = _UFUNCS[kind](best, value) if by_position else np.where(better, value, best)
    return chosen


def _window_elements(ctx, x, fill, out, window):
    """``(by_position, views)``: the padded ``x``'s elements at each place of a window,
    one view of the ``out`` shape per place (row-major)."""
    by_position, pieces = _window_pieces_lowered(ctx, x, fill, out, **window)
    if by_position:
        return True, pieces
    sizes = window["window_dimensions"]
    if math.prod(sizes) > _PIECES:
        raise NotLowered(f"windows of {math.prod(sizes)} elements compared in one loop")
    return False, [ctx.view(pieces, lambda a, at=(Ellipsis, *j): a[at])
                   for j in np.ndindex(*sizes)]  # fmt: skip


def _window_gather_lowering(ctx, t, x, *, kind, **window):
    out_aval = ctx.out_avals[0]
    if _no_windows(out_aval, "a window gather"):
        return ctx.full(out_aval, 0)
    fill = _identity(kind, x.dtype)
    by_position, xs = _window_elements(ctx, x, fill, out_aval.shape, window)
    _, ts = _window_elements(ctx, t, 0, out_aval.shape, window)
    n, zero = len(xs), t.dtype.type(0)

    def gathered(*v):
        chosen, out = _choosing(kind, v[:n], by_position), zero
        for k, piece in enumerate(v[n:]):
            out = np.where(chosen == k, piece, out)
        # by rows, the implementation sums the chosen value with zeros: -0.0 becomes 0.0
        return out if by_position else out + zero

    return ctx.elementwise(gathered, *xs, *ts)


def _window_scatter_lowering(ctx, ct, x, *, kind, **window):
    out_aval = ctx.out_avals[0]
    out = ct.shape
    if 0 in out or not out:
        raise NotLowered("a window scatter of no windows, or of a 0-d value")
    fill = _identity(kind, x.dtype)
    by_position, xs = _window_elements(ctx, x, fill, out, window)
    chosen = ctx.elementwise(lambda *v: _choosing(kind, v, by_position), *xs)
    sizes, dilation = window["window_dimensions"], window["window_dilation"]
    strides, axes = window["window_strides"], range(len(sizes))
    shape, where = _placement(x.shape, window["base_dilation"], window["padding"], axes)
    y = ctx.full(ShapedArray(shape, ct.dtype), 0)
    zero = ct.dtype.type(0)
    if by_position:  # each place of the windows, added where it was chosen
        disjoint = all(s >= _dilated(k, r) for k, r, s in zip(sizes, dilation, strides))
        for k, at in enumerate(np.ndindex(*sizes)):
            index = tuple(slice(i * r, i * r + (o - 1) * s + 1, s)
                          for i, r, o, s in zip(at, dilation, out, strides))  # fmt: skip
            part = ctx.view(y, lambda a, index=index: a[index])
            if disjoint:
                ctx.elementwise(lambda c, g, k=k: np.where(c == k, g, zero), chosen, ct, out=part)
            else:
                ctx.elementwise(lambda c, g, y, k=k: y + np.where(c == k, g, zero), chosen, ct,
                                part, out=part)  # fmt: skip
    else:  # each window, its cotangent added at its chosen element
        places = ctx.constant(np.arange(math.prod(sizes)).reshape(sizes))
        for at in np.ndindex(*out):
            index = tuple(slice(i * s, i * s + (k - 1) * r + 1, r)
                          for i, k, r, s in zip(at, sizes, dilation, strides))  # fmt: skip
            part = ctx.view(y, lambda a, index=index: a[index])
            mine = [ctx.view(v, lambda a, at=at: a[at]) for v in (chosen, ct)]
            ctx.elementwise(lambda y, j, c, g: y + np.where(j == c, g, zero), part, places,
                            *mine, out=part)  # fmt: skip
    if where is not None and shape == tuple(x.shape):
        return y
    result = ctx.full(out_aval, 0)
    if where is not None:
        ctx.copy_into(ctx.view(result, lambda a: a[where[1]]), ctx.view(y, lambda a: a[where[0]]))
    return result


reduce_window_sum_p.def_lowering(_reduce_window_lowering("sum"))
reduce_window_max_p.def_lowering(_reduce_window_lowering("max"))
reduce_window_min_p.def_lowering(_reduce_window_lowering("min"))
window_gather_p.def_lowering(_rolled(_window_gather_lowering))
window_scatter_p.def_lowering(_rolled(_window_scatter_lowering))


def _bind_window(prim: Primitive, operand, window_dimensions, window_strides, padding,
                 base_dilation, window_dilation):  # fmt: skip
    """``prim`` of ``operand`` with the public arguments of a windowed reduction, checked
    and normalised to the primitive's parameters."""
    name = prim.name
    shape = shape_of(operand)
    nd = len(shape)
    window = _ints(window_dimensions, nd, "window_dimensions", name)
    strides = _ints(window_strides, nd, "window_strides", name)
    base = _ints(base_dilation, nd, "base_dilation", name)
    dilation = _ints(window_dilation, nd, "window_dilation", name)
    if isinstance(padding, str):
        padding = padtype_to_pads(shape, _dilated_shape(window, dilation), strides, padding)
    pads = _pairs(padding, nd, name)
    for n, (lo, hi), b in zip(shape, pads, base):
        if _dilated(n, b) + lo + hi < 0:
            raise ValueError(f"{name}: negative padding {pads} is larger than the operand's "
                             f"shape {shape}")  # fmt: skip
    return prim.bind(operand, window_dimensions=window, window_strides=strides, padding=pads,
                     base_dilation=base, window_dilation=dilation)  # fmt: skip


@implements(reduce_window_sum_p)
def reduce_window_sum(operand, window_dimensions, window_strides=None, padding="VALID",
                      base_dilation=None, window_dilation=None):  # fmt: skip
    """The sum over each window of ``operand`` (sum pooling): ``window_dimensions``,
    ``window_strides`` (default ones), ``padding`` (``'VALID'``, ``'SAME'``,
    ``'SAME_LOWER'`` or ``(low, high)`` pairs), ``base_dilation`` and ``window_dilation``,
    one entry per axis, as in jax.lax.reduce_window with ``lax.add`` and ``0``.

    >>> import numpy as np
    >>> reduce_window_sum(np.arange(6.0), (2,), (2,))
    array([1., 5., 9.])
    """
    if dtype_of(operand).kind not in "iufc":
        raise TypeError(f"reduce_window_sum: operand must have a number dtype, got "
                        f"{dtype_of(operand)}")  # fmt: skip
    return _bind_window(reduce_window_sum_p, operand, window_dimensions, window_strides,
                        padding, base_dilation, window_dilation)  # fmt: skip


@implements(reduce_window_max_p)
def reduce_window_max(operand, window_dimensions, window_strides=None, padding="VALID",
                      base_dilation=None, window_dilation=None):  # fmt: skip
    """The maximum of each window of ``operand`` (max pooling), arguments as in
    ``reduce_window_sum``; padding holds ``-inf`` (the lowest integer).  Its derivative
    goes to the first maximum of each window (row-major), as JAX's does.

    >>> import numpy as np, autodiff
    >>> reduce_window_max(np.array([1.0, 3.0, 3.0, 0.0]), (2,), (1,), "SAME")
    array([3., 3., 3., 0.])
    >>> x = np.array([1.0, 3.0, 3.0, 0.0])
    >>> autodiff.grad(lambda x: reduce_window_max(x, (2,), (1,), "SAME").sum())(x)
    array([0., 2., 1., 1.])
    """
    return _bind_window(reduce_window_max_p, operand, window_dimensions, window_strides,
                        padding, base_dilation, window_dilation)  # fmt: skip


@implements(reduce_window_min_p)
def reduce_window_min(operand, window_dimensions, window_strides=None, padding="VALID",
                      base_dilation=None, window_dilation=None):  # fmt: skip
    """The minimum of each window of ``operand``, arguments as in ``reduce_window_sum``;
    padding holds ``inf`` (the highest integer); the derivative goes to the first minimum
    of each window.

    >>> import numpy as np
    >>> reduce_window_min(np.arange(4.0), (3,), (1,), [(1, 1)])
    array([0., 0., 1., 2.])
    """
    return _bind_window(reduce_window_min_p, operand, window_dimensions, window_strides,
                        padding, base_dilation, window_dilation)  # fmt: skip
