"""``odeint`` with pytree ``args``, its errors, and its derivatives' two methods.

Derivatives are compared with JAX's ``odeint`` (``jax.experimental.ode``: its own
Dormand-Prince solver, so agreement is to the tolerances) and with closed forms; the
VJP's two methods (forward sensitivities for few inputs, the adjoint otherwise) are
each forced and compared.  The augmented dynamics are staged once per rule call (and
once for good under ``jit``): counted, not timed (``benchmarks/ode.py`` times them).
"""

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import grad, jit, jvp, vmap
from tests.crosscheck import jax

pytest.importorskip("scipy")
import autodiff.scipy.integrate as integrate
from autodiff.scipy.integrate import odeint

TIGHT = {"rtol": 1e-10, "atol": 1e-10}
T = np.linspace(0.0, 1.5, 7)
Y0 = np.array([0.8, -0.4])


def _params(rng):
    """A two-layer network as a list of (W, b) pairs: the canonical neural ODE's args."""
    return [
        (rng.standard_normal((3, 2)) * 0.5, rng.standard_normal(3) * 0.1),
        (rng.standard_normal((2, 3)) * 0.5, rng.standard_normal(2) * 0.1),
    ]


def mlp(lib):
    def dynamics(y, t, params):
        h = y
        for w, b in params[:-1]:
            h = lib.tanh(w @ h + b)
        w, b = params[-1]
        return w @ h + b - 0.1 * y

    return dynamics


def _loss(params, y0=Y0):
    return anp.sum(odeint(mlp(anp), y0, T, args=(params,), **TIGHT) ** 2)


@pytest.fixture(params=["sensitivities", "adjoint"])
def method(request, monkeypatch):
    """Each of the VJP's methods, forced."""
    if request.param == "adjoint":
        monkeypatch.setattr(integrate, "SENSITIVITIES_AT_MOST", 0)
    else:
        monkeypatch.setattr(integrate, "SENSITIVITIES_AT_MOST", 10**9)
    return request.param


