"""``anp.r_`` and ``anp.c_``: NumPy's concatenation shorthands, for traced values too.

``np.r_[x, y]`` converts every item with ``np.array`` itself, which no protocol hands to
autodiff; these do the same work with ``anp`` functions.  With no traced item they are
NumPy's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autodiff.core.arrays import dtype_of, ndim_of
from autodiff.numpy._creation import array, linspace
from autodiff.rules.compositions import _holds_tracer
from autodiff.rules.shape import concatenate, transpose

__all__ = ["c_", "r_"]

_SCALARS = (int, float, complex, bool, np.generic)


def _directive(item: str, axis: int, ndmin: int, trans1d: int) -> tuple[int, int, int]:
    """``"axis"``, ``"axis,ndmin"`` or ``"axis,ndmin,trans1d"`` (see numpy.r_)."""
    if item in ("r", "c"):
        raise NotImplementedError(
            f"anp.r_['{item}', ...] builds a numpy.matrix, which traced values cannot be; "
            f"use anp.r_['0,2', ...] (rows) or anp.c_[...] (columns) for a 2-d array."
        )
    try:
        values = [int(v) for v in item.split(",")]
    except ValueError as e:
        raise ValueError(f"unknown special directive {item!r}") from e
    if not 1 <= len(values) <= 3:
        raise ValueError(f"unknown special directive {item!r}")
    axis, ndmin, trans1d = (values + [ndmin, trans1d][len(values) - 1 :])[:3]
    return axis, ndmin, trans1d


def _place(x: Any, ndmin: int, trans1d: int) -> Any:
    """``x`` with at least ``ndmin`` axes, its own axes moved to ``trans1d`` (numpy.r_)."""
    nd = ndim_of(x)
    x = array(x, ndmin=ndmin)
    if trans1d != -1 and nd < ndmin:
        k2, k1 = ndmin - nd, trans1d
        if k1 < 0:
            k1 += k2 + 1
        axes = list(range(ndmin))
        x = transpose(x, axes[:k1] + axes[k2:] + axes[k1:k2])
    return x


class _Concatenator:
    __slots__ = ("axis", "name", "ndmin", "numpy", "trans1d")

    def __init__(self, name: str, numpy: Any, axis: int, ndmin: int, trans1d: int) -> None:
        self.name, self.numpy = name, numpy
        self.axis, self.ndmin, self.trans1d = axis, ndmin, trans1d

    def __getitem__(self, key: Any) -> Any:
        items = key if isinstance(key, tuple) else (key,)
        if not _holds_tracer(list(items)):
            return self.numpy[key]
        axis, ndmin, trans1d = self.axis, self.ndmin, self.trans1d
        pieces, kinds = [], []  # kinds: the scalars and dtypes that set the result's dtype
        for k, item in enumerate(items):
            if isinstance(item, str):
                if k != 0:
                    raise ValueError("special directives must be the first entry.")
                axis, ndmin, trans1d = _directive(item, axis, ndmin, trans1d)
                continue
            if isinstance(item, slice):
                piece = _range(item)
                if ndmin > 1:
                    piece = array(piece, ndmin=ndmin)
                    if trans1d != -1:
                        piece = np.swapaxes(piece, -1, trans1d)
                kinds.append(piece.dtype)
            elif type(item) in _SCALARS:
                piece = item
                kinds.append(item)
            else:
                piece = _place(item, ndmin, trans1d)
                kinds.append(dtype_of(piece))
            pieces.append(piece)
        dtype = np.result_type(*kinds)
        return concatenate([array(p, dtype=dtype, ndmin=ndmin) for p in pieces], axis=axis)

    def __len__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return f"autodiff.numpy.{self.name}"


def _range(item: slice) -> Any:
    start = 0 if item.start is None else item.start
    step: Any = 1 if item.step is None else item.step
    if isinstance(step, (complex, np.complexfloating)):  # 0:1:5j means 5 points
        return linspace(start, item.stop, num=int(abs(complex(step))))
    return np.arange(start, item.stop, step)


class _RowConcatenator(_Concatenator):
    """Like ``numpy.r_``: concatenate along the first axis; items may be traced.

    >>> import numpy as np, autodiff.numpy as anp
    >>> from autodiff import grad
    >>> float(grad(lambda x: anp.r_[x, 2.0 * x, 0:3].sum())(1.0))
    3.0
    """

    __slots__ = ()


class _ColumnConcatenator(_Concatenator):
    """Like ``numpy.c_``: 1-d items become columns (concatenated along the last axis).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.c_[np.array([1.0, 2.0]), np.array([3.0, 4.0])].shape
    (2, 2)
    """

    __slots__ = ()


r_ = _RowConcatenator("r_", np.r_, axis=0, ndmin=1, trans1d=-1)
c_ = _ColumnConcatenator("c_", np.c_, axis=-1, ndmin=2, trans1d=0)
