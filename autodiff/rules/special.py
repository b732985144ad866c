"""scipy.special functions (``autodiff.scipy.special``).  Needs SciPy.

The elementwise functions are one line each (see ``elementwise.py``): a
perturbation ``g`` of an argument moves the output by ``deriv(g, ans, *args)``:

================  ==================================================================
erf, erfc         ``±g * 2/sqrt(pi) * exp(-x**2)`` (holomorphic: complex x too)
erfinv, erfcinv   ``±g * sqrt(pi)/2 * exp(ans**2)``
ndtr              ``g * exp(-x**2/2) / sqrt(2 pi)`` (complex too)
log_ndtr          ``g * exp(-x**2/2 - ans) / sqrt(2 pi)`` (stable in the far tail)
ndtri             ``g * sqrt(2 pi) * exp(ans**2/2)``
expit, log_expit  ``g * ans * (1 - ans)``; ``g * expit(-x)``
logit             ``g / (x * (1 - x))``
gamma             ``g * ans * digamma(x)``
gammaln           ``g * digamma(x)`` (log|Gamma|, also for negative x)
digamma           ``g * polygamma(1, x)``
polygamma         in x: ``g * polygamma(n + 1, x)``; none in the integer order n
beta, betaln      in a: ``g * ans * (digamma(a) - digamma(a + b))`` (betaln: without ``ans``)
i0, i1, iv        ``g * i1(x)``; ``g * (i0 + iv(2, x)) / 2``; ``g * (iv(v-1, x) + iv(v+1, x)) / 2``
i0e, i1e, ive     as i0, i1, iv for the scaled ``iv * exp(-|x|)``, minus ``g * sign(x) * ans``
j0, j1, jv (jn)   ``-g * j1(x)``; ``g * (j0 - jv(2, x)) / 2``; ``g * (jv(v-1, x) - jv(v+1, x)) / 2``
y0, y1, yn, yv    as j0, j1, jv
xlogy             in x: ``g * log(y)``; in y: ``g * x / y`` (0 where x == 0)
xlog1py           in x: ``g * log1p(y)``; in y: ``g * x / (1 + y)`` (0 where x == 0)
entr              ``-g * (log(x) + 1)``
rel_entr          in x: ``g * (log(x / y) + 1)``; in y: ``-g * x / y`` (0 where x == 0)
kl_div            in x: ``g * log(x / y)``; in y: ``g * (1 - x / y)`` (0 where x == 0)
gammainc(c)       in x: ``±g * x**(a-1) exp(-x) / Gamma(a)``
betainc           in x: ``g * x**(a-1) (1-x)**(b-1) / B(a, b)``
stdtr             in t: ``g *`` Student's t density with ``df`` degrees of freedom
================  ==================================================================

Orders and shape parameters: the integer orders of ``polygamma``, ``yn`` have no
derivative. The real orders of the Bessel functions (``iv``, ``ive``, ``jv``,
``yv``) and the shape parameters of the incomplete integrals (``a`` of ``gammainc``
and ``gammaincc``, ``a``, ``b`` of ``betainc``, ``df`` of ``stdtr``) have
derivatives that are not elementary functions: JAX and torch give none either
(except JAX's ``gammainc`` in ``a``).  Differentiating in them raises
``MissingRuleError``; they batch like every other argument.

The SciPy ufuncs are registered, so ``scipy.special.erf(traced)`` works too.
``logsumexp``, ``softmax``, ``log_softmax`` and ``multigammaln`` are compositions
(``autodiff/scipy/special.py``).  SciPy's ``polygamma`` is a Python function that
converts its inputs with ``asarray``: call ``autodiff.scipy.special.polygamma`` on
traced values.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special as _sp

from autodiff.core.arrays import (
    dtype_of,
)
from autodiff.errors import MissingRuleError
from autodiff.rules._helpers import broadcasting, unary
from autodiff.rules.elementwise import (
    equal,
    exp,
    log,
    log1p,
    sign,
    where,
)

__all__ = [
    "erf", "erfc", "erfinv", "erfcinv", "ndtr", "log_ndtr", "ndtri", "expit", "log_expit",
    "logit", "gamma", "gammaln", "digamma", "polygamma", "beta", "betaln", "gammainc",
    "gammaincc", "betainc", "stdtr", "i0", "i1", "iv", "i0e", "i1e", "ive", "j0", "j1", "jv",
    "jn", "y0", "y1", "yn", "yv", "xlogy", "xlog1py", "entr", "rel_entr", "kl_div",
]  # fmt: skip

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)  # Python floats keep float32 float32
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0
_SQRT_TWO_PI = math.sqrt(2.0 * math.pi)
_LOG_SQRT_TWO_PI = math.log(_SQRT_TWO_PI)


def _quotient_or_zero(x: Any, y: Any) -> Any:
    """``x / y``, and 0 where ``x == 0`` (even where ``y`` is 0 too)."""
    zero = equal(x, 0)
    return where(zero, 0.0, x / where(zero, 1.0, y))


def _no_derivative(name: str, what: str) -> Callable:
    """The rule of an argument without a derivative: it says so when one is asked for."""

    def rule(g, ans, *args):
        raise MissingRuleError(
            f"{name} has no derivative in {what} (it is not an elementary function; JAX and "
            f"torch give none either). Differentiate in the other arguments only, or keep "
            f"{what} constant (a plain array, or stop_gradient)."
        )

    return rule


def _keeping_float32(ufunc: Callable) -> Callable:
    """``ufunc(n, x)`` with an integer order ``n``: float32 for a float32 ``x``
    (SciPy's integer-order loops compute in float64)."""

    def impl(n, x):
        out = ufunc(n, x)
        return out.astype(np.float32) if dtype_of(x) == np.float32 else out

    impl.__name__ = getattr(ufunc, "__name__", "impl")
    return impl


def _polygamma_impl(n, x):
    # scipy.special.polygamma's own formula, with ufuncs only: scipy's function
    # converts its arguments with np.asarray, which CuPy and Dask arrays must not meet.
    higher = (-1.0) ** (n + 1) * _sp.gamma(n + 1.0) * _sp.zeta(n + 1, x)
    return np.where(n == 0, _sp.psi(x), higher)  # float64 whatever x is


# --- error function and the normal distribution ---------------------------------------------
erf_p, erf = unary(
    "erf", _sp.erf, lambda g, a, x: g * (_TWO_OVER_SQRT_PI * exp(-(x * x))), numpy=[_sp.erf]
)
erfc_p, erfc = unary(
    "erfc", _sp.erfc, lambda g, a, x: g * (-_TWO_OVER_SQRT_PI * exp(-(x * x))), numpy=[_sp.erfc]
)
erfinv_p, erfinv = unary(
    "erfinv", _sp.erfinv, lambda g, a, x: g * (_SQRT_PI_OVER_TWO * exp(a * a)), numpy=[_sp.erfinv]
)
erfcinv_p, erfcinv = unary(
    "erfcinv",
    _sp.erfcinv,
    lambda g, a, x: g * (-_SQRT_PI_OVER_TWO * exp(a * a)),
    numpy=[_sp.erfcinv],
)
ndtr_p, ndtr = unary(
    "ndtr", _sp.ndtr, lambda g, a, x: g * (exp(-0.5 * (x * x)) / _SQRT_TWO_PI), numpy=[_sp.ndtr]
)
log_ndtr_p, log_ndtr = unary(
    "log_ndtr",
    _sp.log_ndtr,
    lambda g, a, x: g * exp(-0.5 * (x * x) - a - _LOG_SQRT_TWO_PI),
    numpy=[_sp.log_ndtr],
)
ndtri_p, ndtri = unary(
    "ndtri", _sp.ndtri, lambda g, a, x: g * (_SQRT_TWO_PI * exp(0.5 * (a * a))), numpy=[_sp.ndtri]
)

# --- logistic -------------------------------------------------------------------------------
expit_p, expit = unary("expit", _sp.expit, lambda g, a, x: g * (a * (1 - a)), numpy=[_sp.expit])
log_expit_p, log_expit = unary(
    "log_expit", _sp.log_expit, lambda g, a, x: g * expit(-x), numpy=[_sp.log_expit]
)
logit_p, logit = unary("logit", _sp.logit, lambda g, a, x: g / (x * (1 - x)), numpy=[_sp.logit])

# --- gamma and beta ---------------------------------------------------------------------------
gamma_p, gamma = unary("gamma", _sp.gamma, lambda g, a, x: g * (a * digamma(x)), numpy=[_sp.gamma])
gammaln_p, gammaln = unary(
    "gammaln", _sp.gammaln, lambda g, a, x: g * digamma(x), numpy=[_sp.gammaln]
)
digamma_p, digamma = unary(
    "digamma", _sp.digamma, lambda g, a, x: g * polygamma(1, x), numpy=[_sp.digamma]
)
polygamma_p, polygamma = broadcasting(
    "polygamma",
    _keeping_float32(_polygamma_impl),
    None,
    lambda g, a, n, x: g * polygamma(n + 1, x),
)


def _digamma_gap(a, b):
    """``digamma(a) - digamma(a + b)``: the derivative of ``betaln(a, b)`` in ``a``."""
    return digamma(a) - digamma(a + b)


beta_p, beta = broadcasting(
    "beta",
    _sp.beta,
    lambda g, ans, a, b: g * (ans * _digamma_gap(a, b)),
    lambda g, ans, a, b: g * (ans * _digamma_gap(b, a)),
    numpy=[_sp.beta],
)
betaln_p, betaln = broadcasting(
    "betaln",
    _sp.betaln,
    lambda g, ans, a, b: g * _digamma_gap(a, b),
    lambda g, ans, a, b: g * _digamma_gap(b, a),
    numpy=[_sp.betaln],
)

# --- incomplete integrals (derivatives in the integration bound only) ----------------------


def _gamma_density(a, x):
    """``x**(a-1) exp(-x) / Gamma(a)``, with ``0**0 == 1``."""
    return exp(xlogy(a - 1.0, x) - x - gammaln(a))


def _beta_density(a, b, x):
    """``x**(a-1) (1-x)**(b-1) / B(a, b)``, with ``0**0 == 1``."""
    return exp(xlogy(a - 1.0, x) + xlog1py(b - 1.0, -x) - betaln(a, b))


def _t_density(df, t):
    """Student's t density with ``df`` degrees of freedom, at ``t``."""
    half = 0.5 * (df + 1.0)
    log_norm = gammaln(half) - gammaln(0.5 * df) - 0.5 * log(df * math.pi)
    return exp(log_norm - half * log1p(t * t / df))


gammainc_p, gammainc = broadcasting(
    "gammainc",
    _sp.gammainc,
    _no_derivative("gammainc", "its shape parameter a"),
    lambda g, ans, a, x: g * _gamma_density(a, x),
    numpy=[_sp.gammainc],
)
gammaincc_p, gammaincc = broadcasting(
    "gammaincc",
    _sp.gammaincc,
    _no_derivative("gammaincc", "its shape parameter a"),
    lambda g, ans, a, x: -g * _gamma_density(a, x),
    numpy=[_sp.gammaincc],
)
betainc_p, betainc = broadcasting(
    "betainc",
    _sp.betainc,
    _no_derivative("betainc", "its shape parameter a"),
    _no_derivative("betainc", "its shape parameter b"),
    lambda g, ans, a, b, x: g * _beta_density(a, b, x),
    numpy=[_sp.betainc],
)
stdtr_p, stdtr = broadcasting(
    "stdtr",
    _sp.stdtr,
    _no_derivative("stdtr", "its degrees of freedom df"),
    lambda g, ans, df, t: g * _t_density(df, t),
    numpy=[_sp.stdtr],
)

# --- Bessel functions: derivatives in x by the recurrences ----------------------------------
_IV_ORDER = _no_derivative("iv", "its order v")
i0_p, i0 = unary("i0", _sp.i0, lambda g, a, x: g * i1(x), numpy=[_sp.i0])
i1_p, i1 = unary("i1", _sp.i1, lambda g, a, x: g * (0.5 * (i0(x) + iv(2.0, x))), numpy=[_sp.i1])
iv_p, iv = broadcasting(
    "iv",
    _sp.iv,
    _IV_ORDER,
    lambda g, ans, v, x: g * (0.5 * (iv(v - 1.0, x) + iv(v + 1.0, x))),
    numpy=[_sp.iv],
)
i0e_p, i0e = unary("i0e", _sp.i0e, lambda g, a, x: g * (i1e(x) - sign(x) * a), numpy=[_sp.i0e])
i1e_p, i1e = unary(
    "i1e",
    _sp.i1e,
    lambda g, a, x: g * (0.5 * (i0e(x) + ive(2.0, x)) - sign(x) * a),
    numpy=[_sp.i1e],
)
ive_p, ive = broadcasting(
    "ive",
    _sp.ive,
    _no_derivative("ive", "its order v"),
    lambda g, ans, v, x: g * (0.5 * (ive(v - 1.0, x) + ive(v + 1.0, x)) - sign(x) * ans),
    numpy=[_sp.ive],
)
j0_p, j0 = unary("j0", _sp.j0, lambda g, a, x: -g * j1(x), numpy=[_sp.j0])
j1_p, j1 = unary("j1", _sp.j1, lambda g, a, x: g * (0.5 * (j0(x) - jv(2.0, x))), numpy=[_sp.j1])
jv_p, jv = broadcasting(
    "jv",
    _sp.jv,
    _no_derivative("jv", "its order v"),
    lambda g, ans, v, x: g * (0.5 * (jv(v - 1.0, x) - jv(v + 1.0, x))),
    numpy=[_sp.jv],  # scipy.special.jn is the same ufunc
)
jn = jv
y0_p, y0 = unary("y0", _sp.y0, lambda g, a, x: -g * y1(x), numpy=[_sp.y0])
y1_p, y1 = unary("y1", _sp.y1, lambda g, a, x: g * (0.5 * (y0(x) - yn(2, x))), numpy=[_sp.y1])
yn_p, yn = broadcasting(
    "yn",
    _keeping_float32(_sp.yn),
    None,  # an integer order
    lambda g, ans, n, x: g * (0.5 * (yn(n - 1, x) - yn(n + 1, x))),
    numpy=[_sp.yn],
)
yv_p, yv = broadcasting(
    "yv",
    _sp.yv,
    _no_derivative("yv", "its order v"),
    lambda g, ans, v, x: g * (0.5 * (yv(v - 1.0, x) - yv(v + 1.0, x))),
    numpy=[_sp.yv],
)

# --- information theory -----------------------------------------------------------------------
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
entr_p, entr = unary("entr", _sp.entr, lambda g, a, x: -g * (log(x) + 1.0), numpy=[_sp.entr])
rel_entr_p, rel_entr = broadcasting(
    "rel_entr",
    _sp.rel_entr,
    lambda g, a, x, y: g * (log(x / y) + 1.0),
    lambda g, a, x, y: -g * _quotient_or_zero(x, y),
    numpy=[_sp.rel_entr],
)
kl_div_p, kl_div = broadcasting(
    "kl_div",
    _sp.kl_div,
    lambda g, a, x, y: g * log(x / y),
    lambda g, a, x, y: g * (1.0 - _quotient_or_zero(x, y)),
    numpy=[_sp.kl_div],
)

_DOCS = {
    erf: """Like scipy.special.erf, elementwise (complex too); differentiable and batchable.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> ss.erf(np.array([0.0]))
array([0.])
>>> bool(autodiff.grad(ss.erf)(0.0) == 2 / np.sqrt(np.pi))
True
""",
    erfc: """Like scipy.special.erfc (``1 - erf(x)``), elementwise (complex too).

>>> import numpy as np, autodiff.scipy.special as ss
>>> ss.erfc(np.array([0.0]))
array([1.])
""",
    erfinv: """Like scipy.special.erfinv, the inverse of erf on (-1, 1).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(ss.erfinv(0.0)), bool(np.isclose(autodiff.grad(ss.erfinv)(0.0), np.sqrt(np.pi) / 2))
(0.0, True)
""",
    erfcinv: """Like scipy.special.erfcinv, the inverse of erfc on (0, 2).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(ss.erfcinv(0.5)) == -float(ss.erfcinv(1.5))
True
>>> bool(np.isclose(autodiff.grad(ss.erfcinv)(1.0), -np.sqrt(np.pi) / 2))
True
""",
    ndtr: """Like scipy.special.ndtr: the standard normal CDF (complex too).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(ss.ndtr(0.0)), bool(np.isclose(autodiff.grad(ss.ndtr)(0.0), 1 / np.sqrt(2 * np.pi)))
(0.5, True)
""",
    log_ndtr: """Like scipy.special.log_ndtr: ``log(ndtr(x))``, accurate far into the left tail,
and so is its derivative.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(autodiff.grad(ss.log_ndtr)(-30.0), 30.0, rtol=1e-2))
True
""",
    ndtri: """Like scipy.special.ndtri, the inverse of ndtr on (0, 1).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(ss.ndtri(0.5)), bool(np.isclose(autodiff.grad(ss.ndtri)(0.5), np.sqrt(2 * np.pi)))
(0.0, True)
""",
    expit: """Like scipy.special.expit (the logistic sigmoid), elementwise.

Its derivative is ``expit(x) * (1 - expit(x))``.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> ss.expit(np.array([0.0]))
array([0.5])
>>> float(autodiff.grad(ss.expit)(0.0))
0.25
""",
    log_expit: """Like scipy.special.log_expit: ``log(expit(x))``, computed stably.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(autodiff.grad(ss.log_expit)(0.0))
0.5
""",
    logit: """Like scipy.special.logit (``log(p / (1 - p))``, the inverse of expit).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> ss.logit(np.array([0.5]))
array([0.])
>>> float(autodiff.grad(ss.logit)(0.5))
4.0
""",
    gamma: """Like scipy.special.gamma for real x; its derivative is ``gamma(x) * digamma(x)``.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(ss.gamma(4.0)), bool(np.isclose(autodiff.grad(ss.gamma)(1.0), -np.euler_gamma))
(6.0, True)
""",
    gammaln: """Like scipy.special.gammaln: ``log|Gamma(x)|`` for real x (derivative: digamma).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> ss.gammaln(np.array([1.0, 4.0]))
array([0.        , 1.79175947])
>>> bool(np.isclose(autodiff.grad(ss.gammaln)(1.0), -np.euler_gamma))
True
""",
    digamma: """Like scipy.special.digamma (psi) for real x; its derivative is polygamma(1, x).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(ss.digamma(1.0), -np.euler_gamma))
True
>>> bool(np.isclose(autodiff.grad(ss.digamma)(1.0), np.pi**2 / 6))
True
""",
    polygamma: """Like scipy.special.polygamma(n, x) for real x and integer orders n.

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
""",
    beta: """Like scipy.special.beta: ``Gamma(a) Gamma(b) / Gamma(a + b)``, differentiable in both.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(ss.beta(1.0, 2.0)), float(autodiff.grad(ss.beta, argnums=1)(1.0, 1.0))
(0.5, -1.0)
""",
    betaln: """Like scipy.special.betaln: ``log|beta(a, b)|``, differentiable in both.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(autodiff.grad(ss.betaln)(1.0, 1.0))
-1.0
""",
    gammainc: """Like scipy.special.gammainc: the regularized lower incomplete gamma ``P(a, x)``.

Differentiable in ``x``; in ``a`` it raises MissingRuleError.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(autodiff.grad(ss.gammainc, argnums=1)(1.0, 2.0), np.exp(-2.0)))
True
""",
    gammaincc: """Like scipy.special.gammaincc: ``1 - gammainc(a, x)``; differentiable in ``x``.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(autodiff.grad(ss.gammaincc, argnums=1)(1.0, 2.0), -np.exp(-2.0)))
True
""",
    betainc: """Like scipy.special.betainc(a, b, x): the regularized incomplete beta function.

Differentiable in ``x``; in ``a`` and ``b`` it raises MissingRuleError.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(autodiff.grad(ss.betainc, argnums=2)(1.0, 1.0, 0.3))
1.0
""",
    stdtr: """Like scipy.special.stdtr(df, t): Student's t CDF; differentiable in ``t``.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(ss.stdtr(3.0, 0.0)), round(float(autodiff.grad(ss.stdtr, argnums=1)(1.0, 0.0)), 6)
(0.5, 0.31831)
""",
    i0: """Like scipy.special.i0, the modified Bessel function of order 0; derivative ``i1``.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(ss.i0(0.0)), float(autodiff.grad(ss.i0)(0.0))
(1.0, 0.0)
""",
    i1: """Like scipy.special.i1, the modified Bessel function of order 1.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(ss.i1(0.0)), float(autodiff.grad(ss.i1)(0.0))
(0.0, 0.5)
""",
    iv: """Like scipy.special.iv(v, x): the modified Bessel function of real order ``v``.

Differentiable in ``x``; in ``v`` it raises MissingRuleError.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(autodiff.grad(ss.iv, argnums=1)(0.0, 1.0), ss.i1(1.0)))
True
""",
    i0e: """Like scipy.special.i0e: ``i0(x) * exp(-|x|)``.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(ss.i0e(0.0))
1.0
""",
    i1e: """Like scipy.special.i1e: ``i1(x) * exp(-|x|)``.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(autodiff.grad(ss.i1e)(0.0))
0.5
""",
    ive: """Like scipy.special.ive(v, x): ``iv(v, x) * exp(-|x|)``; differentiable in ``x``.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(ss.ive(1.0, 2.0), ss.iv(1.0, 2.0) * np.exp(-2.0)))
True
""",
    j0: """Like scipy.special.j0, the Bessel function of the first kind of order 0.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(autodiff.grad(ss.j0)(1.0), -ss.j1(1.0)))
True
""",
    j1: """Like scipy.special.j1, the Bessel function of the first kind of order 1.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(autodiff.grad(ss.j1)(0.0))
0.5
""",
    jv: """Like scipy.special.jv (and jn, the same function): Bessel function of real order ``v``.

Differentiable in ``x``; in ``v`` it raises MissingRuleError.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(autodiff.grad(ss.jn, argnums=1)(0.0, 1.0), -ss.j1(1.0)))
True
""",
    y0: """Like scipy.special.y0, the Bessel function of the second kind of order 0.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(autodiff.grad(ss.y0)(1.0), -ss.y1(1.0)))
True
""",
    y1: """Like scipy.special.y1, the Bessel function of the second kind of order 1.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(autodiff.grad(ss.y1)(1.0), (ss.y0(1.0) - ss.yn(2, 1.0)) / 2))
True
""",
    yn: """Like scipy.special.yn(n, x): the Bessel function of the second kind of integer order.

Differentiable in ``x``.  Unlike SciPy's, a float32 ``x`` gives float32.

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> bool(np.isclose(autodiff.grad(ss.yn, argnums=1)(0, 1.0), -ss.y1(1.0)))
True
""",
    yv: """Like scipy.special.yv(v, x): the Bessel function of the second kind of real order.

Differentiable in ``x``; in ``v`` it raises MissingRuleError.

>>> import numpy as np, autodiff.scipy.special as ss
>>> bool(np.isclose(ss.yv(1.0, 2.0), ss.y1(2.0)))
True
""",
    xlogy: """Like scipy.special.xlogy: ``x * log(y)``, and 0 where ``x == 0``.

The derivative in ``y`` (``x / y``) is 0 where ``x == 0``.

>>> import numpy as np, autodiff.scipy.special as ss
>>> ss.xlogy(np.array([0.0, 2.0]), np.array([0.0, 1.0]))
array([0., 0.])
""",
    xlog1py: """Like scipy.special.xlog1py: ``x * log1p(y)``, and 0 where ``x == 0``.

>>> import numpy as np, autodiff.scipy.special as ss
>>> ss.xlog1py(np.array([0.0, 2.0]), np.array([-1.0, 0.0]))
array([0., 0.])
""",
    entr: """Like scipy.special.entr: ``-x log(x)`` (0 at 0, ``-inf`` for negative x).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(autodiff.grad(ss.entr)(1.0))
-1.0
""",
    rel_entr: """Like scipy.special.rel_entr: ``x log(x / y)`` (0 where ``x == 0``).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(autodiff.grad(ss.rel_entr, argnums=1)(1.0, 2.0))
-0.5
""",
    kl_div: """Like scipy.special.kl_div: ``x log(x / y) - x + y`` (``y`` where ``x == 0``).

>>> import numpy as np, autodiff, autodiff.scipy.special as ss
>>> float(autodiff.grad(ss.kl_div, argnums=1)(1.0, 2.0))
0.5
""",
}
for _fn, _doc in _DOCS.items():
    _fn.__doc__ = _doc


# The elementwise functions are built by helpers in another module, so doctest
# does not find their docstrings by itself; list them for it.
__test__ = {fn.__name__: doc for fn, doc in _DOCS.items()}
