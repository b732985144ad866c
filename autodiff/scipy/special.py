"""``autodiff.scipy.special``: like ``scipy.special``, differentiable and batchable.

The primitives are declared, with their rules, in ``autodiff/rules/special.py``; their
compositions (``multigammaln``, ``logsumexp``, ``softmax``, ``log_softmax``) are here.
The last three subtract the maximum as a constant (it cancels from the result, so its
derivative is not needed), which keeps them stable.  SciPy's versions of these are
Python functions that convert their inputs with ``asarray``: call the functions of
this module on traced values.
"""

from __future__ import annotations

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.special")

import math  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import scipy.special as _reference  # noqa: E402

from autodiff.core.arrays import (  # noqa: E402
    array_library,
    array_like,
    dtype_of,
    ndim_of,
    normalize_axes,
    shape_of,
)
from autodiff.core.numpy_args import wrap_namespace as _wrap_namespace  # noqa: E402
from autodiff.core.tracer import Tracer  # noqa: E402
from autodiff.rules.compositions import scalar_if_0d  # noqa: E402
from autodiff.rules.elementwise import (  # noqa: E402
    absolute,
    exp,
    greater,
    isfinite,
    log,
    sign,
    stop_gradient,
    where,
)
from autodiff.rules.reductions import max, sum  # noqa: E402
from autodiff.rules.shape import broadcast_to, expand_dims, reshape  # noqa: E402
from autodiff.rules.special import *  # noqa: E402, F403
from autodiff.rules.special import __all__ as _primitives  # noqa: E402
from autodiff.rules.special import gammaln  # noqa: E402

_compositions = ["multigammaln", "logsumexp", "softmax", "log_softmax"]


def multigammaln(a, d):
    """Like scipy.special.multigammaln: ``log`` of the multivariate gamma function of
    dimension ``d`` (a positive integer), for ``a > (d - 1) / 2``.

    ``d (d-1)/4 log(pi) + sum_j gammaln(a - j/2)`` for ``j = 0 .. d-1``.  On plain
    arrays an ``a`` outside the domain raises ValueError, as in SciPy; on traced
    values (which cannot be inspected) the result there is NaN.

    >>> import numpy as np, autodiff, autodiff.scipy.special as ss
    >>> a, d = 23.5, 10
    >>> want = d * (d - 1) / 4 * np.log(np.pi) + ss.gammaln(a - np.arange(d) / 2).sum()
    >>> bool(np.isclose(ss.multigammaln(a, d), want))
    True
    >>> bool(np.isclose(autodiff.grad(ss.multigammaln)(2.0, 1), ss.digamma(2.0)))
    True
    """
    if not isinstance(d, (int, np.integer)) or isinstance(d, bool) or d < 1:
        raise ValueError(f"multigammaln: d should be a positive integer (dimension), got {d!r}")
    d = int(d)
    bound = 0.5 * (d - 1)
    inspectable = not isinstance(a, Tracer) and array_library(a) is None
    if inspectable and np.any(np.asarray(a) <= bound):
        raise ValueError(f"multigammaln: condition a > 0.5 * (d-1) ({bound}) not met by {a}")
    halves = 0.5 * np.arange(d, like=array_like(a))
    if dtype_of(a) == np.float32:
        halves = halves.astype(np.float32)
    total = sum(gammaln(expand_dims(a, -1) - halves), axis=-1)
    total = total + 0.25 * d * (d - 1) * math.log(math.pi)
    # (where answers a 0-d array; SciPy, and the plain path, a scalar)
    return total if inspectable else scalar_if_0d(where(greater(a, bound), total, math.nan))


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


__all__ = [*_primitives, *_compositions]
_wrap_namespace(globals(), _reference)  # lists and tuples as SciPy takes them
