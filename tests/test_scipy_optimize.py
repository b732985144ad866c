"""``autodiff.scipy.optimize``: SciPy's solvers, their solutions differentiated implicitly.

Each solver's solution is checked against SciPy's own (the same solve), and its
derivatives under ``grad``, ``jvp``, ``hessian``, ``vmap`` and ``jit`` against closed
forms (ridge regression, a cube root, a box-constrained quadratic), the implicit function
theorem evaluated independently with NumPy or JAX at the solution, finite differences of
tightly solved problems, and a loop over examples.
"""

import warnings

import numpy as np
import pytest
import scipy.optimize as so

import autodiff.numpy as anp
from autodiff import grad, hessian, jacfwd, jacrev, jit, jvp, vmap
from autodiff.errors import AutodiffWarning, ConvergenceError, TransformTypeError
from autodiff.scipy import optimize as ao
from tests import crosscheck

A3 = np.array([[2.0, 0.5, 0.1], [0.5, 1.5, 0.2], [0.1, 0.2, 1.0]])
TH = np.array([0.3, -0.2, 0.5])


def close(got, want, rtol=1e-7, atol=1e-9):
    np.testing.assert_allclose(np.asarray(got, float), np.asarray(want, float), rtol=rtol,
                               atol=atol)  # fmt: skip


def fd(fun, p, eps=1e-6):
    p = np.asarray(p, float)
    cols = [(np.asarray(fun(p + eps * e)) - np.asarray(fun(p - eps * e))) / (2 * eps)
            for e in np.eye(p.size).reshape(-1, *p.shape)]  # fmt: skip
    return np.stack(cols, -1).reshape(np.shape(fun(p)) + p.shape)


# --- minimize: every method, unconstrained ------------------------------------------------------


def quartic(x, th):
    return 0.5 * x @ A3 @ x - th @ x + 0.1 * anp.sum(x**4)


def implicit_jacobian(x):
    """dx/dθ of argmin quartic: H⁻¹, H = A + 1.2 diag(x²) (∂∇f/∂θ = -I)."""
    return np.linalg.inv(A3 + 1.2 * np.diag(x**2))


METHODS = {
    "Nelder-Mead": dict(options=dict(xatol=1e-11, fatol=1e-14, maxiter=20000, maxfev=20000)),
    "Powell": dict(options=dict(xtol=1e-11, ftol=1e-14)),
    "CG": dict(options=dict(gtol=1e-9)),
    "BFGS": dict(options=dict(gtol=1e-9)),
    "L-BFGS-B": dict(options=dict(gtol=1e-11)),
    "TNC": dict(options=dict(gtol=1e-11)),
    "COBYLA": dict(options=dict(rhobeg=0.5, tol=1e-12, maxiter=5000)),
    "COBYQA": dict(options=dict(final_tr_radius=1e-12)),
    "SLSQP": dict(options=dict(ftol=1e-14)),
    "trust-constr": dict(options=dict(gtol=1e-12, xtol=1e-14)),
    "Newton-CG": dict(options=dict(xtol=1e-12)),
    "dogleg": dict(options=dict(gtol=1e-11)),
    "trust-ncg": dict(options=dict(gtol=1e-9)),
    "trust-exact": dict(options=dict(gtol=1e-11)),
    "trust-krylov": dict(options=dict(gtol=1e-11)),
}


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_solves_as_scipy_and_differentiates_implicitly(method):
    def solve(th):
        x0 = np.full(3, 0.05)  # (trust-krylov overflows from exactly zero: SciPy's own)
        return ao.minimize(quartic, x0, args=(th,), method=method, **METHODS[method]).x

    x = solve(TH)
    gradient = lambda x: A3 @ x - TH + 0.4 * x**3
    assert np.abs(gradient(x)).max() < 1e-5
    want = implicit_jacobian(x)
    close(jacrev(solve)(TH), want)
    close(jacfwd(solve)(TH), want)
    close(jvp(solve, (TH,), (np.ones(3),))[1], want @ np.ones(3))


