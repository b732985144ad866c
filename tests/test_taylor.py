"""Taylor mode: ``jet`` against JAX's ``jax.experimental.jet``, nested ``jvp`` and closed
forms; its composition with ``grad``, ``vmap`` and ``jit``; control flow, ``custom_jvp``,
``odeint``; the fallback for a primitive without a Taylor rule; bad input.

Every primitive's rule is checked sample by sample in ``test_taylor_registry.py``."""

import math
import warnings

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import cond, fori_loop, grad, jet, jit, jvp, scan, switch, vmap, while_loop
from autodiff.core.primitive import Primitive
from autodiff.errors import AutodiffWarning, TransformTypeError, TransformValueError
from autodiff.interpreters.collapsed import push_collapsed
from autodiff.interpreters.taylor import push_series

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
jax_jet = pytest.importorskip("jax.experimental.jet")
jax.config.update("jax_enable_x64", True)

RNG = np.random.default_rng(0)
X = RNG.normal(size=3)
SERIES = [RNG.normal(size=3) for _ in range(4)]


def nested_jvp(f, x, series):
    """f(x(t)) and its first len(series) derivatives at t = 0 along
    x(t) = x + sum_k series[k] t^(k+1) / (k+1)!, by nested forward mode."""

    def g(t):
        return f(x + sum(c * (t ** (k + 1) / math.factorial(k + 1)) for k, c in enumerate(series)))

    def derivative(h):
        return lambda t: jvp(h, (t,), (np.ones(()),))[1]

    out, h = [], g
    for _ in series:
        h = derivative(h)
        out.append(h(np.zeros(())))
    return g(np.zeros(())), out


def allclose(a, b, rtol=1e-10):
    return all(np.allclose(u, v, rtol=rtol, atol=rtol) for u, v in zip(a, b, strict=True))


PROGRAMS = [
    (lambda x: anp.exp(anp.sin(x)) * x, lambda x: jnp.exp(jnp.sin(x)) * x),
    (lambda x: anp.tanh(x) / (2 + anp.cos(x)), lambda x: jnp.tanh(x) / (2 + jnp.cos(x))),
    (lambda x: anp.log1p(x * x) + anp.sqrt(1 + x * x),
     lambda x: jnp.log1p(x * x) + jnp.sqrt(1 + x * x)),
    (lambda x: anp.sum(anp.outer(x, x) @ anp.sinh(x)),
     lambda x: jnp.sum(jnp.outer(x, x) @ jnp.sinh(x))),
    # JAX's jet has no rule for tan or arctan: nested jvp only
    (lambda x: x**3 - anp.tan(x) + anp.cosh(x) ** 2, None),
    (lambda x: anp.arctan(x) * anp.expm1(x), None),
]  # fmt: skip


@pytest.mark.parametrize(("f", "jf"), PROGRAMS)
def test_jet_agrees_with_jax_and_nested_jvp(f, jf):
    y, ys = jet(f, (X,), (SERIES,))
    if jf is not None:
        jy, jys = jax_jet.jet(jf, (X,), (SERIES,))
        assert np.allclose(y, jy) and allclose(ys, jys)
    y2, ys2 = nested_jvp(f, X, SERIES)
    assert np.allclose(y, y2) and allclose(ys, ys2, 1e-9)
    # plain (normalised) coefficients, as JAX's jet2
    _, plain = jet(f, (X,), ([c / math.factorial(k + 1) for k, c in enumerate(SERIES)],),
                   factorial_scaled=False)  # fmt: skip
    assert allclose([c * math.factorial(k + 1) for k, c in enumerate(plain)], ys)


