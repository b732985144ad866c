"""``autodiff.scipy.sparse``: sparse arrays with traced values, and SciPy's sparse solvers
differentiable in those values and the right-hand side.

The registry (``tests/registry/sparse.py``) runs products and every solver through every
transform; here: a PDE's solution differentiated in its coefficient field against JAX,
the values' cotangent living on the pattern, one factorisation per set of values, the
array type's constructors and errors, and non-convergence.
"""

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import autodiff.numpy as anp
import autodiff.rules.sparse as rules
import autodiff.scipy.sparse as asp
import autodiff.scipy.sparse.linalg as asl
from autodiff import grad, hessian, jacfwd, jacobian_sparsity, jacrev, jit, jvp, vmap
from autodiff.errors import ConvergenceError, TransformTypeError, TransformValueError
from autodiff.testing import check_grads
from tests import crosscheck

RNG = np.random.default_rng(33)


def close(got, want, rtol=1e-9, atol=1e-12):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


def poisson(n):
    """-div(k grad u) = 1 on the unit square's n x n interior nodes, u = 0 outside, k
    given per node (face values: means of the two nodes): the pattern, and the map from
    k to the values (a constant sparse matrix, so the values are linear in k)."""
    idx = np.arange(n * n).reshape(n, n)
    rows, cols, weights = [], [], []  # value = sum over (entry, node) of weight * k[node]
    entry = {}

    def add(i, j, node, w):
        key = entry.setdefault((i, j), len(entry))
        rows.append(key)
        cols.append(node)
        weights.append(w)

    h2 = (n + 1) ** 2
    for r in range(n):
        for c in range(n):
            i = idx[r, c]
            for dr, dc in ((0, 1), (1, 0), (0, -1), (-1, 0)):
                rr, cc = r + dr, c + dc
                inside = 0 <= rr < n and 0 <= cc < n
                for node in (i, idx[rr, cc] if inside else i):  # face value: mean of the two
                    add(i, i, node, 0.5 * h2)
                    if inside:
                        add(i, idx[rr, cc], node, -0.5 * h2)
    keys = np.array(list(entry))
    order = np.lexsort((keys[:, 1], keys[:, 0]))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    to_values = sp.csr_array((weights, (rank[rows], cols)), shape=(len(entry), n * n))
    pattern = sp.csr_array((np.ones(len(entry)), (keys[order, 0], keys[order, 1])),
                           shape=(n * n, n * n))  # fmt: skip
    return pattern, to_values


N = 6
PATTERN, TO_VALUES = poisson(N)
K0 = 1.0 + 0.5 * np.sin(np.arange(N * N))
F = np.ones(N * N)


def stiffness(k):
    values = asp.csr_array(TO_VALUES) @ k
    return asp.csr_array((values, PATTERN.indices, PATTERN.indptr), shape=PATTERN.shape)


def solution(k):
    return asl.spsolve(stiffness(k), F)


def objective(k):
    return anp.mean((solution(k) - 0.02) ** 2)


def test_a_pde_solution_differentiated_in_its_coefficient_field_matches_jax():
    dense = lambda k: (TO_VALUES @ k, PATTERN)
    values, _ = dense(K0)
    matrix = sp.csr_array((values, PATTERN.indices, PATTERN.indptr), shape=PATTERN.shape)
    close(solution(K0), np.linalg.solve(matrix.toarray(), F))
    jax = crosscheck.jax()
    jnp = jax.numpy
    to_values = jnp.asarray(TO_VALUES.toarray())
    rows = np.repeat(np.arange(N * N), np.diff(PATTERN.indptr))

    def jax_objective(k):
        a = jnp.zeros((N * N, N * N)).at[rows, PATTERN.indices].set(to_values @ k)
        return jnp.mean((jnp.linalg.solve(a, jnp.asarray(F)) - 0.02) ** 2)

    close(grad(objective)(K0), jax.grad(jax_objective)(K0), rtol=1e-8)
    close(jvp(objective, (K0,), (np.cos(np.arange(N * N)),))[1],
          jax.jvp(jax_objective, (K0,), (np.cos(np.arange(N * N)),))[1], rtol=1e-8)  # fmt: skip
    close(hessian(objective)(K0), jax.hessian(jax_objective)(K0), rtol=1e-7, atol=1e-14)
    ks = K0 * RNG.uniform(0.8, 1.2, (3, N * N))
    close(vmap(grad(objective))(ks), [grad(objective)(k) for k in ks])
    close(jit(grad(objective))(K0), grad(objective)(K0))


