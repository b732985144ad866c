"""Semantics the issue pins with exact values: levels, closures, nesting,
stop_gradient, control flow, leaks, and the stack after errors."""

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, jvp, stop_gradient, vjp, vmap
from autodiff.core.stack import current_interpreters
from autodiff.errors import ConcretizationError, LeakedTracerError

ys = np.array([1.0, 2.0, 3.0])


# --- perturbation confusion -----------------------------------------------------------


def test_perturbation_confusion_product():
    # d/dx [x * d/dy (x y)] = d/dx x^2 = 2x
    assert grad(lambda x: x * grad(lambda y: x * y)(1.0))(3.0) == 6.0


def test_perturbation_confusion_sum():
    # d/dy (x + y) = 1, so d/dx [x * 1] = 1; a confused system gives 2
    assert grad(lambda x: x * grad(lambda y: x + y)(1.0))(1.0) == 1.0


def test_perturbation_confusion_jvp():
    inner = lambda x: jvp(lambda y: x * y, (1.0,), (1.0,))[1]  # = x
    assert jvp(lambda x: x * inner(x), (3.0,), (1.0,))[1] == 6.0
    inner_sum = lambda x: jvp(lambda y: x + y, (1.0,), (1.0,))[1]  # = 1
    assert jvp(lambda x: x * inner_sum(x), (1.0,), (1.0,))[1] == 1.0


def test_sibling_transforms_at_same_depth_do_not_share_levels():
    # Two grads at the same nesting depth inside one outer grad.
    def f(x):
        a = grad(lambda y: x * y * y)(2.0)  # 4x
        b = grad(lambda z: x * z)(5.0)  # x
        return a * b  # 4x^2

    assert grad(f)(3.0) == 24.0


# --- closures across transforms -------------------------------------------------------


def test_grad_of_vmap_closure():
    assert grad(lambda x: vmap(lambda y: x * y)(ys).sum())(2.0) == 6.0


def test_vmap_of_grad_closure():
    np.testing.assert_array_equal(vmap(lambda y: grad(lambda x: x * y)(2.0))(ys), ys)


# --- vmap outputs ---------------------------------------------------------------------


def test_vmap_constant_output_is_broadcast():
    np.testing.assert_array_equal(vmap(lambda t: 3.0)(ys), [3.0, 3.0, 3.0])


def test_vmap_constant_output_with_out_dims_none_passes_through():
    assert vmap(lambda t: 3.0, out_dims=None)(ys) == 3.0


@pytest.mark.parametrize("out_dims", [0, 1, -1])
def test_vmap_python_bool_output_is_broadcast_as_jax_does(out_dims):
    # A flag the function returns (True, or a comparison) is broadcast like a number.
    def f(x):
        return True, x > 1.5, False

    flag, mask, off = vmap(vmap(f), out_dims=out_dims)(np.stack([ys, -ys]))
    assert flag.dtype == mask.dtype == off.dtype == np.bool_
    shape = (2, 3) if out_dims == 0 else (3, 2)  # the outer batch axis last
    np.testing.assert_array_equal(flag, np.ones(shape, bool))
    np.testing.assert_array_equal(off, np.zeros(shape, bool))
    expected = np.stack([ys, -ys]) > 1.5
    np.testing.assert_array_equal(mask, expected if out_dims == 0 else expected.T)
    jax = pytest.importorskip("jax")
    theirs = jax.vmap(jax.vmap(f), out_axes=out_dims)(np.stack([ys, -ys]))
    for ours, their in zip((flag, mask, off), theirs):
        np.testing.assert_array_equal(ours, np.asarray(their))
        assert ours.shape == their.shape
    assert vmap(lambda t: True, out_dims=None)(ys) is True  # unbatched, passed through


