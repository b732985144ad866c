"""``autodiff.scipy.stats``: SciPy's distributions, differentiable in data and parameters.

Each distribution is an object with SciPy's methods and spelling:
``norm.logpdf(x, loc=0, scale=1)``, ``gamma.cdf(x, a, loc=0, scale=1)``,
``poisson.logpmf(k, mu, loc=0)``; shape parameters are positional (or by name),
``loc`` and ``scale`` positional after them or keywords.  Everything is a
composition of ``autodiff.numpy`` and ``autodiff.scipy.special`` functions, so
every method works under every transform and broadcasts its arguments.

============  ==================================================================
continuous    ``norm``, ``t``, ``beta``, ``gamma``, ``expon``, ``laplace``, ``chi2``:
              ``logpdf``, ``pdf``, ``cdf``, ``logcdf``, ``sf``, ``logsf``
discrete      ``poisson``, ``bernoulli``: ``logpmf``, ``pmf``, ``cdf``, ``logcdf``,
              ``sf``, ``logsf``
multivariate  ``multivariate_normal`` and ``dirichlet``: ``logpdf``, ``pdf``
============  ==================================================================

As in SciPy: outside the support ``logpdf`` is ``-inf`` and ``cdf`` is 0 or 1,
with derivative 0 there (such points are moved inside the support before the
density is computed, so no NaN reaches a derivative); a parameter outside its
domain (``scale <= 0``, ``df <= 0``, ``p`` outside [0, 1], ...) gives NaN; a
discrete ``logpmf`` is ``-inf`` off the integers.

Derivatives: every ``logpdf``/``pdf``/``logpmf``/``pmf`` is differentiable in the
data and every parameter, and so is every ``cdf``/``sf`` (and their logs) in
``x``, ``loc`` and ``scale``, and in ``mu``/``p`` of the discrete ones.  The
``cdf``/``sf`` of ``t``, ``beta``, ``gamma`` and ``chi2`` are the incomplete
integrals ``stdtr``/``betainc``/``gammainc``, which have no derivative in their
shape parameters (``MissingRuleError``, see ``autodiff.scipy.special``).
The discrete distributions' ``k`` is data: a float ``k`` differentiates as the
continuous formula does.  SciPy's frozen distributions (``norm(0, 1).logpdf``),
``ppf``, ``rvs``, the moments and ``multivariate_normal.cdf`` are not here.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.stats")

import numpy as np  # noqa: E402

import autodiff.numpy as anp  # noqa: E402
from autodiff.core.arrays import array_library  # noqa: E402
from autodiff.core.tracer import Tracer  # noqa: E402
from autodiff.rules import special as sc  # noqa: E402
from autodiff.rules import stats as _stats  # noqa: E402
from autodiff.rules.compositions import scalar_if_0d  # noqa: E402

__all__ = [
    "norm",
    "t",
    "beta",
    "gamma",
    "expon",
    "laplace",
    "chi2",
    "poisson",
    "bernoulli",
    "multivariate_normal",
    "dirichlet",
]

_LOG_SQRT_TWO_PI = 0.5 * math.log(2.0 * math.pi)
_LOG2 = math.log(2.0)
_INF = math.inf
_NAN = math.nan


def _parse(where: str, shapes: Sequence[str], extra: Sequence[str], args: tuple, kwds: dict):
    """SciPy's conventions: shape parameters, then ``extra`` (``loc``, ``scale``), each
    positional or by keyword.  Returns the shape parameters and the extras."""
    names = [*shapes, *extra]
    if len(args) > len(names):
        raise TypeError(f"{where}: too many positional arguments ({len(args)} > {len(names)})")
    given = dict(zip(names, args))
    for key, value in kwds.items():
        if key not in names:
            raise TypeError(f"{where}: unexpected keyword argument {key!r}")
        if key in given:
            raise TypeError(f"{where}: got multiple values for argument {key!r}")
        given[key] = value
    missing = [s for s in shapes if s not in given]
    if missing:
        raise TypeError(f"{where}: missing shape parameter(s) {', '.join(missing)}")
    defaults = {"loc": 0.0, "scale": 1.0}
    return [_array(given[s]) for s in shapes], [_array(given.get(e, defaults[e])) for e in extra]


def _array(value):
    """Lists and tuples as arrays (SciPy takes them); arrays and numbers as they are."""
    return anp.asarray(value) if isinstance(value, (list, tuple)) else value


def _nan_unless(valid, out):
    """``out``, NaN where the parameters are not ``valid``; a 0-d answer a scalar, as
    SciPy's methods give it."""
    return scalar_if_0d(out if valid is None else anp.where(valid, out, _NAN))


