"""Functions given to solvers and custom rules may close over traced values.

``custom_vjp``'s ``fun``/``fwd``/``bwd``, ``custom_jvp``'s function and rule,
``custom_root``'s ``f``/``solve``/``tangent_solve`` and ``custom_linear_solve``'s
``matvec``/``solve``/``transpose_solve``: each may compute with a traced value it closes
over, under ``grad``, ``jvp``, ``vmap``, ``jit`` and nestings, and the derivative reaches
that value.  Checked against finite differences (``check_grads``, to second order),
closed forms, JAX (where JAX differentiates the same program) and a loop over examples;
a closed-over value the search cannot find raises instead of mixing levels.
"""

import contextlib
import functools

import numpy as np
import pytest

import autodiff.numpy as anp
import autodiff.scipy.linalg as asl
from autodiff import (
    custom_jvp,
    custom_linear_solve,
    custom_root,
    custom_vjp,
    grad,
    hessian,
    jacfwd,
    jacrev,
    jit,
    jvp,
    vmap,
)
from autodiff.core.stack import current_interpreters
from autodiff.errors import LeakedTracerError, TransformTypeError, TransformValueError
from autodiff.testing import check_grads
from tests import crosscheck

rng = np.random.default_rng(33)
W = rng.normal(size=(3, 2)) * 0.7
X = rng.normal(size=2)
SPD = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])
B = np.array([1.0, -2.0, 0.5])


def assert_close(got, want, rtol=1e-10, atol=1e-12):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol)


# --- custom_vjp -----------------------------------------------------------------------------------


def layer_loss(w, x):
    """sum(tanh(w @ x)), through a custom_vjp layer whose fun, fwd and bwd close over w."""

    @custom_vjp
    def layer(h):
        return anp.tanh(w @ h)

    def fwd(h):
        out = layer(h)  # (calls the function itself, as JAX's examples do)
        return out, (h, out)

    def bwd(res, ct):
        _, out = res
        return (w.T @ (ct * (1 - out**2)),)

    layer.defvjp(fwd, bwd)
    return anp.sum(layer(x))


def test_custom_vjp_closing_over_traced_weights_matches_finite_differences_and_jax():
    check_grads(layer_loss, (W, X), order=2)
    jax = crosscheck.jax()
    jnp = jax.numpy
    plain = lambda w, x: jnp.sum(jnp.tanh(w @ x))
    for argnums in (0, 1):
        assert_close(grad(layer_loss, argnums)(W, X), jax.grad(plain, argnums)(W, X))
    assert_close(hessian(layer_loss)(W, X), jax.hessian(plain)(W, X))
    assert_close(jvp(layer_loss, (W, X), (np.ones_like(W), np.zeros(2)))[1],
                 jax.jvp(plain, (W, X), (np.ones_like(W), np.zeros(2)))[1])  # fmt: skip


def test_custom_vjp_closure_under_vmap_jit_and_nesting():
    ws = rng.normal(size=(4, 3, 2))
    loop = np.stack([grad(layer_loss)(w, X) for w in ws])
    assert_close(vmap(grad(layer_loss), in_dims=(0, None))(ws, X), loop)
    assert_close(grad(lambda w: anp.sum(vmap(lambda v: layer_loss(v, X))(w)))(ws), loop)
    assert_close(jit(grad(layer_loss))(W, X), grad(layer_loss)(W, X))
    assert_close(grad(jit(layer_loss))(W, X), grad(layer_loss)(W, X))
    assert_close(jit(vmap(layer_loss, in_dims=(0, None)))(ws, X),
                 [layer_loss(w, X) for w in ws])  # fmt: skip


def fake_rule_vjp(w):
    """g(w) where g(x) = sin(x) * w has bwd ``2 ct`` (on purpose not its derivative): the
    rule gives the explicit argument's part, the closed-over w's goes through the code."""

    @custom_vjp
    def g(x):
        return anp.sin(x) * w

    g.defvjp(lambda x: (anp.sin(x) * w, None), lambda res, ct: (2.0 * ct,))
    return g(w)


def fake_rule_jvp(w):
    @custom_jvp
    def g(x):
        return anp.sin(x) * w

    @g.defjvp
    def _(primals, tangents):
        return g(primals[0]), 2.0 * tangents[0]

    return g(w)