def test_the_result_without_a_transform_is_scipys():
    got = ao.minimize(quartic, np.zeros(3), args=(TH,), method="BFGS")
    want = so.minimize(lambda x: quartic(x, TH), np.zeros(3), method="BFGS",
                       jac=lambda x: A3 @ x - TH + 0.4 * x**3)  # fmt: skip
    assert type(got) is so.OptimizeResult and set(got) == set(want)
    close(got.x, want.x, rtol=1e-6)
    assert got.success and got.nit == want.nit


# --- minimize: closed forms, every transform ---------------------------------------------------

RNG = np.random.default_rng(33)
X_TRAIN, X_VAL = RNG.normal(size=(20, 4)), RNG.normal(size=(10, 4))
W_TRUE = np.array([1.0, -2.0, 0.5, 0.0])
Y_TRAIN = X_TRAIN @ W_TRUE + 0.3 * RNG.normal(size=20)
Y_VAL = X_VAL @ W_TRUE + 0.3 * RNG.normal(size=10)


def ridge(lam):
    loss = lambda w, lam: anp.sum((X_TRAIN @ w - Y_TRAIN) ** 2) + lam * anp.sum(w**2)
    return ao.minimize(loss, np.zeros(4), args=(lam,), method="BFGS",
                       options=dict(gtol=1e-10)).x  # fmt: skip


def ridge_exact(lam):
    k = X_TRAIN.T @ X_TRAIN + lam * np.eye(4)
    w = np.linalg.solve(k, X_TRAIN.T @ Y_TRAIN)
    dw = -np.linalg.solve(k, w)
    return w, dw, -2 * np.linalg.solve(k, dw)  # w, dw/dλ, d²w/dλ²


def validation(lam):
    return anp.mean((X_VAL @ ridge(lam) - Y_VAL) ** 2)


def test_ridge_regression_derivatives_match_the_closed_form():
    lam = 0.7
    w, dw, d2w = ridge_exact(lam)
    close(ridge(lam), w, rtol=1e-8)
    close(jacfwd(ridge)(lam), dw)
    close(jacrev(ridge)(lam), dw)
    close(jacfwd(jacrev(ridge))(lam), d2w, rtol=1e-6)
    residual = X_VAL @ w - Y_VAL
    close(grad(validation)(lam), 2 * np.mean(residual * (X_VAL @ dw)))
    hess = 2 * np.mean((X_VAL @ dw) ** 2 + residual * (X_VAL @ d2w))
    close(hessian(validation)(lam), hess, rtol=1e-6)


def test_ridge_regression_under_vmap_and_jit_and_against_jax():
    lams = np.array([0.1, 0.7, 2.0, 5.0])
    close(vmap(ridge)(lams), [ridge(v) for v in lams])
    close(vmap(grad(validation))(lams), [grad(validation)(v) for v in lams])
    close(jit(grad(validation))(0.7), grad(validation)(0.7))
    close(grad(jit(validation))(0.7), grad(validation)(0.7))
    close(jit(ridge)(0.7), ridge(0.7))
    jax = crosscheck.jax()
    jnp = jax.numpy

    def jax_validation(lam):  # the closed form, in JAX
        k = X_TRAIN.T @ X_TRAIN + lam * jnp.eye(4)
        return jnp.mean((X_VAL @ jnp.linalg.solve(k, X_TRAIN.T @ Y_TRAIN) - Y_VAL) ** 2)

    close(grad(validation)(0.7), jax.grad(jax_validation)(0.7))
    close(hessian(validation)(0.7), jax.hessian(jax_validation)(0.7), rtol=1e-6)


# --- minimize: bounds and constraints -------------------------------------------------------------

BOX_METHODS = ["L-BFGS-B", "TNC", "SLSQP", "trust-constr", "Powell", "Nelder-Mead", "COBYLA",
               "COBYQA"]  # fmt: skip


