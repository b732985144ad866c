"""Sets: ``isin``, a primitive with no derivative.  The set functions (``unique`` and
its array-API spellings, ``union1d``, ``intersect1d``, ``setdiff1d``, ``setxor1d``) are
compositions (``autodiff/numpy/_sets.py``).
"""

from __future__ import annotations

import math

import numpy as np

from autodiff.core.arrays import ndim_of, shape_of
from autodiff.core.primitive import Primitive
from autodiff.rules import elementwise as _elt
from autodiff.rules import indexing as _idx
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import bring_to_front, implements, move_to_front, numpy_impl

__all__ = ["isin"]


# --- isin ----------------------------------------------------------------------------------------


def _isin_batch(args, dims, *, invert, kind):
    (element, test), (ed, td) = args, dims
    if td is None:  # elementwise in ``element``: its batch axis stays
        return isin_p.bind(element, test, invert=invert, kind=kind), ed
    # One test set per example: compare every element with every member of its set.
    size = shape_of(test)[td]
    element = bring_to_front(element, ed, size)
    members = math.prod(n for i, n in enumerate(shape_of(test)) if i != td)
    test = _shp.reshape(
        move_to_front(test, td), (size,) + (1,) * (ndim_of(element) - 1) + (members,)
    )
    found = _red.any(_elt.equal(_shp.expand_dims(element, -1), test), axis=-1)
    return (_elt.logical_not(found) if invert else found), 0


isin_p = Primitive(
    "isin",
    numpy_impl(
        np.isin,
        # kind= only when set: Dask's isin has no such keyword
        lambda e, t, *, invert, kind: np.isin(
            e, t, invert=invert, **({} if kind is None else {"kind": kind})
        ),
    ),
    differentiable=False,
    batch=_isin_batch,
)


@implements(isin_p, np.isin)
def isin(element, test_elements, assume_unique=False, invert=False, *, kind=None):
    """Like numpy.isin (not differentiable; batchable): whether each entry of
    ``element`` is among ``test_elements``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.isin(np.array([1.0, 2.0, 3.0]), [3.0, 1.0])
    array([ True, False,  True])
    """
    element, test_elements = _idx.operand(element), _idx.operand(test_elements)
    return isin_p.bind(element, test_elements, invert=bool(invert), kind=kind)