@pytest.mark.parametrize("f", [fake_rule_vjp, fake_rule_jvp])
def test_the_rule_gives_the_arguments_part_the_code_the_closures(f):
    w0, ws = 0.7, np.array([0.7, -0.3, 1.9])
    want = 2.0 + np.sin(w0)  # rule: d/dx = 2; code: d(sin(x) w)/dw = sin(x), at x = w
    assert_close(grad(f)(w0), want)
    assert_close(jvp(f, (w0,), (1.0,))[1], want)
    assert_close(vmap(grad(f))(ws), 2.0 + np.sin(ws))
    assert_close(jit(grad(f))(w0), want)
    assert_close(grad(jit(f))(w0), want)
    assert_close(grad(grad(f))(w0), np.cos(w0))  # the rule is constant, the closure's part not
    assert_close(jacfwd(jacrev(f))(w0), np.cos(w0))


def softplus_loss(w, x):
    """w * softplus(x), a custom_jvp whose function and rule close over w."""

    @custom_jvp
    def softplus(x):
        return w * anp.log1p(anp.exp(x))

    @softplus.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return softplus(x), w * t / (1 + anp.exp(-x))

    return anp.sum(softplus(x * w[0]))


def test_custom_jvp_closing_over_traced_values_matches_finite_differences_and_jax():
    w, x = np.array([0.8, -0.4]), np.array([0.3, -1.1])
    check_grads(softplus_loss, (w, x), order=2)
    jax = crosscheck.jax()
    jnp = jax.numpy
    plain = lambda w, x: jnp.sum(w * jnp.log1p(jnp.exp(x * w[0])))
    assert_close(grad(softplus_loss)(w, x), jax.grad(plain)(w, x))
    assert_close(hessian(softplus_loss)(w, x), jax.hessian(plain)(w, x))
    ws = rng.normal(size=(3, 2))
    assert_close(vmap(grad(softplus_loss), in_dims=(0, None))(ws, x),
                 [grad(softplus_loss)(v, x) for v in ws])  # fmt: skip
    assert_close(jit(grad(softplus_loss))(w, x), grad(softplus_loss)(w, x))


# --- custom_linear_solve --------------------------------------------------------------------------


def sym(p):
    """An SPD matrix depending on p (3,)."""
    return SPD + anp.diag(p**2) + 0.1 * anp.outer(p, p)


def direct(p, b):
    """A x = b with a direct solve that closes over the traced matrix (the natural
    spelling, which JAX accepts)."""
    a = sym(p)
    return custom_linear_solve(lambda v: a @ v, b, lambda mv, r: anp.linalg.solve(a, r),
                               symmetric=True)  # fmt: skip


def nonsymmetric(a, b):
    solve = lambda mv, r: anp.linalg.solve(a, r)
    transpose = lambda vm, r: anp.linalg.solve(a.T, r)
    return custom_linear_solve(lambda v: a @ v, b, solve, transpose_solve=transpose)


P = np.array([0.3, -0.5, 0.9])


def test_a_solve_closing_over_the_traced_matrix():
    reference = lambda p, b: np.linalg.solve(SPD + np.diag(p**2) + 0.1 * np.outer(p, p), b)
    assert_close(direct(P, B), reference(P, B))
    check_grads(direct, (P, B), order=2)
    a = SPD + rng.normal(size=(3, 3)) * 0.3
    check_grads(nonsymmetric, (a, B), order=2)
    jax = crosscheck.jax()
    jnp = jax.numpy

    def jax_nonsymmetric(a, b):
        return jax.lax.custom_linear_solve(lambda v: a @ v, b, lambda mv, r: jnp.linalg.solve(a, r),
                                           lambda vm, r: jnp.linalg.solve(a.T, r))  # fmt: skip

    for argnums in (0, 1):
        assert_close(
            jacrev(nonsymmetric, argnums)(a, B), jax.jacrev(jax_nonsymmetric, argnums)(a, B)
        )
        assert_close(
            jacfwd(nonsymmetric, argnums)(a, B), jax.jacfwd(jax_nonsymmetric, argnums)(a, B)
        )
    loss = lambda a: jnp.sum(jax_nonsymmetric(a, B) ** 2)
    assert_close(hessian(lambda a: anp.sum(nonsymmetric(a, B) ** 2))(a), jax.hessian(loss)(a))