def test_closed_forms_to_order_eight():
    x = 0.4
    _, ys = jet(np.exp, (x,), ([1.0] + [0.0] * 7,))
    assert np.allclose(ys, [np.exp(x)] * 8)
    _, ys = jet(np.sin, (x,), ([1.0] + [0.0] * 7,))
    cycle = [np.cos(x), -np.sin(x), -np.cos(x), np.sin(x)]
    assert np.allclose(ys, cycle * 2)
    _, ys = jet(np.log, (x,), ([1.0] + [0.0] * 7,))  # d^k log = (-1)^(k-1) (k-1)! / x^k
    assert np.allclose(ys, [(-1) ** (k - 1) * math.factorial(k - 1) / x**k for k in range(1, 9)])
    _, ys = jet(lambda x: 1 / x, (x,), ([1.0] + [0.0] * 7,))
    assert np.allclose(ys, [(-1) ** k * math.factorial(k) / x ** (k + 1) for k in range(1, 9)])
    # tanh along t: tanh(x + t); derivatives from its Taylor series at 0
    _, ys = jet(np.tanh, (0.0,), ([1.0] + [0.0] * 6,))
    assert np.allclose(ys, [1, 0, -2, 0, 16, 0, -272])
    # a path with curvature: sin(t^2/2 * 2) = sin(t^2): second derivative 2, fourth 0
    _, ys = jet(np.sin, (0.0,), ([0.0, 2.0, 0.0, 0.0],))
    assert np.allclose(ys, [0, 2, 0, 0])


def test_pytrees_in_and_out_and_the_structure_of_the_series():
    def f(p, x):
        return {"a": p["w"] * x, "b": (anp.sin(x), anp.sum(p["w"] ** 2))}

    p = {"w": np.array([1.0, 2.0])}
    x = np.array([0.5, -0.5])
    y, ys = jet(f, (p, x), ([{"w": np.ones(2)}, {"w": np.zeros(2)}], [np.ones(2), np.ones(2)]))
    assert set(y) == {"a", "b"} and len(ys["a"]) == 2 and len(ys["b"][0]) == 2
    assert np.allclose(ys["a"][0], x + p["w"])  # d(w x) = x dw + w dx
    assert np.allclose(ys["a"][1], 2 * np.ones(2) + p["w"])  # 2 dw dx + w d2x
    assert np.allclose(ys["b"][1][0], 2 * np.sum(p["w"]))
    assert np.allclose(ys["b"][1][1], 2 * 2)  # sum(w^2)'' = 2 |dw|^2


def test_outputs_that_do_not_depend_on_the_input_get_zero_series():
    _, ys = jet(lambda x: (np.ones(2), x * 0 + 1.0), (1.0,), ([1.0, 1.0],))
    assert all(np.all(c == 0) for c in ys[0]) and all(np.all(c == 0) for c in ys[1])


def test_piecewise_linear_functions_such_as_relu():
    f = lambda x: anp.sum(anp.maximum(x, 0.0) * x + anp.abs(x))
    x = np.array([-1.0, 0.5, 2.0])
    _, ys = jet(f, (x,), ([np.ones(3), np.ones(3)],))
    _, want = nested_jvp(f, x, [np.ones(3), np.ones(3)])
    assert allclose(ys, want)


# --- composition --------------------------------------------------------------------------------


def _second(f):
    return lambda x, v: jet(f, (x,), ([v, np.zeros_like(v)],))[1][1]


def test_grad_of_a_taylor_coefficient():
    f = lambda x: anp.sum(anp.sin(x) * anp.exp(x))
    v = np.array([1.0, 0.0, 0.0])
    # d/dx of D^2 f[v] = third derivatives along v twice
    got = grad(_second(f))(X, v)
    want = jvp(lambda x: jvp(lambda x: grad(f)(x), (x,), (v,))[1], (X,), (v,))[1]
    assert np.allclose(got, want)


def test_vmap_of_jet_against_a_loop():
    f = lambda x: anp.tanh(x @ np.arange(9.0).reshape(3, 3) / 9) ** 2
    xs, vs = RNG.normal(size=(4, 3)), RNG.normal(size=(4, 3))
    got = vmap(_second(f))(xs, vs)
    assert np.allclose(got, np.stack([_second(f)(x, v) for x, v in zip(xs, vs)]))
    got = vmap(_second(f), in_dims=(None, 0))(X, vs)  # directions batched only
    assert np.allclose(got, np.stack([_second(f)(X, v) for v in vs]))


def test_jet_under_jit_and_of_a_jitted_function():
    f = lambda x: anp.sum(anp.cos(x) ** 3)
    g = _second(f)
    assert np.allclose(jit(g)(X, SERIES[0]), g(X, SERIES[0]))
    assert np.allclose(_second(jit(f))(X, SERIES[0]), g(X, SERIES[0]))


