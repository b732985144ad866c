"""The differential operators: every method against ``hessian``/``jacobian`` and closed
forms; under ``grad`` (a physics-informed loss), ``vmap`` (collocation points) and
``jit`` (compiled: the suite compiles every jitted call); the estimators' unbiasedness,
tested with fixed seeds and tolerances derived from their variances; bad input."""

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import (
    biharmonic,
    differential_operator,
    divergence,
    grad,
    hessian,
    hessian_diag,
    hvp,
    jacobian,
    jit,
    laplacian,
    vmap,
)
from autodiff.errors import ConcretizationError, TransformTypeError, TransformValueError
from autodiff.testing import check_grads
from autodiff.transforms import directional

RNG = np.random.default_rng(1)
D = 6
W1, W2, W3 = RNG.normal(size=(D, 8)) / 2, RNG.normal(size=(8, 8)) / 3, RNG.normal(size=8)
X = RNG.normal(size=D)


def mlp(x, w3=W3):
    return anp.tanh(anp.tanh(x @ W1) @ W2) @ w3 + anp.sum(anp.sin(x) * x**2)


def field(x):  # R^D -> R^D
    return anp.tanh(x @ W1 @ W1.T) * anp.cos(x[::-1])


def particles(x):  # 5 particles in 3-D, independent: a block-diagonal Hessian
    p = x.reshape(5, 3)
    return anp.sum(anp.tanh(anp.tanh(p @ W1[:3]) @ W2) @ W3) + anp.sum(anp.exp(-(p**2)))


XP = RNG.normal(size=15)


def trace_hessian(f, x):
    return np.trace(hessian(f)(x))


EXACT = ["auto", "collapsed", "sparse", "taylor", "hvp"]


@pytest.mark.parametrize("method", EXACT)
def test_laplacian_exact_methods(method):
    assert np.isclose(laplacian(mlp, method=method)(X), trace_hessian(mlp, X))
    assert np.isclose(laplacian(particles, method=method)(XP), trace_hessian(particles, XP))


@pytest.mark.parametrize("method", ["auto", "collapsed", "taylor"])
def test_laplacian_of_every_output_and_of_a_pytree_argument(method):
    got = laplacian(field, method=method)(X)
    want = [np.trace(hessian(lambda x, i=i: field(x)[i])(X)) for i in range(D)]
    assert np.allclose(got, want)

    def f(p):
        return {"s": anp.sum(p["a"] ** 3) * anp.sin(p["b"])}

    p = {"a": np.array([1.0, 2.0]), "b": np.array(0.5)}
    got = laplacian(f, method=method)(p)["s"]
    want = 6 * 3.0 * np.sin(0.5) - 9.0 * np.sin(0.5)
    assert np.isclose(got, want)


@pytest.mark.parametrize("method", ["auto", "collapsed", "taylor", "hvp"])
def test_weighted_laplacian(method):
    sigma = RNG.normal(size=(D, 3))
    want = np.trace(sigma @ sigma.T @ hessian(mlp)(X))
    assert np.isclose(laplacian(mlp, method=method, sigma=sigma)(X), want)


@pytest.mark.parametrize("method", ["auto", "taylor", "hvp", "sparse"])
def test_hessian_diag(method):
    assert np.allclose(hessian_diag(mlp, method=method)(X), np.diag(hessian(mlp)(X)))
    assert np.allclose(hessian_diag(particles, method=method)(XP),
                       np.diag(hessian(particles)(XP)))  # fmt: skip


@pytest.mark.parametrize("method", ["auto", "jvp", "sparse"])
def test_divergence(method):
    assert np.isclose(divergence(field, method=method)(X), np.trace(jacobian(field)(X)))

    def local(x):  # each output reads its neighbours only: few colours
        return anp.sin(x) * anp.roll(x, 1) + x**2

    x = RNG.normal(size=30)
    assert np.isclose(divergence(local, method=method)(x), np.trace(jacobian(local)(x)))


