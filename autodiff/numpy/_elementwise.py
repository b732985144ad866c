"""Compositions of the elementwise primitives: ``modf``, ``frexp``, ``divmod``,
``select``, ``unwrap``, ``isposinf``, ``isneginf``, and the comparisons of whole arrays
(``isclose``, ``allclose``, ``array_equal``, ``array_equiv``).

Each is written with the primitives of ``autodiff/rules/elementwise.py`` (``modf``
and ``frexp`` with its two one-output halves each), whose rules give the derivatives
and batching.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from autodiff.core.arrays import (
    array_library,
    dtype_of,
    is_complex,
    ndim_of,
    normalize_axes,
    shape_of,
)
from autodiff.core.overrides import register_numpy
from autodiff.core.tracer import Tracer
from autodiff.rules import creation as _cre
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules.elementwise import (
    _frexp_exponent,
    _frexp_mantissa,
    _modf_fraction,
    _modf_integral,
    absolute,
    as_operands,
    astype,
    equal,
    floor_divide,
    greater,
    isfinite,
    isinf,
    isnan,
    less,
    less_equal,
    logical_and,
    logical_not,
    logical_or,
    remainder,
    signbit,
    stop_gradient,
    subtract,
    where,
)

__all__ = [
    "modf", "frexp", "divmod", "select", "unwrap", "isposinf", "isneginf", "isclose",
    "allclose", "array_equal", "array_equiv",
]  # fmt: skip


@register_numpy(np.modf)
def modf(x, /):
    """Like numpy.modf: ``(fractional part, integral part)``, both with the sign of ``x``.
    The fractional part has derivative 1; the integral part none.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.modf(np.array([2.5, -1.25]))
    (array([ 0.5 , -0.25]), array([ 2., -1.]))
    """
    return _modf_fraction(x), _modf_integral(x)


@register_numpy(np.frexp)
def frexp(x, /):
    """Like numpy.frexp: ``(mantissa, exponent)`` with ``x == mantissa * 2**exponent``.
    The mantissa has derivative ``2**-exponent``; the (integer) exponent none.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.frexp(np.array([8.0, 0.75]))
    (array([0.5 , 0.75]), array([4, 0], dtype=int32))
    """
    return _frexp_mantissa(x), _frexp_exponent(x)


@register_numpy(np.divmod)
def divmod(x1, x2, /):
    """Like numpy.divmod: ``(floor_divide(x1, x2), remainder(x1, x2))``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.divmod(np.array([7.0, -7.0]), 2.0)
    (array([ 3., -4.]), array([1., 1.]))
    """
    return floor_divide(x1, x2), remainder(x1, x2)


@register_numpy(np.select)
def select(condlist, choicelist, default=0):
    """Like numpy.select: the choice of the first true condition (``default`` if none).

    >>> import numpy as np, autodiff.numpy as anp
    >>> x = np.array([-1.0, 0.5, 2.0])
    >>> anp.select([x < 0, x > 1], [-x, x * 10], default=x)
    array([ 1. ,  0.5, 20. ])
    """
    if len(condlist) != len(choicelist):
        raise ValueError("list of cases must be same length as list of conditions")
    result = default
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        result = where(cond, choice, result)
    return result


@register_numpy(np.unwrap)
def unwrap(p, discont=None, axis=-1, *, period=2 * math.pi):
    """Like numpy.unwrap: ``p`` with jumps larger than ``discont`` (default
    ``period / 2``) along ``axis`` replaced by their complements, by adding multiples
    of ``period``.  The corrections are piecewise constant, so the derivative is the
    identity.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.unwrap(np.array([0.0, 3.0, 6.5, 0.5])).round(4)
    array([0.    , 3.    , 0.2168, 0.5   ])
    """
    p = as_operands(p)
    lead = (slice(None),) * normalize_axes(axis, ndim_of(p))[0]
    head, tail, body = (*lead, slice(0, 1)), (*lead, slice(1, None)), (*lead, slice(0, -1))
    fixed = stop_gradient(p)  # the corrections: constants for every derivative
    step = fixed[tail] - fixed[body]
    if discont is None:
        discont = period / 2
    if np.result_type(dtype_of(step), period).kind in "iu":  # NumPy's integer arithmetic
        high, odd = builtins.divmod(period, 2)
        ambiguous = odd == 0
    else:
        high, ambiguous = period / 2, True
    wrapped = remainder(step + high, period) - high  # step moved into [-high, high)
    if ambiguous:  # a step of exactly +period/2 stays +period/2
        wrapped = where(logical_and(equal(wrapped, -high), greater(step, 0)), high, wrapped)
    correction = where(less(absolute(step), discont), 0, wrapped - step)
    shift = _red.cumsum(correction, axis=len(lead))
    return _shp.concatenate([p[head], p[tail] + shift], axis=len(lead))


def _real_operand(name, x, out):
    """``x`` for isposinf/isneginf: real (the sign of a complex infinity is ambiguous)."""
    x = as_operands(x)
    if is_complex(x):
        raise TypeError(
            f"{name} is not supported for complex values because it would be ambiguous; "
            f"apply it to anp.real(x) or anp.imag(x)"
        )
    if out is not None:
        raise NotImplementedError(f"{name}(..., out=...) is not supported; use the returned value")
    return x


@register_numpy(np.isposinf)
def isposinf(x, out=None):
    """Like numpy.isposinf (not differentiable; batchable).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.isposinf(np.array([np.inf, -np.inf, 1.0]))
    array([ True, False, False])
    """
    x = _real_operand("isposinf", x, out)
    return logical_and(isinf(x), logical_not(signbit(x)))


@register_numpy(np.isneginf)
def isneginf(x, out=None):
    """Like numpy.isneginf (not differentiable; batchable).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.isneginf(np.array([np.inf, -np.inf, 1.0]))
    array([False,  True, False])
    """
    x = _real_operand("isneginf", x, out)
    return logical_and(isinf(x), signbit(x))


@register_numpy(np.isclose)
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Like numpy.isclose: ``|a - b| <= atol + rtol * |b|`` elementwise, infinities
    equal to themselves (not differentiable; batchable).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.isclose(np.array([1.0, 1.1, np.inf]), np.array([1.0 + 1e-9, 1.0, np.inf]))
    array([ True, False,  True])
    """
    a, b = as_operands(a, b)
    if isinstance(b, int) and not isinstance(b, bool):
        b = float(b)
    elif dtype_of(b).kind in "biu":  # as NumPy: compare in floating point
        b = astype(b, np.result_type(dtype_of(b), 1.0))
    with np.errstate(invalid="ignore"):  # inf - inf: equal, decided by a == b
        near = less_equal(absolute(subtract(a, b)), atol + rtol * absolute(b))
        close = logical_or(logical_and(near, isfinite(b)), equal(a, b))
        if equal_nan:
            close = logical_or(close, logical_and(isnan(a), isnan(b)))
    return close


