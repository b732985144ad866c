"""Every example in the torch.func.grad and torch.func.vjp documentation,
translated to autodiff, with values checked against hand-derived formulas."""

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, no_grad, vjp, vmap

rng = np.random.default_rng(7)


# --- torch.func.grad ------------------------------------------------------------------


def test_grad_of_sin_is_cos():
    x = rng.standard_normal()
    assert np.allclose(grad(lambda x: anp.sin(x))(x), np.cos(x))


def test_second_order_grad_of_sin():
    x = rng.standard_normal()
    assert np.allclose(grad(grad(lambda x: anp.sin(x)))(x), -np.sin(x))


def test_per_sample_gradients_with_vmap():
    batch_size, feature_size = 3, 5

    def model(weights, feature_vec):
        assert feature_vec.ndim == 1
        return anp.maximum(anp.dot(feature_vec, weights), 0.0)  # relu

    def compute_loss(weights, example, target):
        y = model(weights, example)
        return ((y - target) ** 2).mean()

    weights = rng.standard_normal(feature_size)
    examples = rng.standard_normal((batch_size, feature_size))
    targets = rng.standard_normal(batch_size)
    per_example = vmap(grad(compute_loss), in_dims=(None, 0, 0))(weights, examples, targets)
    # d/dw (relu(x.w) - t)^2 = 2 (relu(x.w) - t) [x.w > 0] x
    z = examples @ weights
    expected = (2 * (np.maximum(z, 0) - targets) * (z > 0))[:, None] * examples
    assert per_example.shape == (batch_size, feature_size)
    np.testing.assert_allclose(per_example, expected, rtol=1e-12)


def test_grad_with_has_aux_and_argnums():
    def my_loss_func(y, y_pred):
        loss_per_sample = (0.5 * y_pred - y) ** 2
        loss = loss_per_sample.mean()
        return loss, (y_pred, loss_per_sample)

    fn = grad(my_loss_func, argnums=(0, 1), has_aux=True)
    y_true = rng.random(4)
    y_preds = rng.random(4)
    (g_true, g_pred), (aux_pred, aux_per_sample) = fn(y_true, y_preds)
    residual = 0.5 * y_preds - y_true
    np.testing.assert_allclose(g_true, -2 * residual / 4)
    np.testing.assert_allclose(g_pred, 0.5 * 2 * residual / 4)
    # aux comes back as plain values, not traced ones
    assert isinstance(aux_pred, np.ndarray)
    np.testing.assert_allclose(aux_pred, y_preds)
    np.testing.assert_allclose(aux_per_sample, residual**2)


def _f_with_no_grad(x):
    with no_grad():
        c = x**2
    return x - c


def test_no_grad_inside_function_is_respected_by_grad():
    assert grad(_f_with_no_grad)(2.5) == 1.0


def test_no_grad_outside_grad_is_ignored_by_grad():
    with no_grad():
        assert grad(_f_with_no_grad)(2.5) == 1.0
        assert grad(lambda x: x**2)(2.5) == 5.0


# --- torch.func.vjp -------------------------------------------------------------------


def test_vjp_of_sin_sum_equals_grad():
    x = rng.standard_normal(5)
    f = lambda x: anp.sin(x).sum()  # torch: x.sin().sum()
    _, vjpfunc = vjp(f, x)
    g = vjpfunc(np.array(1.0))[0]
    np.testing.assert_allclose(g, grad(f)(x))
    np.testing.assert_allclose(g, np.cos(x))


def test_vjp_of_tuple_output():
    x = rng.standard_normal(5)
    _, vjpfunc = vjp(lambda x: (anp.sin(x), anp.cos(x)), x)
    vjps = vjpfunc((np.ones(5), np.ones(5)))
    np.testing.assert_allclose(vjps[0], np.cos(x) - np.sin(x))


def test_vjp_of_dict_output():
    x = rng.standard_normal(5)
    _, vjpfunc = vjp(lambda x: {"first": anp.sin(x), "second": anp.cos(x)}, x)
    vjps = vjpfunc({"first": np.ones(5), "second": np.ones(5)})
    np.testing.assert_allclose(vjps[0], np.cos(x) - np.sin(x))


def test_vjp_of_matmul_gives_both_partials():
    x, y = rng.standard_normal((5, 4)), rng.standard_normal((4, 5))
    _, vjpfunc = vjp(anp.matmul, x, y)
    cotangents = rng.standard_normal((5, 5))
    vjps = vjpfunc(cotangents)
    assert len(vjps) == 2
    np.testing.assert_allclose(vjps[0], cotangents @ y.T)
    np.testing.assert_allclose(vjps[1], x.T @ cotangents)


def test_vjp_keyword_argument_keeps_its_default():
    x = rng.standard_normal(5)

    def f(x, scale=4.0):
        return x * scale

    _, vjpfunc = vjp(f, x)
    np.testing.assert_array_equal(vjpfunc(np.ones_like(x))[0], np.full(x.shape, 4.0))


def test_no_grad_inside_function_is_respected_by_vjp():
    _, vjpfunc = vjp(_f_with_no_grad, 2.5)
    assert vjpfunc(1.0)[0] == 1.0


def test_no_grad_outside_vjp_is_ignored_by_vjp():
    with no_grad():
        out, vjpfunc = vjp(lambda x: x**2, 2.5)
    assert out == 6.25
    assert vjpfunc(1.0)[0] == 5.0


@pytest.mark.parametrize("plain_numpy", [False, True])
def test_seed_examples_in_plain_numpy(plain_numpy):
    """The same code with np.* instead of anp.* (the protocols route it)."""
    lib = np if plain_numpy else anp
    x = rng.standard_normal(5)
    _, vjpfunc = vjp(lambda x: lib.sum(lib.sin(x)), x)
    np.testing.assert_allclose(vjpfunc(1.0)[0], np.cos(x))