def test_sparse_methods_use_one_direction_per_colour(monkeypatch):
    seen = []
    collapsed = directional.collapsed

    def spy(p, V, order, weights=None):
        seen.append(np.shape(V))
        return collapsed(p, V, order, weights)

    monkeypatch.setattr("autodiff.transforms.differential.collapsed", spy)
    x = RNG.normal(size=60)  # 20 particles: auto detects the blocks
    f = lambda x: anp.sum(anp.tanh(x.reshape(20, 3) @ W1[:3]) ** 2)
    assert np.isclose(laplacian(f)(x), trace_hessian(f, x))
    assert seen[-1] == (3, 60)  # three colours, not sixty directions
    laplacian(mlp, method="auto")(RNG.normal(size=D))  # below 32 elements: dense at once
    assert seen[-1] == (D, D)


def test_differential_operator_mixed_third_order_and_first_order():
    f = lambda x: x[0] ** 2 * x[1] ** 2 + anp.sin(x[0] * x[2])
    x = np.array([0.7, -1.2, 0.4])
    mixed = differential_operator(f, np.array([[1.0, 1, 0], [1, 0, 0], [0, 1, 0]]), order=2,
                                  weights=[0.5, -0.5, -0.5])  # fmt: skip
    assert np.isclose(mixed(x), hessian(f)(x)[0, 1])
    V, w = RNG.normal(size=(4, 3)), RNG.normal(size=4)
    T = jacobian(jacobian(jacobian(f)))(x)
    want = sum(wr * np.einsum("ijk,i,j,k", T, v, v, v) for wr, v in zip(w, V))
    for method in ("collapsed", "taylor"):
        assert np.isclose(differential_operator(f, V, order=3, weights=w, method=method)(x), want)
    first = differential_operator(f, V, order=1, weights=w)(x)
    assert np.isclose(first, jacobian(f)(x) @ (w @ V))


def test_biharmonic():
    r4 = lambda x: anp.sum(x**2) ** 2
    for n in (1, 2, 5):
        x = RNG.normal(size=n)
        assert np.isclose(biharmonic(r4)(x), 8 * n * (n + 2))
        assert np.isclose(biharmonic(r4, method="taylor")(x), 8 * n * (n + 2))
    g = lambda x: anp.exp(x[0]) * anp.sin(x[1]) * x[2] ** 4
    x = np.array([0.3, 0.8, 1.1])
    # sum_ij d^4 g / dx_i^2 dx_j^2 from the fourth-derivative tensor
    H4 = jacobian(jacobian(jacobian(jacobian(g))))(x)
    assert np.isclose(biharmonic(g)(x), np.einsum("iijj", H4))


def test_hvp():
    v = RNG.normal(size=D)
    assert np.allclose(hvp(mlp)(X, v), hessian(mlp)(X) @ v)
    f = lambda a, b: anp.sum(a**2 * b) + anp.sum(anp.sin(b))
    a, b = RNG.normal(size=3), RNG.normal(size=3)
    ha, hb = hvp(f, argnums=(0, 1))(a, b, (np.ones(3), np.zeros(3)))
    assert np.allclose(ha, 2 * b) and np.allclose(hb, 2 * a)


# --- composition --------------------------------------------------------------------------------


def _pinn_residual(w3, x):
    return laplacian(mlp, argnums=0)(x, w3) - anp.sum(x)


@pytest.mark.parametrize("method", ["collapsed", "taylor", "hvp", "sparse"])
def test_grad_of_a_laplacian_with_respect_to_the_parameters(method):
    def loss(w3, x):
        return laplacian(lambda x: mlp(x, w3), method=method)(x) ** 2

    got = grad(loss)(W3, X)
    want = grad(lambda w3, x: np.trace(hessian(lambda x: mlp(x, w3))(x)) ** 2)(W3, X)
    assert np.allclose(got, want)


@pytest.mark.parametrize("method", ["collapsed", "taylor", "hvp", "auto"])
def test_vmap_over_collocation_points_against_a_loop(method):
    xs = RNG.normal(size=(4, D))
    op = laplacian(mlp, method=method)
    assert np.allclose(vmap(op)(xs), [op(x) for x in xs])
    # a loss over points differentiated with respect to the parameters
    lap = laplacian(mlp, argnums=0, method=method)
    loss = lambda w3: anp.mean(vmap(lap, in_dims=(0, None))(xs, w3) ** 2)
    want = grad(lambda w3: sum(lap(x, w3) ** 2 for x in xs) / len(xs))(W3)
    assert np.allclose(grad(loss)(W3), want)