def _positive(x):
    return anp.greater(x, 0)


def _nonnegative(x):
    return anp.greater_equal(x, 0)


def _unit(x):
    return anp.logical_and(anp.greater_equal(x, 0), anp.less_equal(x, 1))


def _checked(params: Sequence, domains: Sequence[Callable], safe: float):
    """The parameters, each with ``safe`` (inside every domain here) where it is outside
    its ``domain`` (the result is NaN there, and the formulas then raise no warning), and
    where all are valid (None: everywhere).  A Python number stays a Python number, so
    that a float32 ``x`` keeps its dtype, as NumPy's promotion rules have it."""
    valid: Any = None
    out = []
    for p, domain in zip(params, domains):
        ok = domain(p)
        if isinstance(p, (int, float)):
            out.append(p if ok else safe)
            ok = bool(ok)
        else:
            out.append(anp.where(ok, p, safe))
        valid = ok if valid is None else anp.logical_and(valid, ok)
    return out, (None if valid is True else valid)


class _Support:
    """Where standardised points lie against a support ``[lo, hi]``: the masks of those
    below and above it (None where the bound is infinite), and the points with those
    outside moved to ``inner``, a point inside, so that the formulas never see them."""

    def __init__(self, z, lo: float, hi: float, inner: float) -> None:
        self.below = anp.less(z, lo) if lo > -_INF else None
        self.above = anp.greater(z, hi) if hi < _INF else None
        outside = self.below if self.above is None else self.above
        if self.below is not None and self.above is not None:
            outside = anp.logical_or(self.below, self.above)
        self.outside = outside
        self.z = z if outside is None else anp.where(outside, inner, z)

    def fill(self, out, below_value: float, above_value: float):
        if self.below is not None:
            out = anp.where(self.below, below_value, out)
        if self.above is not None:
            out = anp.where(self.above, above_value, out)
        return out


