"""jacrev, jacfwd, hessian, linearize: against finite differences, hand-derived
formulas and each other; torch.func's Jacobian structures; no basis loops."""

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import hessian, jacfwd, jacobian, jacrev, jvp, linearize, vmap
from autodiff.core.primitive import Primitive
from autodiff.errors import TransformTypeError, TransformValueError
from tests import crosscheck

rng = np.random.default_rng(21)
W = rng.standard_normal((3, 4))


def fd_jacobian(f, x, eps=1e-6):
    """Central differences, one column per input element."""
    x = np.asarray(x, dtype=float)
    out = np.asarray(f(x))
    jac = np.zeros(out.shape + x.shape)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = eps
        jac[(..., *idx)] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps)
    return jac


FUNCTIONS = {
    "tanh(Wx)": (lambda x: anp.tanh(W @ x), rng.standard_normal(4)),
    "matrix in, vector out": (
        lambda x: anp.sum(anp.sin(x) * x, axis=1),
        rng.standard_normal((2, 3)),
    ),
    "vector in, matrix out": (lambda x: anp.outer(x, anp.exp(x)), rng.standard_normal(3)),
    "scalar out": (lambda x: anp.sum(x**3), rng.standard_normal(3)),
}


@pytest.mark.parametrize("name", list(FUNCTIONS))
@pytest.mark.parametrize("jac", [jacrev, jacfwd], ids=["jacrev", "jacfwd"])
def test_jacobian_against_finite_differences(name, jac):
    f, x = FUNCTIONS[name]
    np.testing.assert_allclose(jac(f)(x), fd_jacobian(f, x), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", list(FUNCTIONS))
def test_jacfwd_equals_jacrev(name):
    f, x = FUNCTIONS[name]
    np.testing.assert_allclose(jacfwd(f)(x), jacrev(f)(x), rtol=1e-12, atol=1e-14)


def test_jacobian_of_tanh_wx_by_hand():
    x = rng.standard_normal(4)
    expected = (1 - np.tanh(W @ x) ** 2)[:, None] * W
    np.testing.assert_allclose(jacrev(lambda x: anp.tanh(W @ x))(x), expected, rtol=1e-13)


def test_torch_func_docstring_examples():
    x = rng.standard_normal(5)
    np.testing.assert_allclose(jacrev(anp.sin)(x), np.diag(np.cos(x)))
    _jac, fx = jacrev(lambda x: (anp.sin(x), anp.sin(x)), has_aux=True)(x)
    np.testing.assert_allclose(fx, np.sin(x))
    assert vmap(jacrev(anp.sin))(rng.standard_normal((6, 5))).shape == (6, 5, 5)
    np.testing.assert_allclose(jacrev(jacrev(lambda x: anp.sin(x).sum()))(x), np.diag(-np.sin(x)))
    y = rng.standard_normal(5)
    f = lambda x, y: x + y**2
    np.testing.assert_allclose(jacrev(f, argnums=1)(x, y), np.diag(2 * y))
    jx, jy = jacrev(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(jx, np.eye(5))
    np.testing.assert_allclose(jy, np.diag(2 * y))


def test_pytree_jacobian_is_output_tree_of_input_tree():
    def f(p):
        return {"s": anp.sum(p["w"] * p["b"]), "v": p["w"] * 2.0}

    p = {"w": np.array([1.0, 2.0]), "b": np.array(3.0)}
    for jac in (jacrev, jacfwd):
        j = jac(f)(p)
        assert set(j) == {"s", "v"} and set(j["s"]) == {"w", "b"}
        np.testing.assert_allclose(j["s"]["w"], [3.0, 3.0])  # d sum(w b)/dw = b
        np.testing.assert_allclose(j["s"]["b"], 3.0)  # = sum(w)
        np.testing.assert_allclose(j["v"]["w"], 2 * np.eye(2))
        assert j["v"]["b"].shape == (2,) and not j["v"]["b"].any()


def test_tuple_argnums_give_a_tuple_per_output_leaf():
    f = lambda x, y: (x * y, anp.sum(x))
    x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    for jac in (jacrev, jacfwd):
        (jxy_x, jxy_y), (js_x, js_y) = jac(f, argnums=(0, 1))(x, y)
        np.testing.assert_allclose(jxy_x, np.diag(y))
        np.testing.assert_allclose(jxy_y, np.diag(x))
        np.testing.assert_allclose(js_x, [1.0, 1.0])
        np.testing.assert_allclose(js_y, [0.0, 0.0])


def test_jacfwd_has_aux_returns_unbatched_aux():
    jac, aux = jacfwd(lambda x: (x**2, x.sum()), has_aux=True)(np.array([1.0, 2.0]))
    np.testing.assert_allclose(jac, np.diag([2.0, 4.0]))
    assert aux == 3.0


@pytest.mark.parametrize("chunk_size", [1, 2, 5])
def test_jacrev_chunk_size_gives_the_same_jacobian(chunk_size):
    f, x = FUNCTIONS["tanh(Wx)"]
    np.testing.assert_allclose(jacrev(f, chunk_size=chunk_size)(x), jacrev(f)(x), rtol=1e-14)


def test_jacobians_batch_instead_of_looping_over_basis_vectors():
    """A linear primitive whose rules are itself, counting its batched calls:
    the rows of the Jacobian come from one batched call, not one call per row."""
    calls = []

    def batch(args, dims):
        calls.append(args[0].shape)
        return twice_p.bind(*args), dims[0]

    twice_p = Primitive(
        "twice",
        lambda x: 2 * x,
        vjp=[lambda ct, a, x: twice_p.bind(ct)],
        jvp=[lambda t, a, x: twice_p.bind(t)],
        batch=batch,
    )
    x = rng.standard_normal(7)
    jacrev(lambda x: twice_p.bind(x))(x)
    jacfwd(lambda x: twice_p.bind(x))(x)
    assert calls == [(7, 7), (7, 7)]  # one batched call each, over all 7 basis vectors


# --- hessian --------------------------------------------------------------------------------


def test_hessian_by_hand_and_against_other_compositions():
    A = rng.standard_normal((4, 3))
    f = lambda x: anp.sum(anp.tanh(A @ x) ** 2)
    x = rng.standard_normal(3)
    t = np.tanh(A @ x)
    expected = A.T @ np.diag(2 * (1 - t**2) * (1 - 3 * t**2)) @ A
    h = hessian(f)(x)
    np.testing.assert_allclose(h, expected, rtol=1e-12)
    np.testing.assert_allclose(jacfwd(jacrev(f))(x), h, rtol=1e-13)
    np.testing.assert_allclose(jacrev(jacrev(f))(x), h, rtol=1e-12)
    np.testing.assert_allclose(jacfwd(jacfwd(f))(x), h, rtol=1e-12)
    grad_f = lambda x: jacrev(f)(x)
    np.testing.assert_allclose(h, fd_jacobian(grad_f, x), rtol=1e-6, atol=1e-8)


def test_hessian_with_argnums_tuple_gives_blocks():
    f = lambda x, y: anp.sum(x**2 * y)
    x, y = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    (hxx, hxy), (hyx, hyy) = hessian(f, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(hxx, np.diag(2 * y))
    np.testing.assert_allclose(hxy, np.diag(2 * x))
    np.testing.assert_allclose(hyx, np.diag(2 * x))
    np.testing.assert_allclose(hyy, np.zeros((2, 2)))


# --- linearize --------------------------------------------------------------------------------


def test_linearize_equals_jvp_and_runs_func_once():
    runs = []

    def f(x, y):
        runs.append(1)
        return anp.tanh(W @ x) * y

    x, y = rng.standard_normal(4), rng.standard_normal(3)
    out, jvp_fn = linearize(f, x, y)
    assert len(runs) == 1
    for _ in range(3):
        tx, ty = rng.standard_normal(4), rng.standard_normal(3)
        np.testing.assert_allclose(jvp_fn(tx, ty), jvp(f, (x, y), (tx, ty))[1], rtol=1e-13)
    assert len(runs) == 1 + 3  # jvp ran f three times; jvp_fn did not
    np.testing.assert_allclose(out, f(x, y))


def test_linearize_under_vmap_gives_the_jacobian():
    f, x = FUNCTIONS["tanh(Wx)"]
    _, jvp_fn = linearize(f, x)
    np.testing.assert_allclose(vmap(jvp_fn)(np.eye(4)).T, jacfwd(f)(x), rtol=1e-13)


def test_linearize_with_pytrees_and_unreached_outputs():
    _out, jvp_fn = linearize(lambda p: (p["a"] * 2.0, np.ones(2)), {"a": np.array(3.0)})
    t, zero = jvp_fn({"a": np.array(1.0)})
    assert t == 2.0 and not zero.any()
    with pytest.raises(TransformValueError, match="structured like the primals"):
        jvp_fn(np.array(1.0))


# --- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("jac", [jacrev, jacfwd], ids=["jacrev", "jacfwd"])
def test_complex_jacobians_are_refused_with_a_pointer(jac):
    with pytest.raises(TransformTypeError, match=r"complex.*use vjp or jvp"):
        jac(lambda z: z * 2.0)(np.array([1.0 + 1.0j]))


def test_jacobian_argnums_are_checked():
    with pytest.raises(TransformValueError, match="out of range"):
        jacrev(lambda x: x, argnums=2)(np.ones(2))
    with pytest.raises(TransformTypeError, match="argnums"):
        jacfwd(lambda x: x, argnums="0")


# --- jacobian: the mode chosen by size --------------------------------------------------


def _counting(f, calls):
    """``f``, recording under which transform each call ran (the outermost tracer's)."""

    def counted(x):
        calls.append(type(x).__name__)
        return f(x)

    return counted


@pytest.mark.parametrize("name", list(FUNCTIONS))
@pytest.mark.parametrize("mode", ["auto", "forward", "reverse", "fwd", "rev"])
def test_jacobian_agrees_with_finite_differences_in_every_mode(name, mode):
    f, x = FUNCTIONS[name]
    np.testing.assert_allclose(jacobian(f, mode=mode)(x), fd_jacobian(f, x), rtol=1e-6, atol=1e-8)


def test_jacobian_auto_takes_reverse_mode_for_few_outputs_and_runs_once():
    calls: list = []
    f = _counting(lambda x: anp.sum(anp.sin(x) ** 2), calls)  # 5 inputs, 1 output
    x = rng.standard_normal(5)
    np.testing.assert_allclose(jacobian(f)(x), 2 * np.sin(x) * np.cos(x), rtol=1e-13)
    assert calls == ["GradTensor"]


def test_jacobian_auto_takes_forward_mode_for_many_outputs():
    calls: list = []
    f = _counting(lambda t: anp.outer(anp.exp(t), anp.arange(1.0, 7.0)), calls)  # 2 in, 12 out
    t = rng.standard_normal(2)
    jac = jacobian(f)(t)
    expected = np.zeros((2, 6, 2))
    expected[0, :, 0] = np.exp(t[0]) * np.arange(1.0, 7.0)
    expected[1, :, 1] = np.exp(t[1]) * np.arange(1.0, 7.0)
    np.testing.assert_allclose(jac, expected, rtol=1e-13)
    # once to see the outputs under reverse mode, once under forward mode (batched jvp)
    assert calls == ["GradTensor", "DualTensor"]


def test_jacobian_with_argnums_and_has_aux_is_structured_as_jacrev():
    f = lambda x, y: (anp.sin(x) * y, x.sum())
    x, y = rng.standard_normal(3), rng.standard_normal(3)
    for mode in ("auto", "forward", "reverse"):
        (jx, jy), aux = jacobian(f, argnums=(0, 1), has_aux=True, mode=mode)(x, y)
        np.testing.assert_allclose(jx, np.diag(np.cos(x) * y), rtol=1e-13)
        np.testing.assert_allclose(jy, np.diag(np.sin(x)), rtol=1e-13)
        assert float(aux) == pytest.approx(x.sum())


def test_jacobian_refuses_an_unknown_mode():
    with pytest.raises(TransformValueError, match="mode must be 'auto', 'forward'"):
        jacobian(anp.sin, mode="sideways")


@pytest.mark.parametrize("mode", ["auto", "forward", "reverse"])
def test_jacobian_agrees_with_jax(mode):
    """jax.jacobian does not exist; jax.jacrev and jax.jacfwd give the same Jacobian, and
    autodiff.jacobian in every mode must give it too (pytree inputs, argnums, has_aux)."""
    jax = crosscheck.jax()
    jnp = jax.numpy

    def f(lib, p, x):
        return {"y": lib.tanh(p["w"] @ x + p["b"]), "s": lib.sum(lib.sin(x) * p["b"][:1])}

    p = {"w": rng.standard_normal((3, 4)), "b": rng.standard_normal(3)}
    x = rng.standard_normal(4)
    got = jacobian(lambda p, x: f(anp, p, x), argnums=(0, 1), mode=mode)(p, x)
    want = jax.jacrev(lambda p, x: f(jnp, p, x), argnums=(0, 1))(p, x)
    got_leaves = optree.tree_leaves(got)  # dicts in sorted key order, as in JAX
    want_leaves = jax.tree_util.tree_leaves(want)
    assert len(got_leaves) == len(want_leaves)
    for g, w in zip(got_leaves, want_leaves, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    hess = jacobian(jacobian(lambda x: anp.sum(anp.sin(x) ** 3), mode=mode), mode=mode)(x)
    np.testing.assert_allclose(hess, jax.hessian(lambda x: jnp.sum(jnp.sin(x) ** 3))(x),
                               rtol=1e-12)  # fmt: skip