@pytest.mark.parametrize("method", BOX_METHODS)
def test_an_active_bound_moves_the_solution(method):
    """argmin ½xᵀAx - θx on [0, u]³ at θ = (0.3, -0.2, 0.5), u = 0.2: x = (0.14, 0, u);
    x₁ is free (2x₁ + 0.1u = θ₁), x₂ at its lower bound, x₃ at its upper one."""

    def solve(th, u):
        quad = lambda x, th: 0.5 * x @ A3 @ x - th @ x
        bounds = [(0.0, u)] * 3
        return ao.minimize(quad, np.full(3, 0.1), args=(th,), method=method, bounds=bounds,
                           tol=1e-12).x  # fmt: skip

    close(solve(TH, 0.2), [0.14, 0.0, 0.2], atol=1e-6)
    d_theta = np.zeros((3, 3))
    d_theta[0, 0] = 0.5
    close(jacrev(solve)(TH, 0.2), d_theta, atol=1e-6)
    close(jacfwd(solve, 1)(TH, 0.2), [-0.05, 0.0, 1.0], atol=1e-6)


def constrained(p, method, objects=False):
    """min quartic s.t. sum(x) = s, x₁ ≥ c (active), x₀ ≥ -5 (inactive)."""
    th, s, c = p[:3], p[3], p[4]
    if objects:
        cons = [so.LinearConstraint(np.ones((1, 3)), 1.0, 1.0),
                so.NonlinearConstraint(lambda x: anp.stack([x[1] - c, x[0]]), [0.0, -5.0],
                                       np.inf)]  # fmt: skip
        th = th * s  # (the equality's level is fixed: move θ instead)
    else:
        cons = [{"type": "eq", "fun": lambda x: anp.sum(x) - s},
                {"type": "ineq", "fun": lambda x: anp.stack([x[1] - c, x[0] + 5.0])}]  # fmt: skip
    return ao.minimize(quartic, np.full(3, 0.3), args=(th,), method=method, constraints=cons,
                       tol=1e-12).x  # fmt: skip


P_CONSTRAINED = np.array([0.3, -0.2, 0.5, 1.0, 0.25])


@pytest.mark.parametrize("method", ["SLSQP", "trust-constr", "COBYLA", "COBYQA"])
@pytest.mark.parametrize("objects", [False, True])
def test_constrained_solutions_differentiate_through_the_kkt_conditions(method, objects):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "delta_grad == 0.0", UserWarning)  # trust-constr's
        x = constrained(P_CONSTRAINED, method, objects)
        assert abs(x[1] - 0.25) < 1e-6  # the inequality is active
        want = fd(lambda p: constrained(p, "SLSQP", objects), P_CONSTRAINED)
        close(jacrev(lambda p: constrained(p, method, objects))(P_CONSTRAINED), want,
              rtol=1e-5, atol=1e-6)  # fmt: skip
        close(jacfwd(lambda p: constrained(p, method, objects))(P_CONSTRAINED), want,
              rtol=1e-5, atol=1e-6)  # fmt: skip


def on_ball(p, method, objects=False):
    """argmax θ·x on the ball |x| ≤ r: x = r θ/|θ|, where only the constraint curves (the
    Lagrangian's Hessian is the multiplier |θ|/2r times 2I)."""
    th, r = p[:3], p[3]
    cons = ([so.NonlinearConstraint(lambda x: r**2 - x @ x, 0.0, np.inf)] if objects else
            [{"type": "ineq", "fun": lambda x: r**2 - x @ x}])  # fmt: skip
    return ao.minimize(lambda x: -th @ x, np.full(3, 0.1), method=method, constraints=cons,
                       tol=1e-12).x  # fmt: skip


def on_ball_exact(p):
    th, r = p[:3], p[3]
    norm = np.linalg.norm(th)
    return np.concatenate([r * (np.eye(3) - np.outer(th, th) / norm**2) / norm,
                           (th / norm)[:, None]], 1)  # fmt: skip


