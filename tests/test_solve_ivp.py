"""``autodiff.scipy.integrate.solve_ivp``: SciPy's solver, its results differentiable.

Every method against SciPy's own solve and finite differences; derivatives in ``y0``,
``args``, closed-over values, ``t_span`` and ``t_eval`` against closed forms; events
(terminal, with a direction) and their times by the implicit function theorem against
a ball's flight; dense output; ``vmap`` against a loop, ``jit``, second order; JAX's
``odeint`` on Lotka-Volterra; the stiff Robertson system; the two VJP methods agree.
"""

import numpy as np
import pytest
import scipy.integrate as si

import autodiff.numpy as anp
import autodiff.scipy.integrate as integrate
from autodiff import grad, hessian, jacfwd, jacrev, jit, jvp, vmap
from autodiff.errors import TransformValueError
from autodiff.scipy.integrate import solve_ivp
from tests import crosscheck

TIGHT = {"rtol": 1e-10, "atol": 1e-12}
G = 9.81


def close(got, want, rtol=1e-6, atol=1e-9):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


def fd(f, x, eps=1e-6):
    x = np.asarray(x, float)
    cols = [(np.asarray(f(x + eps * e)) - np.asarray(f(x - eps * e))) / (2 * eps)
            for e in np.eye(x.size).reshape(-1, *x.shape)]  # fmt: skip
    return np.stack(cols, -1)


def lotka_volterra(t, y, a, b, c, d):
    return anp.stack([a * y[0] - b * y[0] * y[1], c * y[0] * y[1] - d * y[1]])


RATES = np.array([1.5, 1.0, 3.0, 1.0])
Y0 = np.array([1.0, 1.0])
T_EVAL = np.linspace(0.0, 4.0, 9)
METHODS = {"RK45": TIGHT, "RK23": {"rtol": 1e-8, "atol": 1e-10}, "DOP853": TIGHT,
           "Radau": {"rtol": 1e-9, "atol": 1e-11}, "BDF": {"rtol": 1e-9, "atol": 1e-11},
           "LSODA": TIGHT}  # fmt: skip


def _final(method, p):
    return solve_ivp(lotka_volterra, (0.0, 2.0), Y0, method=method, t_eval=[1.0, 2.0],
                     args=tuple(p), **METHODS[method]).y[:, -1]  # fmt: skip


def test_the_reference_derivative_is_right():
    """DOP853's derivative, the reference of every method's below, against finite
    differences of its own solution."""
    close(jacfwd(lambda p: _final("DOP853", p))(RATES), fd(lambda p: _final("DOP853", p), RATES),
          rtol=1e-6, atol=1e-8)  # fmt: skip


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_solves_as_scipy_and_differentiates(method):
    plain = solve_ivp(lotka_volterra, (0.0, 4.0), Y0, method=method, t_eval=T_EVAL,
                      args=tuple(RATES), **METHODS[method])  # fmt: skip
    want = si.solve_ivp(lotka_volterra, (0.0, 4.0), Y0, method=method, t_eval=T_EVAL,
                        args=tuple(RATES), **METHODS[method])  # fmt: skip
    close(plain.y, want.y, rtol=1e-7)  # (implicit methods: autodiff's exact Jacobian)
    reference = jacfwd(lambda p: _final("DOP853", p))(RATES)
    rtol = 1e-5 if method in ("RK23", "BDF", "Radau") else 1e-6
    close(jacrev(lambda p: _final(method, p))(RATES), reference, rtol=rtol, atol=1e-7)
    close(jacfwd(lambda p: _final(method, p))(RATES), reference, rtol=rtol, atol=1e-7)


def decay(t, y, k):
    return -k * y


def test_derivatives_in_y0_args_t_span_and_t_eval_match_closed_forms():
    def y_at(y0, k, t0, t1, t_eval):  # y0 exp(-k (t - t0))
        return solve_ivp(decay, (t0, t1), y0, t_eval=t_eval, args=(k,), **TIGHT).y[0]

    y0, k, t0, t1, te = np.array([2.0]), 0.7, 0.2, 3.0, np.array([0.5, 1.5, 3.0])
    value = 2.0 * np.exp(-k * (te - t0))
    close(y_at(y0, k, t0, t1, te), value)
    grads = jacrev(y_at, argnums=(0, 1, 2, 4))(y0, k, t0, t1, te)
    close(grads[0][:, 0], value / 2.0)
    close(grads[1], -(te - t0) * value)
    close(grads[2], k * value)
    close(grads[3], np.diag(-k * value))
    close(jacfwd(y_at, argnums=3)(y0, k, t0, t1, te), 0.0)  # t1 only bounds the range
    close(hessian(lambda k: anp.sum(y_at(y0, k, t0, t1, te)))(k), np.sum((te - t0) ** 2 * value),
          rtol=1e-5)  # fmt: skip


