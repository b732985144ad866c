"""``scipy.stats``' one primitive: the multivariate normal's log-density with a full
covariance (``autodiff.scipy.stats.multivariate_normal.logpdf`` binds it; the scalar and
diagonal covariances stay compositions there).

Why a primitive: composed, the density is 14 primitives, so a program that sums a few of
them (a Gaussian mixture) pays 14 tape entries and 14 VJP rules per density under
``grad``; as one primitive its VJP is a handful of matrix products (HIPS autograd's
``mvn.logpdf`` is one primitive too).  Its rules are written with public functions, so
they differentiate again (Hessian-vector products) and batch.

With ``S = (cov + cov^T) / 2`` (the symmetric part: SciPy assumes a symmetric ``cov``,
reading its symmetric part keeps the derivative symmetric), ``P = S^-1`` and
``w = P diff`` per point::

    logpdf = -diff^T P diff / 2 - log det S / 2 - d log(2 pi) / 2
    d logpdf = -w . d diff + (w^T dcov w - tr(P dcov)) / 2
    ct_diff = -ct w,  ct_cov = (sum_n ct_n w_n w_n^T - (sum_n ct_n) P) / 2

(``w^T dcov w`` and ``tr(P dcov)`` read only ``dcov``'s symmetric part, as they must.)
"""

from __future__ import annotations

import math

import numpy as np

from autodiff.core.arrays import dtype_of, ndim_of, shape_of
from autodiff.core.graph import ShapedArray
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import jvp_taylor
from autodiff.rules import compositions as _comp
from autodiff.rules import linalg as _lin
from autodiff.rules import products as _prod
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import implements, move_to_front

__all__ = ["multivariate_normal_logpdf"]

# -log(2 pi) / 2 + log(2) / 2 a component: the implementation factors cov + cov^T = 2 S.
_HALF_LOG_PI = 0.5 * math.log(math.pi)


def _mvn_logpdf_impl(diff, cov):
    # Cholesky of cov + cov^T = 2 S (S the symmetric part): low = sqrt(2) L, L L^T = S.
    # Then z = low^-1 diff has |z|^2 = maha / 2 and sum(log(diag(low))) = (log det S + d
    # log 2) / 2.  One (d, d) inverse serves all the points (a matmul), not a solve each.
    # (The factorisations' own implementations: another array library meets the same checks.)
    low = _lin.cholesky_p.impl(cov + np.swapaxes(cov, -1, -2), upper=False)
    z = np.matmul(diff, np.swapaxes(_lin.inv_p.impl(low), -1, -2))
    half_logdet = np.sum(np.log(np.diagonal(low, 0, -2, -1)), axis=-1)
    dim = np.shape(cov)[-1]
    return -dim * _HALF_LOG_PI - np.sum(z * z, axis=-1) - half_logdet[..., None]


def _precision_and_w(diff, cov):
    """``P = S^-1`` and ``w = diff P`` (each point's row times P), with public functions."""
    precision = 2.0 * _lin.inv(cov + _shp.swap_last_two(cov))
    return precision, _prod.matmul(diff, precision)


def _mvn_logpdf_vjp(ct, ans, diff, cov):
    precision, w = _precision_and_w(diff, cov)
    ct_col = _shp.expand_dims(ct, -1)
    ct_diff = -(ct_col * w)
    outer = _prod.matmul(_shp.swap_last_two(w * ct_col), w)  # sum_n ct_n w_n w_n^T
    total = _shp.expand_dims(_red.sum(ct, axis=-1), (-2, -1))
    return ct_diff, 0.5 * (outer - total * precision)


def _mvn_logpdf_jvp(tangents, ans, diff, cov):
    diff_dot, cov_dot = tangents
    precision, w = _precision_and_w(diff, cov)
    out = None
    if diff_dot is not None:
        out = -_red.sum(w * diff_dot, axis=-1)
    if cov_dot is not None:
        quadratic = _red.sum(_prod.matmul(w, cov_dot) * w, axis=-1)
        trace = _red.sum(precision * cov_dot, axis=(-2, -1))
        term = 0.5 * (quadratic - _shp.expand_dims(trace, -1))
        out = term if out is None else out + term
    return out