@pytest.mark.parametrize(("method", "objects", "tol"), [
    ("SLSQP", False, 1e-8), ("SLSQP", True, 1e-7), ("trust-constr", False, 1e-8),
    ("COBYQA", True, 1e-6), ("COBYLA", False, 3e-4),  # (COBYLA's solution: to 4e-5;
    # COBYQA's to 1e-9 on an AMD EPYC, 4e-7 on an Intel Xeon: its steps follow roundoff)
])  # fmt: skip
def test_a_curved_active_constraint_against_the_closed_form(method, objects, tol):
    p = np.array([0.3, -0.2, 0.5, 1.5])
    solve = lambda p: on_ball(p, method, objects)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "delta_grad == 0.0", UserWarning)  # trust-constr's
        close(solve(p), p[3] * p[:3] / np.linalg.norm(p[:3]), atol=tol)
        close(jacrev(solve)(p), on_ball_exact(p), atol=tol)
        close(jacfwd(solve)(p), on_ball_exact(p), atol=tol)
        second = fd(lambda p: on_ball_exact(p)[0], p, 1e-5)  # (the closed form's differences)
        close(hessian(lambda p: solve(p)[0])(p), second, atol=10 * tol)


def test_a_constraint_closing_over_a_traced_budget():
    def allocation(budget, prices):  # max Σ log x_i s.t. prices · x ≤ budget: x_i = b/(n p_i)
        cons = [{"type": "ineq", "fun": lambda x: budget - prices @ x}]
        return ao.minimize(lambda x: -anp.sum(anp.log(x)), np.full(3, 0.1), method="SLSQP",
                           bounds=[(1e-6, None)] * 3, constraints=cons, tol=1e-14).x  # fmt: skip

    prices = np.array([1.0, 2.0, 4.0])
    close(allocation(3.0, prices), 3.0 / (3 * prices), rtol=1e-6)
    close(jacfwd(allocation)(3.0, prices), 1 / (3 * prices), rtol=1e-5)
    # (off the diagonal: zeros, to SLSQP's solution: 8e-9 on an Intel Xeon)
    close(jacrev(allocation, 1)(3.0, prices), -np.diag(3.0 / (3 * prices**2)), rtol=1e-5,
          atol=1e-7)  # fmt: skip


def box(th, u, method="L-BFGS-B"):
    """argmin quartic on [0, u]³: one coordinate free, one at each bound (as above)."""
    return ao.minimize(quartic, np.full(3, 0.1), args=(th,), method=method,
                       bounds=[(0.0, u)] * 3, tol=1e-12).x  # fmt: skip


@pytest.mark.parametrize(("solve", "p"), [
    (lambda p: box(p[:3], p[3]), np.array([*TH, 0.2])),
    (lambda p: constrained(p, "SLSQP"), P_CONSTRAINED),
    (lambda p: constrained(p, "SLSQP", objects=True), P_CONSTRAINED),
], ids=["bounds", "kkt", "kkt-objects"])  # fmt: skip
def test_bounded_and_constrained_solutions_to_second_order_under_vmap_and_jit(solve, p):
    """The projected gradient's and the KKT system's implicit derivatives differentiated
    again (against differences of the gradient), batched (against a loop over
    independently drawn parameters) and staged (against the eager values)."""
    loss = lambda p: anp.sum(solve(p) ** 3)
    first = lambda p: np.asarray(grad(loss)(p))
    close(hessian(loss)(p), fd(first, p, 1e-5), rtol=1e-4, atol=1e-6)
    ps = p + 0.02 * np.random.default_rng(7).normal(size=(3, p.size))
    close(vmap(solve)(ps), [solve(q) for q in ps], rtol=1e-10, atol=1e-12)
    close(vmap(grad(loss))(ps), [grad(loss)(q) for q in ps], rtol=1e-9, atol=1e-12)
    close(jit(grad(loss))(p), grad(loss)(p), rtol=1e-10)


# --- minimize: the implicit system's solvers, failures -----------------------------------------


