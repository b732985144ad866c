"""Array creation from existing arrays: zeros_like, ones_like.

Their outputs are constants (not differentiable).  Under ``vmap`` they keep
the operand's batch axis, so the result is created by the operand's own array
library (NumPy, CuPy, Dask) rather than converted to NumPy.
"""

from __future__ import annotations

import numpy as np

from autodiff._core import Primitive
from autodiff._tracer import register_numpy

__all__ = ["ones_like", "zeros_like"]


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