class _Continuous:
    """A distribution of a real variable, given in standard form (loc 0, scale 1):
    ``logpdf(z, *shapes)``, ``cdf`` and ``sf`` (and their logs, if better than ``log``
    of them) for ``z`` inside the support; ``domains`` has a predicate per shape
    parameter (default: positive)."""

    def __init__(
        self,
        name: str,
        shapes: Sequence[str],
        logpdf: Callable,
        cdf: Callable,
        sf: Callable,
        *,
        logcdf: Callable | None = None,
        logsf: Callable | None = None,
        support: tuple[float, float] = (-_INF, _INF),
        inner: float = 0.0,
        domains: Sequence[Callable] = (),
    ) -> None:
        self.name, self.shapes = name, tuple(shapes)
        self._logpdf, self._cdf, self._sf = logpdf, cdf, sf
        self._logcdf = logcdf or (lambda z, *s: anp.log(cdf(z, *s)))
        self._logsf = logsf or (lambda z, *s: anp.log(sf(z, *s)))
        self._support, self._inner = support, inner
        self._domains = domains or [_positive] * len(self.shapes)

    def __repr__(self) -> str:
        return f"<autodiff.scipy.stats.{self.name}>"

    def _standard(self, method: str, x, args, kwds):
        where = f"{self.name}.{method}"
        shapes, (loc, scale) = _parse(where, self.shapes, ("loc", "scale"), args, kwds)
        (scale, *shapes), valid = _checked([scale, *shapes], [_positive, *self._domains], 1.0)
        support = _Support((_array(x) - loc) / scale, *self._support, self._inner)
        return support, shapes, valid, scale

    def logpdf(self, x, *args, **kwds):
        """The log-density at ``x``: ``logpdf(x, *shapes, loc=0, scale=1)``, as in SciPy.

        >>> import numpy as np, autodiff
        >>> from autodiff.scipy.stats import norm, gamma
        >>> bool(np.isclose(norm.logpdf(0.0), -0.5 * np.log(2 * np.pi)))
        True
        >>> float(autodiff.grad(norm.logpdf)(1.0)), float(gamma.logpdf(-1.0, 2.0))
        (-1.0, -inf)
        """
        support, shapes, valid, scale = self._standard("logpdf", x, args, kwds)
        # a Python scale keeps its log a Python float (NumPy's float64 would promote float32)
        log_scale = math.log(scale) if isinstance(scale, (int, float)) else anp.log(scale)
        out = self._logpdf(support.z, *shapes) - log_scale
        if support.outside is not None:
            out = anp.where(support.outside, -_INF, out)
        return _nan_unless(valid, out)

    def pdf(self, x, *args, **kwds):
        """The density at ``x``: ``exp(logpdf(x, ...))``.

        >>> from autodiff.scipy.stats import expon
        >>> float(expon.pdf(0.0, scale=2.0))
        0.5
        """
        return anp.exp(self.logpdf(x, *args, **kwds))

    def _tail(self, method: str, fn: Callable, low: float, high: float, x, args, kwds):
        support, shapes, valid, _ = self._standard(method, x, args, kwds)
        with np.errstate(divide="ignore"):  # log of an underflowed tail: -inf, as in SciPy
            out = fn(support.z, *shapes)
        return _nan_unless(valid, support.fill(out, low, high))

    def cdf(self, x, *args, **kwds):
        """The probability of a value at most ``x``.

        >>> import numpy as np, autodiff
        >>> from autodiff.scipy.stats import norm
        >>> float(norm.cdf(0.0)), bool(np.isclose(autodiff.grad(norm.cdf)(0.0), norm.pdf(0.0)))
        (0.5, True)
        """
        return self._tail("cdf", self._cdf, 0.0, 1.0, x, args, kwds)

    def logcdf(self, x, *args, **kwds):
        """``log(cdf(x, ...))``, accurate in the far left tail where SciPy's is.

        >>> from autodiff.scipy.stats import laplace
        >>> round(float(laplace.logcdf(-1.0)), 6)
        -1.693147
        """
        return self._tail("logcdf", self._logcdf, -_INF, 0.0, x, args, kwds)

    def sf(self, x, *args, **kwds):
        """The survival function ``1 - cdf(x, ...)``, computed without the subtraction.

        >>> from autodiff.scipy.stats import expon
        >>> float(expon.sf(0.0))
        1.0
        """
        return self._tail("sf", self._sf, 1.0, 0.0, x, args, kwds)

    def logsf(self, x, *args, **kwds):
        """``log(sf(x, ...))``.

        >>> from autodiff.scipy.stats import expon
        >>> float(expon.logsf(3.0))
        -3.0
        """
        return self._tail("logsf", self._logsf, 0.0, -_INF, x, args, kwds)


