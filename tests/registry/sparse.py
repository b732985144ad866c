"""Registry records: scipy.sparse and scipy.sparse.linalg (``autodiff.scipy.sparse``).

A sparse matrix's values are an array argument (``data`` on a fixed, diagonally
dominant pattern, so every redrawn example stays well-conditioned), the pattern a
constant of the record's ``call``; SciPy computes the reference on plain arrays.  The
Krylov methods' derivatives are as accurate as their tolerance: the samples ask for
1e-13 (and float32 cannot meet it).  Empty without SciPy.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from tests.registry import OpInfo, Sample

_rng = np.random.default_rng(1357)  # local: these draws don't shift other families'
N = 6


def _pattern():
    """A matrix diagonally dominant by rows and by columns (values in [0, 1), at most
    ``N - 1`` off the diagonal, 8 on it): its redrawn values stay so, and ``A + Aᵀ`` is
    symmetric positive definite."""
    import scipy.sparse as sp

    m = sp.random(N, N, density=0.35, random_state=7, format="csr")
    m = sp.csr_array(m + 8.0 * sp.eye(N))
    m.sum_duplicates()
    m.sort_indices()
    return m


def _records() -> list[OpInfo]:
    import scipy.sparse as sp
    import scipy.sparse.linalg as spla

    import autodiff.scipy.sparse as asp
    import autodiff.scipy.sparse.linalg as asl

    general = _pattern()
    x, cols = _rng.standard_normal(N), _rng.standard_normal((N, 3))

    def ours(m):
        return lambda data: asp.csr_array((data, m.indices, m.indptr), shape=m.shape)

    def theirs(m):
        return lambda data: sp.csr_array((data, m.indices, m.indptr), shape=m.shape)

    a, a_ref = ours(general), theirs(general)
    s = lambda data: a(data) + a(data).T  # symmetric values: a matrix plus its transpose
    s_ref = lambda data: a_ref(data) + a_ref(data).T
    tight = {"rtol": 1e-13}

    def record(name, call, reference, args, label, keeps_float32=True, rtol=None):
        op = OpInfo(name, [Sample(args, {}, label, rtol=rtol)], numpy_name=None,
                    call=lambda lib, *xs: call(*xs), keeps_float32=keeps_float32)  # fmt: skip
        op.reference = reference
        return op

    def krylov(name, m, ref):
        options = tight if name == "minres" else {**tight, "atol": 0.0}
        return record(
            f"scipy.sparse.linalg.{name}",
            lambda data, b: getattr(asl, name)(m(data), b, **options)[0],
            lambda data, b: getattr(spla, name)(ref(data), b, **options)[0],
            (general.data, x),
            "values,b",
            keeps_float32=False,
            rtol=1e-5,
        )

    return [
        record("scipy.sparse.csr_array", lambda data, v: a(data) @ v,
               lambda data, v: a_ref(data) @ v, (general.data, x), "A @ x"),
        record("scipy.sparse.csr_array", lambda data, v: v @ a(data),
               lambda data, v: v @ a_ref(data), (general.data, x), "x @ A"),
        record("scipy.sparse.csr_array", lambda data, v: a(data).T @ v,
               lambda data, v: a_ref(data).T @ v, (general.data, cols), "A.T @ X"),
        record("scipy.sparse.linalg.spsolve", lambda data, b: asl.spsolve(a(data), b),
               lambda data, b: spla.spsolve(a_ref(data), b), (general.data, x), "values,b"),
        record("scipy.sparse.linalg.spsolve", lambda data, b: asl.spsolve(a(data), b),
               lambda data, b: spla.spsolve(a_ref(data), b), (general.data, cols), "columns"),
        record("scipy.sparse.linalg.splu",
               lambda data, b: asl.splu(a(data)).solve(b, trans="T"),
               lambda data, b: spla.splu(a_ref(data).tocsc()).solve(b, trans="T"),
               (general.data, x), "solve(trans='T')"),
        krylov("cg", s, s_ref),
        krylov("minres", s, s_ref),
        krylov("gmres", a, a_ref),
        krylov("bicgstab", a, a_ref),
        record("scipy.sparse.linalg.lsqr",
               lambda m, b: asl.lsqr(m, b, atol=1e-14, btol=1e-14)[0],
               lambda m, b: spla.lsqr(m, b, atol=1e-14, btol=1e-14)[0],
               (_rng.standard_normal((8, 3)), _rng.standard_normal(8)), "dense A,b",
               keeps_float32=False, rtol=1e-5),
    ]  # fmt: skip


OPS: list = _records() if importlib.util.find_spec("scipy") is not None else []