@pytest.mark.parametrize(
    "op",
    [laplacian(mlp), laplacian(particles, method="sparse"), hessian_diag(mlp),
     divergence(field), biharmonic(lambda x: anp.sum(anp.sin(x[:3]) ** 2))],
)  # fmt: skip
def test_operators_under_jit_compiled(op):
    x = XP if op.__wrapped__ is particles else X
    assert np.allclose(jit(op)(x), op(x))
    assert np.allclose(jit(vmap(op))(np.stack([x, x + 1])), [op(x), op(x + 1)])


def test_laplacian_of_a_jitted_function_and_through_control_flow():
    def f(x):
        y = autodiff.fori_loop(0, 3, lambda i, c: anp.tanh(c) * 1.5, x)
        return autodiff.cond(anp.sum(y) > 0, lambda y: anp.sum(y**3), lambda y: anp.sum(y), y)

    want = trace_hessian(f, X)
    assert np.isclose(laplacian(f)(X), want)
    assert np.isclose(laplacian(jit(f))(X), want)
    assert np.isclose(jit(laplacian(f))(X), want)


def test_a_value_dependent_loop_under_jit_inside_an_operator_is_refused_clearly():
    def f(x):
        return anp.sum(autodiff.while_loop(lambda c: anp.sum(c**2) < 50.0, lambda c: c * 1.7, x))

    assert np.isclose(laplacian(f)(X), trace_hessian(f, X))  # eagerly: fine
    assert np.isclose(laplacian(jit(f))(X), trace_hessian(f, X))
    with pytest.raises(ConcretizationError, match="laplacian\\(jit\\(f\\)\\)"):
        jit(laplacian(f))(X)


# --- estimators: unbiased, with variance falling as 1/samples ------------------------------------


def _symmetric_part(A):
    return (A + A.T) / 2


@pytest.mark.parametrize("probes", ["rademacher", "gaussian"])
def test_hutchinson_laplacian_is_unbiased(probes):
    H = hessian(mlp)(X)
    # Var[v^T H v]: Rademacher 2 (|H|_F^2 - sum H_ii^2), Gaussian 2 |H|_F^2
    var = 2 * (np.sum(H**2) - (np.sum(np.diag(H) ** 2) if probes == "rademacher" else 0))
    m = 4000
    got = laplacian(mlp, method="hutchinson", samples=m, seed=3, probes=probes)(X)
    assert abs(got - np.trace(H)) < 4 * np.sqrt(var / m)
    # the variance itself: over independent seeds, close to var / m
    few = [laplacian(mlp, method="hutchinson", samples=10, seed=s, probes=probes)(X)
           for s in range(400)]  # fmt: skip
    assert 0.7 < np.var(few) / (var / 10) < 1.4


def test_stde_laplacian_and_diagonal_are_unbiased():
    H = hessian(mlp)(X)
    d = np.diag(H)
    m = 3000
    var = D**2 * np.var(d)  # one uniform coordinate i: D * H_ii
    got = laplacian(mlp, method="stde", samples=m, seed=5)(X)
    assert abs(got - np.trace(H)) < 4 * np.sqrt(var / m)
    diag = hessian_diag(mlp, method="stde", samples=m, seed=5)(X)
    # per entry: D * H_ii * (count of i) / m, a binomial count: Var = D^2 H_ii^2 p (1 - p) / m
    p = 1 / D
    assert np.all(np.abs(diag - d) < 4 * np.sqrt(D**2 * d**2 * p * (1 - p) / m) + 1e-12)


def test_hutchinson_diagonal_and_divergence_are_unbiased():
    H = hessian(mlp)(X)
    m = 3000
    diag = hessian_diag(mlp, method="hutchinson", samples=m, seed=7)(X)
    var = np.sum(H**2, axis=1) - np.diag(H) ** 2  # Var[v_i (H v)_i] = sum_(j != i) H_ij^2
    assert np.all(np.abs(diag - np.diag(H)) < 4 * np.sqrt(var / m))
    J = jacobian(field)(X)
    S = _symmetric_part(J)
    var = 2 * (np.sum(S**2) - np.sum(np.diag(S) ** 2))
    got = divergence(field, method="hutchinson", samples=m, seed=8)(X)
    assert abs(got - np.trace(J)) < 4 * np.sqrt(var / m)


