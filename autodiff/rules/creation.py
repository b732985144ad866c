"""Array creation from existing arrays: zeros_like, ones_like.

Their outputs are constants (not differentiable).  Under ``vmap`` they keep
the operand's batch axis, so the result is created by the operand's own array
library (NumPy, CuPy, Dask) rather than converted to NumPy.
"""

from __future__ import annotations

import numpy as np

from autodiff._core import Primitive
from autodiff._tracer import register_numpy

__all__ = ["empty_like", "full_like", "ones_like", "zeros_like"]


def _like(name, numpy_func):
    prim = Primitive(
        name,
        lambda x, *, dtype: numpy_func(x, dtype=dtype),
        differentiable=False,
    )
    prim.def_batch(lambda args, dims, *, dtype: (prim.bind(args[0], dtype=dtype), dims[0]))

    def public(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
        if shape is not None:
            raise NotImplementedError(f"{name}(..., shape=...) is not supported on traced values")
        return prim.bind(a, dtype=dtype)

    public.__name__ = public.__qualname__ = name
    public.__doc__ = f"Like numpy.{name}: a constant array shaped like ``a`` (no derivative)."
    public.primitive = prim  # type: ignore[attr-defined]
    return register_numpy(numpy_func)(public)


zeros_like = _like("zeros_like", np.zeros_like)
ones_like = _like("ones_like", np.ones_like)


@register_numpy(np.full_like)
def full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """Like numpy.full_like; a traced ``fill_value`` stays differentiable.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.full_like(np.zeros(2), 3.5)
    array([3.5, 3.5])
    """
    from autodiff.rules.elementwise import astype

    target = np.dtype(dtype) if dtype is not None else a.dtype
    return astype(zeros_like(a, dtype=target, shape=shape) + fill_value, target)


@register_numpy(np.empty_like)
def empty_like(a, dtype=None, order="K", subok=True, shape=None, *, device=None):
    """Like numpy.empty_like; the entries are zeros (NumPy leaves them unspecified)."""
    return zeros_like(a, dtype=dtype, shape=shape)
