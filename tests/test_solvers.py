"""Derivatives of solvers: ``custom_root`` and ``custom_linear_solve``.

Checked against finite differences (``check_grads``, to second order), against JAX's
``lax.custom_root`` and ``lax.custom_linear_solve`` on the same problems, under
``vmap`` against a loop, under ``jit`` against the eager values, and composed: a root
whose Newton steps are a ``custom_linear_solve``.  The solvers' iterations are not
differentiated: a solve that stops autodiff's tracing still differentiates.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import custom_linear_solve, custom_root, grad, jacfwd, jacrev, jit, jvp, vmap
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.testing import check_grads


def newton(f, x):
    """Newton's method on plain arrays: never traced, so never differentiated."""
    x = np.asarray(x, float)
    for _ in range(50):
        fx = np.asarray(f(x))
        jac = np.atleast_2d(np.asarray(jacfwd(f)(x))).reshape(fx.size, x.size)
        x = x - np.linalg.solve(jac, fx.ravel()).reshape(x.shape)
    return x


def dense_tangent_solve(g, y):
    jac = jacfwd(g)(y)
    return anp.linalg.solve(jac.reshape(y.size, y.size), y.ravel()).reshape(y.shape)


def system(theta):
    """x with x + theta[0] * x**3 = theta[1:], elementwise."""
    f = lambda x: x + theta[0] * x**3 - theta[1:]
    return custom_root(f, np.zeros(len(theta) - 1), newton, dense_tangent_solve)


def system_jax(theta):
    f = lambda x: x + theta[0] * x**3 - theta[1:]

    def solve(f, x):
        for _ in range(50):
            x = x - jnp.linalg.solve(jax.jacfwd(f)(x), f(x))
        return x

    tangent = lambda g, y: jnp.linalg.solve(jax.jacfwd(g)(y), y)
    return jax.lax.custom_root(f, jnp.zeros(len(theta) - 1), solve, tangent)


THETA = np.array([0.3, 0.5, -1.0, 2.0])


def test_custom_root_values_and_derivatives():
    x = system(THETA)
    np.testing.assert_allclose(x + THETA[0] * x**3, THETA[1:], atol=1e-12)
    check_grads(system, (THETA,), order=2)
    with jax.enable_x64(True):
        want_x = np.asarray(system_jax(jnp.asarray(THETA)))
        want_jac = np.asarray(jax.jacrev(system_jax)(jnp.asarray(THETA)))
        want_jvp = np.asarray(jax.jvp(system_jax, (jnp.asarray(THETA),),
                                      (jnp.ones(4),))[1])  # fmt: skip
    np.testing.assert_allclose(x, want_x, rtol=1e-10)
    np.testing.assert_allclose(jacrev(system)(THETA), want_jac, rtol=1e-9)
    np.testing.assert_allclose(jacfwd(system)(THETA), want_jac, rtol=1e-9)
    np.testing.assert_allclose(jvp(system, (THETA,), (np.ones(4),))[1], want_jvp, rtol=1e-9)


def test_custom_root_under_vmap_and_jit():
    thetas = np.random.default_rng(0).uniform(0.1, 1.0, (3, 4))
    np.testing.assert_allclose(vmap(system)(thetas), [system(t) for t in thetas], rtol=1e-12)
    np.testing.assert_allclose(vmap(jacrev(system))(thetas), [jacrev(system)(t) for t in thetas],
                               rtol=1e-10)  # fmt: skip
    np.testing.assert_allclose(jit(system)(THETA), system(THETA), rtol=1e-12)
    np.testing.assert_allclose(jit(jacrev(system))(THETA), jacrev(system)(THETA), rtol=1e-10)
    np.testing.assert_allclose(jacrev(jit(system))(THETA), jacrev(system)(THETA), rtol=1e-10)


def test_custom_root_with_aux_and_a_scalar():
    def cube_root(a):
        f = lambda x: x**3 - a
        solve = lambda f, x: (newton(f, x), np.array(50))  # aux: the iterations
        return custom_root(f, 1.0, solve, lambda g, y: y / g(1.0), has_aux=True)

    x, aux = cube_root(8.0)
    assert (float(x), int(aux)) == (pytest.approx(2.0), 50)
    g = grad(lambda a: cube_root(a)[0])(8.0)
    assert float(g) == pytest.approx(1 / 12)


