"""Array creation: from other arrays (``zeros_like``, ...), from nested lists of traced
values (``array``, ``asarray``), and ranges whose ends may be traced (``linspace``, ...);
and ``as_output``, the transforms' 0-d results as 0-d arrays (``as_array_p``).

No public primitive here has a derivative of its own: ``zeros_like`` and friends are
constants, and the rest are compositions (``array`` stacks its traced elements,
``linspace`` is ``start + i * step``), so their derivatives and batching come from
``stack``, ``broadcast_to`` and the elementwise rules.  With no traced value among the
arguments each function is NumPy's own, exactly.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autodiff.core.loading import RuleKit
from autodiff.core.lowering import Elementwise, Emitter
from autodiff.core.overrides import register_numpy
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import linear_taylor
from autodiff.core.tracer import Tracer

__all__ = ["ones_like", "zeros_like"]

# Sparsity detection's kit, loaded at its rules' first call (rules/_helpers.py says why;
# importing its sparsity_kit from there would join this module to the maths' circle).
_sparsity_kit = RuleKit("autodiff.rules._sparsity")


def _like(name, numpy_func):
    prim = Primitive(
        name,
        lambda x, *, dtype: numpy_func(x, dtype=dtype),
        differentiable=False,
    )
    prim.def_batch(lambda args, dims, *, dtype: (prim.bind(args[0], dtype=dtype), dims[0]))

    @prim.def_shape
    def shape(x, *, dtype):
        from autodiff.core.graph import ShapedArray  # staging's, loaded with jit (see above)

        return ShapedArray(x.shape, x.dtype if dtype is None else dtype)

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


# --- a transform's 0-d result: a 0-d array --------------------------------------------------


def _as_array(x: Any) -> Any:
    """A NumPy scalar as a 0-d array of its own (writable); anything else as it is."""
    return np.asarray(x) if isinstance(x, np.generic) else x


# Every array a transform returns is an ndarray, as JAX's results are arrays and torch's
# tensors, where NumPy's ufuncs give a NumPy scalar for 0-d operands.  Eagerly
# ``as_output`` converts the value; on a value ``jit`` stages it records this primitive,
# so that each tier of the jitted function (the replay, the kernels, control flow's
# bodies) converts where the transform did, and only there: ``jit(f)`` of an ``f`` that
# returns a NumPy scalar still returns one.  Derivatives and batches pass through (a
# batched value is not 0-d); compiled code copies nothing (``stages._typed`` types a
# kernel's 0-d results as NumPy's calls would).
as_array_p = Primitive(
    "as_array",
    _as_array,
    vjp=[lambda ct, ans, x: ct],
    jvp=[lambda t, ans, x: t],
    vjp_reads=[()],
    batch=lambda args, dims: (args[0], dims[0]),
    shape=lambda aval: aval,
    sparsity=_sparsity_kit.elementwise([True], ()),
    lowering=Elementwise(lambda x: x, kinds="fbiu"),
)
as_array_p.def_taylor(linear_taylor(as_array_p))


def as_output(x: Any) -> Any:
    """A result leaf as a transform returns it: a NumPy scalar (what a ufunc gives for
    0-d operands) as a 0-d array, and a 0-d value ``jit`` stages as one when the jitted
    function runs (``as_array_p``); other leaves as they are.  Also the last step of the
    compositions whose NumPy namesake always answers an array (``full_like``,
    ``tensordot``) but whose last step is a ufunc, which answers a scalar for 0-d operands.

    >>> import numpy as np
    >>> type(as_output(np.float64(1.5))).__name__, as_output(2.0)
    ('ndarray', 2.0)
    """
    if isinstance(x, np.generic):
        return np.asarray(x)
    if isinstance(x, Tracer) and x._interp.stages and x.shape == ():
        return as_array_p.bind(x)
    return x