class _Discrete:
    """A distribution on the integers of ``[lo, hi]`` (shifted by ``loc``), given by
    ``logpmf(k, *shapes)`` and ``cdf``/``sf`` at integer ``k`` inside the support;
    ``domains`` has a predicate per shape parameter."""

    def __init__(
        self,
        name: str,
        shapes: Sequence[str],
        logpmf: Callable,
        cdf: Callable,
        sf: Callable,
        *,
        support: tuple[float, float],
        domains: Sequence[Callable],
    ) -> None:
        self.name, self.shapes = name, tuple(shapes)
        self._logpmf, self._cdf, self._sf = logpmf, cdf, sf
        self._support, self._domains = support, domains

    def __repr__(self) -> str:
        return f"<autodiff.scipy.stats.{self.name}>"

    def _standard(self, method: str, k, args, kwds):
        shapes, (loc,) = _parse(f"{self.name}.{method}", self.shapes, ("loc",), args, kwds)
        shapes, valid = _checked(shapes, self._domains, 0.5)
        return _array(k) - loc, shapes, valid

    def logpmf(self, k, *args, **kwds):
        """The log-probability of ``k``: ``logpmf(k, *shapes, loc=0)``, as in SciPy.

        >>> import numpy as np, autodiff
        >>> from autodiff.scipy.stats import poisson
        >>> bool(np.isclose(poisson.logpmf(0, 2.0), -2.0)), float(poisson.logpmf(0.5, 2.0))
        (True, -inf)
        >>> float(autodiff.grad(poisson.logpmf, argnums=1)(3.0, 2.0))
        0.5
        """
        j, shapes, valid = self._standard("logpmf", k, args, kwds)
        support = _Support(j, *self._support, self._support[0])
        off = anp.not_equal(j, anp.floor(j))
        off = off if support.outside is None else anp.logical_or(off, support.outside)
        out = anp.where(off, -_INF, self._logpmf(anp.where(off, self._support[0], j), *shapes))
        return _nan_unless(valid, out)

    def pmf(self, k, *args, **kwds):
        """The probability of ``k``: ``exp(logpmf(k, ...))``.

        >>> from autodiff.scipy.stats import bernoulli
        >>> float(bernoulli.pmf(1, 0.25))
        0.25
        """
        return anp.exp(self.logpmf(k, *args, **kwds))

    def _tail(self, method: str, fn: Callable, low: float, high: float, k, args, kwds):
        j, shapes, valid = self._standard(method, k, args, kwds)
        support = _Support(anp.floor(j), *self._support, self._support[0])
        with np.errstate(divide="ignore"):
            out = fn(support.z, *shapes)
        return _nan_unless(valid, support.fill(out, low, high))

    def cdf(self, k, *args, **kwds):
        """The probability of a value at most ``k``.

        >>> from autodiff.scipy.stats import bernoulli
        >>> float(bernoulli.cdf(0, 0.25)), float(bernoulli.cdf(-1, 0.25))
        (0.75, 0.0)
        """
        return self._tail("cdf", self._cdf, 0.0, 1.0, k, args, kwds)

    def logcdf(self, k, *args, **kwds):
        """``log(cdf(k, ...))``.

        >>> import numpy as np
        >>> from autodiff.scipy.stats import poisson
        >>> bool(np.isclose(poisson.logcdf(0, 1.0), -1.0))
        True
        """
        return self._tail(
            "logcdf", lambda j, *s: anp.log(self._cdf(j, *s)), -_INF, 0.0, k, args, kwds
        )

    def sf(self, k, *args, **kwds):
        """The probability of a value above ``k``: ``1 - cdf(k, ...)``.

        >>> from autodiff.scipy.stats import bernoulli
        >>> float(bernoulli.sf(0, 0.25))
        0.25
        """
        return self._tail("sf", self._sf, 1.0, 0.0, k, args, kwds)

    def logsf(self, k, *args, **kwds):
        """``log(sf(k, ...))``.

        >>> import numpy as np
        >>> from autodiff.scipy.stats import bernoulli
        >>> bool(np.isclose(bernoulli.logsf(0, 0.25), np.log(0.25)))
        True
        """
        return self._tail(
            "logsf", lambda j, *s: anp.log(self._sf(j, *s)), 0.0, -_INF, k, args, kwds
        )


# --- the continuous distributions (standard forms) -----------------------------------------


def _t_logpdf(z, df):
    half = 0.5 * (df + 1.0)
    norm_ = sc.gammaln(half) - sc.gammaln(0.5 * df) - 0.5 * anp.log(df * math.pi)
    return norm_ - half * anp.log1p(z * z / df)


def _halves(z):
    """The mask ``z < 0`` and ``z`` clipped to each half (0 elsewhere), so that each
    branch of a two-piece formula is computed only where it is finite."""
    negative = anp.less(z, 0)
    return negative, anp.where(negative, z, 0.0), anp.where(negative, 0.0, z)


def _laplace_cdf(z):
    negative, neg, pos = _halves(z)
    return anp.where(negative, 0.5 * anp.exp(neg), 1.0 - 0.5 * anp.exp(-pos))


def _laplace_logcdf(z):
    negative, neg, pos = _halves(z)
    return anp.where(negative, neg - _LOG2, anp.log1p(-0.5 * anp.exp(-pos)))


def _chi2_logpdf(z, df):
    k = 0.5 * df
    return sc.xlogy(k - 1.0, z) - 0.5 * z - sc.gammaln(k) - k * _LOG2


