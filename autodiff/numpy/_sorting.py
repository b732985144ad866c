"""Sorting compositions: ``sort``, ``partition``, ``sort_complex``.

``sort`` is ``take_along_axis`` of ``argsort``, so the derivative of each sorted entry
flows back to the entry it came from, and it needs no rules of its own; ``partition``
is the same over ``argpartition`` (NumPy's introselect arranges the values and their
positions alike, so the entries agree with ``numpy.partition`` everywhere, not only at
``kth``).
"""

from __future__ import annotations

import numpy as np

from autodiff.core.overrides import register_numpy
from autodiff.rules import compositions as _comp
from autodiff.rules import elementwise as _elt
from autodiff.rules.sorting import argpartition, argsort

__all__ = ["sort", "partition", "sort_complex"]


@register_numpy(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    """Like numpy.sort; the derivative of each sorted entry flows to the entry
    it came from.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> autodiff.grad(lambda x: anp.sort(x)[0])(np.array([3.0, 1.0, 2.0]))
    array([0., 1., 0.])
    """
    if axis is None:
        a, axis = _comp.ravel(a), 0
    order_ = argsort(a, axis, kind, order, stable=stable)
    return _comp.take_along_axis(a, order_, axis)


@register_numpy(np.partition)
def partition(a, kth, axis=-1, kind="introselect", order=None):
    """Like numpy.partition: the ``kth`` entries where sorting would put them, the
    others on the correct side; each entry's derivative flows to where it came from.

    >>> import numpy as np, autodiff.numpy as anp
    >>> float(anp.partition(np.array([3.0, 1.0, 2.0]), 1)[1])
    2.0
    """
    if axis is None:
        a, axis = _comp.ravel(a), 0
    return _comp.take_along_axis(a, argpartition(a, kth, axis, kind, order), axis)


@register_numpy(np.sort_complex)
def sort_complex(a):
    """Like numpy.sort_complex: sorted along the last axis by real part, then
    imaginary part; the result is complex.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.sort_complex(np.array([2.0, 1.0 + 1j, 1.0]))
    array([1.+0.j, 1.+1.j, 2.+0.j])
    """
    out = sort(a)
    kind = out.dtype.char
    if kind in "FDG":
        return out
    # NumPy's choice: 8- and 16-bit integers give complex64, long doubles clongdouble,
    # everything else (float32 too) complex128.
    target = np.complex64 if kind in "bBhH" else np.clongdouble if kind == "g" else np.complex128
    return _elt.astype(out, target)
