"""The public transforms' argument and return conventions (torch.func's, with
JAX's value_and_grad), checked against hand-derived values."""

from collections import namedtuple

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import (
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    value_and_grad,
    vjp,
    vmap,
)

rng = np.random.default_rng(3)
x3 = np.array([0.5, -1.0, 2.0])


def f2(x, y):
    return anp.sum(x * x * y)  # d/dx = 2xy, d/dy = x^2


# --- grad: argnums --------------------------------------------------------------------


def test_argnums_int_gives_bare_gradient():
    g = grad(f2, argnums=1)(x3, 3.0)
    assert isinstance(g, np.ndarray | np.floating)
    assert g == np.sum(x3**2)


def test_argnums_tuple_gives_tuple_even_of_one():
    g = grad(f2, argnums=(0,))(x3, 3.0)
    assert isinstance(g, tuple) and len(g) == 1
    np.testing.assert_allclose(g[0], 6.0 * x3)
    gx, gy = grad(f2, argnums=(0, 1))(x3, 3.0)
    np.testing.assert_allclose(gx, 6.0 * x3)
    assert gy == np.sum(x3**2)


def test_negative_argnums_count_from_the_end():
    np.testing.assert_allclose(grad(f2, argnums=-1)(x3, 3.0), np.sum(x3**2))
    _gy, gx = grad(f2, argnums=(-1, 0))(x3, 3.0)
    np.testing.assert_allclose(gx, 6.0 * x3)


def test_python_float_inputs_are_accepted():
    assert grad(lambda x: x**3)(2.0) == 12.0
    np.testing.assert_allclose(grad(f2)(x3, 3), 6.0 * x3)  # a non-differentiated int is fine


def test_keyword_arguments_are_passed_and_not_differentiated():
    def f(x, *, scale):
        return anp.sum(x * scale)

    np.testing.assert_allclose(grad(f)(x3, scale=2.5), np.full(3, 2.5))


# --- grad: pytrees --------------------------------------------------------------------


def test_gradient_of_dict_of_params_has_same_structure():
    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    x = rng.standard_normal(3)

    def loss(p):
        return anp.sum(anp.tanh(x @ p["w"] + p["b"]))

    g = grad(loss)(params)
    assert set(g) == {"w", "b"}
    d = 1 - np.tanh(x @ params["w"] + params["b"]) ** 2
    np.testing.assert_allclose(g["b"], d)
    np.testing.assert_allclose(g["w"], np.outer(x, d))


def test_gradient_of_nested_tuple_list_namedtuple():
    Pair = namedtuple("Pair", ["a", "b"])
    p = (Pair(np.array(1.0), np.array([2.0, 3.0])), [np.array(4.0)])
    g = grad(lambda p: p[0].a * anp.sum(p[0].b) * p[1][0])(p)
    assert isinstance(g, tuple) and isinstance(g[0], Pair) and isinstance(g[1], list)
    assert g[0].a == 20.0 and g[1][0] == 5.0
    np.testing.assert_array_equal(g[0].b, [4.0, 4.0])


# --- grad_and_value / value_and_grad --------------------------------------------------


def test_grad_and_value_order_and_aux():
    g, v = grad_and_value(lambda x: x**2)(3.0)
    assert (g, v) == (6.0, 9.0)
    g, (v, aux) = grad_and_value(lambda x: (x**2, "note"), has_aux=True)(3.0)
    assert (g, v, aux) == (6.0, 9.0, "note")


def test_value_and_grad_is_jax_order():
    v, g = value_and_grad(lambda x: x**2)(3.0)
    assert (v, g) == (9.0, 6.0)
    (v, aux), g = value_and_grad(lambda x: (x**2, x + 1), has_aux=True)(3.0)
    assert (v, aux, g) == (9.0, 4.0, 6.0)


def test_has_aux_values_are_unwrapped():
    g, aux = grad(lambda x: (x**2, {"x": x, "sq": x**2}), has_aux=True)(3.0)
    assert g == 6.0
    assert type(aux["x"]) is np.ndarray and aux["sq"] == 9.0


# --- dtypes ---------------------------------------------------------------------------


def test_float32_inputs_get_float32_gradients():
    x = np.array([1.0, 2.0], dtype=np.float32)
    g = grad(lambda x: anp.sum(x * np.float64(2.0)))(x)  # a float64 constant promotes
    assert g.dtype == np.float32
    np.testing.assert_array_equal(g, [2.0, 2.0])


# --- vjp ------------------------------------------------------------------------------


def test_vjp_fn_can_be_called_many_times_and_later():
    _out, vjp_fn = vjp(lambda x: anp.sin(x) * 2.0, x3)
    for ct in (np.ones(3), np.arange(3.0)):
        np.testing.assert_allclose(vjp_fn(ct)[0], 2.0 * np.cos(x3) * ct)


def test_vmap_of_vjp_fn_gives_the_jacobian():
    W = rng.standard_normal((2, 3))
    _out, vjp_fn = vjp(lambda x: anp.tanh(W @ x), x3)
    jac = vmap(vjp_fn)(np.eye(2))[0]
    np.testing.assert_allclose(jac, (1 - np.tanh(W @ x3) ** 2)[:, None] * W)


def test_vjp_returns_one_entry_per_primal_with_pytree_primals():
    p = {"a": np.array(2.0), "b": np.array([1.0, 3.0])}
    _out, vjp_fn = vjp(lambda p, s: p["a"] * anp.sum(p["b"]) * s, p, 4.0)
    gp, gs = vjp_fn(1.0)
    assert gp["a"] == 16.0 and gs == 8.0
    np.testing.assert_array_equal(gp["b"], [8.0, 8.0])