def test_a_solve_closing_over_a_batched_matrix_under_vmap_and_jit():
    ps = rng.normal(size=(4, 3))
    assert_close(vmap(direct, in_dims=(0, None))(ps, B), [direct(p, B) for p in ps])
    loss = lambda p: anp.sum(direct(p, B) ** 2)
    assert_close(vmap(grad(loss))(ps), [grad(loss)(p) for p in ps])
    assert_close(jit(direct)(P, B), direct(P, B))
    assert_close(jit(grad(loss))(P), grad(loss)(P))
    assert_close(grad(jit(loss))(P), grad(loss)(P))
    assert_close(jit(jvp, static_argnums=0)(direct, (P, B), (np.ones(3), B))[1],
                 jvp(direct, (P, B), (np.ones(3), B))[1])  # fmt: skip
    assert_close(jit(vmap(grad(loss)))(ps), vmap(grad(loss))(ps))


def test_has_aux_under_jit_returns_the_aux():
    def solve_with_aux(mv, r):
        return r / 2.0, {"iterations": np.array(7), "residual": anp.sum(r) * 0.0}

    def f(b):
        return custom_linear_solve(lambda v: 2.0 * v, b, solve_with_aux, solve_with_aux,
                                   has_aux=True)  # fmt: skip

    x, _ = f(B)
    x_jit, aux_jit = jit(f)(B)
    assert_close(x_jit, x)
    assert int(aux_jit["iterations"]) == 7 and float(aux_jit["residual"]) == 0.0
    assert_close(grad(lambda b: anp.sum(f(b)[0]))(B), np.full(3, 0.5))
    _, aux_batched = vmap(f)(np.stack([B, 2 * B]))
    assert_close(aux_batched["iterations"], [7, 7])


# --- custom_root ---------------------------------------------------------------------------------


def cho_root(a, b):
    """JAX's test: the root of a x - b, its solve and its tangent solve a Cholesky solve
    with factors computed from the traced a, closed over by both."""
    f = lambda x: a @ x - b
    factors = asl.cho_factor(a)
    cho_solve = lambda f, rhs: asl.cho_solve(factors, rhs)

    def pos_def_solve(g, rhs):
        return custom_linear_solve(g, rhs, cho_solve, symmetric=True)

    return custom_root(f, b, cho_solve, pos_def_solve)


def test_root_whose_solves_close_over_traced_factors_matches_jax():
    m = rng.normal(size=(3, 3))
    spd = lambda x: cho_root(x @ x.T + 0.5 * np.eye(3), B)
    assert_close(spd(m), np.linalg.solve(m @ m.T + 0.5 * np.eye(3), B))
    check_grads(spd, (m,), order=2)
    assert_close(jit(spd)(m), spd(m))
    assert_close(jit(jacrev(spd))(m), jacrev(spd)(m))
    jax = crosscheck.jax()
    jnp, jsl = jax.numpy, jax.scipy.linalg

    def jax_cho_root(x):
        a = x @ x.T + 0.5 * jnp.eye(3)
        factors = jsl.cho_factor(a)
        cho_solve = lambda f, rhs: jsl.cho_solve(factors, rhs)
        pos_def = lambda g, rhs: jax.lax.custom_linear_solve(g, rhs, cho_solve, symmetric=True)
        return jax.lax.custom_root(lambda x: a @ x - B, B, cho_solve, pos_def)

    assert_close(jacrev(spd)(m), jax.jacrev(jax_cho_root)(m), rtol=1e-9)
    assert_close(jacfwd(spd)(m), jax.jacfwd(jax_cho_root)(m), rtol=1e-9)


def cube_root(a):
    f = lambda x: x**3 - a

    def newton(_, x):  # uses the closure f, not its argument; stops on the residual
        while abs(float(f(x))) > 1e-13:
            x = x - f(x) / (3 * x**2)
        return x

    return custom_root(f, 1.0, newton, lambda g, y: y / g(1.0))