def test_hutch_plus_plus_is_unbiased_and_beats_hutchinson_on_a_low_rank_hessian():
    U = RNG.normal(size=(D, 2))
    f = lambda x: anp.sum(anp.exp(x @ U)) + 0.01 * anp.sum(x**2)
    exact = trace_hessian(f, X)
    plus = np.array([laplacian(f, method="hutch++", samples=6, seed=s)(X) for s in range(100)])
    assert abs(plus.mean() - exact) < 4 * plus.std() / np.sqrt(len(plus)) + 1e-9
    hutch = [laplacian(f, method="hutchinson", samples=6, seed=s)(X) for s in range(100)]
    assert plus.var() < np.var(hutch) / 10
    J = jacobian(field)(X)
    div = [divergence(field, method="hutch++", samples=6, seed=s)(X) for s in range(100)]
    assert abs(np.mean(div) - np.trace(J)) < 4 * np.std(div) / 10 + 1e-9


def test_differential_operator_stde_is_unbiased():
    V, w = RNG.normal(size=(5, D)), RNG.normal(size=5)
    op = differential_operator(mlp, V, order=2, weights=w)
    terms = np.array([w_ * v @ hessian(mlp)(X) @ v for w_, v in zip(w, V)])
    m = 2000
    got = differential_operator(mlp, V, order=2, weights=w, method="stde", samples=m, seed=2)(X)
    assert np.isclose(op(X), terms.sum())
    assert abs(got - terms.sum()) < 4 * np.sqrt(len(w) ** 2 * np.var(terms) / m)


def test_the_randomness_of_estimators():
    op = laplacian(mlp, method="hutchinson", samples=5, seed=11)
    assert op(X) == op(X)  # an int seed: fixed probes
    xs = RNG.normal(size=(3, D))
    assert np.allclose(vmap(op)(xs), [op(x) for x in xs])  # shared by every example
    with pytest.raises(TransformValueError, match="randomness is 'error'"):
        vmap(laplacian(mlp, method="hutchinson", samples=5))(xs)
    rng = np.random.default_rng(0)
    gen = laplacian(mlp, method="hutchinson", samples=5, seed=rng)
    a, b = gen(X), gen(X)
    assert a != b  # a Generator: new probes at every call
    rng2 = np.random.default_rng(0)
    jitted = jit(laplacian(mlp, method="hutchinson", samples=5, seed=rng2))
    assert np.allclose([jitted(X), jitted(X)], [a, b])  # jit draws at every call, as eagerly
    rng3 = np.random.default_rng(0)
    same = vmap(laplacian(mlp, method="stde", samples=5, seed=rng3), randomness="same")(xs)
    assert same.shape == (3,)
    different = vmap(laplacian(mlp, method="hutchinson", samples=5, seed=None),
                     randomness="different")(xs)  # fmt: skip
    assert different.shape == (3,)


# --- bad input ----------------------------------------------------------------------------------


def _op(*args, **kwargs):
    return lambda: differential_operator(mlp, *args, **kwargs)


def _lap(**kwargs):
    return lambda: laplacian(mlp, **kwargs)