def chain(x, th):  # a sparse (tridiagonal) Hessian
    return anp.sum((x[1:] - x[:-1]) ** 2) + anp.sum((x - th) ** 2) + 0.1 * anp.sum(x**4)


@pytest.mark.parametrize("kind", ["sparse", "cg", "minres", "gmres", "bicgstab", "cg-matfree",
                                  "gmres-matfree", "callable"])  # fmt: skip
def test_the_implicit_solvers_agree(kind):
    th = np.sin(np.arange(30.0))
    if kind == "callable":
        kind = lambda matvec, b: np.linalg.solve(np.asarray(jacfwd(matvec)(b)), b)

    def loss(t, kind):
        return anp.sum(ao.minimize(chain, np.zeros(30), args=(t,), method="L-BFGS-B",
                                   implicit_solve=kind).x ** 2)  # fmt: skip

    close(grad(loss)(th, kind), grad(loss)(th, "dense"), rtol=1e-8)


@pytest.mark.parametrize("kind", ["dense", "sparse", "cg", "gmres-matfree"])
def test_second_order_through_the_implicit_solvers(kind):
    """hessian through minimize, the tangent's linear solve by each kind of solver,
    against the implicit function theorem's second order by hand: with c = 3x² and
    H = ∇²f = 2L + 2I + 1.2 diag(x²) (L the chain's Laplacian), dx/dθ = 2H⁻¹ and
    ∇²_θ Σx³ = 2H⁻¹ diag(6x - 2.4 x (H⁻¹c)) 2H⁻¹."""
    th = np.sin(np.arange(8.0))

    def solve(t):
        return ao.minimize(chain, np.zeros(8), args=(t,), method="L-BFGS-B",
                           options=dict(gtol=1e-12), implicit_solve=kind).x  # fmt: skip

    x = solve(th)
    lap = 2 * np.eye(8) - np.eye(8, k=1) - np.eye(8, k=-1)
    lap[0, 0] = lap[-1, -1] = 1.0
    h_inv = np.linalg.inv(2 * lap + 2 * np.eye(8) + 1.2 * np.diag(x**2))
    want = 4 * h_inv @ np.diag(6 * x - 2.4 * x * (h_inv @ (3 * x**2))) @ h_inv
    close(hessian(lambda t: anp.sum(solve(t) ** 3))(th), want, rtol=1e-7, atol=1e-10)


def test_a_solution_that_did_not_converge_is_not_differentiated():
    def solve(th, on_failure="raise"):
        return ao.minimize(quartic, np.zeros(3), args=(th,), method="BFGS",
                           options=dict(maxiter=1), on_failure=on_failure).x  # fmt: skip

    assert not ao.minimize(quartic, np.zeros(3), args=(TH,), options=dict(maxiter=1)).success
    with pytest.raises(ConvergenceError, match=r"did not converge.*on_failure"):
        grad(lambda t: anp.sum(solve(t)))(TH)
    with pytest.warns(AutodiffWarning, match="differentiating it anyway"):
        jacfwd(solve)(TH, "warn")
    jacfwd(solve)(TH, "ignore")
    stopped = lambda t: ao.minimize(quartic, np.zeros(3), args=(t,), options=dict(maxiter=1))
    flags = vmap(lambda t: stopped(t).success)(np.stack([TH, TH]))
    close(flags, [False, False])  # vmap alone differentiates nothing: no error


def test_transformed_functions_return_arrays_not_results():
    with pytest.raises(TransformTypeError, match="return its arrays"):
        jit(lambda t: ao.minimize(quartic, np.zeros(3), args=(t,)))(TH)
    x, ok, nit = jit(lambda t: (lambda r: (r.x, r.success, r.nit))(
        ao.minimize(quartic, np.zeros(3), args=(t,))))(TH)  # fmt: skip
    eager = ao.minimize(quartic, np.zeros(3), args=(TH,))
    close(x, eager.x)
    assert bool(ok) and int(nit) == eager.nit