def test_a_newton_loop_on_the_closed_over_residual():
    a, as_ = 8.0, np.array([8.0, 27.0, 0.5])
    assert_close(cube_root(a), 2.0)
    assert_close(grad(cube_root)(a), a ** (-2 / 3) / 3)
    assert_close(jvp(cube_root, (a,), (1.0,))[1], a ** (-2 / 3) / 3)
    assert_close(grad(grad(cube_root))(a), -2 / 9 * a ** (-5 / 3), rtol=1e-8)
    assert_close(vmap(grad(cube_root))(as_), as_ ** (-2 / 3) / 3)
    assert_close(jit(grad(cube_root))(a), a ** (-2 / 3) / 3)
    assert_close(jit(cube_root)(27.0), 3.0)


# --- refused: mismatched structures, closed-over values the search cannot find --------------------


def test_mismatched_structures_are_refused_as_in_jax():
    solve = lambda f, x: x
    with pytest.raises(TypeError, match=r"matvec\(\) output pytree"):
        custom_linear_solve(lambda x: [x], 1.0, solve, solve)
    with pytest.raises(TypeError, match=r"solve\(\) output pytree"):
        custom_linear_solve(lambda x: x, 1.0, lambda f, x: [x], solve)
    with pytest.raises(TypeError, match=r"transpose_solve\(\) output pytree|solve\(\) output"):
        grad(lambda b: custom_linear_solve(lambda x: 2 * x, b, solve, lambda f, x: [x]))(1.0)
    with pytest.raises(ValueError, match=r"solve\(\) output shapes"):
        custom_linear_solve(lambda x: x, 1.0, lambda f, x: np.ones(2), solve)
    with pytest.raises(ValueError, match=r"matvec\(\) output shapes"):
        jvp(lambda a: custom_linear_solve(lambda x: a * np.ones(2), 1.0, solve, solve),
            (1.0,), (1.0,))  # fmt: skip
    with pytest.raises(TypeError, match=r"f\(\) output pytree"):
        custom_root(lambda x: (x, x), 0.0, lambda f, x: x, lambda f, x: x)
    with pytest.raises(TypeError, match=r"solve\(\) output pytree"):
        custom_root(lambda x: x, 0.0, lambda f, x: (x, x), lambda f, x: x)
    with pytest.raises(TypeError, match=r"tangent_solve\(\) output pytree"):
        jvp(lambda x: custom_root(lambda y: x - y, 0.0, lambda f, x: x, lambda f, y: (y, y)),
            (0.0,), (1.0,))  # fmt: skip
    for error in (TransformTypeError, TransformValueError):
        assert issubclass(error, TypeError) or issubclass(error, ValueError)


def test_a_closed_over_value_the_search_misses_raises_instead_of_mixing_levels():
    def deep(a):  # a scale nine containers down: past what the search looks into
        box = [a * 1.0]
        for _ in range(8):
            box = [box]

        def solve(mv, r):
            inner = box
            for _ in range(9):
                inner = inner[0]
            return r / inner

        return custom_linear_solve(lambda v: a * v, np.ones(2), solve, symmetric=True)

    for transform in (grad, lambda f: lambda a: jvp(f, (a,), (1.0,))):
        with pytest.raises(LeakedTracerError, match="reached a function that a solver"):
            transform(lambda a: anp.sum(deep(a)))(2.0)
    assert float(deep(2.0)[0]) == 0.5  # (without a transform there is nothing to find)


def test_closures_through_objects_and_partials():
    class Model:
        def __init__(self, a):
            self.params = {"a": a}

        def solve(self, mv, r):
            return anp.linalg.solve(self.params["a"], r)

    def f(a):
        model = Model(a)
        matvec = functools.partial(anp.matmul, a)
        return anp.sum(custom_linear_solve(matvec, B, model.solve, symmetric=True))

    want = grad(lambda a: anp.sum(anp.linalg.solve(a, B)))(SPD)
    assert_close(grad(f)(SPD), want)
    assert_close(jit(grad(f))(SPD), want)