VE, TE = TransformValueError, TransformTypeError


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (_op(np.eye(D), order=0), VE, "order must be >= 1"),
        (_op(np.eye(D), order=-2), VE, "order must be >= 1"),
        (_op(np.eye(D), order=2.0), TE, "order must be an int"),
        (_op(lambda H: H**2, order=2), TE, "nonlinear operator"),
        (_op(np.ones(D), order=2), VE, r"\(R, n\) array"),
        (_op(np.eye(D), order=2, weights=np.ones(2)), VE, "one entry per direction"),
        (_lap(method="nope"), VE, "method must be one of"),
        (lambda: hessian_diag(mlp, method="collapsed"), VE, "gives the diagonal's sum"),
        (lambda: divergence(field, method="collapsed"), VE, "first-order trace"),
        (_lap(method="hutchinson"), VE, "give samples="),
        (_lap(method="hutch++", samples=2, seed=0), VE, "samples must be an int >= 3"),
        (_lap(method="stde", samples=4, seed="x"), TE, "seed must be"),
        (_lap(method="hutchinson", samples=4, probes="uniform"), VE, "probes must be"),
        (_lap(argnums=(0,)), TE, "argnums must be one int"),
        (_lap(method="sparse", sigma=np.eye(D)), VE, "sigma's columns"),
        (lambda: laplacian(3.0), TE, "callable"),
    ],
)
def test_bad_arguments_are_refused_when_the_operator_is_made(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_bad_calls_are_refused():
    with pytest.raises(TransformValueError, match="the differentiated argument has 6"):
        differential_operator(mlp, np.eye(4), order=2)(X)
    with pytest.raises(TransformValueError, match="sigma must be an \\(n, k\\) matrix"):
        laplacian(mlp, sigma=np.eye(3))(X)
    with pytest.raises(TransformValueError, match="as many outputs as inputs"):
        divergence(lambda x: x[:2])(X)
    with pytest.raises(TransformValueError, match="needs func to return one scalar"):
        laplacian(field, method="hvp")(X)
    with pytest.raises(TransformTypeError, match="real floating-point"):
        laplacian(mlp)(np.arange(6))


UNARY = ["exp", "expm1", "exp2", "log", "log1p", "log2", "log10", "sqrt", "cbrt", "reciprocal",
         "square", "sin", "cos", "tan", "sinh", "cosh", "tanh", "arcsin", "arccos", "arctan",
         "arcsinh", "arctanh", "abs", "negative", "sinc", "deg2rad", "i0"]  # fmt: skip


@pytest.mark.parametrize("order", [2, 3])
def test_collapsed_mode_composes_every_elementwise_function(order):
    """Collapsed mode takes elementwise functions by composition with their own Taylor
    coefficients: against a jet per direction, for every one."""
    A = RNG.uniform(0.05, 0.2, size=(3, 4))

    def f(x):
        z = 0.3 + x @ A  # in (0, 1): every function's domain
        # each function, then sin of it: the outer function sees every coefficient the inner
        # one gives, not only the top
        return anp.stack([anp.sum(anp.sin(getattr(anp, name)(z) * 0.5) * (k + 1))
                          for k, name in enumerate(UNARY)])  # fmt: skip

    x = RNG.uniform(0.1, 0.9, 3)
    V, w = RNG.normal(size=(4, 3)), RNG.normal(size=4)
    op = lambda method: differential_operator(f, V, order=order, weights=w, method=method)(x)
    assert np.allclose(op("collapsed"), op("taylor"), rtol=1e-9, atol=1e-9)


def test_a_draw_inside_func_is_one_draw_of_the_function_for_every_direction():
    """Collapsed mode's directions are not examples: func drawing from a generator it
    closes over draws once, and the Laplacian is that of the function with the draw."""
    rng = np.random.default_rng(5)
    f = lambda x: anp.sum(anp.tanh(x * rng.normal(size=x.shape)))
    m = np.random.default_rng(5).normal(size=X.shape)
    t = np.tanh(X * m)
    want = np.sum(m**2 * (-2 * t * (1 - t**2)))  # tanh'' = -2 tanh (1 - tanh^2)
    assert np.isclose(laplacian(f, method="collapsed")(X), want, rtol=1e-10)


BINARY = ["power", "float_power", "logaddexp", "logaddexp2", "arctan2", "hypot"]


@pytest.mark.parametrize("order", [2, 3])
def test_collapsed_mode_composes_functions_of_one_moving_argument(order):
    """A broadcasting function with one argument moving and the other a constant (which
    may broadcast it) goes by composition too; with both moving, by its rule."""
    A = RNG.uniform(0.05, 0.2, size=(3, 4))
    C = RNG.uniform(0.5, 1.5, size=(2, 4))  # broadcasts z up to (2, 4)

    def f(x):
        z = 0.3 + x @ A
        terms = []
        for k, name in enumerate(BINARY):
            fn = getattr(anp, name)
            for y in (fn(z, C), fn(C, z), fn(z, 1.5), fn(z, z[::-1] + 0.5)):
                terms.append(anp.sum(anp.sin(y * 0.5)) * (k + 1))
        return anp.stack(terms)

    x = RNG.uniform(0.1, 0.9, 3)
    V, w = RNG.normal(size=(4, 3)), RNG.normal(size=4)
    op = lambda method: differential_operator(f, V, order=order, weights=w, method=method)(x)
    assert np.allclose(op("collapsed"), op("taylor"), rtol=1e-9, atol=1e-9)
    if order == 2:
        want = [np.trace(h) for h in hessian(f)(x)]
        assert np.allclose(laplacian(f, method="collapsed")(x), want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(
    "make",
    [
        lambda f: hessian_diag(f),
        lambda f: hessian_diag(f, method="hvp"),
        lambda f: divergence(lambda x: anp.sin(x) * f(x)),
        lambda f: differential_operator(f, np.eye(D)[:3] + 0.5, order=3, weights=[1.0, -2.0, 0.5]),
        lambda f: biharmonic(lambda x: f(x[:D])),
        lambda f: laplacian(f, method="stde", samples=4, seed=0),
    ],
)
def test_every_operator_is_differentiable_in_the_parameters(make):
    def g(w3):
        return anp.sum(make(lambda x: mlp(x, w3))(X) ** 2)

    check_grads(g, (W3,), order=1, modes=("fwd", "rev"))


def test_the_identity_directions_are_shared_read_only_and_only_when_small():
    UnitRows = directional.UnitRows
    a, b = UnitRows.eye(4, np.dtype(float)), UnitRows.eye(4, np.dtype(float))
    assert a is b and not a.flags.writeable and np.array_equal(a, np.eye(4))
    assert np.array_equal(a.picks, np.arange(4))
    assert np.array_equal(a @ np.arange(12.0).reshape(4, 3), np.arange(12.0).reshape(4, 3))
    big = UnitRows.eye(1449, np.dtype(float))  # past 2^21 elements: made for each call
    assert big is not UnitRows.eye(1449, np.dtype(float)) and not big.flags.writeable
    f = lambda x: anp.sum(anp.sin(x) * x)
    x = RNG.normal(size=6)
    assert np.isclose(laplacian(f, method="collapsed")(x), np.trace(hessian(f)(x)), rtol=1e-12)


@pytest.mark.parametrize("name", ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
                                  "sin", "cos", "sinh", "cosh", "tan", "tanh"])  # fmt: skip
def test_closed_form_second_coefficients_are_the_recurrences(name):
    """A rule's ``second`` (``f'``, ``f''/2`` in closed form, which collapsed mode of order
    2 takes) against the recurrence along ``x0 + t`` and against central differences."""
    rule = getattr(anp, name).primitive.taylor
    x0 = RNG.uniform(0.2, 0.9, size=5)
    ans, c1, c2 = rule.second(x0)
    want_ans, (w1, w2) = rule((x0,), ((np.ones(5), None),))
    assert np.allclose(ans, want_ans) and np.allclose(c1, w1) and np.allclose(c2, w2)
    fn, h = getattr(np, name), 1e-4
    assert np.allclose(c1, (fn(x0 + h) - fn(x0 - h)) / (2 * h), rtol=1e-6)
    assert np.allclose(2 * c2, (fn(x0 + h) - 2 * fn(x0) + fn(x0 - h)) / h**2, rtol=1e-5)


@pytest.mark.parametrize("p", [2, 3, 0.5, -1.5, 1])
def test_closed_form_second_coefficients_of_a_constant_power(p):
    rule = anp.power.primitive.taylor
    x0 = RNG.uniform(0.2, 0.9, size=5)
    ans, c1, c2 = rule.second(x0, p)
    want_ans, (w1, w2) = rule((x0, p), ((np.ones(5), None), (None, None)))
    assert np.allclose(ans, x0**p) and np.allclose(ans, want_ans) and np.allclose(c1, w1)
    assert np.allclose(0 if c2 is None else c2, 0 if w2 is None else w2)
    assert np.allclose(c1, p * x0 ** (p - 1)) and np.allclose(
        0 if c2 is None else c2, p * (p - 1) / 2 * x0 ** (p - 2)
    )
    assert rule.second(x0, np.array(2.0)) is None  # an array exponent: no closed form


@pytest.mark.parametrize("name", ["multiply", "divide", "logaddexp", "logaddexp2"])
def test_closed_form_partials_of_binary_functions(name):
    """``partials`` (value, gradient, halved Hessian with the mixed term whole) against
    the rule along each argument and along both (polarisation)."""
    rule = getattr(anp, name).primitive.taylor
    u, v = RNG.uniform(0.5, 2.0, size=(2, 4))
    ans, (fu, fv), (huu, fuv, hvv) = rule.partials(u, v)
    one, none = (np.ones(4), None), (None, None)
    _, (wu, wuu) = rule((u, v), (one, none))
    _, (wv, wvv) = rule((u, v), (none, one))
    _, (_, both) = rule((u, v), (one, one))
    zero = lambda c: 0 if c is None else c
    assert np.allclose(ans, getattr(np, name)(u, v))
    assert np.allclose(fu, wu) and np.allclose(fv, wv)
    assert np.allclose(zero(huu), zero(wuu)) and np.allclose(zero(hvv), zero(wvv))
    assert np.allclose(fuv, zero(both) - zero(wuu) - zero(wvv))


def test_collapsed_mode_on_plain_arrays_agrees_with_the_traced_path():
    """Collapsed mode computes products, sums of squares and functions of several moving
    arguments on the directions' unwrapped values: NumPy arrays eagerly, the staging's
    tracers under jit; under the rule checks it takes the interpreters' path.  All three
    and trace(hessian) must agree, with weights, a value moving in both arguments
    (x * x), two different moving values (u / v, logaddexp), a constant over a moving
    value, and a broadcast product (the general path)."""
    A = RNG.normal(size=(3, 4)) / 2

    def f(x):
        Z = anp.reshape(x, (2, 3)) @ A  # (2, 4)
        T = anp.tanh(Z.T)  # the directions' axis behind the transpose
        u, v = anp.exp(T * 0.5), 1.5 + anp.sin(T)
        return (anp.sum(u * v + u / v + T * T / (T * T + 1.0)) + anp.sum(anp.log1p(v**2) + 2.0 / v)
                + anp.sum(anp.logaddexp(u, v) * (x[:3] @ A)[:, None]))  # fmt: skip

    x = RNG.normal(size=6)
    want = trace_hessian(f, x)
    assert np.isclose(laplacian(f, method="collapsed")(x), want, rtol=1e-10)
    assert np.isclose(jit(laplacian(f, method="collapsed"))(x), want, rtol=1e-10)
    with autodiff.debug_rules():
        assert np.isclose(laplacian(f, method="collapsed")(x), want, rtol=1e-10)
    sigma = RNG.normal(size=(6, 2))
    H = hessian(f)(x)
    got = laplacian(f, method="collapsed", sigma=sigma)(x)
    assert np.isclose(got, np.trace(sigma.T @ H @ sigma), rtol=1e-10)
    V, w = RNG.normal(size=(3, 6)), RNG.normal(size=3)
    op = lambda method: differential_operator(f, V, order=2, weights=w, method=method)(x)
    assert np.isclose(op("collapsed"), op("taylor"), rtol=1e-10)
    assert np.isclose(op("collapsed"), sum(wi * vi @ H @ vi for wi, vi in zip(w, V)), rtol=1e-10)


def test_collapsed_mode_reads_a_batched_coefficient_with_its_directions_first():
    """The NumPy path moves the directions' axis of a batched coefficient to the front
    wherever a batching rule left it, and declines values another transform sees."""
    from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
    from autodiff.interpreters.collapsed_values import unwrapped

    directions = BatchInterpreter(3)
    value = RNG.normal(size=(4, 3, 2))
    plain = lambda primals, series: unwrapped(directions, None, primals, series)
    front, top = plain((np.ones((4, 2)),), (BatchedTensor(directions, value, 1), None))
    assert front.shape == (3, 4, 2) and np.array_equal(front, np.moveaxis(value, 1, 0))
    assert top is None
    other = BatchInterpreter(3)
    assert plain((np.ones((4, 2)),), (BatchedTensor(other, value, 1), None)) is None
    assert plain((BatchedTensor(other, value, 1),), (None, None)) is None