# --- control flow and custom rules --------------------------------------------------------------


CONTROL = {
    "cond": lambda x: cond(anp.sum(x) > 0, lambda x: anp.sin(x) * x, lambda x: anp.cos(x), x),
    "switch": lambda x: switch(1, [anp.sin, lambda x: anp.exp(x) * x, anp.cos], x),
    "while_loop": lambda x: while_loop(
        lambda c: anp.sum(anp.abs(c)) < 6.0, lambda c: anp.sin(c) + 1.5 * c, x
    ),
    "fori_loop": lambda x: fori_loop(0, 3, lambda i, c: anp.tanh(c) * (i + 1.5), x),
    "scan": lambda x: scan(lambda c, xi: (c * anp.sin(xi) + xi, c**2), 1.0, x)[1],
}


@pytest.mark.parametrize("name", list(CONTROL))
def test_control_flow_propagates_jets(name):
    f = CONTROL[name]
    y, ys = jet(f, (X,), (SERIES[:3],))
    y2, want = nested_jvp(f, X, SERIES[:3])
    assert np.allclose(y, y2) and allclose(ys, want, 1e-9)
    staged = jit(lambda x: jet(f, (x,), (SERIES[:3],)))(X)  # staged: one loop carrying series
    assert allclose(staged[1], ys, 1e-9)


def test_odeint_propagates_jets_through_its_sensitivities():
    integrate = pytest.importorskip("autodiff.scipy.integrate")

    def f(k):
        return integrate.odeint(lambda y, t, k: -k * y**2, np.array([1.0]), np.array([0.0, 1.0]),
                                args=(k,), rtol=1e-11, atol=1e-11)[-1, 0]  # fmt: skip

    # y(1) = 1 / (1 + k): derivatives 1/(1+k)^2 ... with signs
    k = 0.5
    _, ys = jet(f, (k,), ([1.0, 0.0, 0.0],))
    want = [-1 / (1 + k) ** 2, 2 / (1 + k) ** 3, -6 / (1 + k) ** 4]
    assert np.allclose(ys, want, rtol=1e-6)


def test_custom_jvp_rules_are_respected():
    @autodiff.custom_jvp
    def f(x):
        return anp.sin(x)

    @f.defjvp
    def _(primals, tangents):  # deliberately not sin's: 2 cos(x) t, so jet must follow it
        (x,), (t,) = primals, tangents
        return f(x), 2 * anp.cos(x) * t

    _, ys = jet(f, (0.3,), ([1.0, 0.0, 0.0],))
    # y' = 2 cos x, y'' = -2 sin x, y''' = -2 cos x along x(t) = 0.3 + t
    assert np.allclose(ys, [2 * np.cos(0.3), -2 * np.sin(0.3), -2 * np.cos(0.3)])


def test_custom_vjp_and_checkpoint_pass_jets():
    @autodiff.custom_vjp
    def f(x):
        return anp.exp(x)

    f.defvjp(lambda x: (anp.exp(x), anp.exp(x)), lambda r, ct: (ct * r,))
    g = autodiff.checkpoint(lambda x: anp.sin(x) * x)
    for fn, want in [(f, [np.exp(0.3)] * 3), (g, None)]:
        _, ys = jet(fn, (0.3,), ([1.0, 0.0, 0.0],))
        if want is None:
            want = nested_jvp(fn, 0.3, [1.0, 0.0, 0.0])[1]
        assert allclose(ys, want)


# --- a primitive without a Taylor rule -----------------------------------------------------------


