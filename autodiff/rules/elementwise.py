"""Elementwise primitives, one line each.

``unary(name, impl, deriv)`` and ``broadcasting(name, impl, *derivs)`` (see
``_helpers``) take, per argument, ``deriv(g, ans, *args)``: how a perturbation
``g`` of that argument moves the output.  It serves as both JVP and VJP,
since an elementwise Jacobian is diagonal; the helper handles broadcasting
(sum back down in the VJP) and batching.

Sub-gradient conventions at kinks: ``abs`` has derivative ``sign(x)`` (0 at
0); ``maximum``/``minimum`` split ties equally (0.5 each).
"""

from __future__ import annotations

import numpy as np

from autodiff._core import Primitive
from autodiff._tracer import register_numpy
from autodiff.rules._helpers import broadcasting, unary

__all__ = [
    "abs",
    "absolute",
    "add",
    "astype",
    "clip",
    "cos",
    "divide",
    "equal",
    "exp",
    "floor_divide",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "log",
    "maximum",
    "minimum",
    "mod",
    "multiply",
    "negative",
    "not_equal",
    "positive",
    "power",
    "remainder",
    "sign",
    "sin",
    "sqrt",
    "square",
    "stop_gradient",
    "subtract",
    "tanh",
    "true_divide",
    "where",
]

# --- arithmetic -----------------------------------------------------------------------
add = broadcasting("add", np.add, lambda g, a, x, y: g, lambda g, a, x, y: g, numpy=[np.add])
subtract = broadcasting(
    "subtract", np.subtract, lambda g, a, x, y: g, lambda g, a, x, y: -g, numpy=[np.subtract]
)
multiply = broadcasting(
    "multiply", np.multiply, lambda g, a, x, y: g * y, lambda g, a, x, y: x * g, numpy=[np.multiply]
)
divide = broadcasting(
    "divide", np.divide, lambda g, a, x, y: g / y, lambda g, a, x, y: -g * a / y, numpy=[np.divide]
)
true_divide = divide
negative = unary("negative", np.negative, lambda g, a, x: -g, numpy=[np.negative])
positive = unary("positive", np.positive, lambda g, a, x: g, numpy=[np.positive])
square = unary("square", np.square, lambda g, a, x: g * (2 * x), numpy=[np.square])
sqrt = unary("sqrt", np.sqrt, lambda g, a, x: g / (2 * a), numpy=[np.sqrt])


def _power_dx(g, ans, x, y):
    if isinstance(y, (int, float)):  # the common x**2: no select needed
        return g * (y * x ** (y - 1)) if y != 0 else g * 0.0
    # d/dx x**y = y x**(y-1), and 0 where y == 0 (avoiding 0 * 0**-1 = nan).
    return g * (y * x ** where(equal(y, 0), 1, y - 1))


def _power_dy(g, ans, x, y):
    # d/dy x**y = x**y log(x), taken as 0 at x == 0 (the limit for y > 0).
    at_zero = equal(x, 0)
    return g * (ans * where(at_zero, 0.0, log(where(at_zero, 1.0, x))))


power = broadcasting("power", np.power, _power_dx, _power_dy, numpy=[np.power])
remainder = broadcasting(
    "remainder",
    np.remainder,
    lambda g, a, x, y: g,
    lambda g, a, x, y: -g * floor_divide(x, y),
    numpy=[np.remainder],
)
mod = remainder
floor_divide = broadcasting(
    "floor_divide", np.floor_divide, nargs=2, numpy=[np.floor_divide], differentiable=False
)

# --- exponentials and trigonometry ----------------------------------------------------
exp = unary("exp", np.exp, lambda g, a, x: g * a, numpy=[np.exp])
log = unary("log", np.log, lambda g, a, x: g / x, numpy=[np.log])
sin = unary("sin", np.sin, lambda g, a, x: g * cos(x), numpy=[np.sin])
cos = unary("cos", np.cos, lambda g, a, x: -g * sin(x), numpy=[np.cos])
tanh = unary("tanh", np.tanh, lambda g, a, x: g * (1 - a * a), numpy=[np.tanh])

