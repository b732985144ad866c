"""Registry records: numpy.linalg (``anp.linalg``).

Eigenvectors and singular vectors are unique up to a sign (real) or a phase
(complex).  Real samples check the raw vectors (LAPACK's sign choice is locally
constant); complex samples go through gauge-invariant functions of them.
"""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import (
    away_from_zero,
    cplx,
    distinct_spectrum,
    domain,
    real,
    spd,
    well_conditioned,
)

_rng = np.random.default_rng(4321)


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


# --- local input domains --------------------------------------------------------------


def _unitary(rng, n, *batch, complex_=False):
    a = rng.standard_normal((*batch, n, n))
    if complex_:
        a = a + 1j * rng.standard_normal((*batch, n, n))
    q, _ = np.linalg.qr(a)
    return q


@domain(_rng)
def separated(rng, m, n, *batch, complex_=False):
    """m x n matrices with well-separated singular values in [1, 3.5] (svd, qr, pinv)."""
    k = min(m, n)
    s_ = np.linspace(3.5, 1.0, k) + rng.uniform(0, 0.1, k)
    u = _unitary(rng, m, *batch, complex_=complex_)[..., :k]
    v = _unitary(rng, n, *batch, complex_=complex_)[..., :k]
    return (u * s_) @ np.conj(np.swapaxes(v, -1, -2))


@domain(_rng)
def cwell(rng, n, *batch):
    """Complex square matrices with singular values in [1, 3]."""
    u, v = _unitary(rng, n, *batch, complex_=True), _unitary(rng, n, *batch, complex_=True)
    return (u * rng.uniform(1.0, 3.0, (*batch, n))[..., None, :]) @ v


@domain(_rng)
def hpd(rng, n, *batch):
    """Hermitian positive definite complex matrices, well conditioned."""
    a = rng.standard_normal((*batch, n, n)) + 1j * rng.standard_normal((*batch, n, n))
    return a @ np.conj(np.swapaxes(a, -1, -2)) / n + np.eye(n)


@domain(_rng)
def hermitian_distinct(rng, n, *batch):
    """Hermitian complex matrices with well-separated eigenvalues."""
    q = _unitary(rng, n, *batch, complex_=True)
    w = np.arange(1, n + 1) * 1.5 + rng.uniform(0, 0.2, n)
    return (q * w) @ np.conj(np.swapaxes(q, -1, -2))


# --- gauge-invariant views of eigenvectors and singular vectors -------------------------


def _abs2(lib, x):
    return lib.real(x * lib.conj(x))


def _eigh_gauge(lib, a, **kw):
    w, v = lib.linalg.eigh(a, **kw)
    return w, _abs2(lib, v), (v * w[..., None, :]) @ lib.conj(lib.swapaxes(v, -1, -2))


def _svd_gauge(lib, a, **kw):
    u, sv, vh = lib.linalg.svd(a, full_matrices=False, **kw)
    return _abs2(lib, u), sv, _abs2(lib, vh), u @ vh


def _eigh_project(lib, a):
    """The projector onto the top eigenvector: smooth, gauge invariant."""
    _, v = lib.linalg.eigh(a)
    top = v[..., -1:]
    return top @ lib.conj(lib.swapaxes(top, -1, -2))