def test_nested_vmap_with_different_in_dims():
    a, b = np.array([1.0, 2.0]), np.array([10.0, 20.0, 30.0])
    mul = lambda x, y: x * y
    out = vmap(vmap(mul, in_dims=(0, None)), in_dims=(None, 0))(a, b)
    assert out.shape == (3, 2)
    np.testing.assert_array_equal(out, b[:, None] * a[None, :])


# --- zero gradients -------------------------------------------------------------------


def test_grad_of_function_ignoring_input_is_zeros():
    x = np.ones((2, 3))
    g = grad(lambda x: 1.0)(x)
    assert g.shape == (2, 3)
    np.testing.assert_array_equal(g, 0.0)


def test_vjp_of_function_ignoring_input_is_zeros():
    x, y = np.ones(3), np.ones(2)
    _out, vjp_fn = vjp(lambda x, y: x * 2.0, x, y)
    gx, gy = vjp_fn(np.ones(3))
    np.testing.assert_array_equal(gx, 2.0)
    np.testing.assert_array_equal(gy, np.zeros(2))


# --- stop_gradient --------------------------------------------------------------------


def test_stop_gradient_stops_every_level():
    # x^2 - sg(x^2): first derivative 2x, second 2
    assert grad(grad(lambda x: x**2 - stop_gradient(x**2)))(2.0) == 2.0


def test_stop_gradient_is_pytree_aware_and_keeps_values():
    def f(p):
        q = stop_gradient(p)
        return (p["a"] * q["a"] + q["b"]).sum()

    p = {"a": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0])}
    g = grad(f)(p)
    np.testing.assert_array_equal(g["a"], p["a"])
    np.testing.assert_array_equal(g["b"], 0.0)


# --- control flow ---------------------------------------------------------------------


def _branchy(t):
    return t * t if t > 0 else -t


def test_python_control_flow_under_grad():
    assert grad(_branchy)(2.0) == 4.0
    assert grad(_branchy)(-2.0) == -1.0


def test_python_control_flow_under_vmap_raises():
    with pytest.raises(ConcretizationError, match=r"anp\.where"):
        vmap(_branchy)(ys)


def test_python_control_flow_under_jvp():
    assert jvp(_branchy, (2.0,), (1.0,))[1] == 4.0


# --- forward over reverse -------------------------------------------------------------


def test_hessian_vector_product_by_jvp_of_grad():
    # f(x) = sum(sin(x) * x) has Hessian diag(2 cos x - x sin x).
    f = lambda x: anp.sum(anp.sin(x) * x)
    x, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, -2.0, 0.5])
    hvp = jvp(grad(f), (x,), (v,))[1]
    np.testing.assert_allclose(hvp, (2 * np.cos(x) - x * np.sin(x)) * v, rtol=1e-13)


def test_vmap_of_jvp_of_sin_at_zero():
    out = vmap(lambda a: jvp(anp.sin, (a,), (1.0,))[1])(np.zeros(3))
    np.testing.assert_array_equal(out, [1.0, 1.0, 1.0])


def test_grad_through_argmax_index():
    np.testing.assert_array_equal(
        grad(lambda t: t[t.argmax()])(np.array([1.0, 3.0, 2.0])), [0.0, 1.0, 0.0]
    )


# --- leaked tracers -------------------------------------------------------------------


def test_value_leaked_from_one_grad_raises_in_a_later_grad():
    leaked = []

    def f(x):
        leaked.append(x)
        return x * x

    grad(f)(1.0)
    with pytest.raises(LeakedTracerError, match=r"grad \(level \d+\)"):
        grad(lambda y: y * leaked[0])(2.0)
    with pytest.raises(LeakedTracerError):
        leaked[0] + 1.0  # any later computation, transformed or not
    with pytest.raises(LeakedTracerError):
        float(leaked[0])


