"""Array creation: from other arrays (``zeros_like``, ...), from nested lists of traced
values (``array``, ``asarray``), and ranges whose ends may be traced (``linspace``, ...).

No primitive here has a derivative of its own: ``zeros_like`` and friends are constants,
and the rest are compositions (``array`` stacks its traced elements, ``linspace`` is
``start + i * step``), so their derivatives and batching come from ``stack``,
``broadcast_to`` and the elementwise rules.  With no traced value among the arguments
each function is NumPy's own, exactly.
"""

from __future__ import annotations

import numpy as np

from autodiff.core.graph import ShapedArray
from autodiff.core.lowering import Emitter
from autodiff.core.overrides import register_numpy
from autodiff.core.primitive import Primitive

__all__ = ["ones_like", "zeros_like"]


def _like(name, numpy_func):
    prim = Primitive(
        name,
        lambda x, *, dtype: numpy_func(x, dtype=dtype),
        differentiable=False,
    )
    prim.def_batch(lambda args, dims, *, dtype: (prim.bind(args[0], dtype=dtype), dims[0]))
    prim.def_shape(lambda x, *, dtype: ShapedArray(x.shape, x.dtype if dtype is None else dtype))
    fill = {"zeros_like": 0, "ones_like": 1}.get(name)
    if fill is not None:

        def lowering(ctx, x, *, dtype, fill=fill):
            return ctx.full(ctx.out_avals[0], fill)

        prim.def_lowering(Emitter(lowering))

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