def test_vjp_with_aux():
    out, vjp_fn, aux = vjp(lambda x: (x * 3.0, x + 1.0), 2.0, has_aux=True)
    assert (out, aux) == (6.0, 3.0)
    assert vjp_fn(1.0) == (3.0,)


def test_vjp_under_grad_is_differentiable():
    # d/dx [vjp of sin at x with ct=1] = d/dx cos(x) = -sin(x)
    g = grad(lambda x: vjp(anp.sin, x)[1](1.0)[0])(0.3)
    np.testing.assert_allclose(g, -np.sin(0.3))


# --- jvp ------------------------------------------------------------------------------


def test_jvp_with_pytree_primals_and_lists():
    p = {"a": np.array(2.0), "b": np.array([1.0, 3.0])}
    t = {"a": np.array(1.0), "b": np.array([0.5, 0.0])}
    out, tout = jvp(lambda p: p["a"] * anp.sum(p["b"]), [p], [t])
    assert out == 8.0
    assert tout == 1.0 * 4.0 + 2.0 * 0.5


def test_jvp_outputs_independent_of_input_get_zero_tangents():
    _out, tout = jvp(lambda x: (x * 2.0, np.ones(2)), (1.0,), (1.0,))
    assert tout[0] == 2.0
    np.testing.assert_array_equal(tout[1], np.zeros(2))


def test_jvp_with_aux():
    out, tout, aux = jvp(lambda x: (x**2, x), (3.0,), (1.0,), has_aux=True)
    assert (out, tout, aux) == (9.0, 6.0, 3.0)
    assert type(aux) is not type(out) or isinstance(aux, np.ndarray)


# --- vmap -----------------------------------------------------------------------------


def test_in_dims_negative_and_per_argument():
    x = rng.standard_normal((4, 3))
    out = vmap(lambda a, b: a * b, in_dims=(-1, None))(x, 2.0)
    np.testing.assert_allclose(out, (x * 2.0).T)


def test_in_dims_pytree_prefix():
    params = {"w": rng.standard_normal(3), "b": rng.standard_normal(5)}
    xs = rng.standard_normal((5, 3))
    out = vmap(lambda p, x: anp.sum(p["w"] * x) + p["b"], in_dims=({"w": None, "b": 0}, 0))(
        params, xs
    )
    np.testing.assert_allclose(out, xs @ params["w"] + params["b"])


def test_out_dims_int_and_pytree():
    x = rng.standard_normal((4, 3))
    out = vmap(lambda r: r * 2.0, out_dims=1)(x)
    np.testing.assert_allclose(out, (2 * x).T)
    a, b = vmap(lambda r: (r.sum(), r * 2.0), out_dims=(0, -1))(x)
    np.testing.assert_allclose(a, x.sum(1))
    np.testing.assert_allclose(b, (2 * x).T)


def test_keyword_arguments_are_not_batched():
    x = rng.standard_normal((4, 3))
    out = vmap(lambda r, *, offset: r + offset)(x, offset=np.arange(3.0))
    np.testing.assert_allclose(out, x + np.arange(3.0))


def test_output_ignoring_batch_is_broadcast_along_out_dims():
    out = vmap(lambda r: np.arange(2.0), out_dims=1)(np.ones((4, 3)))
    assert out.shape == (2, 4)
    np.testing.assert_array_equal(out, np.tile(np.arange(2.0)[:, None], (1, 4)))


def test_vmap_of_vmap_of_grad():
    x = rng.standard_normal((2, 3))
    g = vmap(vmap(grad(lambda t: anp.sin(t) * t)))(x)
    np.testing.assert_allclose(g, np.cos(x) * x + np.sin(x))


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 10])
def test_chunk_size_gives_same_result(chunk_size):
    x = rng.standard_normal((7, 3))
    f = lambda r: (anp.sum(r**2), r * 2.0)
    want = vmap(f)(x)
    got = vmap(f, chunk_size=chunk_size)(x)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w)


def test_chunk_size_one_is_a_plain_loop_allowing_control_flow():
    out = vmap(lambda t: t * t if t > 0 else -t, chunk_size=1)(np.array([-1.0, 2.0]))
    np.testing.assert_array_equal(out, [1.0, 4.0])


def test_every_transform_returns_ndarrays_never_numpy_scalars():
    # NumPy ufuncs return np.float64 for 0-d input; JAX and torch always return their
    # array type, and so does every transform here (0-d arrays for scalars).
    f = lambda x: x - 2 * np.sin(x)
    out, vjp_fn = vjp(f, 0.5)
    linear_out, jvp_fn = linearize(f, 0.5)
    results = {
        "grad": grad(f)(0.5),
        "grad_and_value": grad_and_value(f)(0.5),
        "vjp": (out, vjp_fn(np.float64(1.0))),
        "jvp": jvp(f, (0.5,), (1.0,)),
        "vmap": vmap(f)(np.ones(3)),
        "jacrev": jacrev(f)(0.5),
        "jacfwd": jacfwd(f)(0.5),
        "hessian": hessian(f)(0.5),
        "linearize": (linear_out, jvp_fn(1.0)),
    }
    for name, result in results.items():
        for leaf in optree.tree_leaves(result):
            assert type(leaf) is np.ndarray, (name, type(leaf))