norm = _Continuous(
    "norm",
    (),
    lambda z: -0.5 * (z * z) - _LOG_SQRT_TWO_PI,
    sc.ndtr,
    lambda z: sc.ndtr(-z),
    logcdf=sc.log_ndtr,
    logsf=lambda z: sc.log_ndtr(-z),
)
"""The normal distribution, ``scipy.stats.norm``: ``norm.logpdf(x, loc=0, scale=1)``,
``pdf``, ``cdf``, ``logcdf``, ``sf``, ``logsf``."""
t = _Continuous(
    "t",
    ("df",),
    _t_logpdf,
    lambda z, df: sc.stdtr(df, z),
    lambda z, df: sc.stdtr(df, -z),
)
"""Student's t distribution, ``scipy.stats.t``: ``t.logpdf(x, df, loc=0, scale=1)``,
``pdf``, ``cdf``, ``logcdf``, ``sf``, ``logsf`` (``cdf`` and ``sf`` have no derivative
in ``df``)."""
beta = _Continuous(
    "beta",
    ("a", "b"),
    lambda z, a, b: sc.xlogy(a - 1.0, z) + sc.xlog1py(b - 1.0, -z) - sc.betaln(a, b),
    lambda z, a, b: sc.betainc(a, b, z),
    lambda z, a, b: sc.betainc(b, a, 1.0 - z),
    support=(0.0, 1.0),
    inner=0.5,
)
"""The beta distribution, ``scipy.stats.beta``: ``beta.logpdf(x, a, b, loc=0, scale=1)``,
``pdf``, ``cdf``, ``logcdf``, ``sf``, ``logsf`` (``cdf`` and ``sf`` have no derivative
in ``a``, ``b``)."""
gamma = _Continuous(
    "gamma",
    ("a",),
    lambda z, a: sc.xlogy(a - 1.0, z) - z - sc.gammaln(a),
    lambda z, a: sc.gammainc(a, z),
    lambda z, a: sc.gammaincc(a, z),
    support=(0.0, _INF),
    inner=1.0,
)
"""The gamma distribution, ``scipy.stats.gamma``: ``gamma.logpdf(x, a, loc=0, scale=1)``,
``pdf``, ``cdf``, ``logcdf``, ``sf``, ``logsf`` (``cdf`` and ``sf`` have no derivative
in ``a``)."""
expon = _Continuous(
    "expon",
    (),
    lambda z: -z,
    lambda z: -anp.expm1(-z),
    lambda z: anp.exp(-z),
    logcdf=lambda z: anp.log(-anp.expm1(-z)),
    logsf=lambda z: -z,
    support=(0.0, _INF),
    inner=1.0,
)
"""The exponential distribution, ``scipy.stats.expon``: ``expon.logpdf(x, loc=0,
scale=1)``, ``pdf``, ``cdf``, ``logcdf``, ``sf``, ``logsf``."""
laplace = _Continuous(
    "laplace",
    (),
    lambda z: -anp.abs(z) - _LOG2,
    _laplace_cdf,
    lambda z: _laplace_cdf(-z),
    logcdf=_laplace_logcdf,
    logsf=lambda z: _laplace_logcdf(-z),
)
"""The Laplace distribution, ``scipy.stats.laplace``: ``laplace.logpdf(x, loc=0,
scale=1)``, ``pdf``, ``cdf``, ``logcdf``, ``sf``, ``logsf``."""
chi2 = _Continuous(
    "chi2",
    ("df",),
    _chi2_logpdf,
    lambda z, df: sc.gammainc(0.5 * df, 0.5 * z),
    lambda z, df: sc.gammaincc(0.5 * df, 0.5 * z),
    support=(0.0, _INF),
    inner=1.0,
)
"""The chi-squared distribution, ``scipy.stats.chi2``: ``chi2.logpdf(x, df, loc=0,
scale=1)``, ``pdf``, ``cdf``, ``logcdf``, ``sf``, ``logsf`` (``cdf`` and ``sf`` have no derivative
in ``df``)."""

# --- the discrete distributions -------------------------------------------------------------