OPS = [
    # --- solve, inv, det, slogdet ---------------------------------------------------------
    OpInfo(
        "linalg.solve",
        [
            s(well_conditioned(3), real(3), label="vector b"),
            s(well_conditioned(3), real(3, 2), label="matrix b"),
            s(well_conditioned(3, 2), real(2, 3, 2), label="stacks"),
            s(well_conditioned(3, 2), real(3), label="stack a, vector b"),
            s(well_conditioned(3, 2), real(3, 2), label="stack a, matrix b"),
            s(well_conditioned(3), real(2, 3, 1), label="matrix a, stack b"),
            s(cwell(3), cplx(3), label="complex vector b"),
            s(cwell(3), cplx(3, 2), label="complex matrix b"),
        ],
    ),
    OpInfo(
        "linalg.inv",
        [
            s(well_conditioned(3), label="matrix"),
            s(well_conditioned(3, 2), label="stack"),
            s(cwell(3), label="complex"),
        ],
    ),
    OpInfo(
        "linalg.det",
        [
            s(well_conditioned(3), label="matrix"),
            s(well_conditioned(3, 2), label="stack"),
            s(cwell(3), label="complex"),
        ],
    ),
    OpInfo(
        "linalg.slogdet",
        [
            s(well_conditioned(3), label="matrix"),
            s(well_conditioned(3, 2), label="stack"),
            s(cwell(3), label="complex"),
        ],
    ),
    # --- cholesky, eigh ------------------------------------------------------------------
    OpInfo(
        "linalg.cholesky",
        [
            s(spd(3), label="matrix"),
            s(spd(3, 2), label="stack"),
            s(spd(3), upper=True, label="upper"),
            s(hpd(3), label="complex"),
            s(hpd(3), upper=True, label="complex upper"),
        ],
    ),
    OpInfo(
        "linalg.eigh",
        [
            s(distinct_spectrum(3), label="matrix"),
            s(distinct_spectrum(3, 2), label="stack"),
            s(distinct_spectrum(3), UPLO="U", label="UPLO=U"),
        ],
    ),
    OpInfo(
        "linalg.eigh",
        [
            s(hermitian_distinct(3), label="complex"),
            s(hermitian_distinct(3, 2), UPLO="U", label="complex stack UPLO=U"),
            s(distinct_spectrum(3), label="real"),
        ],
        call=_eigh_gauge,
    ),
    OpInfo("linalg.eigh", [s(distinct_spectrum(3), label="projector")], call=_eigh_project),
    # --- svd ------------------------------------------------------------------------------
    OpInfo(
        "linalg.svd",
        [
            s(separated(3, 3), label="square"),
            s(separated(3, 3), full_matrices=False, label="square reduced"),
            s(separated(3, 2), full_matrices=False, label="tall"),
            s(separated(2, 3), full_matrices=False, label="wide"),
            s(separated(3, 2, 2), full_matrices=False, label="stack"),
            s(separated(3, 2), compute_uv=False, label="values tall"),
            s(separated(2, 3, 2), compute_uv=False, label="values stack"),
            s(separated(3, 3, complex_=True), compute_uv=False, label="values complex"),
            s(distinct_spectrum(3), hermitian=True, label="hermitian"),
            s(distinct_spectrum(3), hermitian=True, compute_uv=False, label="values hermitian"),
        ],
    ),
    OpInfo(
        "linalg.svd",
        [
            s(separated(3, 3, complex_=True), label="complex"),
            s(separated(3, 2, complex_=True), label="complex tall"),
            s(separated(2, 3, 2, complex_=True), label="complex wide stack"),
        ],
        call=_svd_gauge,
    ),
    # full_matrices=True of a non-square matrix, the raw vectors: values and batching
    # only (the extra ones are LAPACK's basis of a complement, which moves otherwise than
    # the derivative's; see _svd_full_gauge's record below).
    OpInfo(
        "linalg.svd",
        [s(separated(3, 2), label="full tall"), s(separated(2, 3, 2), label="full wide stack")],
        differentiable=False,
    ),
    # --- qr -------------------------------------------------------------------------------
    OpInfo(
        "linalg.qr",
        [
            s(separated(3, 3), label="square"),
            s(separated(3, 2), label="tall"),
            s(separated(2, 3), label="wide"),
            s(separated(3, 2, 2), label="stack"),
            s(separated(2, 3), mode="complete", label="complete wide"),
            s(separated(3, 2), mode="r", label="r"),
            s(separated(3, 3, complex_=True), label="complex"),
            s(separated(3, 2, complex_=True), label="complex tall"),
            s(separated(2, 3, complex_=True), label="complex wide"),
        ],
    ),
    OpInfo(
        "linalg.qr",
        [s(separated(3, 2), mode="complete", label="complete tall")],
        differentiable=False,
    ),
    # --- pinv, matrix_power -----------------------------------------------------------------
    OpInfo(
        "linalg.pinv",
        [
            s(well_conditioned(3), label="square"),
            s(separated(3, 2), label="tall"),
            s(separated(2, 3), label="wide"),
            s(separated(3, 2, 2), label="stack"),
            s(separated(3, 2), rcond=1e-10, label="rcond"),
            s(spd(3), hermitian=True, label="hermitian"),
            s(separated(2, 3, complex_=True), label="complex wide"),
        ],
    ),
    OpInfo(
        "linalg.matrix_power",
        [s(well_conditioned(3), n=k, label=f"n={k}") for k in (0, 1, 2, 3, 5, -1, -3)]
        + [s(well_conditioned(3, 2), n=4, label="stack"), s(cwell(3), n=2, label="complex")],
    ),
]