def test_a_closed_over_rate_and_the_two_vjp_methods(monkeypatch):
    def final(k):
        return solve_ivp(lambda t, y: -k * y, (0.0, 2.0), np.array([1.0]), t_eval=[2.0],
                         **TIGHT).y[0, 0]  # fmt: skip

    close(grad(final)(0.4), -2.0 * np.exp(-0.8))
    close(jvp(final, (0.4,), (1.0,))[1], -2.0 * np.exp(-0.8))
    monkeypatch.setattr(integrate, "SENSITIVITIES_AT_MOST", 0)  # the adjoint instead
    close(grad(final)(0.4), -2.0 * np.exp(-0.8))
    trajectory = lambda p: solve_ivp(lotka_volterra, (0.0, 2.0), Y0, t_eval=[1.0, 2.0],
                                     args=tuple(p), **TIGHT).y  # fmt: skip
    close(jacrev(trajectory)(RATES), fd(trajectory, RATES), rtol=1e-5, atol=1e-7)


def flight(v, drag=0.0, **kwargs):
    """A ball thrown up at speed v: lands (terminal, falling) and passes its apex."""

    def ground(t, y, drag):
        return y[0]

    ground.terminal, ground.direction = True, -1

    def apex(t, y, drag):
        return y[1]

    return solve_ivp(lambda t, y, drag: anp.stack([y[1], -G - drag * y[1]]), (0.0, 10.0),
                     anp.stack([0.0, v]), events=[ground, apex], args=(drag,), **TIGHT,
                     **kwargs)  # fmt: skip


def test_event_times_and_values_by_the_implicit_function_theorem():
    v = 4.0
    res = flight(v)
    assert res.status == 1 and len(res.t_events[0]) == 1 and len(res.t_events[1]) == 1
    close(res.t_events[0][0], 2 * v / G)
    close(res.t[-1], 2 * v / G)  # the terminal event ends the trajectory
    land = lambda v: flight(v).t_events[0][0]
    top = lambda v: flight(v).y_events[1][0, 0]
    close(grad(land)(v), 2 / G)
    close(jvp(land, (v,), (1.0,))[1], 2 / G)
    close(grad(top)(v), v / G)  # the apex height v²/2g
    close(grad(lambda v: flight(v).t_events[1][0])(v), 1 / G)
    close(grad(grad(top))(v), 1 / G, rtol=1e-5)
    with_drag = lambda p: np.array([flight(p[0], p[1]).t_events[0][0]])
    close(jacrev(lambda p: flight(p[0], p[1]).t_events[0][0])(np.array([v, 0.3])),
          fd(with_drag, np.array([v, 0.3]))[0], rtol=1e-5)  # fmt: skip
    close(grad(lambda v: flight(v).y[1, -1])(v), -1.0)  # the speed at landing: -v


def test_an_event_closing_over_a_traced_level():
    """The ball falling through a height h the event closes over: v t - g t²/2 = h at
    t = (v + s)/g, s = sqrt(v² - 2gh), so dt/dh = -1/s and dt/dv = (1 + v/s)/g."""

    def crossing(v, h):
        def through(t, y):
            return y[0] - h

        through.terminal, through.direction = True, -1
        # (max_step: SciPy detects a sign change between steps, and on this exactly
        # quadratic flight its error control would step over both crossings at once)
        return solve_ivp(lambda t, y: anp.stack([y[1], -G + 0.0 * y[0]]), (0.0, 10.0),
                         anp.stack([0.0, v]), events=through, max_step=0.1,
                         **TIGHT).t_events[0][0]  # fmt: skip

    v, h = 4.0, 0.5
    s = np.sqrt(v**2 - 2 * G * h)
    close(crossing(v, h), (v + s) / G)
    close(grad(crossing, argnums=(0, 1))(v, h), ((1 + v / s) / G, -1 / s))
    close(jvp(lambda h: crossing(v, h), (h,), (1.0,))[1], -1 / s)


def test_dense_output_is_differentiable():
    def at(v, t):
        return flight(v, dense_output=True).sol(t)[0]  # the height at t: v t - g t²/2

    close(at(4.0, 0.3), 4.0 * 0.3 - G * 0.3**2 / 2)
    close(grad(at)(4.0, 0.3), 0.3)
    close(grad(at, 1)(4.0, 0.3), 4.0 - G * 0.3)
    assert isinstance(flight(4.0, dense_output=True).sol, si.OdeSolution)  # SciPy's, plainly