def test_the_values_cotangent_is_on_the_pattern():
    a = stiffness(K0)
    grads = grad(lambda v: anp.sum(asl.spsolve(a.with_data(v), F) ** 2))(a.data)
    assert grads.shape == a.data.shape  # one per stored value, not a dense matrix
    values = np.asarray(a.data)
    x = np.linalg.solve(a.toscipy().toarray(), F)
    w = np.linalg.solve(a.toscipy().toarray().T, 2 * x)  # dL/dx = 2x, pulled back
    rows = np.repeat(np.arange(N * N), np.diff(PATTERN.indptr))
    close(grads, -w[rows] * x[PATTERN.indices])
    close(values, a.data)


def test_one_factorisation_serves_the_forward_and_the_derivative_solves(monkeypatch):
    calls = []
    factor = rules._spla.splu
    monkeypatch.setattr(rules._spla, "splu", lambda *a, **k: calls.append(1) or factor(*a, **k))
    k = K0 * 1.01  # values no earlier test factored
    grad(objective)(k)
    assert len(calls) == 1
    jacfwd(solution)(k * 1.01)  # 36 tangents
    assert len(calls) == 2
    vmap(lambda f: asl.spsolve(stiffness(k), f))(RNG.normal(size=(4, N * N)))
    assert len(calls) == 2  # the same values: the same factorisation
    lu = asl.splu(stiffness(k * 1.02))
    lu.solve(F)
    lu.solve(F, trans="T")
    assert len(calls) == 3
    assert (np.triu(lu.L.toarray(), 1) == 0).all()  # SciPy's factors, for plain values


def test_factorized_is_differentiable_and_factors_once(monkeypatch):
    """factorized(A)'s solve, A the stiffness plus a constant upwind term (not symmetric):
    the misfit's gradient in the coefficients against the adjoint by hand (w = A⁻ᵀ ∂L/∂x,
    the values' cotangent -w_i x_j on the pattern, pulled back to k), right-hand sides
    batched against NumPy, the forward and adjoint solves on one factorisation."""
    calls = []
    factor = rules._spla.splu
    monkeypatch.setattr(rules._spla, "splu", lambda *a, **k: calls.append(1) or factor(*a, **k))
    k = K0 * 1.03  # values no other test factors
    upwind = asp.csr_array(sp.eye(N * N, k=1, format="csr") * 10.0)
    matrix = lambda k: stiffness(k) + upwind
    misfit = lambda k: anp.mean((asl.factorized(matrix(k))(F) - 0.02) ** 2)
    dense = matrix(k).toscipy().toarray()
    assert not np.allclose(dense, dense.T)
    x = np.linalg.solve(dense, F)
    w = np.linalg.solve(dense.T, 2 * (x - 0.02) / x.size)
    rows = np.repeat(np.arange(N * N), np.diff(PATTERN.indptr))
    close(grad(misfit)(k), TO_VALUES.T @ (-w[rows] * x[PATTERN.indices]))
    assert len(calls) == 1
    solve = asl.factorized(matrix(k))
    bs = RNG.normal(size=(3, N * N))
    close(vmap(solve)(bs), np.linalg.solve(dense, bs.T).T)
    close(jvp(solve, (F,), (bs[0],))[1], np.linalg.solve(dense, bs[0]))
    assert len(calls) == 1


def test_splus_arguments_reach_scipys_factorisation():
    """permc_spec, diag_pivot_thresh and options are SciPy's: NATURAL keeps the columns'
    order, and a solve with them is differentiable like any other."""
    k = K0 * 1.05
    natural = lambda k: asl.splu(stiffness(k), permc_spec="NATURAL", diag_pivot_thresh=0.0,
                                 options=dict(SymmetricMode=True))  # fmt: skip
    lu = natural(k)
    assert (lu.perm_c == np.arange(N * N)).all()
    assert (asl.splu(stiffness(k)).perm_c != np.arange(N * N)).any()  # (COLAMD's, by default)
    close(grad(lambda k: anp.mean((natural(k).solve(F) - 0.02) ** 2))(k), grad(objective)(k))


def test_a_values_array_written_after_construction_does_not_change_the_matrix():
    values = np.array([4.0, 1.0, 1.0, 3.0])
    a = asp.csr_array((values, np.array([0, 1, 0, 1]), np.array([0, 2, 4])), shape=(2, 2))
    x = asl.spsolve(a, np.ones(2))
    values *= 10.0
    close(asl.spsolve(a, np.ones(2)), x)


def test_products_and_their_sparsity():
    a = stiffness(K0)
    dense = a.toscipy().toarray()
    x = RNG.normal(size=N * N)
    close(a @ x, dense @ x)
    close(x @ a, x @ dense)
    close(a.T @ x, dense.T @ x)
    close((2.0 * a - a / 2.0).toarray(), 1.5 * dense)
    pattern = jacobian_sparsity(lambda y: a @ y)(x).toarray()
    assert (pattern == (dense != 0)).all()
    check_grads(lambda k, y: stiffness(k) @ y, (K0, x), order=2)
    other = asp.csr_array(sp.eye(N * N, format="csr") * 2.0)
    close((a + other).toarray(), dense + 2 * np.eye(N * N))
    check_grads(lambda k: (stiffness(k) + other).toarray(), (K0,), order=1)