# --- piecewise ------------------------------------------------------------------------
absolute = unary("absolute", np.absolute, lambda g, a, x: g * sign(x), numpy=[np.absolute])
abs = absolute


def _won(g, x, y):
    """``g`` where x beats y, half of it on ties, 0 where y wins."""
    dtype = _dtype_of(g)  # comparisons give constants: no derivative flows through them
    return g * (astype(greater(x, y), dtype) + 0.5 * astype(equal(x, y), dtype))


maximum = broadcasting(
    "maximum",
    np.maximum,
    lambda g, a, x, y: _won(g, x, y),
    lambda g, a, x, y: _won(g, y, x),
    numpy=[np.maximum],
)
minimum = broadcasting(
    "minimum",
    np.minimum,
    lambda g, a, x, y: _won(g, y, x),
    lambda g, a, x, y: _won(g, x, y),
    numpy=[np.minimum],
)


@register_numpy(np.clip)
def clip(a, a_min=None, a_max=None, out=None, *, min=None, max=None):
    """Like numpy.clip: ``minimum(maximum(a, a_min), a_max)``; either bound may be None.

    At a bound the derivative is split like maximum/minimum ties (0.5).
    """
    if out is not None:
        raise NotImplementedError("clip(..., out=...) is not supported; use the returned value")
    low = a_min if a_min is not None else min
    high = a_max if a_max is not None else max
    if low is not None:
        a = maximum(a, low)
    if high is not None:
        a = minimum(a, high)
    return a


where = broadcasting(
    "where",
    np.where,
    None,
    lambda g, a, c, x, y: where(c, g, 0.0),
    lambda g, a, c, x, y: where(c, 0.0, g),
    numpy=[np.where],
)

# --- not differentiable ---------------------------------------------------------------
sign = unary("sign", np.sign, numpy=[np.sign], differentiable=False)
equal = broadcasting("equal", np.equal, nargs=2, numpy=[np.equal], differentiable=False)
not_equal = broadcasting(
    "not_equal", np.not_equal, nargs=2, numpy=[np.not_equal], differentiable=False
)
less = broadcasting("less", np.less, nargs=2, numpy=[np.less], differentiable=False)
less_equal = broadcasting(
    "less_equal", np.less_equal, nargs=2, numpy=[np.less_equal], differentiable=False
)
greater = broadcasting("greater", np.greater, nargs=2, numpy=[np.greater], differentiable=False)
greater_equal = broadcasting(
    "greater_equal", np.greater_equal, nargs=2, numpy=[np.greater_equal], differentiable=False
)
stop_gradient = unary("stop_gradient", lambda x: x, differentiable=False)
stop_gradient.__doc__ = "``x`` as a constant for every derivative; values and batching still flow."


# --- astype ---------------------------------------------------------------------------


def _astype_impl(x, *, dtype):
    return x.astype(dtype) if hasattr(x, "astype") else np.asarray(x, dtype=dtype)


def _dtype_of(x):
    return x.dtype if hasattr(x, "dtype") else np.result_type(x)


astype_p = Primitive(
    "astype",
    _astype_impl,
    vjp=[lambda ct, ans, x, *, dtype: astype(ct, _dtype_of(x))],
    jvp=[lambda t, ans, x, *, dtype: astype_p.bind(t, dtype=dtype)],
    batch=lambda args, dims, *, dtype: (astype_p.bind(args[0], dtype=dtype), dims[0]),
)
# Casting to an integer or bool type rounds: no derivative flows through it.
astype_discrete_p = Primitive(
    "astype_discrete",
    _astype_impl,
    differentiable=False,
    batch=lambda args, dims, *, dtype: (astype_discrete_p.bind(args[0], dtype=dtype), dims[0]),
)


@register_numpy(np.astype)
def astype(x, dtype, /, *, copy=True, device=None):
    """Like ``x.astype(dtype)``; differentiable to floating dtypes only."""
    dtype = np.dtype(dtype)
    if dtype == _dtype_of(x):
        return x
    prim = astype_p if dtype.kind in "fc" else astype_discrete_p
    return prim.bind(x, dtype=dtype)