@pytest.mark.parametrize(
    "transform",
    [
        lambda f: grad(f)(1.0),
        lambda f: jvp(f, (1.0,), (1.0,)),
        lambda f: vmap(f)(np.ones(3)),
    ],
    ids=["grad", "jvp", "vmap"],
)
def test_leak_detected_for_every_tracer_kind(transform):
    leaked = []

    def f(x):
        leaked.append(x)
        return x * 2.0

    transform(f)
    with pytest.raises(LeakedTracerError, match=type(leaked[0]).__name__):
        anp.sin(leaked[0])


# --- errors leave the library usable --------------------------------------------------


@pytest.mark.parametrize(
    "transform",
    [
        lambda f: grad(f)(1.0),
        lambda f: vjp(f, 1.0),
        lambda f: jvp(f, (1.0,), (1.0,)),
        lambda f: vmap(f)(np.ones(3)),
        lambda f: vmap(grad(f))(np.ones(3)),
        lambda f: grad(lambda x: vmap(f)(x * np.ones(3)).sum())(1.0),
    ],
    ids=["grad", "vjp", "jvp", "vmap", "vmap-grad", "grad-vmap"],
)
def test_stack_is_empty_after_an_error_and_next_call_is_correct(transform):
    def boom(x):
        x = x * 2.0
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        transform(boom)
    assert current_interpreters() == ()
    assert grad(lambda x: x**3)(2.0) == 12.0
    np.testing.assert_array_equal(vmap(lambda x: x * 2.0)(ys), 2 * ys)


def test_tracer_leaked_from_an_inner_transform_and_returned_raises_at_once():
    def f(x):
        inner = []
        vmap(lambda y: inner.append(y) or y)(np.ones(2))
        return x * 2.0, inner[0]  # the inner vmap's tracer escapes through the output

    with pytest.raises(LeakedTracerError, match="BatchedTensor of vmap"):
        jvp(f, (1.0,), (1.0,))


# --- primitives with several results -----------------------------------------------------


def _sincos():
    from autodiff.core.primitive import Primitive

    prim = Primitive(
        "sincos",
        lambda x: (np.sin(x), np.cos(x)),
        multiple_results=True,
        vjp=[lambda cts, ans, x: cts[0] * anp.cos(x) - cts[1] * anp.sin(x)],
        jvp=lambda ts, ans, x: (ts[0] * anp.cos(x), -ts[0] * anp.sin(x)),
        batch=lambda args, dims: (prim.bind(*args), (dims[0], dims[0])),
    )
    return prim


def test_multiple_results_primitive_under_every_transform():
    from autodiff.testing import check_grads, check_vmap

    sincos_p = _sincos()
    x = np.array([0.3, -1.2, 2.0])
    check_grads(lambda x: sincos_p.bind(x), (x,), order=2)
    check_vmap(lambda x: sincos_p.bind(x), 0, (np.stack([x, 2 * x]),))
    # Only one of the results used: the other gets a zero cotangent.
    np.testing.assert_allclose(grad(lambda x: anp.sum(sincos_p.bind(x)[1]))(x), -np.sin(x))
    # d/dt sin(t) cos(t) = cos(2t), per example
    product = vmap(grad(lambda t: sincos_p.bind(t)[0] * sincos_p.bind(t)[1]))(x)
    np.testing.assert_allclose(product, np.cos(2 * x))


def test_multiple_results_primitive_rejects_per_argument_jvp():
    from autodiff.core.primitive import Primitive

    with pytest.raises(TypeError, match="one function"):
        Primitive("pair", lambda x: (x, x), multiple_results=True, jvp=[lambda t, a, x: t])


def test_vmap_of_jvp_over_tangents_gives_forward_mode_jacobian():
    W = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    x = np.array([0.1, 0.2, -0.3])
    f = lambda x: anp.tanh(W @ x)
    jac_t = vmap(lambda t: jvp(f, (x,), (t,))[1])(np.eye(3))  # rows: J e_i
    np.testing.assert_allclose(jac_t.T, (1 - np.tanh(W @ x) ** 2)[:, None] * W)