def test_vmap_against_a_loop_and_jit():
    ps = RATES * np.random.default_rng(5).uniform(0.9, 1.1, (3, 4))
    trajectory = lambda p: solve_ivp(lotka_volterra, (0.0, 2.0), Y0, t_eval=[0.5, 1.0, 2.0],
                                     args=tuple(p), **TIGHT).y  # fmt: skip
    loss = lambda p: anp.sum(trajectory(p) ** 2)
    close(vmap(trajectory)(ps), [trajectory(p) for p in ps], rtol=1e-12)
    close(vmap(grad(loss))(ps), [grad(loss)(p) for p in ps], rtol=1e-10)
    close(jit(trajectory)(RATES), trajectory(RATES), rtol=1e-12)
    close(jit(grad(loss))(RATES), grad(loss)(RATES), rtol=1e-10)
    with pytest.raises(TransformValueError, match="give t_eval and no events"):
        vmap(lambda v: flight(v).t_events[0][0])(np.array([3.0, 4.0]))
    with pytest.raises(TransformValueError, match="give t_eval and no events"):
        jit(lambda v: flight(v).t_events[0][0])(4.0)


def test_lotka_volterra_gradient_matches_jax():
    jax = crosscheck.jax()
    jnp = jax.numpy
    from jax.experimental.ode import odeint as jax_odeint

    def loss(y0, p):
        ys = solve_ivp(lotka_volterra, (0.0, 4.0), y0, t_eval=T_EVAL, args=tuple(p), **TIGHT).y
        return anp.mean(ys**2)

    def jax_loss(y0, p):
        f = lambda y, t, p: jnp.stack([p[0] * y[0] - p[1] * y[0] * y[1],
                                       p[2] * y[0] * y[1] - p[3] * y[1]])  # fmt: skip
        return jnp.mean(jax_odeint(f, y0, jnp.asarray(T_EVAL), p, rtol=1e-11, atol=1e-12) ** 2)

    got = grad(loss, argnums=(0, 1))(Y0, RATES)
    want = jax.grad(jax_loss, argnums=(0, 1))(jnp.asarray(Y0), jnp.asarray(RATES))
    for g, w in zip(got, want):
        close(g, w, rtol=1e-6)


def robertson(t, y, k1, k2, k3):
    return anp.stack([-k1 * y[0] + k3 * y[1] * y[2],
                      k1 * y[0] - k3 * y[1] * y[2] - k2 * y[1] ** 2,
                      k2 * y[1] ** 2])  # fmt: skip


@pytest.mark.parametrize("method", ["BDF", "Radau"])
def test_the_stiff_robertson_system(method):
    k = np.array([0.04, 3e7, 1e4])
    options = {"rtol": 1e-8, "atol": 1e-12}

    def final(logk):
        return solve_ivp(robertson, (0.0, 40.0), np.array([1.0, 0.0, 0.0]), method=method,
                         t_eval=[40.0], args=tuple(anp.exp(logk)), **options).y[:, -1]  # fmt: skip

    y = final(np.log(k))
    close(np.sum(y), 1.0, rtol=1e-7)  # mass is conserved
    close(jacrev(final)(np.log(k)), fd(final, np.log(k), 1e-5), rtol=2e-3, atol=1e-8)


def test_the_result_under_a_transform():
    seen = {}

    def f(p):
        res = solve_ivp(lotka_volterra, (0.0, 2.0), Y0, t_eval=[1.0, 2.0], args=tuple(p))
        seen.update(res)
        return anp.sum(res.y)

    grad(f)(RATES)
    assert seen["success"] and seen["status"] == 0 and seen["nfev"] > 0
    assert np.shape(seen["y"]) == (2, 2) and np.shape(seen["t"]) == (2,)


def test_vectorized_dynamics_and_the_solvers_own_steps():
    def vectorized(t, y, k):  # y of shape (n,) or (n, m), as SciPy's vectorized=True allows
        return -k * y

    def steps(k, t1):
        res = solve_ivp(vectorized, (0.0, t1), np.array([1.0, 2.0]), method="Radau",
                        vectorized=True, args=(k,), **TIGHT)  # fmt: skip
        return res.y[:, -1]  # at the last step: t1

    close(steps(0.5, 2.0), np.array([1.0, 2.0]) * np.exp(-1.0))
    close(jacrev(steps)(0.5, 2.0), -2.0 * np.array([1.0, 2.0]) * np.exp(-1.0))
    close(jacfwd(steps, 1)(0.5, 2.0), -0.5 * np.array([1.0, 2.0]) * np.exp(-1.0))