def _mvn_logpdf_batch(args, dims):
    # Batch axes to the front of both, each broadcast to the batch, so the stack axes of
    # diff (*B, n, d) and cov (*B, d, d) line up; an unbatched cov is not copied.
    diff, cov = args
    d_diff, d_cov = dims
    if d_cov is None:  # every example's points share cov: one more stack axis of diff
        diff = move_to_front(diff, d_diff)
        k, (n, d) = shape_of(diff)[0], shape_of(diff)[-2:]
        stack = shape_of(cov)[:-2]
        # (K, *B, n, d) -> (*B, K n, d): B leads, as in cov
        diff = _shp.reshape(_comp.moveaxis(diff, 0, len(stack)), (*stack, k * n, d))
        return _shp.reshape(mvn_logpdf_p.bind(diff, cov), (*stack, k, n)), len(stack)
    cov = move_to_front(cov, d_cov)
    k = shape_of(cov)[0]
    if d_diff is None:
        diff = _shp.broadcast_to(diff, (k, *shape_of(diff)))
    else:
        diff = move_to_front(diff, d_diff)
    return mvn_logpdf_p.bind(diff, cov), 0


def _mvn_logpdf_shape(diff, cov):
    dtype = np.result_type(diff.dtype, cov.dtype, np.float32)  # LAPACK's: float32 or wider
    return ShapedArray(diff.shape[:-1], dtype)


mvn_logpdf_p = Primitive(
    "multivariate_normal_logpdf",
    _mvn_logpdf_impl,
    vjp=_mvn_logpdf_vjp,
    jvp=_mvn_logpdf_jvp,
    batch=_mvn_logpdf_batch,
    shape=_mvn_logpdf_shape,
)
mvn_logpdf_p.def_taylor(jvp_taylor(mvn_logpdf_p))  # from its JVP rule (exact)


@implements(mvn_logpdf_p)
def multivariate_normal_logpdf(diff, cov):
    """The log-density of N(0, cov) at the points ``diff`` of shape ``(*B, n, d)``, for
    the stack ``(*B, d, d)`` of covariances read as their symmetric parts: shape ``(*B, n)``.
    ``autodiff.scipy.stats.multivariate_normal.logpdf`` is SciPy's spelling of it.

    >>> import numpy as np, autodiff
    >>> from autodiff.rules.stats import multivariate_normal_logpdf
    >>> cov = np.array([[2.0, 0.0], [0.0, 0.5]])  # at (1, 1): -(1/2 + 2)/2 - log(2 pi)
    >>> bool(np.isclose(multivariate_normal_logpdf(np.ones((1, 2)), cov)[0],
    ...                 -1.25 - np.log(2 * np.pi)))
    True
    >>> autodiff.grad(lambda d: multivariate_normal_logpdf(d, np.eye(2)).sum())(
    ...     np.array([[1.0, -2.0]]))
    array([[-1.,  2.]])
    """
    stack = shape_of(cov)[:-2]
    if (ndim_of(diff) < 2 or ndim_of(cov) < 2 or shape_of(cov)[-1] != shape_of(cov)[-2]
            or shape_of(diff)[:-2] != stack):  # fmt: skip
        raise ValueError(
            f"multivariate_normal_logpdf: points (*B, n, d) and covariances (*B, d, d) of "
            f"the same stack B, got {shape_of(diff)} and {shape_of(cov)}"
        )
    if shape_of(diff)[-1] != shape_of(cov)[-1]:
        raise ValueError(
            f"multivariate_normal_logpdf: points of shape {shape_of(diff)} have no "
            f"{shape_of(cov)[-1]} components"
        )
    if dtype_of(diff).kind == "c" or dtype_of(cov).kind == "c":
        raise TypeError("multivariate_normal_logpdf: real points and covariances only")
    return mvn_logpdf_p.bind(diff, cov)