# --- norm -------------------------------------------------------------------------------

_VECTOR_ORDS = [None, 2, 1, -1, np.inf, -np.inf, 3, 0.5, -2.5]
_MATRIX_ORDS = [None, "fro", "nuc", 1, -1, 2, -2, np.inf, -np.inf]

OPS += [
    OpInfo(
        "linalg.norm",
        [s(away_from_zero(4), ord=o, label=f"vector ord={o}") for o in _VECTOR_ORDS]
        + [s(real(3, 4), label="matrix default"), s(real(2, 3, 2), label="3-d default")]
        + [s(real(2, 3), keepdims=True, label="default keepdims")]
        + [s(away_from_zero(2, 3), ord=o, axis=1, label=f"axis=1 ord={o}") for o in _VECTOR_ORDS]
        + [
            s(away_from_zero(2, 3), ord=3, axis=0, keepdims=True, label="axis=0 ord=3 keepdims"),
            s(away_from_zero(2, 3, 2), ord=1, axis=-2, label="axis=-2 ord=1"),
            s(away_from_zero(2, 3), ord=np.inf, axis=-1, keepdims=True, label="inf keepdims"),
        ]
        + [s(separated(3, 3), ord=o, label=f"matrix ord={o}") for o in _MATRIX_ORDS]
        + [s(separated(3, 2, 2), ord=o, axis=(1, 2), label=f"stack ord={o}") for o in _MATRIX_ORDS]
        + [
            s(real(3, 2, 2), ord="fro", axis=(2, 0), keepdims=True, label="axis=(2,0) keepdims"),
            s(separated(3, 2, 2), ord=2, axis=(-1, -2), keepdims=True, label="2 keepdims"),
            s(real(2, 3, 2), ord=1, axis=(0, 2), label="1 axis=(0,2)"),
            s(real(2, 3, 2), ord=np.inf, axis=(2, 1), label="inf axis=(2,1)"),
            s(cplx(4), label="complex vector"),
            s(cplx(4), ord=1, label="complex vector ord=1"),
            s(cplx(4), ord=3, label="complex vector ord=3"),
            s(cplx(3, 3), ord="fro", label="complex fro"),
            s(separated(3, 3, complex_=True), ord="nuc", label="complex nuc"),
            s(separated(3, 3, complex_=True), ord=2, label="complex 2"),
        ],
    ),
    # ord=0 counts the nonzero entries: no derivative.
    OpInfo(
        "linalg.norm",
        [
            s(real(4), ord=0, label="ord=0"),
            s(np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 3.0]]), ord=0, axis=1, label="ord=0 axis"),
        ],
        differentiable=False,
    ),
]

# --- the array API's linalg functions ---------------------------------------------------------

OPS += [
    OpInfo(
        "linalg.vector_norm",
        [
            s(away_from_zero(2, 3), label="all axes"),
            s(away_from_zero(2, 3, 2), axis=(0, 2), ord=3, label="axes (0,2) ord=3"),
            s(away_from_zero(2, 3), axis=-1, ord=1, keepdims=True, label="axis -1 ord=1 kd"),
            s(away_from_zero(2, 3), axis=0, ord=np.inf, label="inf"),
        ],
    ),
    OpInfo(
        "linalg.matrix_norm",
        [
            s(real(2, 3, 3), label="fro"),
            s(separated(3, 3), ord="nuc", label="nuc"),
            s(separated(2, 3, 3), ord=2, keepdims=True, label="2 keepdims"),
        ],
    ),
    OpInfo("linalg.matmul", [s(real(2, 3), real(3, 4)), s(real(3), real(5, 3, 2), label="bcast")]),
    OpInfo(
        "linalg.tensordot", [s(real(2, 3, 4), real(3, 4, 2)), s(real(2, 3), real(3, 2), axes=1)]
    ),
    OpInfo("linalg.outer", [s(real(3), real(2)), s(cplx(2), cplx(3), label="complex")]),
    OpInfo("linalg.trace", [s(real(2, 3, 3)), s(real(3, 4), offset=1, label="offset")]),
    OpInfo("linalg.diagonal", [s(real(2, 3, 3)), s(real(3, 4), offset=-1, label="offset")]),
    OpInfo("linalg.matrix_transpose", [s(real(2, 3, 4))]),
    OpInfo("linalg.vecdot", [s(real(2, 3), real(3)), s(cplx(3), cplx(2, 3), label="complex")]),
]

