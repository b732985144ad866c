"""Polynomials and piecewise-linear interpolation: ``poly*``, ``vander`` and ``interp``.

All compositions: evaluation and fitting through the powers of x (``vander``),
matrix products and ``linalg.pinv``; multiplication is convolution (``correlate_p``,
``autodiff/rules/polynomial.py``); division through one triangular Toeplitz solve;
the coefficients of a polynomial from its roots by a tree of pairwise products.  No
function loops over the elements of its arrays in Python (``polyder`` and ``polyint``
loop over the order ``m``).

Where NumPy's result depends on values (the leading zeros ``polydiv`` trims from the
remainder, ``polyfit``'s rank warning, whether ``poly`` of complex roots is real), the
values are read where they are at hand: on plain NumPy arrays and under ``grad``/``jvp``.
Under ``vmap`` (one result for many examples) and on other array libraries (where
reading a value would force a computation) ``polydiv`` keeps the remainder's leading
zeros and ``polyfit`` does not warn; ``poly`` decides for the whole batch, or raises.
The leading zeros ``polymul`` drops from its operands are dropped from plain arrays
only: a traced coefficient that is zero still has a derivative (a model whose leading
coefficient starts at 0 would otherwise never move it), so the product keeps them (the
same polynomial, with leading zeros).

Given a ``np.poly1d``, the arithmetic answers one, as NumPy's does (``_as_given``); an
answer that holds traced values stays an array (a poly1d holds plain coefficients).
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

import numpy as np

from autodiff.core.arrays import array_library, array_like, dtype_of, is_complex, ndim_of, shape_of
from autodiff.core.numpy_args import warn_caller
from autodiff.core.overrides import register_numpy
from autodiff.core.tracer import Tracer
from autodiff.errors import ConcretizationError
from autodiff.numpy import _products, _shape, _sorting
from autodiff.rules import compositions as _comp
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import linalg as _lin
from autodiff.rules import products as _prod
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules import sorting as _srt
from autodiff.rules.polynomial import convolve, correlate_p

__all__ = [
    "interp", "poly", "polyadd", "polyder", "polydiv", "polyfit", "polyint", "polymul",
    "polysub", "polyval", "vander",
]  # fmt: skip


# --- values that NumPy's results depend on ----------------------------------------------------


def _value(x: Any) -> Any:
    """``x``'s value as a NumPy array where it is at hand (plain arrays, and the values
    traced by ``grad`` and ``jvp``), else None: under ``vmap`` there is one per example,
    and another library's array would have to be computed or copied to be read."""
    if isinstance(x, Tracer):
        try:
            x = x._concrete_value("a choice that depends on values")
        except ConcretizationError:
            return None
    return x if isinstance(x, (np.ndarray, np.generic, float, int, complex)) else None


# --- powers, evaluation, fitting -------------------------------------------------------------


def _powers(x, n, increasing):
    """``x[..., None] ** k`` for k = n-1, ..., 1, 0 (0, ..., n-1 if ``increasing``), in
    x's precision (float32 stays float32; integers stay integers)."""
    dtype = dtype_of(x)
    exponent_dtype = np.finfo(dtype).dtype if dtype.kind in "fc" else np.int64
    k = np.arange(n, dtype=exponent_dtype, like=array_like(x))
    if not increasing:
        k = k[::-1]
    return _shp.expand_dims(x, -1) ** k


@register_numpy(np.vander)
def vander(x, N=None, increasing=False):
    """Like numpy.vander: the columns are powers of the 1-d ``x``, decreasing (or
    increasing) from ``N - 1`` (default ``len(x) - 1``) to 0.  float32 stays float32
    (NumPy promotes to float64).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.vander(np.array([1.0, 2.0, 3.0]), 3)
    array([[1., 1., 1.],
           [4., 2., 1.],
           [9., 3., 1.]])
    """
    x = _elt.as_operands(x)
    if ndim_of(x) != 1:
        raise ValueError("x must be a one-dimensional array or sequence.")
    return _powers(x, shape_of(x)[0] if N is None else operator.index(N), increasing)


def _operands(*xs):
    """``as_operands``, with NumPy's ``poly1d`` objects as their coefficient arrays
    (results are arrays: a poly1d cannot hold traced values)."""
    return _elt.as_operands(*(x.coeffs if isinstance(x, np.poly1d) else x for x in xs))