def matrix(p):
    """A non-symmetric 3x3 matrix depending on p."""
    return anp.stack([anp.stack([4.0 + p[0], p[1], 0.0 * p[0]]),
                      anp.stack([1.0 + 0.0 * p[0], 3.0 + p[0] * p[1], p[1]]),
                      anp.stack([0.5 + 0.0 * p[0], 2.0 * p[0], 5.0 + 0.0 * p[0]])])  # fmt: skip


def lsolve(p, b):
    a = matrix(p)
    matvec = lambda v: a @ v
    solve = lambda mv, rhs: np.linalg.solve(np.asarray(jacfwd(mv)(rhs)), np.asarray(rhs))
    transpose_solve = lambda vm, rhs: np.linalg.solve(np.asarray(jacfwd(vm)(rhs)), np.asarray(rhs))
    return custom_linear_solve(matvec, b, solve, transpose_solve=transpose_solve)


def lsolve_jax(p, b):
    a = jnp.asarray([[4.0 + p[0], p[1], 0.0], [1.0, 3.0 + p[0] * p[1], p[1]],
                     [0.5, 2.0 * p[0], 5.0]])  # fmt: skip
    solve = lambda mv, rhs: jnp.linalg.solve(jax.jacfwd(mv)(rhs), rhs)
    return jax.lax.custom_linear_solve(lambda v: a @ v, b, solve, transpose_solve=solve)


P, B = np.array([0.7, -0.4]), np.array([1.0, 2.0, -1.0])


def test_custom_linear_solve_values_and_derivatives():
    x = lsolve(P, B)
    np.testing.assert_allclose(np.asarray(matrix(P)) @ x, B, atol=1e-12)
    check_grads(lsolve, (P, B), order=2)
    with jax.enable_x64(True):
        want = [
            np.asarray(j)
            for j in jax.jacrev(lsolve_jax, argnums=(0, 1))(jnp.asarray(P), jnp.asarray(B))
        ]
    got = jacrev(lsolve, argnums=(0, 1))(P, B)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10)
    got = jacfwd(lsolve, argnums=(0, 1))(P, B)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10)
    bs = np.random.default_rng(1).random((3, 3))
    np.testing.assert_allclose(vmap(lsolve, in_dims=(None, 0))(P, bs), [lsolve(P, b) for b in bs])
    np.testing.assert_allclose(jit(grad(lambda p: lsolve(p, B).sum()))(P),
                               grad(lambda p: lsolve(p, B).sum())(P), rtol=1e-12)  # fmt: skip


def test_a_root_whose_newton_steps_are_linear_solves():
    def newton_linear(f, x):
        x = np.asarray(x, float)
        for _ in range(30):
            step = custom_linear_solve(lambda v, x=x: jvp(f, (x,), (v,))[1], f(x),
                                       lambda mv, r: np.asarray(dense_tangent_solve(mv, r)),
                                       symmetric=True)  # fmt: skip
            x = x - np.asarray(step)
        return x

    def solution(theta):
        f = lambda x: x + theta[0] * x**3 - theta[1:]
        return custom_root(f, np.zeros(3), newton_linear, dense_tangent_solve)

    np.testing.assert_allclose(solution(THETA), system(THETA), rtol=1e-10)
    np.testing.assert_allclose(jacrev(solution)(THETA), jacrev(system)(THETA), rtol=1e-9)


def test_solver_errors_are_clear():
    a = np.array([[2.0, 1.0], [0.0, 3.0]])
    no_transpose = lambda b: custom_linear_solve(lambda v: a @ v, b,
                                                 lambda mv, r: np.linalg.solve(a, r))  # fmt: skip
    np.testing.assert_allclose(no_transpose(np.ones(2)), np.linalg.solve(a, np.ones(2)))
    with pytest.raises(TransformTypeError, match="transpose_solve"):
        grad(lambda b: no_transpose(b).sum())(np.ones(2))
    wrong = lambda b: custom_linear_solve(lambda v: a @ v, b, lambda mv, r: r[:1])
    with pytest.raises(TransformValueError, match="structured like b"):
        wrong(np.ones(2))
    with pytest.raises(TransformTypeError, match=r"callable|function"):
        custom_root(None, 1.0, newton, lambda g, y: y)
