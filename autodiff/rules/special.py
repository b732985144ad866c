"""scipy.special functions (``autodiff.scipy.special``).  Needs SciPy.

The elementwise functions are one line each (see ``elementwise.py``): a
perturbation ``g`` of an argument moves the output by ``deriv(g, ans, *args)``:

=============  ===============================================================
erf            ``g * 2/sqrt(pi) * exp(-x**2)`` (holomorphic: complex x too)
erfc           ``-g * 2/sqrt(pi) * exp(-x**2)``
expit          ``g * ans * (1 - ans)``
logit          ``g / (x * (1 - x))``
gammaln        ``g * digamma(x)`` (log|Gamma|, also for negative x)
digamma        ``g * polygamma(1, x)``
polygamma      in x: ``g * polygamma(n + 1, x)``; none in the integer order n
xlogy          in x: ``g * log(y)``; in y: ``g * x / y`` (0 where x == 0)
xlog1py        in x: ``g * log1p(y)``; in y: ``g * x / (1 + y)`` (0 where x == 0)
=============  ===============================================================

The SciPy ufuncs are registered, so ``scipy.special.erf(traced)`` works too.
``logsumexp``, ``softmax`` and ``log_softmax`` are compositions (their
derivatives follow): they subtract the maximum as a constant (it cancels
from the result, so its derivative is not needed), which keeps them stable.
SciPy's versions of these and ``polygamma`` are Python functions that convert
their inputs with ``asarray``: call the functions of this module on traced values.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.special as _sp

from autodiff.rules._helpers import broadcasting, ndim_of, normalize_axes, shape_of, unary
from autodiff.rules.elementwise import (
    absolute,
    equal,
    exp,
    isfinite,
    log,
    log1p,
    sign,
    stop_gradient,
    where,
)
from autodiff.rules.reductions import max, sum
from autodiff.rules.shape import broadcast_to, reshape

__all__ = [
    "erf",
    "erfc",
    "expit",
    "logit",
    "gammaln",
    "digamma",
    "polygamma",
    "xlogy",
    "xlog1py",
    "logsumexp",
    "softmax",
    "log_softmax",
]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)  # a Python float keeps float32 float32


def _quotient_or_zero(x: Any, y: Any) -> Any:
    """``x / y``, and 0 where ``x == 0`` (even where ``y`` is 0 too)."""
    zero = equal(x, 0)
    return where(zero, 0.0, x / where(zero, 1.0, y))


def _polygamma_impl(n, x):
    # scipy.special.polygamma's own formula, with ufuncs only: scipy's function
    # converts its arguments with np.asarray, which CuPy and Dask arrays must not meet.
    higher = (-1.0) ** (n + 1) * _sp.gamma(n + 1.0) * _sp.zeta(n + 1, x)
    out = np.where(n == 0, _sp.psi(x), higher)  # float64 whatever x is; keep float32 float32
    dtype = getattr(x, "dtype", None)
    return out.astype(dtype) if dtype == np.float32 else out


erf_p, erf = unary(
    "erf", _sp.erf, lambda g, a, x: g * (_TWO_OVER_SQRT_PI * exp(-(x * x))), numpy=[_sp.erf]
)
erfc_p, erfc = unary(
    "erfc", _sp.erfc, lambda g, a, x: g * (-_TWO_OVER_SQRT_PI * exp(-(x * x))), numpy=[_sp.erfc]
)
expit_p, expit = unary("expit", _sp.expit, lambda g, a, x: g * (a * (1 - a)), numpy=[_sp.expit])
logit_p, logit = unary("logit", _sp.logit, lambda g, a, x: g / (x * (1 - x)), numpy=[_sp.logit])
gammaln_p, gammaln = unary(
    "gammaln", _sp.gammaln, lambda g, a, x: g * digamma(x), numpy=[_sp.gammaln]
)
digamma_p, digamma = unary(
    "digamma", _sp.digamma, lambda g, a, x: g * polygamma(1, x), numpy=[_sp.digamma]
)
polygamma_p, polygamma = broadcasting(
    "polygamma", _polygamma_impl, None, lambda g, a, n, x: g * polygamma(n + 1, x)
)
xlogy_p, xlogy = broadcasting(
    "xlogy",
    _sp.xlogy,
    lambda g, a, x, y: g * log(y),
    lambda g, a, x, y: g * _quotient_or_zero(x, y),
    numpy=[_sp.xlogy],
)
xlog1py_p, xlog1py = broadcasting(
    "xlog1py",
    _sp.xlog1py,
    lambda g, a, x, y: g * log1p(y),
    lambda g, a, x, y: g * _quotient_or_zero(x, 1 + y),
    numpy=[_sp.xlog1py],
)

erf.__doc__ = """Like scipy.special.erf, elementwise (complex too); differentiable and batchable.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> ss.erf(np.array([0.0]))
array([0.])
>>> bool(autodiff.grad(ss.erf)(0.0) == 2 / np.sqrt(np.pi))
True
"""
erfc.__doc__ = """Like scipy.special.erfc (``1 - erf(x)``), elementwise (complex too).

>>> import numpy as np, autodiff.scipy.special as ss
>>> ss.erfc(np.array([0.0]))
array([1.])
"""
expit.__doc__ = """Like scipy.special.expit (the logistic sigmoid), elementwise.