def _as_bool(x):
    """A Python bool from a NumPy value, as NumPy returns; a traced 0-d bool or one of
    another array library (a lazy Dask array, a CuPy array on the GPU) stays an array."""
    return builtins.bool(x) if isinstance(x, (np.ndarray, np.generic)) else x


def _false(a1, a2):
    """False: a bool for NumPy operands, else a 0-d array like the traced (transforms
    return arrays) or foreign one."""
    other = next((a for a in (a1, a2) if isinstance(a, Tracer) or array_library(a)), None)
    return False if other is None else _red.any(_cre.zeros_like(other, dtype=np.bool_))


@register_numpy(np.allclose)
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """Like numpy.allclose: ``all(isclose(a, b, ...))``; a Python bool for plain arrays
    and a 0-d boolean array for traced ones (not differentiable; batchable).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.allclose(np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-9]))
    True
    """
    return _as_bool(_red.all(isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


@register_numpy(np.array_equal)
def array_equal(a1, a2, equal_nan=False):
    """Like numpy.array_equal: the same shape and the same elements (not
    differentiable; batchable).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.array_equal(np.array([1.0, 2.0]), np.array([1.0, 2.0])), anp.array_equal([1], [1, 1])
    (True, False)
    """
    a1, a2 = as_operands(a1, a2)
    if shape_of(a1) != shape_of(a2):
        return _false(a1, a2)
    same = equal(a1, a2)
    if equal_nan:
        same = logical_or(same, logical_and(isnan(a1), isnan(a2)))
    return _as_bool(_red.all(same))


@register_numpy(np.array_equiv)
def array_equiv(a1, a2):
    """Like numpy.array_equiv: equal elements once broadcast to one shape (not
    differentiable; batchable).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.array_equiv(np.array([1.0, 2.0]), np.array([[1.0, 2.0], [1.0, 2.0]]))
    True
    """
    a1, a2 = as_operands(a1, a2)
    try:
        np.broadcast_shapes(shape_of(a1), shape_of(a2))
    except ValueError:
        return _false(a1, a2)
    return _as_bool(_red.all(equal(a1, a2)))