def _as_given(func):
    """``func``, answering ``np.poly1d`` objects where an argument is one (NumPy's
    ``truepoly``): one, or a pair for ``polydiv``; a traced answer stays an array."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        ans = func(*args, **kwargs)
        if not any(isinstance(a, np.poly1d) for a in args):
            return ans
        wrap = lambda r: np.poly1d(r) if isinstance(r, np.ndarray) else r
        return tuple(map(wrap, ans)) if isinstance(ans, tuple) else wrap(ans)

    return wrapper


def _coefficients(p, name):
    p = _shape.atleast_1d(_operands(p))
    if ndim_of(p) != 1:
        raise ValueError(f"{name}: the coefficients must be a 1-d sequence (got {shape_of(p)})")
    return p


@register_numpy(np.polyval)
def polyval(p, x):
    """Like numpy.polyval: ``p[0] * x**(N-1) + ... + p[N-1]`` at every ``x``, as a
    product of the powers of ``x`` with ``p`` (NumPy uses Horner's scheme: the results
    agree to rounding).  A 2-d ``p`` holds one polynomial per column.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.polyval(np.array([3.0, 0.0, 1.0]), np.array([5.0, 1.0]))
    array([76.,  4.])
    """
    p, x = _operands(p, x)
    if ndim_of(p) == 0:
        raise TypeError("polyval: p must be a sequence of coefficients, highest power first")
    n = shape_of(p)[0]
    if n == 0:
        return _cre.zeros_like(x)
    powers = _powers(x, n, increasing=False)
    if ndim_of(p) == 1:
        return _prod.matmul(powers, p)
    # One polynomial per column of p: broadcast x's shape against the columns', as Horner's
    # scheme on rows of p would.
    return _red.sum(powers * _comp.moveaxis(p, 0, -1), axis=-1)


@register_numpy(np.polyfit)
def polyfit(x, y, deg, rcond=None, full=False, w=None, cov=False):
    """Like numpy.polyfit: least-squares coefficients of degree ``deg`` for the points
    ``(x, y)`` (``y`` 2-d: one fit per column), weighted by ``w``; with ``full=True``
    also the residuals, rank, singular values and ``rcond``; with ``cov`` the
    covariance.  Solved with the pseudo-inverse of the scaled Vandermonde matrix (the
    minimum-norm solution when it is rank deficient, as NumPy's ``lstsq``);
    differentiable in ``x``, ``y`` and ``w`` where the rank is full.  The rank warning
    and the empty residuals of a rank-deficient fit need values (see the module's
    docstring): under ``vmap`` residuals are always returned.

    >>> import numpy as np, autodiff.numpy as anp
    >>> x = np.array([0.0, 1.0, 2.0, 3.0])
    >>> anp.polyfit(x, 2 * x**2 - 1, 2).round(12) + 0.0
    array([ 2.,  0., -1.])
    """
    x, y = _elt.as_operands(x, y)
    order = int(deg) + 1
    x, y = x + 0.0, y + 0.0
    if deg < 0:
        raise ValueError("expected deg >= 0")
    if ndim_of(x) != 1:
        raise TypeError("expected 1D vector for x")
    if shape_of(x)[0] == 0:
        raise TypeError("expected non-empty vector for x")
    if ndim_of(y) not in (1, 2):
        raise TypeError("expected 1D or 2D array for y")
    if shape_of(x)[0] != shape_of(y)[0]:
        raise TypeError("expected x and y to have same length")
    points = shape_of(x)[0]
    if rcond is None:
        rcond = points * float(np.finfo(dtype_of(x)).eps)
    lhs, rhs = vander(x, order), y
    if w is not None:
        w = _elt.as_operands(w) + 0.0
        if ndim_of(w) != 1:
            raise TypeError("expected a 1-d array for weights")
        if shape_of(w)[0] != shape_of(y)[0]:
            raise TypeError("expected w and y to have the same length")
        lhs = lhs * w[:, None]
        rhs = rhs * (w[:, None] if ndim_of(rhs) == 2 else w)
    scale = _elt.sqrt(_red.sum(lhs * lhs, axis=0))  # columns of unit norm: better conditioned
    lhs = lhs / scale
    scaled = _prod.matmul(_lin.pinv(lhs, rcond=rcond), rhs)
    c = scaled / (scale[:, None] if ndim_of(scaled) == 2 else scale)
    known = _value(lhs) is not None
    if not (full or known):
        if cov:
            return c, _polyfit_cov(lhs, rhs, scaled, scale, cov, points, order)
        return c
    s = _lin.svd(lhs, compute_uv=False)
    rank = _elt.astype(_red.sum(_elt.greater(s, rcond * s[0])), np.int32)
    deficient = known and int(_value(rank)) != order
    if full:
        resids = _residuals(lhs, rhs, scaled)
        if points <= order or deficient:  # lstsq returns none then
            resids = resids[:0]
        return c, resids, rank, s, rcond
    if deficient:
        warn_caller("Polyfit may be poorly conditioned", np.exceptions.RankWarning)
    if cov:
        return c, _polyfit_cov(lhs, rhs, scaled, scale, cov, points, order)
    return c


def _residuals(lhs, rhs, scaled):
    """The sums of squared residuals, one per column of ``rhs`` (shape (1,) for 1-d)."""
    r = rhs - _prod.matmul(lhs, scaled)
    squares = _elt.real(r * _elt.conj(r)) if is_complex(r) else r * r
    total = _red.sum(squares, axis=0)
    return _shp.reshape(total, (1,)) if ndim_of(total) == 0 else total


def _polyfit_cov(lhs, rhs, scaled, scale, cov, points, order):
    base = _lin.inv(_prod.matmul(_shp.transpose(lhs), lhs)) / _products.outer(scale, scale)
    if cov == "unscaled":
        fac: Any = 1
    elif points <= order:
        raise ValueError(
            "the number of data points must exceed order to scale the covariance matrix"
        )
    else:
        fac = _residuals(lhs, rhs, scaled) / (points - order)
    return base * fac if ndim_of(rhs) == 1 else base[:, :, None] * fac


# --- arithmetic on coefficients ------------------------------------------------------------------


def _aligned(a1, a2):
    """Both coefficient sequences padded with leading zeros to the same length."""
    a1, a2 = _shape.atleast_1d(*_operands(a1, a2))
    n1, n2 = shape_of(a1)[0], shape_of(a2)[0]
    if n1 < n2:
        a1 = _shp.pad(a1, (n2 - n1, 0))
    elif n2 < n1:
        a2 = _shp.pad(a2, (n1 - n2, 0))
    return a1, a2


@register_numpy(np.polyadd)
@_as_given
def polyadd(a1, a2):
    """Like numpy.polyadd: the sum of two polynomials (coefficients, highest power first).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.polyadd(np.array([1.0, 2.0]), np.array([9.0, 5.0, 4.0]))
    array([9., 6., 6.])
    """
    a1, a2 = _aligned(a1, a2)
    return a1 + a2


@register_numpy(np.polysub)
@_as_given
def polysub(a1, a2):
    """Like numpy.polysub: the difference of two polynomials.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.polysub(np.array([2.0, 10.0, -2.0]), np.array([3.0, 10.0, -4.0]))
    array([-1.,  0.,  2.])
    """
    a1, a2 = _aligned(a1, a2)
    return a1 - a2


@register_numpy(np.polymul)
@_as_given
def polymul(a1, a2):
    """Like numpy.polymul: the product of two polynomials (their convolution).  NumPy
    first drops each operand's leading zeros (an all-zero one is ``[0]``): so does this
    function on plain arrays; traced ones keep them (see the module's docstring).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.polymul(np.array([1.0, 2.0, 3.0]), np.array([9.0, 5.0, 1.0]))
    array([ 9., 23., 38., 17.,  3.])
    >>> anp.polymul(np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0]))
    array([1., 3., 2.])
    """
    a1, a2 = _shape.atleast_1d(*_operands(a1, a2))
    return convolve(_without_leading_zeros(a1), _without_leading_zeros(a2))


def _without_leading_zeros(a):
    """A plain array ``a`` without its leading zeros, ``[0]`` if it is all zeros (NumPy's
    ``poly1d``); anything else as it is."""
    if type(a) is not np.ndarray:
        return a
    nonzero = np.flatnonzero(a)
    return a[nonzero[0] :] if nonzero.size else np.zeros(1, a.dtype)


@register_numpy(np.polydiv)
@_as_given
def polydiv(u, v):
    """Like numpy.polydiv: quotient and remainder of the division of ``u`` by ``v``.

    The quotient solves one lower-triangular Toeplitz system (the leading coefficients
    of ``q * v`` are those of ``u``).  NumPy then trims the remainder's leading zeros
    (entries within 1e-8 of 0): so does this function where the values are at hand, and
    under ``vmap`` it keeps ``len(v) - 1`` coefficients (the same polynomial, with
    leading zeros).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.polydiv(np.array([3.0, 5.0, 2.0]), np.array([2.0, 1.0]))
    (array([1.5 , 1.75]), array([0.25]))
    """
    u, v = _shape.atleast_1d(*_operands(u, v))
    u, v = u + 0.0, v + 0.0
    dtype = np.result_type(dtype_of(u), dtype_of(v))
    u, v = _elt.astype(u, dtype), _elt.astype(v, dtype)
    m, n = shape_of(u)[0] - 1, shape_of(v)[0] - 1
    if m < n:
        q, r = _cre.zeros_like(u[:1]), u
    else:
        k = m - n + 1
        # T[i, j] = v[i - j] for 0 <= i - j <= n, else 0 (the entry after v's last)
        diagonals = np.arange(k)[:, None] - np.arange(k)
        diagonals = np.where((diagonals >= 0) & (diagonals <= n), diagonals, n + 1)
        padded = _shp.concatenate([v, _cre.zeros_like(v[:1])])
        toeplitz = _shp.reshape(padded[diagonals.ravel()], (k, k))  # a 1-d gather: Dask has it
        q = _lin.solve(toeplitz, u[:k])
        r = (u - convolve(q, v))[min(k, m) :]  # the first k cancel; NumPy keeps one
    return q, _trim_leading_zeros(r)


def _trim_leading_zeros(r):
    """``r`` without the leading entries NumPy's polydiv takes for zeros (|r| <= 1e-8),
    keeping one; ``r`` itself where its values are not at hand."""
    value = _value(r)
    if value is None:
        return r
    small = np.abs(value) <= 1e-8
    zeros = int(np.argmin(small)) if not small.all() else small.size
    return r[min(zeros, shape_of(r)[0] - 1) :]


def _falling(n, m, count, dtype, like):
    """(n - k)(n - k - 1)...(n - k - m + 1) for k < count: the factors of polyder."""
    return _comp.constant_like([math.perm(n - k, m) for k in range(count)], dtype, like)


@register_numpy(np.polyder)
@_as_given
def polyder(p, m=1):
    """Like numpy.polyder: the coefficients of the ``m``-th derivative of ``p``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.polyder(np.array([1.0, 1.0, 1.0, 1.0]), 2)
    array([6., 2.])
    """
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of derivative must be positive (see polyint)")
    p = _coefficients(p, "polyder")
    if m == 0:
        return p
    n = shape_of(p)[0] - 1
    count = max(n - m + 1, 0)
    return p[:count] * _falling(n, m, count, dtype_of(p), p)


@register_numpy(np.polyint)
@_as_given
def polyint(p, m=1, k=None):
    """Like numpy.polyint: the coefficients of the ``m``-th antiderivative of ``p``,
    with integration constants ``k`` (the lowest coefficients: one per order, or one
    for all; default 0).  Differentiable in ``p`` and ``k``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.polyint(np.array([3.0, 2.0, 1.0]), k=5.0)
    array([1., 1., 1., 5.])
    """
    m = operator.index(m)
    if m < 0:
        raise ValueError("Order of integral must be positive (see polyder)")
    p = _coefficients(p, "polyint")
    if m == 0:  # NumPy's answer: p as it is, its dtype kept
        return p
    dtype = np.result_type(dtype_of(p), 1.0)
    p = _elt.astype(p, dtype)
    if k is None:
        k = _comp.constant_like([0] * m, dtype, p)
    if not isinstance(k, Tracer) and array_library(k) is None:  # constants in p's library
        k = _comp.constant_like(np.asarray(k).tolist(), dtype, p)
    k = _shape.atleast_1d(k)
    if shape_of(k)[0] == 1 and m > 1:
        k = _shp.broadcast_to(k, (m,))
    if shape_of(k)[0] < m:
        raise ValueError("k must be a scalar or a rank-1 array of length 1 or >m.")
    for i in range(m):  # one antiderivative per order
        n = shape_of(p)[0]
        divisors = _comp.constant_like(list(range(n, 0, -1)), dtype, p)
        p = _shp.concatenate([p / divisors, _elt.astype(k[i : i + 1], dtype)])
    return p


@register_numpy(np.poly)
def poly(seq_of_zeros):
    """Like numpy.poly: the coefficients of the monic polynomial with the given roots
    (of a square matrix: its characteristic polynomial, through ``linalg.eigvals``).
    Complex roots that come in conjugate pairs give real coefficients, as in NumPy;
    under ``vmap`` every example must agree on that.

    The product of the linear factors is taken as a tree of pairwise products
    (log2 n rounds of batched convolutions), not one factor at a time.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.poly(np.array([1.0, 2.0, 3.0]))
    array([ 1., -6., 11., -6.])
    """
    z = _shape.atleast_1d(_elt.as_operands(seq_of_zeros))
    shape = shape_of(z)
    if len(shape) == 2 and shape[0] == shape[1] and shape[0] != 0:
        # NumPy's eigvals, which hands traced values to autodiff's linalg.eigvals
        z = np.linalg.eigvals(z)
    elif len(shape) != 1:
        raise ValueError("input must be 1d or non-empty square 2d array.")
    elif dtype_of(z).kind not in "fc":
        z = _elt.astype(z, np.float64)
    n = shape_of(z)[0]
    if n == 0:
        return 1.0
    # Factors x - z_i as rows [1, -z_i], padded with the constant 1 (as [0, 1]) to a
    # power of two; each round multiplies neighbouring pairs.
    ones = _cre.ones_like(z)
    rows = _shp.stack([ones, -z], axis=-1)
    count = 1 << (n - 1).bit_length()
    if count > n:
        padding = _shp.stack([_cre.zeros_like(z[:1]), _cre.ones_like(z[:1])], axis=-1)
        rows = _shp.concatenate([rows, _shp.broadcast_to(padding, (count - n, 2))])
    while shape_of(rows)[0] > 1:
        left, right = rows[0::2], rows[1::2]
        width = shape_of(rows)[1]
        rows = correlate_p.bind(
            left, _comp.flip(right, -1), offset=-(width - 1), length=2 * width - 1
        )
    coefficients = rows[0, -(n + 1) :]  # the padding's leading zeros dropped
    if is_complex(coefficients):
        roots = _sorting.sort(z)
        conjugate_pairs = _red.all(_elt.equal(roots, _sorting.sort(_elt.conj(z))))
        coefficients = _elt.real_if_p.bind(coefficients, conjugate_pairs)
    return coefficients


# --- piecewise-linear interpolation ------------------------------------------------------------


@register_numpy(np.interp)
def interp(x, xp, fp, left=None, right=None, period=None):
    """Like numpy.interp: the piecewise-linear interpolant through ``(xp, fp)`` (``xp``
    increasing) at ``x``; ``left``/``right`` (default ``fp[0]``/``fp[-1]``) outside, or
    periodic with ``period``.  Differentiable in ``x``, ``xp`` and ``fp`` (and traced
    ``left``/``right``); complex ``fp`` too.  float32 stays float32 (NumPy computes in
    float64).

    At a sample point ``x == xp[j]`` the derivative in ``x`` is the slope of the
    segment to its right (at ``xp[-1]``, to its left); outside ``[xp[0], xp[-1]]`` it is 0.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> xp, fp = np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 0.0])
    >>> anp.interp(np.array([0.0, 1.5, 2.5]), xp, fp)
    array([3. , 2.5, 1. ])
    >>> float(autodiff.grad(anp.interp)(2.5, xp, fp))
    -2.0
    """
    x, xp, fp = _elt.as_operands(x, xp, fp)
    if ndim_of(xp) != 1 or ndim_of(fp) != 1:
        raise ValueError("Data points must be 1-D sequences")
    if shape_of(xp)[0] != shape_of(fp)[0]:
        raise ValueError("fp and xp are not of the same length.")
    if shape_of(xp)[0] == 0:
        raise ValueError("array of sample points is empty")
    if period is not None:
        if period == 0:
            raise ValueError("period must be a non-zero value")
        period = abs(period)
        left = right = None
        x, xp = _elt.remainder(x, period), _elt.remainder(xp, period)
        order = _srt.argsort(xp)
        xp, fp = _comp.take(xp, order), _comp.take(fp, order)
        xp = _shp.concatenate([xp[-1:] - period, xp, xp[0:1] + period])
        fp = _shp.concatenate([fp[-1:], fp, fp[0:1]])
    n = shape_of(xp)[0]
    left = fp[0] if left is None else left
    right = fp[-1] if right is None else right
    if n == 1:
        inside = fp[0]
    else:
        j = _comp.clip(_srt.searchsorted(xp, x, side="right") - 1, 0, n - 2)
        x0, x1 = _comp.take(xp, j), _comp.take(xp, j + 1)
        f0, f1 = _comp.take(fp, j), _comp.take(fp, j + 1)
        width = x1 - x0
        slope = (f1 - f0) / _elt.where(_elt.equal(width, 0), 1.0, width)  # 0 only at a repeat
        # From the nearer end of the segment: exact at every sample point, as NumPy is.
        inside = _elt.where(_elt.greater_equal(x, x1), slope * (x - x1) + f1, slope * (x - x0) + f0)
    return _elt.where(_elt.less(x, xp[0]), left, _elt.where(_elt.greater(x, xp[-1]), right, inside))