Its derivative is ``expit(x) * (1 - expit(x))``.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> ss.expit(np.array([0.0]))
array([0.5])
>>> float(autodiff.grad(ss.expit)(0.0))
0.25
"""
logit.__doc__ = """Like scipy.special.logit (``log(p / (1 - p))``, the inverse of expit).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> ss.logit(np.array([0.5]))
array([0.])
>>> float(autodiff.grad(ss.logit)(0.5))
4.0
"""
gammaln.__doc__ = """Like scipy.special.gammaln: ``log|Gamma(x)|`` for real x (derivative: digamma).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> ss.gammaln(np.array([1.0, 4.0]))
array([0.        , 1.79175947])
>>> bool(np.isclose(autodiff.grad(ss.gammaln)(1.0), -np.euler_gamma))
True
"""
digamma.__doc__ = """Like scipy.special.digamma (psi) for real x; its derivative is polygamma(1, x).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(ss.digamma(1.0), -np.euler_gamma))
True
>>> bool(np.isclose(autodiff.grad(ss.digamma)(1.0), np.pi**2 / 6))
True
"""
polygamma.__doc__ = """Like scipy.special.polygamma(n, x) for real x and integer orders n.

Differentiable in ``x`` (to any order: the derivative is ``polygamma(n + 1, x)``),
not in ``n``; batchable in both.  SciPy's polygamma converts its arguments
with ``asarray``, so call this one on traced values.  Unlike SciPy's, a float32
``x`` gives float32.

>>> import numpy as np, scipy.special, autodiff.scipy.special as ss
>>> x = np.array([0.5, 2.0])
>>> bool(np.allclose(ss.polygamma(np.array([0, 1]), x), scipy.special.polygamma([0, 1], x)))
True
>>> bool(np.isclose(ss.polygamma(1, 1.0), np.pi**2 / 6))
True
"""
xlogy.__doc__ = """Like scipy.special.xlogy: ``x * log(y)``, and 0 where ``x == 0``.

The derivative in ``y`` (``x / y``) is 0 where ``x == 0``.

>>> import numpy as np, autodiff.scipy.special as ss
>>> ss.xlogy(np.array([0.0, 2.0]), np.array([0.0, 1.0]))
array([0., 0.])
"""
xlog1py.__doc__ = """Like scipy.special.xlog1py: ``x * log1p(y)``, and 0 where ``x == 0``.

>>> import numpy as np, autodiff.scipy.special as ss
>>> ss.xlog1py(np.array([0.0, 2.0]), np.array([-1.0, 0.0]))
array([0., 0.])
"""


# --- compositions -------------------------------------------------------------------------


def _stable_max(a: Any, axes: tuple[int, ...]) -> Any:
    """The maximum over ``axes`` (kept), as a constant, and 0 where it is not finite."""
    m = stop_gradient(max(a, axes, keepdims=True))
    return where(isfinite(m), m, 0.0)


def logsumexp(a, axis=None, b=None, keepdims=False, return_sign=False):
    """Like scipy.special.logsumexp: ``log(sum(b * exp(a)))`` over ``axis``, computed stably.

    For real ``a`` and ``b``.  With ``return_sign=True``, returns
    ``(log|s|, sign(s))`` for ``s = sum(b * exp(a))``.  SciPy's logsumexp
    converts its inputs with ``asarray``, so on traced values call this one
    (``autodiff.scipy.special.logsumexp``), not ``scipy.special.logsumexp``.

    >>> import numpy as np, autodiff, autodiff.scipy.special as ss
    >>> float(ss.logsumexp(np.array([0.0, 0.0])) - np.log(2.0))
    0.0
    >>> autodiff.grad(ss.logsumexp)(np.array([0.0, 0.0]))
    array([0.5, 0.5])
    """
    if b is not None:
        shape = np.broadcast_shapes(shape_of(a), shape_of(b))
        if shape_of(a) != shape:
            a = broadcast_to(a, shape)
    axes = normalize_axes(axis, ndim_of(a))
    m = _stable_max(a, axes)
    terms = exp(a - m)
    if b is not None:
        terms = b * terms
    total = sum(terms, axes, keepdims=keepdims)
    shift = reshape(m, shape_of(total))
    with np.errstate(divide="ignore"):  # all terms 0: -inf, as in SciPy, without a warning
        if return_sign:
            return log(absolute(total)) + shift, sign(total)
        return log(total) + shift


def softmax(x, axis=None):
    """Like scipy.special.softmax: ``exp(x) / sum(exp(x))`` over ``axis`` (default: all).

    Computed stably (the maximum is subtracted first).  Call this one on traced
    values (SciPy's converts its input with ``asarray``).

    >>> import numpy as np, autodiff.scipy.special as ss
    >>> ss.softmax(np.array([[0.0, 0.0], [1.0, 1.0]]), axis=1)
    array([[0.5, 0.5],
           [0.5, 0.5]])
    """
    axes = normalize_axes(axis, ndim_of(x))
    e = exp(x - _stable_max(x, axes))
    return e / sum(e, axes, keepdims=True)


def log_softmax(x, axis=None):
    """Like scipy.special.log_softmax: ``x - logsumexp(x)`` over ``axis`` (default: all).

    Computed stably.  Call this one on traced values (SciPy's converts its
    input with ``asarray``).

    >>> import numpy as np, autodiff.scipy.special as ss
    >>> ss.log_softmax(np.array([0.0, 0.0])) + np.log(2.0)
    array([0., 0.])
    """
    axes = normalize_axes(axis, ndim_of(x))
    shifted = x - _stable_max(x, axes)
    with np.errstate(divide="ignore"):
        return shifted - log(sum(exp(shifted), axes, keepdims=True))


# The elementwise functions are built by helpers in another module, so doctest
# does not find their docstrings by itself; list them for it.
__test__ = {
    fn.__name__: fn.__doc__
    for fn in (erf, erfc, expit, logit, gammaln, digamma, polygamma, xlogy, xlog1py)
}