# --- eig, eigvals, eigvalsh ------------------------------------------------------------------


@domain(_rng)
def diagonalizable(rng, n, *batch, complex_=False, complex_pair=False):
    """Non-symmetric matrices ``Q diag(w) Q^-1`` with well-separated eigenvalues ``w``
    and a well-conditioned ``Q``: complex ones, or real ones with real eigenvalues, or
    (``complex_pair``) real ones with one complex-conjugate pair.  Every redraw keeps
    the kind, so the output dtype of ``eig`` is the same in every example."""
    q = (cwell if complex_ else well_conditioned).draw_with(rng, n, *batch)
    w = np.arange(1, n + 1) * 1.5 + rng.uniform(0, 0.2, n)
    if complex_:
        return (q * (w + 1j * rng.uniform(-1, 1, n))) @ np.linalg.inv(q)
    d = np.zeros((n, n))
    d[np.arange(n), np.arange(n)] = w
    if complex_pair:  # the first two eigenvalues: w[0] +- 1.2i
        d[0, 1], d[1, 0], d[1, 1] = 1.2, -1.2, w[0]
    return q @ d @ np.linalg.inv(q)


def _eig_gauge(lib, a):
    """Eigenvalues, the moduli of eigenvector entries, and ``V diag(w**2) V^-1``: smooth
    and gauge invariant (real parts only, so the output dtype does not depend on values)."""
    w, v = lib.linalg.eig(a)
    square = (v * (w**2)[..., None, :]) @ lib.linalg.inv(v)
    return lib.real(w), lib.imag(w), _abs2(lib, v), lib.real(square)


def _svd_full_gauge(lib, a):
    """``full_matrices=True`` of a non-square matrix through the projectors onto the
    complements (spanned by the extra columns of U or rows of Vh), which are unique."""
    u, sv, vh = lib.linalg.svd(a)
    k = sv.shape[-1]
    u2, vh2 = u[..., :, k:], vh[..., k:, :]
    cu = u2 @ lib.conj(lib.swapaxes(u2, -1, -2))
    cv = lib.conj(lib.swapaxes(vh2, -1, -2)) @ vh2
    return (
        lib.real(cu),
        lib.real(cv),
        sv,
        _abs2(lib, u[..., :, :k]),
        lib.real(u[..., :, :k] @ vh[..., :k, :]),
    )


OPS += [
    OpInfo(
        "linalg.eig",
        [
            s(diagonalizable(3), label="real eigenvalues"),
            s(diagonalizable(3, 2), label="stack"),
        ],
    ),
    OpInfo(
        "linalg.eig",
        [
            s(diagonalizable(3, complex_=True), label="complex"),
            s(diagonalizable(3, complex_pair=True), label="real, complex pair"),
            s(diagonalizable(3, 2, complex_=True), label="complex stack"),
        ],
        call=_eig_gauge,
    ),
    OpInfo(
        "linalg.eigvals",
        [
            s(diagonalizable(3), label="real"),
            s(diagonalizable(3, 2, complex_=True), label="complex stack"),
        ],
    ),
    OpInfo(
        "linalg.eigvals",
        [s(diagonalizable(3, complex_pair=True), label="real, complex pair")],
        call=lambda lib, a: (lib.real(lib.linalg.eigvals(a)), lib.imag(lib.linalg.eigvals(a))),
    ),
    OpInfo(
        "linalg.eigvalsh",
        [
            s(distinct_spectrum(3), label="real"),
            s(distinct_spectrum(3, 2), UPLO="U", label="stack UPLO=U"),
            s(hermitian_distinct(3), label="complex"),
        ],
    ),
    # --- svd with full_matrices=True of non-square matrices, svdvals ----------------------
    OpInfo(
        "linalg.svd",
        [
            s(separated(3, 2), label="full tall"),
            s(separated(2, 4, 2), label="full wide stack"),
            s(separated(3, 2, complex_=True), label="full complex tall"),
        ],
        call=_svd_full_gauge,
    ),
    OpInfo(
        "linalg.svdvals",
        [
            s(separated(3, 2), label="tall"),
            s(separated(2, 3, 2), label="wide stack"),
            s(separated(3, 3, complex_=True), label="complex"),
        ],
    ),
]

# --- lstsq, matrix_rank, cond ----------------------------------------------------------------