@pytest.mark.parametrize("p", [2, 3, 1, 0.5, -1.5, 2.5])
def test_powers_with_a_python_exponent_by_binomial_coefficients(p):
    """``x ** p`` with a constant exponent composes ``binom(p, j) x0^(p-j)``: against nested
    jvp, also at ``x0 = 0`` for integer exponents (where a recurrence would divide by 0)."""
    x = np.abs(X) + 0.5 if p != int(p) or p < 0 else np.concatenate([X, [0.0]])
    series = [RNG.normal(size=x.shape) for _ in range(4)]
    for g in (lambda x: x**p, lambda x: anp.float_power(x, p), lambda x: anp.sin(x + 2) ** p):
        y, ys = jet(g, (x,), (series,))
        want_y, want = nested_jvp(g, x, series)
        assert np.allclose(y, want_y) and allclose(ys, want, 1e-9)


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
def test_logaddexp_by_its_recurrence(name):
    """Against nested jvp with either argument moving, both, and one broadcast."""
    fn = getattr(anp, name)
    C = RNG.normal(size=(2, 3))
    for g in (lambda x: fn(x, C), lambda x: fn(0.3, x), lambda x: fn(anp.sin(x), x[::-1] * 2)):
        y, ys = jet(g, (X,), (SERIES,))
        want_y, want = nested_jvp(g, X, SERIES)
        assert np.allclose(y, want_y) and allclose(ys, want, 1e-9)


def test_a_primitive_without_a_taylor_rule_falls_back_exactly_and_warns_once():
    cube_p = Primitive("my_cube", lambda x: x**3, jvp=[lambda t, ans, x: 3 * x**2 * t])
    f = lambda x: cube_p.bind(anp.sin(x))
    with pytest.warns(AutodiffWarning, match="primitive 'my_cube' has no Taylor rule"):
        _, ys = jet(f, (X,), (SERIES,))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once only
        _, again = jet(f, (X,), (SERIES,))
    _, want = nested_jvp(lambda x: anp.sin(x) ** 3, X, SERIES)
    assert allclose(ys, want, 1e-9) and allclose(again, want, 1e-9)


def test_a_user_primitive_declares_its_taylor_rule():
    def taylor(primals, series):  # x^2 by Leibniz
        (x,), (s,) = primals, series
        c = [x, *s]
        return x * x, [sum(c[j] * c[k - j] for j in range(k + 1)) for k in range(1, len(c))]

    sq_p = Primitive("my_square", lambda x: x * x, jvp=[lambda t, ans, x: 2 * x * t], taylor=taylor)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _, ys = jet(lambda x: sq_p.bind(x), (X,), (SERIES[:2],))
    assert allclose(ys, nested_jvp(lambda x: x * x, X, SERIES[:2])[1])


# --- the interpreter's two lower-level entries ---------------------------------------------------


def test_push_series_and_collapsed_mode_agree_with_per_direction_jets():
    f = lambda x: (anp.sum(anp.tanh(x) ** 2 * anp.sin(x[::-1])),)
    V, w = RNG.normal(size=(5, 3)), RNG.normal(size=5)
    per = [push_series(f, [X], [(v, None)], 2)[1][0][1] for v in V]
    (y,), (top,) = push_collapsed(f, [X], [V], 2, w)
    assert np.isclose(top, np.dot(w, per)) and np.isclose(y, f(X)[0])
    (y,), (top,) = push_collapsed(f, [X], [V], 3)
    assert np.isclose(top, sum(push_series(f, [X], [(v, None, None)], 3)[1][0][2] for v in V))


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("primals", "series", "error", "match"),
    [
        ((1.0,), ([],), TransformValueError, "order 0"),
        ((1.0, 2.0), ([1.0], [1.0, 2.0]), TransformValueError, "different orders"),
        ((1.0,), ([1.0], [1.0]), TransformValueError, "series has 2 entries"),
        (1.0, ([1.0],), TransformTypeError, "primals must be a tuple"),
        ((1.0,), [1.0], TransformTypeError, r"series\[0\] is a float"),
        ((np.ones(2),), ([np.ones(3)],), TransformValueError, "coefficient 1 .* shape"),
        (({"a": 1.0},), ([{"b": 1.0}],), TransformValueError, "structured"),
        ((1,), ([1.0],), TransformTypeError, "floating-point"),
        ((1.0,), ([1j],), TransformTypeError, "complex but its primal is real"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(primals, series, error, match):
    with pytest.raises(error, match=match):
        jet(lambda *a: a[0], primals, series)


def test_a_non_array_output_is_refused():
    with pytest.raises(TransformTypeError, match="output 0 of fun is a str"):
        jet(lambda x: "no", (1.0,), ([1.0],))
    with pytest.raises(TransformTypeError, match="factorial_scaled"):
        jet(np.sin, (1.0,), ([1.0],), factorial_scaled="yes")