def test_the_search_skips_the_packages_own_functions_but_not_its_closures():
    # A function of the package's modules that closes over nothing reaches only their
    # globals (skipped: a grad through autograd's @primitive searched a dozen of them at
    # each call); a closure the package made (that @primitive's wrapper) holds the user's
    # function, whose closed-over traced value is found, and its gradient is right.
    from autodiff.compat import autograd as ag
    from autodiff.transforms import closures

    assert closures._is_packages_own(ag.defvjp) and closures._is_packages_own(closures.closed_over)
    assert not closures._is_packages_own(ag.primitive(np.sin))  # a closure

    def f(a, x):
        @ag.primitive
        def scaled(x):
            return a * anp.sin(x)  # closes over the traced a

        ag.defvjp(scaled, lambda ans, x: lambda g: g * a * anp.cos(x))
        assert any(t is a for t in closures.closed_over(scaled))
        return anp.sum(scaled(x))

    a, x = 1.5, np.array([0.2, 0.7])
    g_a, g_x = grad(f, argnums=(0, 1))(a, x)
    assert_close(g_a, np.sum(np.sin(x)))
    assert_close(g_x, a * np.cos(x))


_SCALE = 1.0  # a global a function reads; the test below makes it a traced value


def _scaled(x):
    return _SCALE * anp.sin(x)


def test_the_search_finds_a_traced_value_in_a_global_or_a_default():
    # A function that closes over nothing is answered without a search where its globals
    # and defaults hold numbers, arrays and modules only; a traced value in either is
    # still found, and an autograd primitive reading it differentiates through it.
    global _SCALE
    from autodiff.compat import autograd as ag
    from autodiff.transforms import closures

    prim = ag.primitive(_scaled)
    ag.defvjp(prim, lambda ans, x: lambda g: g * _SCALE * anp.cos(x))

    def f(a, x):
        global _SCALE
        assert closures.closed_over(_scaled) == []
        _SCALE = a  # (until the backward pass has run: the VJP maker reads it then)
        assert any(t is a for t in closures.closed_over(_scaled))
        assert any(t is a for t in closures.closed_over(lambda v, s=a: s * v))
        return anp.sum(prim(x))

    a, x = 1.5, np.array([0.2, 0.7])
    try:
        g_a, g_x = grad(f, argnums=(0, 1))(a, x)
    finally:
        _SCALE = 1.0
    assert_close(g_a, np.sum(np.sin(x)))
    assert_close(g_x, a * np.cos(x))
    assert _SCALE == 1.0


def test_an_autograd_primitive_differentiates_each_call_with_its_own_fixed_arguments():
    # One custom rule per primitive and set of differentiated positions serves every call
    # (made once, not per call); what differs between calls (an integer, a keyword, an
    # array with no VJP of its own, traced or not) travels with the call. A traced value
    # there gets its derivative through the function's own code, as a closed-over one.
    from autodiff.compat import autograd as ag

    @ag.primitive
    def soft(x, w, k, sharp=1.0):
        return k * w * anp.logaddexp(0.0, sharp * x) / sharp

    ag.defvjp(soft, lambda ans, x, w, k, sharp=1.0: lambda g: g * k * w / (1 + anp.exp(-sharp * x)))

    def f(x, w):
        return anp.sum(soft(x, w, 2) + soft(x**2, w, 3, sharp=4.0) + soft(x, np.ones(2), 1))

    x, w = np.array([0.3, -1.2]), np.array([0.5, 2.0])
    s = lambda z: 1 / (1 + np.exp(-z))
    want_x = 2 * w * s(x) + 3 * w * s(4 * x**2) * 2 * x + s(x)
    want_w = 2 * np.logaddexp(0, x) + 3 * np.logaddexp(0, 4 * x**2) / 4
    g_x, g_w = grad(f, argnums=(0, 1))(x, w)
    assert_close(g_x, want_x)
    assert_close(g_w, want_w)
    assert_close(vmap(grad(f), in_dims=(0, None))(np.stack([x, 2 * x]), w)[0], want_x)


def test_an_error_in_a_solve_leaves_the_transforms_working():
    def f(a):
        with contextlib.suppress(ZeroDivisionError):
            custom_linear_solve(lambda v: a * v, np.ones(2), lambda mv, r: 1 / 0, symmetric=True)
        assert all(i.active for i in current_interpreters())
        return a * a  # the traced a still works

    assert_close(grad(f)(3.0), 6.0)
    assert_close(vmap(grad(f))(np.array([1.0, 2.0])), [2.0, 4.0])