def test_pytree_args_gradients_match_jax(method):
    jx = jax()
    from jax.experimental.ode import odeint as jax_odeint

    params = _params(np.random.default_rng(0))
    got_params, got_y0 = grad(lambda p, y0: _loss(p, y0), argnums=(0, 1))(params, Y0)

    def jax_loss(p, y0):
        ys = jax_odeint(mlp(jx.numpy), y0, jx.numpy.asarray(T), p, **TIGHT)
        return jx.numpy.sum(ys**2)

    want_params, want_y0 = jx.grad(jax_loss, argnums=(0, 1))(params, jx.numpy.asarray(Y0))
    np.testing.assert_allclose(got_y0, want_y0, rtol=1e-7, atol=1e-9)
    for (gw, gb), (ww, wb) in zip(got_params, want_params, strict=True):
        np.testing.assert_allclose(gw, ww, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(gb, wb, rtol=1e-7, atol=1e-9)


def test_the_two_vjp_methods_agree_with_the_closed_form(monkeypatch):
    """y' = -k y + c: y(t) = c/k + (y0 - c/k) exp(-k (t - t0)); args a dict of a float
    and an array, derivatives in y0, every time and both args."""
    t = np.array([0.2, 0.7, 1.1, 1.6])

    def ys(y0, t, k, c):
        return odeint(lambda y, s, p: -p["k"] * y + p["c"], y0, t, args=({"k": k, "c": c},),
                      **TIGHT)[:, 0]  # fmt: skip

    def exact(y0, t, k, c):
        return c / k + (y0 - c / k) * anp.exp(-k * (t - t[0]))

    primals = (1.3, t, 0.9, np.array([0.25]))
    want = [autodiff.jacrev(exact, argnums=i)(*primals) for i in range(4)]
    for limit in (0, 10**9):  # the adjoint, then the sensitivities
        monkeypatch.setattr(integrate, "SENSITIVITIES_AT_MOST", limit)
        for i in range(4):
            got = autodiff.jacrev(ys, argnums=i)(*primals)
            np.testing.assert_allclose(np.reshape(got, np.shape(want[i])), want[i],
                                       rtol=1e-7, atol=1e-9)  # fmt: skip


def test_pytree_args_under_vmap_and_jit(method):
    rng = np.random.default_rng(1)
    batch = [_params(rng) for _ in range(3)]
    stacked = [
        (np.stack([p[i][0] for p in batch]), np.stack([p[i][1] for p in batch])) for i in range(2)
    ]
    got = vmap(grad(_loss))(stacked)
    for j, params in enumerate(batch):
        want = grad(_loss)(params)
        for (gw, gb), (ww, wb) in zip(got, want, strict=True):
            np.testing.assert_allclose(gw[j], ww, rtol=1e-6, atol=1e-8)
            np.testing.assert_allclose(gb[j], wb, rtol=1e-6, atol=1e-8)
    jitted = jit(grad(_loss))
    for _ in range(2):  # staging, then the replay
        for (gw, gb), (ww, wb) in zip(jitted(batch[0]), grad(_loss)(batch[0]), strict=True):
            np.testing.assert_allclose(gw, ww, rtol=1e-12)
            np.testing.assert_allclose(gb, wb, rtol=1e-12)


def test_static_leaves_of_args_stay_python_values():
    def f(y, t, spec):
        assert isinstance(spec["power"], int) and spec["name"] == "decay"
        return -spec["rate"] * y ** spec["power"]

    def final(rate):
        spec = {"rate": rate, "power": 1, "name": "decay"}
        return odeint(f, 1.0, np.array([0.0, 1.0]), args=(spec,), **TIGHT)[-1, 0]

    assert np.isclose(grad(final)(0.5), -np.exp(-0.5), rtol=1e-7)


def test_y0_and_t_are_array_likes():
    def final(a):
        return odeint(lambda y, t: -y, [a, 2 * a], [0.0, 0.5, 1.0], **TIGHT)[-1].sum()

    assert np.isclose(grad(final)(1.0), 3 * np.exp(-1.0), rtol=1e-7)


# --- what an error says ------------------------------------------------------------------------


def test_a_closed_over_traced_value_is_differentiated_like_args():
    def closing_over(k):
        return odeint(lambda y, s: -k * y, 1.0, T, rtol=1e-10, atol=1e-12)[-1, 0]

    class Rates:  # not a pytree: optree sees one leaf, which holds the traced k
        def __init__(self, k):
            self.k = k

    def hidden(k):
        return odeint(lambda y, s, r: -r.k * y, 1.0, T, args=(Rates(k),), rtol=1e-10,
                      atol=1e-12)[-1, 0]  # fmt: skip

    want = -T[-1] * np.exp(-0.5 * T[-1])  # d/dk exp(-k t)
    for f in (closing_over, hidden):
        assert np.isclose(grad(f)(0.5), want, rtol=1e-6)
        assert np.isclose(jvp(f, (0.5,), (1.0,))[1], want, rtol=1e-6)
        np.testing.assert_allclose(
            vmap(grad(f))(np.array([0.5, 0.8])),
            -T[-1] * np.exp(-np.array([0.5, 0.8]) * T[-1]),
            rtol=1e-6,
        )


def test_a_wrong_shape_is_named():
    with pytest.raises(ValueError, match=r"func returned an array of shape \(3,\) for a state y "
                                         r"of shape \(2,\)"):  # fmt: skip
        odeint(lambda y, t: np.ones(3), Y0, T)
    with pytest.raises(ValueError, match="func returned a NoneType"):
        odeint(lambda y, t: None, Y0, T)
    with pytest.raises(TypeError, match="func must be callable"):
        odeint("f", Y0, T)


# --- the augmented dynamics are staged once ------------------------------------------------


def _counting_stages(monkeypatch):
    monkeypatch.setattr(integrate, "_kept_replays", integrate.LRUCache(64))  # none kept yet
    calls = []
    stage = integrate.stage

    def counted(*args, **kwargs):
        calls.append(kwargs.get("name"))
        return stage(*args, **kwargs)

    monkeypatch.setattr(integrate, "stage", counted)
    return calls


def test_the_augmented_dynamics_are_staged_once_per_gradient(method, monkeypatch):
    params = _params(np.random.default_rng(2))
    calls = _counting_stages(monkeypatch)
    grad(_loss)(params)
    assert len(calls) == 1  # one staging for all the solver's steps (and segments)
    grad(_loss)(params)
    assert len(calls) == 1  # the same dynamics, augmented alike: staged once across calls
    jitted = jit(grad(_loss))
    jitted(params)
    calls.clear()
    jitted(params)
    jitted(params)
    assert calls == []  # under jit, once for good


def test_dynamics_reading_a_changed_array_are_staged_again(monkeypatch):
    calls = _counting_stages(monkeypatch)
    rates = np.array([0.5, 1.0])
    decay = lambda y, t, k: -k * rates * y  # reads the array rates, which changes below
    final = lambda k: anp.sum(odeint(decay, Y0, T, args=(k,), **TIGHT)[-1])
    first = grad(final)(1.0)
    rates[0] = 2.0  # written in place: a staged copy would compute with the old values
    second = grad(final)(1.0)
    assert len(calls) == 2
    want = -T[-1] * np.array([0.5, 1.0]) * np.exp(-np.array([0.5, 1.0]) * T[-1]) @ Y0
    assert np.isclose(first, want, rtol=1e-6)
    want = -T[-1] * np.array([2.0, 1.0]) * np.exp(-np.array([2.0, 1.0]) * T[-1]) @ Y0
    assert np.isclose(second, want, rtol=1e-6)


def test_dynamics_with_python_control_flow_run_as_they_are(method):
    """Staging cannot see ``if`` on the state: those dynamics run step by step."""

    def piecewise(y, t, k):
        return -k * y if y[0] > 0.5 else -2 * k * y

    def final(k):
        return odeint(piecewise, 1.0, np.array([0.0, 0.2]), args=(k,), **TIGHT)[-1, 0]

    assert np.isclose(grad(final)(0.5), -0.2 * np.exp(-0.1), rtol=1e-6)