def test_coo_array_sums_duplicates_differentiably():
    rows, cols = np.array([0, 1, 0, 1]), np.array([1, 0, 1, 1])
    build = lambda v: asp.coo_array((v, (rows, cols)), shape=(2, 2)).toarray()
    close(build(np.array([1.0, 2.0, 3.0, 4.0])), [[0.0, 4.0], [2.0, 4.0]])
    close(jacrev(build)(np.ones(4))[0, 1], [1.0, 0.0, 1.0, 0.0])


def test_constructor_errors_are_clear():
    with pytest.raises(TransformValueError, match="shape="):
        asp.csr_array((np.ones(2), np.array([0, 1]), np.array([0, 1, 2])))
    with pytest.raises(TransformValueError, match="sorted and unique"):
        asp.csr_array((np.ones(2), np.array([1, 0]), np.array([0, 2, 2])), shape=(2, 2))
    with pytest.raises(TransformValueError, match="stores 3 values"):
        asp.csr_array((np.ones(2), np.array([0, 1, 1]), np.array([0, 2, 3])), shape=(2, 2))
    with pytest.raises(TransformTypeError, match="indices is traced"):
        grad(lambda i: asp.csr_array((np.ones(1), i, np.array([0, 1])), shape=(1, 1)))(0.0)
    with pytest.raises(TransformTypeError, match="values are traced"):
        grad(lambda v: asp.csr_array(np.eye(2)).with_data(v).toscipy())(np.ones(2))
    with pytest.raises(TransformTypeError, match="factors carry no"):
        grad(lambda v: asl.splu(asp.csr_array(np.eye(2)).with_data(v)).L)(np.ones(2))


def test_krylov_methods_take_every_kind_of_matrix():
    dense = stiffness(K0).toscipy().toarray()
    b = RNG.normal(size=N * N)
    want = np.linalg.solve(dense, b)
    operator = spla.aslinearoperator(sp.csr_array(dense))
    for a in (dense, sp.csr_array(dense), operator, stiffness(K0)):
        for method in (asl.cg, asl.gmres, asl.bicgstab):
            x, info = method(a, b, rtol=1e-12)
            assert info == 0
            close(x, want, rtol=1e-8)
            solve = lambda b, a=a, method=method: method(a, b, rtol=1e-12)[0]
            close(jacfwd(solve)(b), np.linalg.inv(dense), rtol=1e-7, atol=1e-10)
    close(grad(lambda b: anp.sum(asl.gmres(operator, b, rtol=1e-12)[0]))(b),
          np.linalg.solve(dense.T, np.ones(N * N)), rtol=1e-7)  # fmt: skip


def test_an_unconverged_krylov_solve_is_not_differentiated():
    a, b = stiffness(K0), F
    _, info = asl.cg(a, b, maxiter=1)
    assert info == 1
    with pytest.raises(ConvergenceError, match="cg did not converge"):
        grad(lambda b: anp.sum(asl.cg(a, b, maxiter=1)[0]))(b)
    grad(lambda b: anp.sum(asl.cg(a, b, maxiter=1, on_failure="ignore")[0]))(b)


def test_lsqr_with_damping_against_the_closed_form():
    a, y = RNG.normal(size=(9, 4)), RNG.normal(size=9)

    def fit(a, y, damp):
        return asl.lsqr(a, y, damp=damp, atol=1e-14, btol=1e-14)[0]

    def exact(a, y, damp):
        return np.linalg.solve(a.T @ a + damp**2 * np.eye(4), a.T @ y)

    close(fit(a, y, 0.5), exact(a, y, 0.5), rtol=1e-8)
    k = a.T @ a + 0.25 * np.eye(4)
    close(jacfwd(fit, 2)(a, y, 0.5), -np.linalg.solve(k, exact(a, y, 0.5)), rtol=1e-7)
    close(jacrev(fit, 1)(a, y, 0.5), np.linalg.solve(k, a.T), rtol=1e-7)
    x, istop, itn, r1, r2, *_ = asl.lsqr(a, y, damp=0.5, atol=1e-14, btol=1e-14)
    assert istop in (1, 2) and itn > 0
    close(r1, np.linalg.norm(y - a @ x))
    close(r2, np.hypot(r1, 0.5 * np.linalg.norm(x)))
    norms = jacfwd(lambda y: asl.lsqr(a, y, atol=1e-14, btol=1e-14)[3])(y)
    residual = y - a @ np.linalg.lstsq(a, y, rcond=None)[0]
    close(norms, residual / np.linalg.norm(residual), rtol=1e-6)