# --- least_squares, root --------------------------------------------------------------------------

T = np.linspace(0, 2, 8)
Y_DECAY = 2.0 * np.exp(-1.3 * T) + 0.05 * np.sin(7 * T)


LS_CASES = [("trf", loss) for loss in ["linear", "soft_l1", "huber", "cauchy", "arctan"]] + [
    ("dogbox", "linear"),
    ("dogbox", "cauchy"),
    ("lm", "linear"),
]  # (lm takes the linear loss only)


@pytest.mark.parametrize(("method", "loss"), LS_CASES)
def test_least_squares_against_the_implicit_function_theorem_in_jax(method, loss):
    def fit(p):
        model = lambda q: q[0] * anp.exp(-q[1] * T) - p[0] * Y_DECAY - p[1]
        return ao.least_squares(model, np.array([1.0, 1.0]), method=method, loss=loss,
                                f_scale=0.1, xtol=1e-15, ftol=1e-15, gtol=1e-15).x  # fmt: skip

    p = np.array([1.0, 0.02])
    q = fit(p)
    jax = crosscheck.jax()
    jnp = jax.numpy
    rho = {"linear": lambda z: z, "soft_l1": lambda z: 2 * (jnp.sqrt(1 + z) - 1),
           "huber": lambda z: jnp.where(z <= 1, z, 2 * jnp.sqrt(z) - 1),
           "cauchy": jnp.log1p, "arctan": jnp.arctan}[loss]  # fmt: skip

    def cost(q, p):
        r = q[0] * jnp.exp(-q[1] * T) - p[0] * Y_DECAY - p[1]
        return 0.5 * 0.01 * jnp.sum(rho((r / 0.1) ** 2))

    hess = jax.hessian(cost)(q, p)
    mixed = jax.jacfwd(jax.grad(cost), argnums=1)(q, p)
    want = -np.linalg.solve(np.asarray(hess), np.asarray(mixed))
    close(jacrev(fit)(p), want, rtol=1e-6)
    close(jacfwd(fit)(p), want, rtol=1e-6)


def test_least_squares_scaling_symmetry_bounds_and_results():
    fit = lambda s: ao.least_squares(lambda q: q[0] * anp.exp(-q[1] * T) - s * Y_DECAY,
                                     np.array([1.0, 1.0]), xtol=1e-15, ftol=1e-15).x  # fmt: skip
    q = fit(1.0)
    close(jacfwd(fit)(1.0), [q[0], 0.0], atol=1e-8)  # q₀ scales with the data, q₁ does not
    bounds = ([0, 1.5], [np.inf] * 2)
    bounded = lambda s: ao.least_squares(lambda q: q[0] * anp.exp(-q[1] * T) - s * Y_DECAY,
                                         np.array([1.0, 1.6]), bounds=bounds).x  # fmt: skip
    qb = bounded(1.0)
    assert abs(qb[1] - 1.5) < 1e-12  # at its bound
    close(jacrev(bounded)(1.0), [qb[0], 0.0], atol=1e-8)
    res = ao.least_squares(lambda q: q - 1.0, np.zeros(2))
    assert type(res) is so.OptimizeResult and res.success


ROOT_METHODS = ["hybr", "lm", "broyden1", "broyden2", "krylov", "df-sane", "diagbroyden"]


@pytest.mark.parametrize("method", ROOT_METHODS)
def test_root_every_method(method):
    def solve(a):
        system = lambda x, a: anp.stack([x[0] ** 3 + x[1] - a[0], x[0] - x[1] ** 3 - a[1]])
        return ao.root(system, np.array([1.0, 0.5]), args=(a,), method=method, tol=1e-13).x

    a = np.array([2.0, 0.3])
    x = solve(a)
    jx = np.array([[3 * x[0] ** 2, 1.0], [1.0, -3 * x[1] ** 2]])  # ∂F/∂x; ∂F/∂a = -I
    close(jacrev(solve)(a), np.linalg.inv(jx), rtol=1e-6)
    close(jacfwd(solve)(a), np.linalg.inv(jx), rtol=1e-6)


