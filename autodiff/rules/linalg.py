"""numpy.linalg: solvers, decompositions and norms (``anp.linalg``), and ``numpy.roots``.

Every function accepts stacks of matrices (leading batch dimensions), like
NumPy.  Primitives: ``solve``, ``inv``, ``det``, ``slogdet``, ``cholesky``,
``eigh``, ``eigvalsh``, ``eig``, ``eigvals``, ``svd`` (and its values-only form,
``compute_uv=False``), ``qr``, ``pinv``, ``roots``, and two that compositions bind:
``lstsq_residuals``, ``norm_root``.  The compositions (``lstsq``, ``matrix_rank``,
``cond``, ``tensorsolve``, ``tensorinv``, ``multi_dot``, ``matrix_power``, ``norm``
and the array API's functions) are in ``autodiff/numpy/linalg.py``.

Derivatives (``X^T`` transposes, ``X^H`` conjugate-transposes the last two axes):

* solve: ``dx = solve(a, db - da x)``; inv: ``dY = -Y da Y``;
  det: ``d det = det tr(a^-1 da)``; slogdet: ``d logabsdet = Re tr(a^-1 da)``
  (and ``d sign = sign i Im tr(a^-1 da)`` for complex ``a``).  These need an
  invertible ``a``.
* cholesky, eigh, eigvalsh: ``a`` is read the way LAPACK reads it, from one
  triangle (the lower one unless ``upper=True`` / ``UPLO='U'``) with the real part
  of the diagonal; a perturbation of the other triangle changes nothing, and the
  derivatives say so.  cholesky: ``dL = L Phi(L^-1 da L^-H)`` (``Phi``: lower
  triangle, half the diagonal).  eigh: ``dw = Re diag(V^H da V)``,
  ``dV = V (F * (V^H da V))`` with ``F[i, j] = 1 / (w[j] - w[i])`` off the
  diagonal: eigenvalues must be distinct (eigvalsh: not even that).
* eig: ``K = V^-1 da V``, ``dw = diag(K)``, ``dV = V (F * K) - V Re diag(V^H V (F * K))``
  (unit-norm columns; the phase fixed by ``Im diag(V^-1 dV) = 0``); distinct
  eigenvalues.  eigvals: ``dw = diag(V^-1 da V)``.
* svd (every mode): the standard formulas with ``F[i, j] = 1 / (s[j]**2 - s[i]**2)``,
  plus the projections onto the complements of the ranges of ``U`` and ``V`` for
  non-square matrices: singular values must be distinct and (for non-square or
  complex matrices) nonzero.  ``full_matrices=True`` of a non-square matrix: the
  extra columns turn as little as keeps them orthogonal (``dU2 = -U1 dU1^H U2``).
  ``compute_uv=False``: ``ds = Re diag(U^H da V)``.
* qr: ``dQ``, ``dR`` from ``C = Q^H da R^-1`` (full column rank); wide
  matrices ``a = [X | Y]`` through ``R = [R1 | Q^H Y]``.  ``mode='complete'``
  of a tall matrix has no derivative (NotImplementedError).
* pinv: ``dP = -P da P + P P^H da^H (I - a P) + (I - P a) da^H P^H P``, valid
  where the rank is locally constant (e.g. full rank); lstsq's ``x = pinv(a) b``.
* roots: each root ``r`` of ``p`` moves by ``dr = -dp(r) / p'(r)`` (simple roots).
* norms: derivative 0 at a zero vector or matrix (torch's and HIPS autograd's
  convention).

Complex numbers follow JAX's convention: each VJP is the non-conjugating
transpose of its JVP, so ``Re sum(ct * J v) == Re sum(vjp(ct) * v)``.  The
gauge of eigenvectors and singular vectors (a sign, or a phase for complex
matrices) is what LAPACK returns; derivatives of the vectors are those of that
choice for real matrices, and are meaningful for gauge-invariant functions of
them (such as ``V diag(w) V^H`` or ``abs(V)``) for complex ones.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.linalg import _umath_linalg
from numpy.linalg._linalg import EighResult, EigResult, QRResult, SlogdetResult, SVDResult

from autodiff.core.arrays import (
    array_like,
    broadcast_shapes,
    dtype_of,
    eye_like,
    is_complex,
    ndim_of,
    shape_of,
)
from autodiff.core.loading import load
from autodiff.core.lowering import Gufunc, NotLowered
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import jvp_taylor
from autodiff.errors import ConcretizationError
from autodiff.rules import compositions as _comp
from autodiff.rules import creation as _cre
from autodiff.rules import elementwise as _elt
from autodiff.rules import indexing as _idx
from autodiff.rules import products as _prod
from autodiff.rules import reductions as _red
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import (
    implements,
    move_to_front,
    numpy_impl,
    shaped_like,
    sparsity_kit,
    to_front_padded,
    unbroadcast,
)

__all__ = [
    "cholesky", "det", "eigh", "inv", "pinv", "qr", "slogdet", "solve", "svd", "eig", "eigvals",
    "eigvalsh", "svdvals",
]  # fmt: skip

LinAlgError = np.linalg.LinAlgError


# --- shape rules: NumPy computes in float64, float32 or complex --------------------------


def _sp() -> Any:
    """The sparsity kit (``rules/_sparsity.py``), for the rules below written out: loaded,
    with the index sets and the graph, at their first call (sparsity detection only)."""
    return load("autodiff.rules._sparsity")


def _aval(shape: tuple, dtype: Any) -> Any:
    """``ShapedArray(shape, dtype)``: the shape rules run under staging, which loads the
    graph; a program that never stages never does."""
    return load("autodiff.core.graph").ShapedArray(shape, dtype)


def _la(dtype: np.dtype) -> np.dtype:
    return dtype if dtype.kind in "fc" and dtype.itemsize >= 4 else np.dtype(np.float64)


def _la_real(dtype: np.dtype) -> np.dtype:
    return np.finfo(_la(dtype)).dtype


def _stack_of(a, *tail):
    return (*a.shape[:-2], *tail)


# --- helpers (written with primitives) --------------------------------------------------


def _real_dtype(x: Any) -> np.dtype:
    dtype = dtype_of(x)
    return np.finfo(dtype).dtype if dtype.kind in "fc" else np.dtype(np.float64)


def _T(x):
    return _shp.swap_last_two(x)


def _H(x):
    return _elt.conj(_T(x)) if is_complex(x) else _T(x)


def _conj(x):
    return _elt.conj(x) if is_complex(x) else x


def _real(x):
    return _elt.real(x) if is_complex(x) else x


def _mm(a, b):
    return _prod.matmul(a, b)


def _eye(n: int, like: Any) -> np.ndarray:
    """A static identity matrix in the real dtype matching ``like`` (and of its array library)."""
    return eye_like(n, _real_dtype(like), like)


def _row(v):
    """``v`` (..., k) as (..., 1, k): multiplying by it scales columns (``X diag(v)``)."""
    return _shp.expand_dims(v, -2)


def _col(v):
    """``v`` (..., k) as (..., k, 1): multiplying by it scales rows (``diag(v) X``)."""
    return _shp.expand_dims(v, -1)


def _diag_part(x):
    return _prod.einsum("...ii->...i", x)


def _diag_embed(v):
    return _col(v) * _eye(shape_of(v)[-1], v)


def _strict_triangle(x: Any, lower: bool) -> np.ndarray:
    n = shape_of(x)[-1]
    mask = np.tri(n, k=-1, dtype=_real_dtype(x), like=array_like(x))
    return mask if lower else mask.T


def _hermitian_from_triangle(d, lower: bool):
    """The Hermitian matrix LAPACK works with when it reads one triangle of ``d``
    (and the real part of its diagonal)."""
    off = d * _strict_triangle(d, lower)
    return off + _H(off) + _eye(shape_of(d)[-1], d) * _real(d)


def _hermitian_from_triangle_T(g, lower: bool):
    """The transpose of ``_hermitian_from_triangle`` (for VJPs)."""
    return (g + _conj(_T(g))) * _strict_triangle(g, lower) + _eye(shape_of(g)[-1], g) * _real(g)


def _check_matrix(a: Any, name: str) -> tuple[int, int]:
    shape = shape_of(a)
    if len(shape) < 2:
        raise LinAlgError(
            f"{name}: {len(shape)}-dimensional array given. Array must be at least two-dimensional"
        )
    return shape[-2], shape[-1]


def _check_square(a: Any, name: str) -> int:
    m, n = _check_matrix(a, name)
    if m != n:
        raise LinAlgError(f"{name}: last 2 dimensions of the array must be square")
    return n


def _uplo(UPLO: Any) -> str:
    UPLO = str(UPLO).upper()
    if UPLO not in ("L", "U"):
        raise ValueError("UPLO argument must be 'L' or 'U'")
    return UPLO


def _stack_batch(prim: Primitive):
    """Batch rule for one-operand functions of (stacks of) matrices: NumPy maps
    them over leading axes, so a batch axis among those stays where it is."""

    def batch(args, dims, **params):
        x, d = args[0], dims[0]
        if d >= ndim_of(x) - 2:
            x, d = move_to_front(x, d), 0
        out = prim.bind(x, **params)
        return (out, (d,) * len(out)) if prim.multiple_results else (out, d)

    return batch


# --- solve --------------------------------------------------------------------------------
# NumPy 2 semantics: b is a (stack of) vector(s) only when b.ndim == 1; otherwise it is
# a stack of matrices (..., M, K) broadcast against a's stack.


def _columns(x, vec: bool):
    return _shp.expand_dims(x, -1) if vec else x


def _uncolumns(x, vec: bool):
    return _shp.squeeze(x, -1) if vec else x


def _solve_jvp_a(t, ans, a, b):
    vec = ndim_of(b) == 1
    return -_uncolumns(solve_p.bind(a, _mm(t, _columns(ans, vec))), vec)


def _solve_vjp_b_full(ct, a, b):
    """solve(a^T, ct) in the matrix form, with a's and b's stacks broadcast."""
    return solve_p.bind(_T(a), _columns(ct, ndim_of(b) == 1))


def _solve_vjp_a(ct, ans, a, b):
    vec = ndim_of(b) == 1
    ct_a = -_mm(_solve_vjp_b_full(ct, a, b), _T(_columns(ans, vec)))
    return unbroadcast(ct_a, shape_of(a))


def _solve_vjp_b(ct, ans, a, b):
    ct_b = _uncolumns(_solve_vjp_b_full(ct, a, b), ndim_of(b) == 1)
    return unbroadcast(ct_b, shape_of(b))


def _solve_batch(args, dims):
    (a, b), (ad, bd) = args, dims
    a_stack = ndim_of(a) - (ad is not None) - 2
    if ndim_of(b) - (bd is not None) == 1:  # vectors
        if bd is None:  # a's stack (batch included) broadcasts against one vector
            return solve_p.bind(move_to_front(a, ad), b), 0
        b = _shp.expand_dims(to_front_padded(b, bd, a_stack), -1)  # (B, 1.., M, 1)
        a = a if ad is None else move_to_front(a, ad)
        return _shp.squeeze(solve_p.bind(a, b), -1), 0
    b_stack = ndim_of(b) - (bd is not None) - 2
    stack = max(a_stack, b_stack)
    a = a if ad is None else to_front_padded(a, ad, stack - a_stack)
    b = b if bd is None else to_front_padded(b, bd, stack - b_stack)
    return solve_p.bind(a, b), 0


solve_p = Primitive(
    "solve",
    np.linalg.solve,
    vjp=[_solve_vjp_a, _solve_vjp_b],
    jvp=[_solve_jvp_a, lambda t, ans, a, b: solve_p.bind(a, t)],
    batch=_solve_batch,
)


@solve_p.def_sparsity
def _solve_sparsity(a, b):
    # column j of the solution reads all of its matrix and column j of b (linear in b)
    sp = _sp()
    sa, sb = sp.shape_of_operand(a), sp.shape_of_operand(b)
    if len(sb) == 1:  # one vector
        out = sa[:-1]
        reads = [sp.problem_groups(sa, 2, out, 1), sp.problem_groups(sb, 1, out, 1)]
    else:
        out = broadcast_shapes(sa[:-2], sb[:-2]) + sb[-2:]
        col = np.arange(sb[-1])
        reads = [
            sp.problem_groups(sa, 2, out, 2),
            sp.problem_groups(sb, 2, out, 2, col, col, sb[-1]),
        ]
    return sp.Sparsity(reads, [(0, 0), (0, 1)])


solve_p.def_taylor(jvp_taylor(solve_p))  # from its JVP rule (exact)


def _solve_gufunc(avals):
    """NumPy's solve of one float64 system: its gufunc (LAPACK's gesv), ``solve1`` for a
    vector right-hand side, as ``np.linalg.solve`` picks."""
    a, b = avals
    if a.ndim != 2 or b.ndim not in (1, 2) or {a.dtype, b.dtype} != {np.dtype(np.float64)}:
        raise NotLowered("a stack of systems, or not float64 (NumPy solves float32 in float64)")
    return _umath_linalg.solve1 if b.ndim == 1 else _umath_linalg.solve


def _solve_core(ufunc, shapes, out_shape):
    (m, _), b = shapes
    if len(b) == 1:
        return [m], [(0, 1), (0,), (0,)]
    return [m, b[1]], [(0, 1), (0, 1), (0, 1)]


# a singular matrix raises the invalid flag in the gufunc; np.linalg.solve turns it into
# LinAlgError whatever np.errstate says, and so do compiled kernels
solve_p.def_lowering(Gufunc(_solve_gufunc, _solve_core, singular=True))


@solve_p.def_shape
def _solve_shape(a, b):
    dtype = np.result_type(_la(a.dtype), _la(b.dtype))
    if b.ndim == 1:
        return _aval(a.shape[:-1], dtype)
    return _aval((*broadcast_shapes(a.shape[:-2], b.shape[:-2]), *b.shape[-2:]), dtype)


@implements(solve_p, np.linalg.solve)
def solve(a, b):
    """Like numpy.linalg.solve: ``x`` with ``a @ x == b``, for stacks too.

    ``b`` is a vector only when it is 1-D; otherwise a (stack of) matrices.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> a = np.array([[2.0, 0.0], [0.0, 4.0]])
    >>> anp.linalg.solve(a, np.array([1.0, 1.0])).tolist()
    [0.5, 0.25]
    >>> autodiff.grad(lambda b: anp.linalg.solve(a, b).sum())(np.ones(2)).tolist()
    [0.5, 0.25]
    """
    m = _check_square(a, "solve")
    vec = ndim_of(b) == 1
    if ndim_of(b) == 0 or shape_of(b)[-1 if vec else -2] != m:
        raise ValueError(f"solve: b of shape {shape_of(b)} does not match a of shape {shape_of(a)}")
    return solve_p.bind(a, b)


# --- inv, det, slogdet -------------------------------------------------------------------


inv_p = Primitive(
    "inv",
    np.linalg.inv,
    vjp=[lambda ct, ans, a: -_mm(_mm(_T(ans), ct), _T(ans))],
    jvp=[lambda t, ans, a: -_mm(_mm(ans, t), ans)],
)
inv_p.def_sparsity(sparsity_kit.stacked([2]))
inv_p.def_batch(_stack_batch(inv_p))
inv_p.def_shape(lambda a: shaped_like(a, dtype=_la(a.dtype)))
inv_p.def_taylor(jvp_taylor(inv_p))  # from its JVP rule (exact)


@implements(inv_p, np.linalg.inv)
def inv(a):
    """Like numpy.linalg.inv: the inverse of each matrix of a stack.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.linalg.inv(np.array([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    _check_square(a, "inv")
    return inv_p.bind(a)


def _sum_matrix(x):
    return _red.sum(x, axis=(-2, -1))


def _log_det_tangent(t, a):
    """``tr(a^-1 t)``: the derivative of log det along ``t``."""
    return _sum_matrix(_T(inv(a)) * t)


det_p = Primitive(
    "det",
    numpy_impl(np.linalg.det),
    vjp=[lambda ct, ans, a: _shp.expand_dims(ct * ans, (-2, -1)) * _T(inv(a))],
    jvp=[lambda t, ans, a: ans * _log_det_tangent(t, a)],
)
det_p.def_sparsity(sparsity_kit.stacked([2]))
det_p.def_batch(_stack_batch(det_p))
det_p.def_shape(lambda a: _aval(a.shape[:-2], _la(a.dtype)))
det_p.def_taylor(jvp_taylor(det_p))  # from its JVP rule (exact)


@implements(det_p, np.linalg.det)
def det(a):
    """Like numpy.linalg.det; its derivative ``det(a) inv(a)^T`` needs an invertible ``a``.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> a = np.array([[2.0, 1.0], [1.0, 3.0]])
    >>> round(float(anp.linalg.det(a)), 6)
    5.0
    >>> autodiff.grad(anp.linalg.det)(a).round(6).tolist()
    [[3.0, -1.0], [-1.0, 2.0]]
    """
    _check_square(a, "det")
    return det_p.bind(a)


def _slogdet_jvp(tangents, ans, a):
    sign, _ = ans
    z = _log_det_tangent(tangents[0], a)
    if is_complex(a):
        return sign * (1j * _elt.imag(z)), _elt.real(z)
    return _cre.zeros_like(sign), z


def _slogdet_vjp(cts, ans, a):
    ct_sign, ct_log = cts
    w = ct_log
    if is_complex(a):
        w = ct_log + 1j * _elt.imag(ct_sign * ans[0])
    return _shp.expand_dims(w, (-2, -1)) * _T(inv(a))


slogdet_p = Primitive(
    "slogdet",
    numpy_impl(np.linalg.slogdet, lambda a: tuple(np.linalg.slogdet(a))),
    vjp=[_slogdet_vjp],
    jvp=_slogdet_jvp,
    multiple_results=True,
)


@slogdet_p.def_sparsity
def _slogdet_sparsity(a):
    # a real matrix's sign is piecewise constant: its derivative is zero
    sp = _sp()
    logabsdet = sp.stacked([2])(a)
    return (logabsdet if sp.is_complex_operand(a) else sp.Sparsity([None])), logabsdet


slogdet_p.def_batch(_stack_batch(slogdet_p))
slogdet_p.def_shape(
    lambda a: (
        _aval(a.shape[:-2], _la(a.dtype)),
        _aval(a.shape[:-2], _la_real(a.dtype)),
    )
)
slogdet_p.def_taylor(jvp_taylor(slogdet_p))  # from its JVP rule (exact)


@implements(slogdet_p, np.linalg.slogdet)
def slogdet(a):
    """Like numpy.linalg.slogdet: ``SlogdetResult(sign, logabsdet)``.

    For real ``a`` the sign has derivative zero; the derivative of
    ``logabsdet`` is ``inv(a)^T`` (``a`` invertible).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> sign, logabsdet = anp.linalg.slogdet(np.array([[-2.0, 0.0], [0.0, 1.0]]))
    >>> float(sign), round(float(logabsdet), 6)
    (-1.0, 0.693147)
    """
    _check_square(a, "slogdet")
    return SlogdetResult(*slogdet_p.bind(a))


# --- cholesky -----------------------------------------------------------------------------


def _phi(x):
    """The lower triangle of ``x`` with its diagonal halved."""
    n = shape_of(x)[-1]
    return x * (np.tri(n, k=-1, dtype=_real_dtype(x), like=array_like(x)) + 0.5 * _eye(n, x))


def _cholesky_jvp(t, ans, a, *, upper):
    low = _H(ans) if upper else ans
    d = _hermitian_from_triangle(t, lower=not upper)
    x = solve_p.bind(low, _H(solve_p.bind(low, d)))  # L^-1 d L^-H
    dl = _mm(low, _phi(x))
    return _H(dl) if upper else dl


def _cholesky_vjp(ct, ans, a, *, upper):
    low = _H(ans) if upper else ans
    ct_l = _H(ct) if upper else ct
    x_bar = _phi(_mm(_T(low), ct_l))
    z_bar = solve_p.bind(_T(low), x_bar)
    d_bar = solve_p.bind(_T(low), _H(z_bar))
    return _hermitian_from_triangle_T(d_bar, lower=not upper)


cholesky_p = Primitive(
    "cholesky",
    numpy_impl(np.linalg.cholesky, lambda a, *, upper: np.linalg.cholesky(a, upper=upper)),
    vjp=[_cholesky_vjp],
    jvp=[_cholesky_jvp],
)


@cholesky_p.def_sparsity
def _cholesky_sparsity(a, *, upper):
    # The factor's triangle reads a's same triangle; its other triangle is zero.  (L[i, j]
    # depends on a[:j+1, :j+1] and row i alone, but the JVP, L phi(L^-1 da L^-H), cancels
    # to roundoff rather than zero elsewhere in the triangle: the rule keeps them.)
    sp = _sp()
    shape = sp.shape_of_operand(a)
    key = sp.triangle_key(shape[-1], lower=not upper)
    return sp.Sparsity([sp.problem_groups(shape, 2, shape, 2, key, key)], [(0, 0)])


cholesky_p.def_batch(_stack_batch(cholesky_p))
cholesky_p.def_shape(lambda a, *, upper: shaped_like(a, dtype=_la(a.dtype)))
cholesky_p.def_taylor(jvp_taylor(cholesky_p))  # from its JVP rule (exact)


@implements(cholesky_p, np.linalg.cholesky)
def cholesky(a, /, *, upper=False):
    """Like numpy.linalg.cholesky: lower ``L`` with ``a == L @ L^H`` (``upper=True``:
    ``L^H``).  Only the lower (upper) triangle of ``a`` is read, as in NumPy.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.linalg.cholesky(np.array([[4.0, 2.0], [2.0, 5.0]])).tolist()
    [[2.0, 0.0], [1.0, 2.0]]
    """
    _check_square(a, "cholesky")
    return cholesky_p.bind(a, upper=bool(upper))


# --- eigh ---------------------------------------------------------------------------------


def _gap_inverse(w):
    """``F[..., i, j] = 1 / (w[j] - w[i])`` off the diagonal, 0 on it."""
    eye = _eye(shape_of(w)[-1], w)
    return (1.0 - eye) / (_row(w) - _col(w) + eye)


def _eigh_jvp(tangents, ans, a, *, UPLO):
    w, v = ans
    d = _hermitian_from_triangle(tangents[0], lower=UPLO == "L")
    k = _mm(_mm(_H(v), d), v)
    return _real(_diag_part(k)), _mm(v, _gap_inverse(w) * k)


def _eigh_vjp(cts, ans, a, *, UPLO):
    ct_w, ct_v = cts
    w, v = ans
    inner = _diag_embed(ct_w) + _gap_inverse(w) * _mm(_T(v), ct_v)
    g = _mm(_mm(_conj(v), inner), _T(v))
    return _hermitian_from_triangle_T(g, lower=UPLO == "L")


eigh_p = Primitive(
    "eigh",
    numpy_impl(np.linalg.eigh, lambda a, *, UPLO: tuple(np.linalg.eigh(a, UPLO=UPLO))),
    vjp=[_eigh_vjp],
    jvp=_eigh_jvp,
    multiple_results=True,
)
eigh_p.def_sparsity(sparsity_kit.stacked([2], outputs=2, triangle=lambda *, UPLO: UPLO == "L"))
eigh_p.def_batch(_stack_batch(eigh_p))
eigh_p.def_shape(
    lambda a, *, UPLO: (
        _aval(a.shape[:-1], _la_real(a.dtype)),
        shaped_like(a, dtype=_la(a.dtype)),
    )
)
eigh_p.def_taylor(jvp_taylor(eigh_p))  # from its JVP rule (exact)


@implements(eigh_p, np.linalg.eigh)
def eigh(a, UPLO="L"):
    """Like numpy.linalg.eigh: ``EighResult(eigenvalues, eigenvectors)`` of a
    symmetric/Hermitian matrix, of which only the ``UPLO`` triangle is read.

    Derivatives need distinct eigenvalues; eigenvectors carry LAPACK's sign
    (phase) choice, so differentiate gauge-invariant functions of them.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> a = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> anp.linalg.eigh(a).eigenvalues.round(6).tolist()
    [1.0, 3.0]
    >>> autodiff.grad(lambda a: anp.linalg.eigh(a)[0][1])(a).round(6).tolist()
    [[0.5, 0.0], [1.0, 0.5]]
    """
    _check_square(a, "eigh")
    return EighResult(*eigh_p.bind(a, UPLO=_uplo(UPLO)))


# --- eigvalsh (the eigenvalues of eigh) -------------------------------------------------
# Its own primitive, so that a degenerate spectrum (eigvalsh(identity)) keeps a finite
# derivative: only eigh's eigenvector rule divides by eigenvalue gaps.


def _eigvalsh_jvp(t, ans, a, *, UPLO):
    _, v = eigh_p.bind(a, UPLO=UPLO)
    d = _hermitian_from_triangle(t, lower=UPLO == "L")
    return _red.sum(_real(_conj(v) * _mm(d, v)), axis=-2)  # Re diag(V^H d V)


def _eigvalsh_vjp(ct, ans, a, *, UPLO):
    _, v = eigh_p.bind(a, UPLO=UPLO)
    return _hermitian_from_triangle_T(_mm(_conj(v) * _row(ct), _T(v)), lower=UPLO == "L")


eigvalsh_p = Primitive(
    "eigvalsh",
    numpy_impl(np.linalg.eigvalsh, lambda a, *, UPLO: np.linalg.eigvalsh(a, UPLO=UPLO)),
    vjp=[_eigvalsh_vjp],
    jvp=[_eigvalsh_jvp],
)
eigvalsh_p.def_sparsity(sparsity_kit.stacked([2], triangle=lambda *, UPLO: UPLO == "L"))
eigvalsh_p.def_batch(_stack_batch(eigvalsh_p))
eigvalsh_p.def_taylor(jvp_taylor(eigvalsh_p))  # from its JVP rule (exact)


@implements(eigvalsh_p, np.linalg.eigvalsh)
def eigvalsh(a, UPLO="L"):
    """Like numpy.linalg.eigvalsh: the eigenvalues (ascending) of a symmetric/Hermitian
    matrix, of which only the ``UPLO`` triangle is read.

    The derivative is ``Re diag(V^H da V)``; it needs no gap between eigenvalues, but
    where some coincide each one's derivative is that of LAPACK's eigenvectors (their
    sum is exact).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> a = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> anp.linalg.eigvalsh(a).round(6).tolist()
    [1.0, 3.0]
    >>> autodiff.grad(lambda a: anp.linalg.eigvalsh(a).sum())(np.eye(2)).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    _check_square(a, "eigvalsh")
    return eigvalsh_p.bind(a, UPLO=_uplo(UPLO))


# --- eig, eigvals (general square matrices) ----------------------------------------------
# a = V diag(w) V^-1 with unit-norm columns of V.  With K = V^-1 da V and F the gaps'
# inverses: dw = diag(K), dV = V (F * K) - V Re diag(V^H V (F * K)).  The last term keeps
# every column at unit norm; the phase of each column (free for complex eigenvectors) is
# fixed by Im diag(V^-1 dV) = 0, as in HIPS autograd and torch.  The VJP is the
# non-conjugating transpose of that JVP.


def _eig_jvp(tangents, ans, a):
    w, v = ans
    k = solve_p.bind(v, _mm(tangents[0], v))  # V^-1 da V
    dv = _mm(v, _gap_inverse(w) * k)
    dv = dv - v * _row(_red.sum(_real(_conj(v) * dv), axis=-2))
    return _diag_part(k), dv


def _eig_vjp(cts, ans, a):
    ct_w, ct_v = cts
    w, v = ans
    ct_v = ct_v - _conj(v) * _row(_red.sum(_real(ct_v * v), axis=-2))
    ct_k = _gap_inverse(w) * _mm(_T(v), ct_v) + _diag_embed(ct_w)
    return solve_p.bind(_T(v), _mm(ct_k, _T(v)))  # V^-T ct_K V^T


eig_p = Primitive(
    "eig",
    numpy_impl(np.linalg.eig, lambda a: tuple(np.linalg.eig(a))),
    vjp=[_eig_vjp],
    jvp=_eig_jvp,
    multiple_results=True,
)
eig_p.def_sparsity(sparsity_kit.stacked([2], outputs=2))
eig_p.def_batch(_stack_batch(eig_p))
eig_p.def_taylor(jvp_taylor(eig_p))  # from its JVP rule (exact)


@eig_p.def_shape
def _eig_shape(a):
    # Staging knows shapes and dtypes, not values: it refuses, saying what to do instead,
    # rather than guess a dtype the replay may not give.
    if a.dtype.kind != "c":
        raise ConcretizationError(
            "linalg.eig and linalg.eigvals of a real matrix are real where every eigenvalue "
            "is real and complex otherwise: their dtype depends on the values, which jit does "
            "not know. Pass a complex matrix (a.astype(complex)) to get complex results "
            "always, or call it outside jit."
        )
    return shaped_like(a, a.shape[:-1]), shaped_like(a)


@implements(eig_p, np.linalg.eig)
def eig(a):
    """Like numpy.linalg.eig: ``EigResult(eigenvalues, eigenvectors)`` of a square
    matrix; real where every eigenvalue of a real matrix is real, complex otherwise.

    Derivatives need distinct eigenvalues.  Eigenvectors have unit norm; their phase is
    LAPACK's (largest entry real), while their derivative fixes it by
    ``Im diag(V^-1 dV) = 0`` (HIPS autograd's and torch's convention).  For real
    eigenvectors the two agree; for complex ones differentiate gauge-invariant
    functions of them (``V diag(f(w)) V^-1``, ``abs(V)``).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> a = np.array([[2.0, 1.0], [0.0, 3.0]])
    >>> anp.linalg.eig(a).eigenvalues.tolist()
    [2.0, 3.0]
    >>> autodiff.grad(lambda a: anp.linalg.eig(a)[0][1])(a).round(6).tolist()
    [[0.0, 0.0], [1.0, 1.0]]
    """
    _check_square(a, "eig")
    return EigResult(*eig_p.bind(a))


def _eigvals_jvp(t, ans, a):
    _, v = eig_p.bind(a)
    return _red.sum(solve_p.bind(v, t) * _T(v), axis=-1)  # diag(V^-1 da V)


def _eigvals_vjp(ct, ans, a):
    _, v = eig_p.bind(a)
    return solve_p.bind(_T(v), _col(ct) * _T(v))  # V^-T diag(ct) V^T


eigvals_p = Primitive(
    "eigvals",
    numpy_impl(np.linalg.eigvals),
    vjp=[_eigvals_vjp],
    jvp=[_eigvals_jvp],
)
eigvals_p.def_sparsity(sparsity_kit.stacked([2]))
eigvals_p.def_batch(_stack_batch(eigvals_p))
eigvals_p.def_shape(lambda a: _eig_shape(a)[0])
eigvals_p.def_taylor(jvp_taylor(eigvals_p))  # from its JVP rule (exact)


@implements(eigvals_p, np.linalg.eigvals)
def eigvals(a):
    """Like numpy.linalg.eigvals: the eigenvalues of a square matrix (real where all
    of a real matrix's are).  The derivative ``diag(V^-1 da V)`` needs simple
    eigenvalues (and a diagonalizable ``a``).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> anp.linalg.eigvals(np.array([[0.0, 1.0], [-1.0, 0.0]])).tolist()
    [1j, -1j]
    >>> autodiff.grad(lambda a: anp.linalg.eigvals(a).sum())(np.ones((2, 2))).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    _check_square(a, "eigvals")
    return eigvals_p.bind(a)


# --- svd ----------------------------------------------------------------------------------


def _svd_gaps(s):
    """``F[..., i, j] = 1 / (s[j]**2 - s[i]**2)`` off the diagonal, 0 on it."""
    eye = _eye(shape_of(s)[-1], s)
    return (1.0 - eye) / ((_row(s) + _col(s)) * (_row(s) - _col(s)) + eye)


def _svd_reduced_jvp(t, u, s, vh, m, n):
    """dU, dS, dVh of the reduced SVD ``a = U diag(s) Vh`` along ``t``."""
    v = _H(vh)
    f = _svd_gaps(s)
    ds_mat = _mm(_mm(_H(u), t), v)
    d = _diag_part(ds_mat)
    dss, sds = ds_mat * _row(s), _col(s) * ds_mat
    du_inner = f * (dss + _H(dss))
    if is_complex(ds_mat):  # the phase freedom: put Im diag(U^H da V) into dU
        du_inner = du_inner + _diag_embed(1j * _elt.imag(d) / s)
    du = _mm(u, du_inner)
    dv = _mm(v, f * (sds + _H(sds)))
    if m > n:
        tv = _mm(t, v)
        du = du + (tv - _mm(u, _mm(_H(u), tv))) / _row(s)
    if n > m:
        thu = _mm(_H(t), u)
        dv = dv + (thu - _mm(v, _mm(_H(v), thu))) / _row(s)
    return du, _real(d), _H(dv)


def _svd_reduced_vjp(ct_u, ct_s, ct_vh, u, s, vh, m, n):
    """The transpose of ``_svd_reduced_jvp``."""
    v, ct_v = _H(vh), _H(ct_vh)
    f = _svd_gaps(s)
    ut_ct = _mm(_T(u), ct_u)
    gu, gv = f * ut_ct, f * _mm(_T(v), ct_v)
    ds_bar = (gu + _H(gu)) * _row(s) + _col(s) * (gv + _H(gv)) + _diag_embed(ct_s)
    if is_complex(ut_ct):
        ds_bar = ds_bar + _diag_embed(1j * _elt.imag(_diag_part(ut_ct)) / s)
    g = _mm(_mm(_conj(u), ds_bar), _T(v))
    if m > n:
        g = g + _mm((ct_u - _mm(_conj(u), ut_ct)) / _row(s), _T(v))
    if n > m:
        x = (ct_v - _mm(_conj(v), _mm(_T(v), ct_v))) / _row(s)
        g = g + _H(_mm(x, _T(u)))
    return g


def _rows(x, start, stop):
    return _idx.getitem(x, (Ellipsis, slice(start, stop), slice(None)))


# full_matrices=True of an m x n matrix, k = min(m, n): the extra columns U2 = U[:, k:] of a
# tall matrix (rows Vh2 = Vh[k:] of a wide one) are any orthonormal basis of the
# complement.  Their derivative is the smallest rotation that keeps them orthogonal to the
# first k: dU2 = -U1 (dU1^H U2) (dVh2 = -(Vh2 dVh1^H) Vh1).  That is exact for
# gauge-invariant functions of them, such as the projector U2 U2^H.


def _svd_jvp(tangents, ans, a, *, full_matrices, hermitian):
    m, n = shape_of(a)[-2:]
    t = tangents[0]
    if hermitian:
        t = _hermitian_from_triangle(t, lower=True)
    u, s, vh = ans
    k = min(m, n)
    if not full_matrices or m == n:
        return _svd_reduced_jvp(t, u, s, vh, m, n)
    u1, vh1 = _cols(u, 0, k), _rows(vh, 0, k)
    du1, ds, dvh1 = _svd_reduced_jvp(t, u1, s, vh1, m, n)
    if m > n:
        du2 = -_mm(u1, _mm(_H(du1), _cols(u, k, m)))
        return _shp.concatenate([du1, du2], axis=-1), ds, dvh1
    dvh2 = -_mm(_mm(_rows(vh, k, n), _H(dvh1)), vh1)
    return du1, ds, _shp.concatenate([dvh1, dvh2], axis=-2)


def _svd_vjp(cts, ans, a, *, full_matrices, hermitian):
    m, n = shape_of(a)[-2:]
    ct_u, ct_s, ct_vh = cts
    u, s, vh = ans
    k = min(m, n)
    if not full_matrices or m == n:
        g = _svd_reduced_vjp(ct_u, ct_s, ct_vh, u, s, vh, m, n)
    elif m > n:
        u1, u2, ct_u2 = _cols(u, 0, k), _cols(u, k, m), _cols(ct_u, k, m)
        ct_u1 = _cols(ct_u, 0, k) - _conj(_mm(_mm(u2, _T(ct_u2)), u1))
        g = _svd_reduced_vjp(ct_u1, ct_s, ct_vh, u1, s, vh, m, n)
    else:
        vh1, vh2, ct_vh2 = _rows(vh, 0, k), _rows(vh, k, n), _rows(ct_vh, k, n)
        ct_vh1 = _rows(ct_vh, 0, k) - _conj(_mm(_mm(vh1, _T(ct_vh2)), vh2))
        g = _svd_reduced_vjp(ct_u, ct_s, ct_vh1, u, s, vh1, m, n)
    return _hermitian_from_triangle_T(g, lower=True) if hermitian else g


def _hermitian(hermitian: bool) -> dict:
    """``hermitian=`` only when set: CuPy's svd and pinv have no such keyword."""
    return {"hermitian": True} if hermitian else {}


def _lower_if_hermitian(*, hermitian, **params):
    """The triangle a ``hermitian=True`` svd or pinv reads (NumPy's eigh's: the lower)."""
    return True if hermitian else None


def _svd_impl(a, *, full_matrices, hermitian):
    return tuple(np.linalg.svd(a, full_matrices=full_matrices, **_hermitian(hermitian)))


svd_p = Primitive(
    "svd",
    numpy_impl(np.linalg.svd, _svd_impl),
    vjp=[_svd_vjp],
    jvp=_svd_jvp,
    multiple_results=True,
)
svd_p.def_sparsity(sparsity_kit.stacked([2], outputs=3, triangle=_lower_if_hermitian))
svd_p.def_batch(_stack_batch(svd_p))
svd_p.def_taylor(jvp_taylor(svd_p))  # from its JVP rule (exact)


@svd_p.def_shape
def _svd_shape(a, *, full_matrices, hermitian):
    *stack, m, n = a.shape
    k = min(m, n)
    u = (m, m) if full_matrices else (m, k)
    vh = (n, n) if full_matrices else (k, n)
    d = _la(a.dtype)
    return (_aval((*stack, *u), d), _aval((*stack, k), _la_real(a.dtype)),
            _aval((*stack, *vh), d))  # fmt: skip


def _svdvals_jvp(t, ans, a, *, hermitian):
    u, _, vh = svd_p.bind(a, full_matrices=False, hermitian=hermitian)
    if hermitian:
        t = _hermitian_from_triangle(t, lower=True)
    return _real(_diag_part(_mm(_mm(_H(u), t), _H(vh))))


def _svdvals_vjp(ct, ans, a, *, hermitian):
    u, _, vh = svd_p.bind(a, full_matrices=False, hermitian=hermitian)
    g = _conj(_mm(u * _row(ct), vh))
    return _hermitian_from_triangle_T(g, lower=True) if hermitian else g


svdvals_p = Primitive(
    "svdvals",
    numpy_impl(
        np.linalg.svd,
        lambda a, *, hermitian: np.linalg.svd(a, compute_uv=False, **_hermitian(hermitian)),
    ),
    vjp=[_svdvals_vjp],
    jvp=[_svdvals_jvp],
)
svdvals_p.def_sparsity(sparsity_kit.stacked([2], triangle=_lower_if_hermitian))
svdvals_p.def_batch(_stack_batch(svdvals_p))
svdvals_p.def_shape(
    lambda a, *, hermitian: _aval(_stack_of(a, min(a.shape[-2:])), _la_real(a.dtype))
)
svdvals_p.def_taylor(jvp_taylor(svdvals_p))  # from its JVP rule (exact)


@implements(svd_p, np.linalg.svd)
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    """Like numpy.linalg.svd: ``SVDResult(U, S, Vh)``, or the singular values
    alone with ``compute_uv=False``.

    Differentiable in every mode.  The singular vectors' derivatives need distinct
    singular values (and nonzero ones for non-square or complex matrices); with
    ``compute_uv=False`` the derivative ``ds = Re diag(U^H da V)`` needs neither
    (where singular values coincide each one's derivative is that of LAPACK's
    vectors, their sum is exact).  Singular vectors carry LAPACK's sign (phase)
    choice: differentiate gauge-invariant functions of complex ones.  With
    ``full_matrices=True`` the extra columns of ``U`` (rows of ``Vh``) of a non-square
    matrix are any basis of a complement; their derivative rotates them as little as
    keeps them orthogonal (exact for functions of the complement, such as its
    projector).  With ``hermitian=True`` only the lower triangle of ``a`` is read
    (NumPy uses eigh).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> a = np.array([[3.0, 0.0], [0.0, -2.0]])
    >>> anp.linalg.svd(a, compute_uv=False).round(6).tolist()
    [3.0, 2.0]
    >>> autodiff.grad(lambda a: anp.linalg.svd(a, compute_uv=False).sum())(a).round(6).tolist()
    [[1.0, 0.0], [0.0, -1.0]]
    """
    _check_matrix(a, "svd")
    if not compute_uv:
        return svdvals_p.bind(a, hermitian=bool(hermitian))
    return SVDResult(*svd_p.bind(a, full_matrices=bool(full_matrices), hermitian=bool(hermitian)))


@implements(svdvals_p, np.linalg.svdvals)
def svdvals(x, /):
    """Like numpy.linalg.svdvals: ``svd(x, compute_uv=False)``, the singular values
    in descending order (see ``svd`` for their derivative).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.linalg.svdvals(np.array([[0.0, 2.0], [1.0, 0.0]])).tolist()
    [2.0, 1.0]
    """
    _check_matrix(x, "svdvals")
    return svdvals_p.bind(x, hermitian=False)


# --- qr -----------------------------------------------------------------------------------


def _right_solve(x, r):
    """``x @ inv(r)``."""
    return _T(solve_p.bind(_T(r), _T(x)))


def _qr_square_jvp(q, r, dx):
    """dQ, dR for ``x = q r`` with ``r`` square (``x`` tall or square)."""
    x = _right_solve(dx, r)
    c = _mm(_H(q), x)
    low = c * _strict_triangle(c, lower=True)
    do = low - _H(low)
    if is_complex(c):  # R's diagonal stays real
        do = do + _eye(shape_of(c)[-1], c) * (c - _elt.real(c))
    return _mm(q, do - c) + x, _mm(c - do, r)


def _qr_square_vjp(q, r, ct_q, ct_r):
    """The transpose of ``_qr_square_jvp``."""
    e = _mm(_T(q), ct_q) - _mm(ct_r, _T(r))
    low_bar = e - _H(e)
    c_bar = low_bar * _strict_triangle(low_bar, lower=True) - e
    if is_complex(c_bar):
        ie = _eye(shape_of(e)[-1], e) * e
        c_bar = c_bar + ie - _elt.real(ie)
    x_bar = _mm(_conj(q), c_bar) + ct_q
    return _T(solve_p.bind(r, _T(x_bar)))


def _qr_check(a, mode):
    m, n = shape_of(a)[-2:]
    if mode == "complete" and m > n:
        raise NotImplementedError(
            "qr: derivatives with mode='complete' of a tall matrix are not implemented (the "
            "extra columns of Q are not unique); use mode='reduced'"
        )
    return m, n


def _cols(x, start, stop):
    return _idx.getitem(x, (Ellipsis, slice(start, stop)))


def _qr_jvp(tangents, ans, a, *, mode):
    m, n = _qr_check(a, mode)
    (t,), (q, r) = tangents, ans
    if m >= n:
        return _qr_square_jvp(q, r, t)
    # Wide: a = [X | Y] with X square; Q, R1 = qr(X) and R2 = Q^H Y.
    dq, dr1 = _qr_square_jvp(q, _cols(r, 0, m), _cols(t, 0, m))
    dr2 = _mm(_H(dq), _cols(a, m, n)) + _mm(_H(q), _cols(t, m, n))
    return dq, _shp.concatenate([dr1, dr2], axis=-1)


def _qr_vjp(cts, ans, a, *, mode):
    m, n = _qr_check(a, mode)
    (ct_q, ct_r), (q, r) = cts, ans
    if m >= n:
        return _qr_square_vjp(q, r, ct_q, ct_r)
    ct_r2 = _cols(ct_r, m, n)
    ct_y = _mm(_conj(q), ct_r2)
    ct_q = ct_q + _H(_mm(ct_r2, _T(_cols(a, m, n))))
    ct_x = _qr_square_vjp(q, _cols(r, 0, m), ct_q, _cols(ct_r, 0, m))
    return _shp.concatenate([ct_x, ct_y], axis=-1)


qr_p = Primitive(
    "qr",
    numpy_impl(np.linalg.qr, lambda a, *, mode: tuple(np.linalg.qr(a, mode=mode))),
    vjp=[_qr_vjp],
    jvp=_qr_jvp,
    multiple_results=True,
)


@qr_p.def_sparsity
def _qr_sparsity(a, *, mode):
    # R is zero below its diagonal; the rest reads the whole matrix.  (Column j of Q, and
    # R[i, j] for i <= j, depend on a's columns 0..j alone, but the JVP's roundoff, about
    # 1e-16, reaches the other columns at random points: the rule keeps them.)
    sp = _sp()
    shape = sp.shape_of_operand(a)
    *stack, m, n = shape
    width = m if mode == "complete" else min(m, n)  # R's rows
    upper = np.where(np.tri(width, n, k=-1, dtype=bool), -1, 0)
    out = (*stack, width, n)
    return sp.stacked([2])(a), sp.Sparsity(
        [sp.problem_groups(shape, 2, out, 2, None, upper)], [(0, 0)]
    )


qr_p.def_batch(_stack_batch(qr_p))
qr_p.def_taylor(jvp_taylor(qr_p))  # from its JVP rule (exact)


@qr_p.def_shape
def _qr_shape(a, *, mode):
    *stack, m, n = a.shape
    k = min(m, n)
    q, r = ((m, m), (m, n)) if mode == "complete" else ((m, k), (k, n))
    d = _la(a.dtype)
    return _aval((*stack, *q), d), _aval((*stack, *r), d)


@implements(qr_p, np.linalg.qr)
def qr(a, mode="reduced"):
    """Like numpy.linalg.qr: ``QRResult(Q, R)`` (``mode='reduced'`` or
    ``'complete'``), or ``R`` alone (``mode='r'``).  ``mode='raw'`` is not supported.

    Differentiable where ``a`` has full rank; for ``mode='complete'`` only when
    ``a`` is not tall (then it equals ``'reduced'``).

    >>> import numpy as np, autodiff.numpy as anp
    >>> q, r = anp.linalg.qr(np.ones((3, 2)))
    >>> q.shape, r.shape
    ((3, 2), (2, 2))
    """
    _check_matrix(a, "qr")
    if mode == "r":
        return qr_p.bind(a, mode="reduced")[1]
    if mode == "raw":
        raise NotImplementedError("qr(mode='raw') is not supported; use mode='reduced'")
    if mode not in ("reduced", "complete"):
        raise ValueError(f"Unrecognized mode '{mode}'")
    return QRResult(*qr_p.bind(a, mode=mode))


# --- pinv ---------------------------------------------------------------------------------


def _pinv_jvp(t, ans, a, *, hermitian, options):
    if hermitian:  # of the matrix LAPACK reads (a's lower triangle), in t and in a
        t = _hermitian_from_triangle(t, lower=True)
        a = _hermitian_from_triangle(a, lower=True)
    p, th = ans, _H(t)
    term1 = -_mm(_mm(p, t), p)
    term2 = _mm(_mm(p, _H(p)), th - _mm(_mm(th, a), p))  # P P^H da^H (I - a P)
    term3 = _mm(th - _mm(p, _mm(a, th)), _mm(_H(p), p))  # (I - P a) da^H P^H P
    return term1 + term2 + term3


def _pinv_vjp(ct, ans, a, *, hermitian, options):
    p = ans
    if hermitian:  # the matrix LAPACK reads: a's lower triangle
        a = _hermitian_from_triangle(a, lower=True)
    g = -_mm(_mm(_T(p), ct), _T(p))
    z2 = _mm(_T(_mm(p, _H(p))), ct)
    g = g + _H(z2 - _mm(_mm(z2, _T(p)), _T(a)))
    z3 = _mm(ct, _T(_mm(_H(p), p)))
    g = g + _H(z3 - _mm(_T(a), _mm(_T(p), z3)))
    return _hermitian_from_triangle_T(g, lower=True) if hermitian else g


pinv_p = Primitive(
    "pinv",
    numpy_impl(
        np.linalg.pinv,
        lambda a, *, hermitian, options: np.linalg.pinv(
            a, **_hermitian(hermitian), **dict(options)
        ),
    ),
    vjp=[_pinv_vjp],
    jvp=[_pinv_jvp],
)
pinv_p.def_sparsity(sparsity_kit.stacked([2], triangle=_lower_if_hermitian))
pinv_p.def_batch(_stack_batch(pinv_p))
pinv_p.def_shape(
    lambda a, *, hermitian, options: _aval(_stack_of(a, a.shape[-1], a.shape[-2]), _la(a.dtype))
)
pinv_p.def_taylor(jvp_taylor(pinv_p))  # from its JVP rule (exact)

_UNSET: Any = object()


@implements(pinv_p, np.linalg.pinv)
def pinv(a, rcond=None, hermitian=False, *, rtol=_UNSET):
    """Like numpy.linalg.pinv: the Moore-Penrose pseudo-inverse (``rcond``/``rtol``
    scalars).  Its derivative holds where the rank is locally constant.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.linalg.pinv(np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 0.0]])).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.5, 0.0]]
    """
    _check_matrix(a, "pinv")
    options = []
    for name, value in (("rcond", rcond), ("rtol", rtol)):
        if value is not None and value is not _UNSET and np.ndim(value) != 0:
            raise NotImplementedError(f"pinv: only a scalar {name} is supported")
        if (name == "rcond" and value is not None) or (name == "rtol" and value is not _UNSET):
            options.append((name, value if value is None else float(value)))
    return pinv_p.bind(a, hermitian=bool(hermitian), options=tuple(options))


# --- lstsq's residuals (numpy/linalg.py's lstsq binds it) ------------------------------
# lstsq is pinv(a) @ b (pinv's derivative holds where the rank is locally constant), which
# runs on stacks too: that is how vmap batches it.  NumPy gives residuals only for a
# problem of full column rank with more rows than columns; the rank is a value, so a
# small primitive keeps or drops them, deciding once for a whole stack of problems.


def _residuals_impl(r, rank, *, n):
    keep = np.all(rank == n)  # one answer for the stack; an array, never read here
    return r[..., np.broadcast_to(keep, r.shape[-1:])]


def _residuals_batch(args, dims, *, n):
    (r, rank), (rd, _) = args, dims
    if rd is None:  # only the rank is batched: one decision for every example
        return lstsq_residuals_p.bind(r, rank, n=n), None
    return lstsq_residuals_p.bind(move_to_front(r, rd), rank, n=n), 0


lstsq_residuals_p = Primitive(
    "lstsq_residuals",
    _residuals_impl,
    vjp=[
        lambda ct, ans, r, rank, *, n: ct if shape_of(ans) == shape_of(r) else _cre.zeros_like(r),
        None,
    ],
    jvp=[lambda t, ans, r, rank, *, n: lstsq_residuals_p.bind(t, rank, n=n), None],
    batch=_residuals_batch,
)
# NumPy gives residuals only for full column rank: staging assumes it (a rank-deficient
# problem then gives an empty array, as NumPy does, which the staged code expected full).
lstsq_residuals_p.def_shape(lambda r, rank, *, n: shaped_like(r))
lstsq_residuals_p.def_taylor(jvp_taylor(lstsq_residuals_p))  # from its JVP rule (exact)


# --- norm's root (numpy/linalg.py's norm binds it) -------------------------------------
# At a zero vector or matrix every norm has derivative 0, as in torch and HIPS autograd
# (not the NaN of inf * 0 that the chain rule gives).  The p-th root of the sum is one
# primitive whose derivative is 0 at 0, so the forward pass costs one NumPy call; elsewhere
# the where-twice pattern keeps the value and sends no cotangent into the branch not taken.


def _norm_root_deriv(g, ans, u, *, p):
    """``d u**(1/p) = u**(1/p) / (p u) du``, and 0 where ``u == 0`` (there ``ans`` is 0
    and the denominator 1)."""
    return g * (ans / (p * u + _elt.equal(u, 0)))


norm_root_p = Primitive(
    "norm_root",
    lambda u, *, p: np.sqrt(u) if p == 2 else u ** (1.0 / p),
    vjp=[_norm_root_deriv],
    jvp=[_norm_root_deriv],
    batch=lambda args, dims, *, p: (norm_root_p.bind(args[0], p=p), dims[0]),
)
norm_root_p.def_sparsity(sparsity_kit.elementwise([True]))
norm_root_p.def_taylor(jvp_taylor(norm_root_p))  # from its JVP rule (exact)


# --- roots (numpy.roots; in the top-level namespace) -----------------------------------------
# The roots of p[0] x^(N-1) + ... + p[N-1] are the eigenvalues of its companion matrix, as
# NumPy computes them: leading zeros stripped, trailing zeros stripped and their roots
# appended as exact zeros.  The primitive does that for a stack of polynomials, stripping
# the zeros that every polynomial of the stack has (so that vmap can batch it).  Its
# derivative is that of each root r of p(r) = 0, dr = -dp(r) / p'(r): the derivative of
# the companion's eigenvalues for simple roots, which also covers the coefficients NumPy
# strips (a trailing zero still moves the root it stands for).


def _roots_impl(p):
    nonzero = p != 0
    if math.prod(p.shape[:-1]) == 0:  # no polynomial: strip nothing
        nonzero = np.ones_like(nonzero, shape=p.shape[-1:])
    stack = tuple(range(nonzero.ndim - 1))
    lead = np.all(np.cumsum(nonzero, axis=-1) == 0, axis=stack)
    trail = np.all(np.flip(np.cumsum(np.flip(nonzero, -1), axis=-1), -1) == 0, axis=stack)
    trail = trail & ~lead  # a zero polynomial has no roots (and no trailing zeros)
    q = p[..., ~(lead | trail)]
    if q.dtype.kind not in "fc":
        q = q.astype(np.float64)
    m = q.shape[-1]
    if m > 1:
        companion = np.zeros_like(q, shape=(*q.shape[:-1], m - 1, m - 1))
        companion[..., 1:, :-1] = np.eye(m - 2, dtype=q.dtype, like=q)
        with np.errstate(divide="ignore", invalid="ignore"):
            companion[..., 0, :] = -q[..., 1:] / q[..., :1]
        try:
            w = np.linalg.eigvals(companion)
        except LinAlgError as e:
            raise LinAlgError(
                f"roots: {e}; a polynomial whose coefficients are not all finite, or one of "
                f"a batch (vmap) with more leading zeros than the others, has no companion "
                f"matrix. Give every polynomial of a batch the same degree."
            ) from e
    else:  # a constant: no roots
        w = np.zeros_like(p, dtype=np.float64, shape=(*p.shape[:-1], 0))
    return np.concatenate([w, np.zeros_like(p[..., trail], dtype=w.dtype)], axis=-1)


def _powers(r, n):
    """``r[..., i] ** (n - 1 - k)`` at ``[..., i, k]``: evaluates polynomials at the roots."""
    exponents = np.arange(n - 1, -1, -1, dtype=_real_dtype(r), like=array_like(r))
    return _col(r) ** exponents


def _root_slopes(powers, p):
    """p'(r) at each root (``powers`` from ``_powers``)."""
    n = shape_of(p)[-1]
    down = np.arange(n - 1, 0, -1, dtype=_real_dtype(p), like=array_like(p))
    slope = _idx.getitem(p, (Ellipsis, slice(0, n - 1))) * down
    return _mm(_idx.getitem(powers, (Ellipsis, slice(1, n))), _col(slope))[..., 0]


def _roots_jvp(t, ans, p):
    powers = _powers(ans, shape_of(p)[-1])
    return -_mm(powers, _col(t))[..., 0] / _root_slopes(powers, p)


def _roots_vjp(ct, ans, p):
    powers = _powers(ans, shape_of(p)[-1])
    return _mm(_row(-ct / _root_slopes(powers, p)), powers)[..., 0, :]


def _roots_batch(args, dims):
    p, d = args[0], dims[0]
    if d == ndim_of(p) - 1:
        p, d = move_to_front(p, d), 0
    return roots_p.bind(p), d


roots_p = Primitive(
    "roots",
    numpy_impl(np.roots, _roots_impl),
    vjp=[_roots_vjp],
    jvp=[_roots_jvp],
    batch=_roots_batch,
)
roots_p.def_taylor(jvp_taylor(roots_p))  # from its JVP rule (exact)


@roots_p.def_shape
def _roots_shape(p):
    raise ConcretizationError(
        "roots under jit: how many roots there are (NumPy strips leading and trailing zero "
        "coefficients) and whether they are real depend on the values, which jit does not "
        "know. Compute the eigenvalues of the companion matrix of a complex polynomial with "
        "anp.linalg.eigvals, or call roots outside jit."
    )


@implements(roots_p, np.roots)
def roots(p):
    """Like numpy.roots: the roots of the polynomial with coefficients ``p`` (highest
    power first), the eigenvalues of its companion matrix; real where all are real.

    Derivatives (``dr = -dp(r) / p'(r)``) need simple roots.  Under ``vmap`` the zeros
    NumPy strips are those every polynomial of the batch has at its start or end.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> anp.roots(np.array([1.0, -3.0, 2.0])).tolist()
    [2.0, 1.0]
    >>> autodiff.grad(lambda p: anp.roots(p)[0])(np.array([1.0, -3.0, 2.0])).tolist()
    [-4.0, -2.0, -1.0]
    """
    if not hasattr(p, "shape"):  # a list of coefficients
        p = _comp.asarray(p)
    if ndim_of(p) == 0:
        p = _shp.reshape(p, (1,))
    if ndim_of(p) != 1:
        raise ValueError("Input must be a rank-1 array.")
    return roots_p.bind(p)


# Rules call primitives of the other families, which are complete by the time they run.