poisson = _Discrete(
    "poisson",
    ("mu",),
    lambda k, mu: sc.xlogy(k, mu) - sc.gammaln(k + 1.0) - mu,
    lambda k, mu: sc.gammaincc(k + 1.0, mu),
    lambda k, mu: sc.gammainc(k + 1.0, mu),
    support=(0.0, _INF),
    domains=[_nonnegative],
)
"""The Poisson distribution, ``scipy.stats.poisson``: ``poisson.logpmf(k, mu, loc=0)``,
``pmf``, ``cdf``, ``logcdf``, ``sf``, ``logsf``."""
bernoulli = _Discrete(
    "bernoulli",
    ("p",),
    lambda k, p: sc.xlogy(k, p) + sc.xlog1py(1.0 - k, -p),
    lambda k, p: anp.where(anp.greater_equal(k, 1), 1.0, 1.0 - p),
    lambda k, p: anp.where(anp.greater_equal(k, 1), 0.0, p),
    support=(0.0, 1.0),
    domains=[_unit],
)
"""The Bernoulli distribution, ``scipy.stats.bernoulli``: ``bernoulli.logpmf(k, p,
loc=0)``, ``pmf``, ``cdf``, ``logcdf``, ``sf``, ``logsf``."""

# --- multivariate ------------------------------------------------------------------------------


def _inspectable(*values) -> bool:
    """Whether the values can be checked here: NumPy arrays or Python numbers (a traced
    value, or a Dask or CuPy array, cannot be read without a cost or at all)."""
    return all(not isinstance(v, Tracer) and array_library(v) is None for v in values)


class _MultivariateNormal:
    """``multivariate_normal.logpdf(x, mean=None, cov=1)`` and ``pdf``, as SciPy spells them."""

    def __repr__(self) -> str:
        return "<autodiff.scipy.stats.multivariate_normal>"

    def logpdf(self, x, mean=None, cov=1, allow_singular=False):
        """The log-density of N(mean, cov) at the points ``x`` (the last axis holds the
        components; a 1-d ``x`` is one point, or many when the dimension is 1).

        ``cov`` is a scalar (times the identity), a 1-d diagonal or a matrix, read as
        its symmetric part ``(cov + cov^T) / 2`` (SciPy assumes a symmetric ``cov``;
        this keeps its derivative symmetric).  Differentiable in all three.  As in
        SciPy, the result is squeezed (``x`` of shape (1, d) gives a scalar).

        >>> import numpy as np, autodiff
        >>> from autodiff.scipy.stats import multivariate_normal
        >>> x, cov = np.array([1.0, 2.0]), np.array([[2.0, 0.5], [0.5, 1.0]])
        >>> import scipy.stats
        >>> bool(np.isclose(multivariate_normal.logpdf(x, cov=cov),
        ...                 scipy.stats.multivariate_normal.logpdf(x, cov=cov)))
        True
        >>> autodiff.grad(multivariate_normal.logpdf)(x, np.zeros(2), np.eye(2))  # -(x - mean)
        array([-1., -2.])
        """
        x, mean, cov = _array(x), _array(mean), _array(cov)
        if allow_singular:
            raise NotImplementedError(
                "multivariate_normal.logpdf: allow_singular=True (a pseudo-determinant) is not "
                "implemented; give a positive definite cov"
            )
        if mean is not None and anp.ndim(mean) > 1:
            raise ValueError("multivariate_normal: array 'mean' must be a vector of length dim")
        if anp.ndim(cov) > 2:
            raise ValueError("multivariate_normal: array 'cov' must be at most two-dimensional")
        if mean is not None and anp.ndim(mean) == 1:
            dim = anp.shape(mean)[0]
        else:
            dim = anp.shape(cov)[0] if anp.ndim(cov) >= 1 else 1
        if anp.ndim(x) == 0:
            x = anp.reshape(x, (1,))
        elif anp.ndim(x) == 1 and dim == 1:
            x = anp.expand_dims(x, -1)
        if anp.shape(x)[-1] != dim:
            raise ValueError(
                f"multivariate_normal: x of shape {anp.shape(x)} has no {dim} components"
            )
        diff = x if mean is None else x - mean
        if anp.ndim(cov) == 0:  # cov * identity
            maha = anp.sum(diff * diff, axis=-1) / cov
            logdet = dim * anp.log(cov)
            out = -0.5 * (maha + logdet) - dim * _LOG_SQRT_TWO_PI
        elif anp.ndim(cov) == 1:  # a diagonal
            maha = anp.sum(diff * diff / cov, axis=-1)
            logdet = anp.sum(anp.log(cov), axis=-1)
            out = -0.5 * (maha + logdet) - dim * _LOG_SQRT_TWO_PI
        else:
            # One primitive (its block says why): points (n, d), the result (n,).
            lead = anp.shape(diff)[:-1]
            points = anp.reshape(diff, (-1, dim)) if len(lead) != 1 else diff
            out = _stats.multivariate_normal_logpdf(points, cov)
            out = anp.reshape(out, lead) if len(lead) != 1 else out
        return scalar_if_0d(anp.squeeze(out) if 1 in anp.shape(out) else out)  # as SciPy's

    def pdf(self, x, mean=None, cov=1, allow_singular=False):
        """``exp(logpdf(x, mean, cov))``.

        >>> import numpy as np
        >>> from autodiff.scipy.stats import multivariate_normal
        >>> bool(np.isclose(multivariate_normal.pdf(np.zeros(2), np.zeros(2)), 1 / (2 * np.pi)))
        True
        """
        return anp.exp(self.logpdf(x, mean, cov, allow_singular))