@pytest.mark.parametrize("method", ["anderson", "linearmixing", "excitingmixing"])
@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")  # anderson's own, near the root
def test_root_mixing_methods_on_a_contraction(method):
    """SciPy's remaining methods, which converge on a contraction: x = a - 0.2 sin(x reversed),
    dx/da = J⁻¹, J = [[1, 0.2 cos x₁], [0.2 cos x₀, 1]]; to second order against differences."""

    def solve(a):
        system = lambda x, a: a - x - 0.2 * anp.sin(x[::-1])
        return ao.root(system, np.zeros(2), args=(a,), method=method, tol=1e-13,
                       options=dict(maxiter=2000)).x  # fmt: skip

    a = np.array([0.4, -0.3])
    x = solve(a)
    close(x, a - 0.2 * np.sin(x[::-1]), atol=1e-12)
    want = np.linalg.inv(np.array([[1.0, 0.2 * np.cos(x[1])], [0.2 * np.cos(x[0]), 1.0]]))
    close(jacrev(solve)(a), want, rtol=1e-8)
    close(jacfwd(solve)(a), want, rtol=1e-8)
    first = lambda a: np.asarray(grad(lambda a: solve(a)[0])(a))
    close(hessian(lambda a: solve(a)[0])(a), fd(first, a, 1e-5), rtol=1e-5, atol=1e-8)


# --- scalar roots, fixed points -------------------------------------------------------------------


def cubic(x, c):
    return x**3 + x - c  # root 1 at c = 2: dx/dc = 1/(3x² + 1), d²x/dc² = -6x (dx/dc)³


@pytest.mark.parametrize("name", ["brentq", "brenth", "ridder", "bisect", "toms748"])
def test_bracketing_roots_to_second_order(name):
    root_of = lambda c: getattr(ao, name)(cubic, -3.0, 3.0, args=(c,))
    close(root_of(2.0), 1.0, atol=1e-10)
    close(grad(root_of)(2.0), 0.25, rtol=1e-9)
    close(grad(grad(root_of))(2.0), -6 * 0.25**3, rtol=1e-8)
    close(vmap(grad(root_of))(np.array([2.0, 10.0])), [0.25, 1 / 13], rtol=1e-9)
    close(jit(grad(root_of))(2.0), 0.25, rtol=1e-9)
    _, r = getattr(ao, name)(cubic, -3.0, 3.0, args=(2.0,), full_output=True)
    assert r.converged and isinstance(r, so.RootResults)


@pytest.mark.parametrize("method", ["brentq", "bisect", "newton", "halley", "secant"])
def test_root_scalar_methods(method):
    kw = dict(bracket=(-3.0, 3.0)) if method in ("brentq", "bisect") else dict(x0=1.5)
    if method == "secant":
        kw["x1"] = 1.7
    root_of = lambda c: ao.root_scalar(cubic, args=(c,), method=method, **kw).root
    close(root_of(2.0), 1.0, atol=1e-9)
    close(grad(root_of)(2.0), 0.25, rtol=1e-8)
    close(jvp(root_of, (2.0,), (1.0,))[1], 0.25, rtol=1e-8)


def test_newton_on_scalars_and_arrays():
    close(grad(lambda c: ao.newton(cubic, 1.5, args=(c,)))(2.0), 0.25, rtol=1e-8)
    cs = np.array([2.0, 10.0])  # roots 1 and 2
    close(jacfwd(lambda c: ao.newton(cubic, np.ones(2), args=(c,)))(cs),
          np.diag([0.25, 1 / 13]), rtol=1e-8)  # fmt: skip
    fprime = lambda x, c: 3 * x**2 + 1
    close(jacrev(lambda c: ao.newton(cubic, np.ones(2), fprime=fprime, args=(c,)))(cs),
          np.diag([0.25, 1 / 13]), rtol=1e-8)  # fmt: skip


