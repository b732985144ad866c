"""JAX's conveniences around the convolution family (``autodiff.lax``): compositions of
``conv_general_dilated`` and the windowed reductions of ``rules/convolution.py``, with
JAX's signatures, so their derivatives and batching come from those primitives."""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import autodiff.numpy as anp
from autodiff.core.arrays import dtype_of, ndim_of, shape_of
from autodiff.core.tracer import Tracer
from autodiff.rules.convolution import (
    _dilated,
    _identity,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_general_permutations,
    padtype_to_pads,
    reduce_window_max,
    reduce_window_min,
    reduce_window_sum,
)

__all__ = [
    "conv",
    "conv_general_shape_tuple",
    "conv_shape_tuple",
    "conv_transpose",
    "conv_transpose_shape_tuple",
    "conv_with_general_padding",
    "reduce_window",
    "reduce_window_shape_tuple",
]


def conv(lhs, rhs, window_strides, padding, precision=None, preferred_element_type=None):
    """Like jax.lax.conv: ``conv_general_dilated`` in the ``NC...``/``OI...`` layout,
    without dilation.

    >>> import numpy as np
    >>> conv(np.ones((1, 1, 4, 4)), np.ones((1, 1, 2, 2)), (2, 2), "VALID")[0, 0]
    array([[4., 4.],
           [4., 4.]])
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, precision=precision,
                                preferred_element_type=preferred_element_type)  # fmt: skip


def conv_with_general_padding(lhs, rhs, window_strides, padding, lhs_dilation, rhs_dilation,
                              precision=None, preferred_element_type=None):  # fmt: skip
    """Like jax.lax.conv_with_general_padding: ``conv_general_dilated`` in the
    ``NC...``/``OI...`` layout with dilations.

    >>> import numpy as np
    >>> conv_with_general_padding(np.ones((1, 1, 3)), np.ones((1, 1, 2)), (1,), [(0, 0)],
    ...                           None, (2,))
    array([[[2.]]])
    """
    return conv_general_dilated(lhs, rhs, window_strides, padding, lhs_dilation=lhs_dilation,
                                rhs_dilation=rhs_dilation, precision=precision,
                                preferred_element_type=preferred_element_type)  # fmt: skip


def _transpose_padding(k: int, s: int, padding: Any) -> tuple[int, int]:
    """The pads of a transposed convolution that undo a forward one's ``padding``."""
    if padding == "SAME":
        total = k + s - 2
        before = k - 1 if s > k - 1 else -(-total // 2)
    elif padding == "VALID":
        total = k + s - 2 + max(k - s, 0)
        before = k - 1
    elif isinstance(padding, tuple):
        pads = tuple(k - p - 1 for p in padding)
        before, total = pads[0], sum(pads)
    else:
        raise ValueError(f"conv_transpose: padding must be 'SAME', 'VALID' or (low, high) "
                         f"pairs, got {padding!r}")  # fmt: skip
    return before, total - before


_TRANSPOSE_LAYOUTS = {2: ("NC", "IO", "NC"), 3: ("NHC", "HIO", "NHC"),
                      4: ("NHWC", "HWIO", "NHWC"), 5: ("NHWDC", "HWDIO", "NHWDC")}  # fmt: skip


def conv_transpose(lhs, rhs, strides, padding, rhs_dilation=None, dimension_numbers=None,
                   transpose_kernel=False, precision=None, preferred_element_type=None,
                   use_consistent_padding=False):  # fmt: skip
    """Like jax.lax.conv_transpose: the fractionally strided convolution (an input
    dilated by ``strides``), in TensorFlow's layout by default (``NHWC``, ``HWIO``).
    ``padding`` strings (and, with ``use_consistent_padding``, pairs) are those of the
    forward convolution it transposes; ``transpose_kernel`` flips the kernel's spatial
    axes and swaps its feature axes, as Keras' ``Conv2DTranspose`` does.

    >>> import numpy as np
    >>> conv_transpose(np.ones((1, 2, 1)), np.ones((2, 1, 1)), (2,), "VALID")[0, :, 0]
    array([1., 1., 1., 1.])
    """
    nd = ndim_of(lhs)
    if ndim_of(rhs) != nd or nd < 2:
        raise ValueError(f"conv_transpose: lhs and rhs must have the same number (at least 2) of "
                         f"axes, got shapes {shape_of(lhs)} and {shape_of(rhs)}")  # fmt: skip
    if dimension_numbers is None:
        if nd not in _TRANSPOSE_LAYOUTS:
            raise ValueError("conv_transpose: no default dimension_numbers for more than 3 "
                             "spatial axes; give them")  # fmt: skip
        dimension_numbers = _TRANSPOSE_LAYOUTS[nd]
    dn = conv_dimension_numbers(shape_of(lhs), shape_of(rhs), dimension_numbers)
    kernel = [shape_of(rhs)[a] for a in dn.rhs_spec[2:]]
    dilation = (1,) * (nd - 2) if rhs_dilation is None else tuple(rhs_dilation)
    if use_consistent_padding or padding in ("SAME", "VALID"):
        per_axis = [padding] * len(strides) if isinstance(padding, str) else \
            [tuple(p) for p in padding]  # fmt: skip
        pads: Any = [_transpose_padding(_dilated(k, r), s, p)
                     for k, r, s, p in zip(kernel, dilation, strides, per_axis)]  # fmt: skip
    else:
        pads = padding
    if transpose_kernel:
        rhs = anp.flip(rhs, tuple(dn.rhs_spec[2:]))
        rhs = anp.swapaxes(rhs, dn.rhs_spec[0], dn.rhs_spec[1])
    return conv_general_dilated(lhs, rhs, (1,) * (nd - 2), pads, strides, rhs_dilation, dn,
                                precision=precision,
                                preferred_element_type=preferred_element_type)  # fmt: skip


def conv_shape_tuple(lhs_shape, rhs_shape, strides, pads, batch_group_count=1):
    """Like jax.lax.conv_shape_tuple: the output shape of a convolution in the
    ``NC...``/``OI...`` layout.

    >>> conv_shape_tuple((2, 3, 9, 9), (4, 3, 3, 3), (2, 2), "SAME")
    (2, 4, 5, 5)
    """
    if isinstance(pads, str):
        pads = padtype_to_pads(lhs_shape[2:], rhs_shape[2:], strides, pads)
    if len(pads) != len(lhs_shape) - 2:
        raise TypeError(f"conv_shape_tuple: expected {len(lhs_shape) - 2} (low, high) pads, "
                        f"got {len(pads)}")  # fmt: skip
    spatial = []
    for n, k, s, (lo, hi) in zip(lhs_shape[2:], rhs_shape[2:], strides, pads):
        if n + lo + hi < 0:
            raise ValueError(f"conv_shape_tuple: negative padding {tuple(pads)} is larger than "
                             f"the spatial shape {tuple(lhs_shape[2:])}")  # fmt: skip
        spatial.append(max(n + lo + hi - k + s, 0) // s)
    return (lhs_shape[0] // batch_group_count, rhs_shape[0], *spatial)


def conv_general_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """Like jax.lax.conv_general_shape_tuple: the output shape of a convolution in a
    layout given by three strings.

    >>> conv_general_shape_tuple((2, 9, 9, 3), (3, 3, 3, 4), (1, 1), "VALID",
    ...                          ("NHWC", "HWIO", "NHWC"))
    (2, 7, 7, 4)
    """
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs, rhs = tuple(np.take(lhs_shape, lhs_perm)), tuple(np.take(rhs_shape, rhs_perm))
    out = conv_shape_tuple(lhs, rhs, window_strides, padding)
    return tuple(int(n) for n in np.take(out, np.argsort(out_perm)))


def conv_transpose_shape_tuple(lhs_shape, rhs_shape, window_strides, padding, dimension_numbers):
    """Like jax.lax.conv_transpose_shape_tuple: the output shape of ``conv_transpose``.

    >>> conv_transpose_shape_tuple((2, 5, 5, 3), (3, 3, 3, 4), (2, 2), "SAME",
    ...                            ("NHWC", "HWIO", "NHWC"))
    (2, 10, 10, 4)
    """
    lhs_perm, rhs_perm, out_perm = conv_general_permutations(dimension_numbers)
    lhs_t, rhs_t = np.take(lhs_shape, lhs_perm), np.take(rhs_shape, rhs_perm)
    if isinstance(padding, str):
        padding = [
            _transpose_padding(int(k), s, padding) for k, s in zip(rhs_t[2:], window_strides)
        ]
    axes = zip(lhs_t[2:], rhs_t[2:], window_strides, padding)
    spatial = [(int(n) - 1) * s - int(k) + 2 + lo + hi for n, k, s, (lo, hi) in axes]
    out = (int(lhs_t[0]), int(rhs_t[0]), *spatial)
    return tuple(int(n) for n in np.take(out, np.argsort(out_perm)))


def reduce_window_shape_tuple(operand_shape, window_dimensions, window_strides, padding,
                              base_dilation=None, window_dilation=None):  # fmt: skip
    """Like jax.lax.reduce_window_shape_tuple: the output shape of a windowed reduction
    (``padding`` as pairs).

    >>> reduce_window_shape_tuple((5, 6), (2, 2), (2, 2), [(0, 1), (0, 0)])
    (3, 3)
    """
    n = len(operand_shape)
    base = (1,) * n if base_dilation is None else base_dilation
    dilation = (1,) * n if window_dilation is None else window_dilation
    axes = zip(operand_shape, base, padding, window_dimensions, dilation, window_strides)
    return tuple(
        max(_dilated(d, b) + lo + hi - _dilated(k, r) + s, 0) // s
        for d, b, (lo, hi), k, r, s in axes
    )


# reduce_window's computation: the monoids it knows, by any of their spellings
_MONOIDS: dict[Any, str] = {anp.add: "sum", np.add: "sum", operator.add: "sum",
                            anp.maximum: "max", np.maximum: "max",
                            anp.minimum: "min", np.minimum: "min"}  # fmt: skip
_REDUCERS = {"sum": reduce_window_sum, "max": reduce_window_max, "min": reduce_window_min}


def reduce_window(operand, init_value, computation: Callable, window_dimensions: Sequence[int],
                  window_strides=None, padding="VALID", base_dilation=None,
                  window_dilation=None):  # fmt: skip
    """Like jax.lax.reduce_window for ``computation`` ``lax.add``, ``lax.max`` or
    ``lax.min`` (``np.add``, ``np.maximum``, ``np.minimum``): each window of ``operand``
    reduced, starting from ``init_value`` (any scalar, traced too: combined once with each
    window's reduction; padding and the gaps of a base dilation add nothing), as XLA does.

    >>> import numpy as np
    >>> reduce_window(np.arange(4.0), 0.0, np.add, (2,), (1,), "VALID")
    array([1., 3., 5.])
    >>> reduce_window(np.arange(4.0), 10.0, np.add, (2,), (2,), [(1, 0)])
    array([10., 13.])
    """
    kind = _MONOIDS.get(computation)
    if kind is None:
        raise NotImplementedError(
            f"reduce_window: computation must be lax.add, lax.max or lax.min (np.add, "
            f"np.maximum, np.minimum), got {computation!r:.60}; for another reduction combine "
            f"strided slices of the padded operand yourself"
        )
    if ndim_of(init_value) != 0:
        raise TypeError(f"reduce_window: init_value must be a scalar, got shape "
                        f"{shape_of(init_value)}")  # fmt: skip
    out = _REDUCERS[kind](operand, window_dimensions, window_strides, padding, base_dilation,
                          window_dilation)  # fmt: skip
    if not isinstance(init_value, Tracer) and np.all(
        init_value == _identity(kind, dtype_of(operand))
    ):
        return out
    # a Python scalar promotes weakly: float32 windows stay float32
    init = init_value if isinstance(init_value, Tracer) else np.asarray(init_value).item()
    return {"sum": anp.add, "max": anp.maximum, "min": anp.minimum}[kind](init, out)