class _Dirichlet:
    """``dirichlet.logpdf(x, alpha)`` and ``pdf``, as SciPy spells them."""

    def __repr__(self) -> str:
        return "<autodiff.scipy.stats.dirichlet>"

    def logpdf(self, x, alpha):
        """The log-density of Dirichlet(alpha) at ``x``, whose first axis holds the K
        components (or K - 1 of them: the last is then ``1 - sum``), as in SciPy.

        Differentiable in ``x`` and ``alpha``.  Plain arrays are checked as SciPy checks
        them (entries in [0, 1] summing to 1); traced values cannot be read, and are not.

        >>> import numpy as np, scipy.stats
        >>> from autodiff.scipy.stats import dirichlet
        >>> x, alpha = np.array([0.2, 0.3, 0.5]), np.array([1.5, 2.0, 3.0])
        >>> bool(np.isclose(dirichlet.logpdf(x, alpha), scipy.stats.dirichlet.logpdf(x, alpha)))
        True
        """
        x, alpha = _array(x), _array(alpha)
        if anp.ndim(alpha) != 1 or anp.shape(alpha)[0] < 2:
            raise ValueError("dirichlet: parameter vector 'alpha' must be one dimensional, K >= 2")
        k = anp.shape(alpha)[0]
        if anp.ndim(x) == 0 or anp.shape(x)[0] not in (k - 1, k):
            raise ValueError(
                f"dirichlet: x must have K = {k} or K - 1 entries along its first axis, "
                f"not shape {anp.shape(x)}"
            )
        if anp.shape(x)[0] == k - 1:
            x = anp.concatenate([x, 1.0 - anp.sum(x, axis=0, keepdims=True)], axis=0)
        if _inspectable(x) and not (
            np.all(np.asarray(x) >= 0)
            and np.all(np.asarray(x) <= 1)
            and np.all(np.abs(np.sum(x, 0) - 1.0) <= 1e-9)
        ):
            raise ValueError("dirichlet: the entries of 'x' must lie in [0, 1] and sum to 1")
        a = anp.reshape(alpha, (k,) + (1,) * (anp.ndim(x) - 1))
        log_beta = anp.sum(sc.gammaln(alpha)) - sc.gammaln(anp.sum(alpha))
        return scalar_if_0d(anp.squeeze(anp.sum(sc.xlogy(a - 1.0, x), axis=0) - log_beta))

    def pdf(self, x, alpha):
        """``exp(logpdf(x, alpha))``.

        >>> import numpy as np
        >>> from autodiff.scipy.stats import dirichlet
        >>> float(dirichlet.pdf(np.array([0.5, 0.5]), np.ones(2)))
        1.0
        """
        return anp.exp(self.logpdf(x, alpha))


multivariate_normal = _MultivariateNormal()
dirichlet = _Dirichlet()
