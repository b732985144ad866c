"""Registry records: scipy.linalg (``autodiff.scipy.linalg``).

SciPy's functions convert traced values with ``asarray``, so there is no plain
SciPy call on traced values (``numpy_name=None``); the ``reference`` field gives each
record's forward value by SciPy on plain arrays (``tests/test_scipy.py``).
Functions returning a tuple with more than arrays are checked through ``call``.
Empty when SciPy is not installed.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from tests.registry import OpInfo, Sample

_rng = np.random.default_rng(2468)  # local: these draws don't shift other families'


def s(*args, label="", diff=None, **kwargs):
    return Sample(tuple(args), kwargs, label, diff)


def spd(n, *batch):
    a = _rng.standard_normal((*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) / n + np.eye(n)


def triangular(n, *batch, lower=True, complex_=False):
    """A well-conditioned triangle (diagonal in [1, 2] in modulus) and anything in the
    other triangle, which the solves must not read."""
    a = _rng.standard_normal((*batch, n, n)) * 0.4
    if complex_:
        a = a + 0.4j * _rng.standard_normal((*batch, n, n))
    diag = _rng.uniform(1.0, 2.0, (*batch, n)) * _rng.choice([-1.0, 1.0], (*batch, n))
    return a + diag[..., None] * np.eye(n)


def real(*shape):
    return _rng.standard_normal(shape)


def cplx(*shape):
    return _rng.standard_normal(shape) + 1j * _rng.standard_normal(shape)


def near_identity(n, *batch, complex_=False):
    """Matrices with eigenvalues near 2 (a smooth principal square root)."""
    e = _rng.standard_normal((*batch, n, n)) * 0.3
    if complex_:
        e = e + 0.3j * _rng.standard_normal((*batch, n, n))
    return 2.0 * np.eye(n) + e


def op(name, samples, reference, **kwargs):
    record = OpInfo(f"scipy.linalg.{name}", samples, numpy_name=None, **kwargs)
    record.reference = reference
    return record


def _records() -> list[OpInfo]:
    import scipy.linalg as sl

    import autodiff.scipy.linalg as sla

    def call(fn):  # a record's call: fn of autodiff.scipy.linalg and the sample
        return lambda lib, *args, **kwargs: fn(sla, *args, **kwargs)

    def lu_solve(m, lu, piv, b, **kwargs):
        return m.lu_solve((lu, piv), b, **kwargs)

    def lu_solve_of_a(m, a, b, **kwargs):
        return m.lu_solve(m.lu_factor(a), b, **kwargs)

    def cho_factor(m, a, lower):
        c = m.cho_factor(a, lower=lower)[0]  # SciPy keeps a's entries in the other triangle
        return c if m is sla else (np.tril(c) if lower else np.triu(c))

    def not_hermitian(n):
        """A complex matrix that is Hermitian positive definite in its upper triangle only."""
        a = cplx(n, n) * 0.3 + 3.0 * np.eye(n)
        return a + np.tril(cplx(n, n), -1)

    return [
        op(
            "solve",
            [
                s(real(3, 3) + 3 * np.eye(3), real(3), label="general,vector"),
                s(real(2, 3, 3) + 3 * np.eye(3), real(2, 3, 2), assume_a="gen", label="stack"),
                s(triangular(3), real(3, 2), assume_a="sym", label="sym,upper read"),
                s(triangular(3), real(3), assume_a="sym", lower=True, label="sym,lower read"),
                s(not_hermitian(3), cplx(3), assume_a="her", label="her,complex"),
                s(
                    spd(3) + np.triu(real(3, 3), 1),
                    real(3, 2),
                    assume_a="pos",
                    lower=True,
                    label="pos,lower read",
                ),
                s(
                    triangular(3),
                    real(3),
                    assume_a="upper triangular",
                    transposed=True,
                    label="upper triangular,transposed",
                ),
                s(triangular(3), real(3, 2), assume_a="lower triangular", label="lower triangular"),
                s(triangular(3), real(3), assume_a="diagonal", label="diagonal"),
                s(
                    triangular(4),
                    real(4),
                    assume_a="tridiagonal",
                    transposed=True,
                    label="tridiagonal,transposed",
                ),
            ],
            sl.solve,
        ),
        op(
            "solve_triangular",
            [
                s(triangular(3), real(3, 2), lower=True, label="lower"),
                s(triangular(3), real(3), trans=1, label="upper,trans=1,vector"),
                s(triangular(3, 2), real(3, 2), lower=True, unit_diagonal=True, trans="T"),
                s(triangular(3, complex_=True), cplx(3), lower=True, trans=2, label="complex,C"),
            ],
            sl.solve_triangular,
        ),
        op(
            "cholesky",
            [s(spd(3), label="upper"), s(spd(3, 2), lower=True, label="stack,lower")],
            sl.cholesky,
        ),
        op(
            "cho_factor",
            [s(spd(3), lower=True, label="lower"), s(spd(3, 2), lower=False, label="stack,upper")],
            lambda a, lower: cho_factor(sl, a, lower),
            call=call(cho_factor),
        ),
        op(
            "cho_solve",
            [
                s(triangular(3), real(3, 2), lower=True, label="lower"),
                s(triangular(3, 2), real(3), lower=False, label="stack,upper,vector"),
            ],
            lambda c, b, lower: sl.cho_solve((c, lower), b),
            call=call(lambda m, c, b, lower: m.cho_solve((c, lower), b)),
        ),
        op(  # lu (piv has no derivative, and vjp takes floating-point outputs only)
            "lu_factor",
            [s(real(3, 3) + 2 * np.eye(3), label="square"), s(real(2, 4, 4), label="stack")],
            lambda a: sl.lu_factor(a)[0],
            call=call(lambda m, a: m.lu_factor(a)[0]),
        ),
        op("lu_factor", [s(real(2, 3, 3), label="lu and piv")], sl.lu_factor, differentiable=False),
        op(
            "lu_solve",
            [
                # pivots that move rows (a random 3 x 3 matrix may give [2, 2, 2]: all the
                # largest, which a redraw near them cannot change)
                s(
                    *sl.lu_factor(real(3, 3)[[2, 0, 1]] + 3 * np.eye(3)[[2, 0, 1]]),
                    real(3, 2),
                    label="matrix",
                ),
                s(*sl.lu_factor(real(2, 3, 3)), real(3), trans=1, label="stack,vector,trans=1"),
            ],
            lambda *args, **kwargs: lu_solve(sl, *args, **kwargs),
            call=call(lu_solve),
        ),
        op(
            "lu_solve",
            [s(real(3, 3) + 2 * np.eye(3), real(3, 2), trans=2, label="of lu_factor(a)")],
            lambda *args, **kwargs: lu_solve_of_a(sl, *args, **kwargs),
            call=call(lu_solve_of_a),
        ),
        op(
            "expm",
            [
                s(real(3, 3) * 0.5, label="matrix"),
                s(real(2, 2, 2) * 0.5, label="stack"),
                s(cplx(2, 2) * 0.5, label="complex"),
            ],
            sl.expm,
        ),
        op(
            "sqrtm",
            [
                s(spd(3), label="spd"),
                s(near_identity(3), label="non-symmetric"),
                s(near_identity(2, 2), label="stack"),
                s(near_identity(2, complex_=True), label="complex"),
            ],
            sl.sqrtm,
        ),
        op(
            "block_diag",
            [
                s(real(2, 3), real(2), real(), label="2-d,1-d,0-d"),
                s(real(2, 2), cplx(1, 3), label="complex"),
            ],
            sl.block_diag,
            call=call(lambda m, *arrs: m.block_diag(*arrs)),
        ),
    ]


OPS: list = _records() if importlib.util.find_spec("scipy") is not None else []
