"""JAX's slices at traced positions (``autodiff.lax``): ``dynamic_slice``,
``dynamic_slice_in_dim``, ``dynamic_index_in_dim``, compositions of ``take`` with the
start clamped into the array as JAX clamps it, so their derivatives and batching are
``take``'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import autodiff.numpy as anp
from autodiff.core.arrays import ndim_of, shape_of

__all__ = ["dynamic_index_in_dim", "dynamic_slice", "dynamic_slice_in_dim"]


def dynamic_slice_in_dim(operand, start_index, slice_size: int, axis: int = 0, *,
                         allow_negative_indices: bool = True):  # fmt: skip
    """Like jax.lax.dynamic_slice_in_dim: ``slice_size`` elements of ``operand`` along
    ``axis`` from ``start_index`` (which may be traced), the start clamped so that the
    slice lies inside (a negative start counts from the end).

    >>> import numpy as np
    >>> dynamic_slice_in_dim(np.arange(6.0), 4, 3)
    array([3., 4., 5.])
    """
    size = shape_of(operand)[axis]
    if not 0 <= slice_size <= size:
        raise ValueError(f"dynamic_slice_in_dim: slice_size={slice_size} must be between 0 "
                         f"and the axis' length {size} (axis {axis} of shape "
                         f"{shape_of(operand)}).")  # fmt: skip
    start = anp.asarray(start_index)
    if allow_negative_indices:
        start = anp.where(start < 0, start + size, start)
    start = anp.clip(start, 0, size - slice_size)
    return anp.take(operand, start + anp.arange(slice_size), axis=axis)


def dynamic_slice(operand, start_indices: Sequence[Any], slice_sizes: Sequence[int], *,
                  allow_negative_indices: bool = True):  # fmt: skip
    """Like jax.lax.dynamic_slice: the block of ``slice_sizes`` at ``start_indices`` (one
    per axis, which may be traced), each clamped as in ``dynamic_slice_in_dim``.

    >>> import numpy as np
    >>> dynamic_slice(np.arange(12.0).reshape(3, 4), (1, 3), (2, 2))
    array([[ 6.,  7.],
           [10., 11.]])
    """
    if len(start_indices) != ndim_of(operand) or len(slice_sizes) != ndim_of(operand):
        raise ValueError(f"dynamic_slice: give one start index and one slice size per axis of "
                         f"the operand of shape {shape_of(operand)}; got {len(start_indices)} "
                         f"and {len(slice_sizes)}.")  # fmt: skip
    for axis, (start, size) in enumerate(zip(start_indices, slice_sizes)):
        operand = dynamic_slice_in_dim(operand, start, size, axis,
                                       allow_negative_indices=allow_negative_indices)  # fmt: skip
    return operand


def dynamic_index_in_dim(operand, index, axis: int = 0, keepdims: bool = True):
    """Like jax.lax.dynamic_index_in_dim: the element at ``index`` (which may be traced)
    along ``axis``, that axis kept with length 1 unless ``keepdims=False``.

    >>> import numpy as np
    >>> dynamic_index_in_dim(np.arange(6.0).reshape(2, 3), 1, axis=1, keepdims=False)
    array([1., 4.])
    """
    out = dynamic_slice_in_dim(operand, index, 1, axis)
    return out if keepdims else anp.squeeze(out, axis)