def test_fixed_point():
    solve = lambda a: ao.fixed_point(lambda x, a: anp.cos(a * x), np.array([0.5, 0.6]), args=(a,))
    x = solve(1.0)
    close(x, np.cos(x), atol=1e-8)
    want = -x * np.sin(x) / (1 + np.sin(x))  # x = cos(a x): dx/da = -x sin / (1 + a sin)
    close(jacfwd(solve)(1.0), want, rtol=1e-7)
    close(jacrev(solve)(1.0), want, rtol=1e-7)


def decay_rate_derivatives(c, q):
    """dq/dc and d²q/dc² of q(c) = argmin ½‖exp(-q T) - c Y‖², by the implicit function
    theorem on its stationarity g(q, c) = Σ rᵢ eᵢ' = 0 (eᵢ = exp(-q tᵢ), rᵢ = eᵢ - c yᵢ),
    at q refined from the solver's by Newton's method.  Not differences: least_squares stops
    on the cost, which pins q to ~1e-8 only (the cost is flat at its minimum), so a
    difference of its gradient over a step of 1e-5 is off by ~1e-3, by the processor."""
    for _ in range(4):
        e = np.exp(-q * T)
        q -= ((e - c * Y_DECAY) @ (-T * e)) / (T**2 * e @ e + (e - c * Y_DECAY) @ (T**2 * e))
    e = np.exp(-q * T)
    r, e1, e2, e3 = e - c * Y_DECAY, -T * e, T**2 * e, -(T**3) * e
    g_q, g_c = e1 @ e1 + r @ e2, -(Y_DECAY @ e1)
    g_qq, g_qc = 3 * e1 @ e2 + r @ e3, -(Y_DECAY @ e2)
    q1 = -g_c / g_q
    return q1, -(g_qq * q1**2 + 2 * g_qc * q1) / g_q


def test_every_solver_under_vmap_jit_and_second_order():
    """least_squares, root, root_scalar, newton and fixed_point under vmap (against a
    loop), jit (against the eager value) and to second order (against differences;
    least_squares against the implicit function theorem by hand)."""
    solvers = {
        "least_squares": lambda c: ao.least_squares(lambda q: anp.exp(-q[0] * T) - c * Y_DECAY,
                                                    np.array([1.0]), xtol=1e-15, ftol=1e-15,
                                                    gtol=1e-15).x[0],
        "root": lambda c: ao.root(lambda x: x**3 + x - c, np.array([1.0]), tol=1e-14).x[0],
        "root_scalar": lambda c: ao.root_scalar(cubic, args=(c,), bracket=(-3.0, 3.0)).root,
        "newton": lambda c: ao.newton(cubic, 1.5, args=(c,), tol=1e-14),
        "fixed_point": lambda c: ao.fixed_point(lambda x: anp.cos(c * x), 0.5, xtol=1e-14),
    }  # fmt: skip
    cs = np.array([1.1, 2.0, 0.9])
    for solve in solvers.values():
        close(vmap(solve)(cs), [solve(c) for c in cs], rtol=1e-10, atol=1e-12)
        close(vmap(grad(solve))(cs), [grad(solve)(c) for c in cs], rtol=1e-9, atol=1e-12)
        close(jit(solve)(2.0), solve(2.0), rtol=1e-12)
        close(jit(grad(solve))(2.0), grad(solve)(2.0), rtol=1e-10)
        if solve is solvers["least_squares"]:
            first, second = decay_rate_derivatives(2.0, solve(2.0))
            close(grad(solve)(2.0), first, rtol=1e-6)
            close(grad(grad(solve))(2.0), second, rtol=1e-6)
            continue
        first = lambda c, solve=solve: np.array([grad(solve)(float(c[0]))])
        second = fd(first, np.array([2.0]), 1e-5)
        close(grad(grad(solve))(2.0), second[0, 0], rtol=1e-5, atol=1e-8)