def _lstsq(lib, a, b):
    """The differentiable outputs (the rank is an integer: the record below)."""
    x, residuals, _, sv = lib.linalg.lstsq(a, b)
    return x, residuals, sv


def _rank_deficient(m, n, rank):
    return separated(m, rank) @ separated(rank, n)


OPS += [
    OpInfo(
        "linalg.lstsq",
        [
            s(separated(4, 3), real(4, 2), label="tall"),
            s(separated(4, 2), real(4), label="tall, vector b"),
            s(separated(2, 3), real(2), label="wide"),
            s(separated(4, 3, complex_=True), cplx(4, 2), label="complex"),
        ],
        call=_lstsq,
    ),
    OpInfo(
        "linalg.lstsq",
        [
            s(separated(4, 3), real(4), label="rank"),
            s(_rank_deficient(2, 3, 1), real(2, 2), label="rank deficient"),
        ],
        differentiable=False,
    ),
    OpInfo(
        "linalg.matrix_rank",
        [
            s(well_conditioned(3), label="full"),
            s(_rank_deficient(4, 3, 2), label="rank 2"),
            s(np.stack([_rank_deficient(3, 3, 1), well_conditioned(3)]), label="stack"),
            s(_rank_deficient(3, 4, 2), tol=0.5, label="tol"),
            s(real(3), label="vector"),
        ],
        differentiable=False,
    ),
    # every p: a real matrix, a stack or a complex one for each
    OpInfo(
        "linalg.cond",
        [
            s(separated(3, 2, 2), label="p=None stack"),
            s(separated(3, 3, complex_=True), p=2, label="p=2 complex"),
            s(separated(3, 3), p=-2, label="p=-2"),
            s(separated(3, 3, 2, complex_=True), p="fro", label="p=fro complex stack"),
            s(separated(3, 3), p="nuc", label="p=nuc"),
            s(well_conditioned(3), p=1, label="p=1"),
            s(well_conditioned(3, 2), p=-1, label="p=-1 stack"),
            s(cwell(3), p=np.inf, label="p=inf complex"),
            s(well_conditioned(3), p=-np.inf, label="p=-inf"),
        ],
    ),
]

# --- tensorsolve, tensorinv, multi_dot, cross ---------------------------------------------------

OPS += [
    OpInfo(
        "linalg.tensorsolve",
        [
            s(well_conditioned(6).reshape(6, 2, 3), real(6), label="a (6,2,3)"),
            s(
                well_conditioned(6).reshape(6, 2, 3).transpose(1, 2, 0),
                real(6),
                axes=(0, 1),
                label="axes",
            ),
            s(well_conditioned(4).reshape(2, 2, 2, 2), real(2, 2), label="b (2,2)"),
        ],
    ),
    OpInfo(
        "linalg.tensorinv",
        [
            s(well_conditioned(4).reshape(4, 2, 2), ind=1, label="ind=1"),
            s(well_conditioned(4).reshape(2, 2, 2, 2), label="ind=2"),
        ],
    ),
    OpInfo(
        "linalg.multi_dot",
        [
            s(real(2, 3), real(3, 4), label="two"),
            s(real(3), real(3, 5), real(5, 2), label="vector first, three"),
            s(real(4, 2), real(2, 5), real(5, 3), real(3), label="vector last, four"),
        ],
        call=lambda lib, *arrays: lib.linalg.multi_dot(list(arrays)),
    ),
    OpInfo(
        "linalg.cross",
        [
            s(real(2, 3), real(3), label="broadcast"),
            s(cplx(3, 2), cplx(3, 1), axis=0, label="complex axis=0"),
        ],
    ),
]

# --- roots (numpy.roots, through eigvals of the companion matrix) -----------------------------


@domain(_rng)
def real_rooted(rng, n):
    """Coefficients of polynomials with ``n`` well-separated real roots (every redraw
    too, so ``roots`` gives real values in every example)."""
    return np.poly(np.cumsum(rng.uniform(0.8, 1.6, n)) - n / 2)


OPS += [
    OpInfo(
        "roots",
        [
            s(real_rooted(4), label="real roots"),
            s(np.poly([1.0 + 1j, 2.0, -0.5j]) * (1.5 - 0.5j), label="complex coefficients"),
        ],
    ),
    OpInfo(
        "roots",
        [s(np.array([1.0, -0.5, 2.0, 1.5]), label="complex pair")],
        call=lambda lib, p: (lib.real(lib.roots(p)), lib.imag(lib.roots(p))),
    ),
]
