"""``x.at[index]``: index updates (JAX's API), and ``x[index] = v`` on traced values.

``anp.at(x)[index].set(v)`` (and ``.add``, ``.multiply``, ``.min``, ``.max``) returns
``x`` updated, a new value: a traced value cannot be written into.  Each mode binds
one scatter primitive of ``autodiff/rules/indexing.py`` (``index_set_p``,
``index_add_p``, ...); a traced boolean mask over the leading axes with one value for
every selected entry becomes a ``where`` instead, which batches where a scatter cannot.
A tracer's ``x.at`` and ``x[index] = v`` (a rebinding, ``core/tracer.py``) reach the
functions here through ``register_numpy``.
"""

from __future__ import annotations

import numpy as np

from autodiff.core.arrays import ndim_of, shape_of
from autodiff.core.overrides import INDEX_UPDATE, SET_ITEM, register_numpy
from autodiff.core.tracer import Tracer
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import shape as _shp
from autodiff.rules.indexing import (
    _is_mask,
    _normalize_index,
    _rebuild,
    getitem,
    index_add_p,
    index_max_p,
    index_min_p,
    index_mul_p,
    index_set_p,
)

__all__ = ["at"]


def _target_shape(shape, index, arrays):
    """The shape of x[index], computed on a zero-strided stand-in for x."""
    stand_in = np.broadcast_to(np.zeros((), dtype=bool), shape)
    return stand_in[_rebuild(index, [np.zeros(shape_of(a), np.intp) for a in arrays])].shape


class _IndexUpdate:
    """``x.at[index]``: functional updates returning new values (JAX's API)."""

    __slots__ = ("index", "x")

    def __init__(self, x, index):
        self.x, self.index = x, index

    def _apply(self, prim, value):
        selected = self._traced_mask_select(prim, value)
        if selected is not None:
            return selected
        static, arrays = _normalize_index(shape_of(self.x), self.index)
        target = _target_shape(shape_of(self.x), static, arrays)
        value = _elt.astype(value, self.x.dtype)
        value = _shp.broadcast_to(value, target)
        return prim.bind(self.x, value, *arrays, index=static)

    def _traced_mask_select(self, prim, value):
        """``x.at[mask].<mode>(v)`` for a traced boolean mask over x's leading axes and a
        ``v`` that is the same for every selected entry: a select (``where``), which
        needs no concrete mask, so it batches under ``vmap`` where the scatter cannot."""
        mask = (
            self.index[0] if isinstance(self.index, tuple) and len(self.index) == 1 else self.index
        )
        if not (isinstance(mask, Tracer) and _is_mask(mask)):
            return None
        x_shape, k = shape_of(self.x), ndim_of(mask)
        rest = x_shape[k:]
        if shape_of(mask) != x_shape[:k] or ndim_of(value) > len(rest):
            return None
        try:
            if np.broadcast_shapes(shape_of(value), rest) != rest:
                return None
        except ValueError:
            return None
        mask = _shp.expand_dims(mask, tuple(range(k, len(x_shape)))) if rest else mask
        value = _elt.astype(value, self.x.dtype)
        x = self.x
        if prim is index_set_p:
            return _elt.where(mask, value, x)
        if prim is index_add_p:
            return x + _elt.where(mask, value, _cre.zeros_like(value))
        if prim is index_mul_p:
            return x * _elt.where(mask, value, _cre.ones_like(value))
        chooser = _elt.minimum if prim is index_min_p else _elt.maximum
        return _elt.where(mask, chooser(x, value), x)

    def get(self):
        """``x[index]``."""
        return getitem(self.x, self.index)

    def set(self, value):
        """``x`` with ``x[index] = value``."""
        return self._apply(index_set_p, value)

    def add(self, value):
        """``x`` with ``x[index] += value``; repeated positions accumulate."""
        return self._apply(index_add_p, value)

    def multiply(self, value):
        """``x`` with ``x[index] *= value``; repeated positions multiply."""
        return self._apply(index_mul_p, value)

    def min(self, value):
        """``x`` with ``x[index] = minimum(x[index], value)``."""
        return self._apply(index_min_p, value)

    def max(self, value):
        """``x`` with ``x[index] = maximum(x[index], value)``."""
        return self._apply(index_max_p, value)


class at:
    """``anp.at(x)[index].set(v)``: index updates for any array (traced values
    also have them as ``x.at[index]``).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.at(np.zeros(3))[1].add(5.0)
    array([0., 5., 0.])
    """

    __slots__ = ("x",)

    def __init__(self, x):
        self.x = x

    def __getitem__(self, index):
        return _IndexUpdate(self.x, index)


register_numpy(INDEX_UPDATE)(at)
register_numpy(SET_ITEM)(lambda x, index, value: at(x)[index].set(value))
