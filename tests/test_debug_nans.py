"""debug_nans(): the first NaN or infinity made from finite values raises, naming
the primitive, the transform and the line of user code that called it."""

import inspect
import threading

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import debug_nans, grad, hessian, jacfwd, jvp, vjp, vmap
from autodiff.debug.nans import checking_nans
from autodiff.errors import AutodiffError, NonFiniteError

HERE = __file__


def line_of(fn, text):
    """The file line number of the first source line of ``fn`` containing ``text``."""
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def sqrt_sum(x):
    y = np.sqrt(x)  # the derivative 1 / (2 sqrt(x)) is inf at 0
    return y.sum()


def log_shifted(x):
    z = anp.log(x - 1.0)  # -inf at x = 1
    return z.sum()


def test_a_forward_value_names_the_primitive_transform_and_line():
    with pytest.raises(NonFiniteError) as info, debug_nans():
        grad(log_shifted)(np.array([1.0, 2.0]))
    message = str(info.value)
    assert message.startswith("'log' made inf from finite values under grad (level ")
    assert f"{HERE}:{line_of(log_shifted, 'anp.log')} `z = anp.log(x - 1.0)" in message
    assert isinstance(info.value, AutodiffError) and isinstance(info.value, FloatingPointError)


def test_a_cotangent_names_the_vjp_the_argument_and_the_forward_line():
    with pytest.raises(NonFiniteError) as info, debug_nans():
        grad(sqrt_sum)(np.array([1.0, 0.0]))
    message = str(info.value)
    assert message.startswith(
        "the VJP of 'sqrt' made inf in the cotangent of its argument 0 from finite values, "
        "in the backward pass of grad (level "
    )
    assert f"'sqrt' was called at {HERE}:{line_of(sqrt_sum, 'np.sqrt')}" in message


def test_vjp_fn_called_later_still_names_the_forward_line():
    with debug_nans():
        _, vjp_fn = vjp(np.sqrt, np.array([0.0, 4.0]))
        with pytest.raises(
            NonFiniteError, match=r"the VJP of 'sqrt' made inf .* backward pass of vjp"
        ):
            vjp_fn(np.ones(2))


def test_a_tangent_names_the_jvp():
    match = r"the JVP of 'sqrt' made inf in the output tangent"
    with pytest.raises(NonFiniteError, match=match), debug_nans():
        jvp(np.sqrt, (np.array([0.0, 1.0]),), (np.ones(2),))


def test_under_vmap_the_call_inside_the_vjp_rule_is_named():
    with pytest.raises(NonFiniteError) as info, debug_nans():
        vmap(grad(lambda x: np.sqrt(x)))(np.array([1.0, 0.0]))
    message = str(info.value)
    assert message.startswith("'divide' made inf from finite values under vmap (level ")
    assert "inside the VJP of 'sqrt' (called at " in message


@pytest.mark.parametrize(
    "transform",
    [
        lambda f: grad(lambda x: f(x).sum()),
        lambda f: vmap(f),
        lambda f: jacfwd(f),
        lambda f: hessian(lambda x: f(x).sum()),
    ],
    ids=["grad", "vmap", "jacfwd", "hessian"],
)
def test_division_by_zero_is_caught_under_every_transform(transform):
    f = lambda x: 1.0 / (x - 2.0)
    match = "'divide' made inf from finite values"
    with pytest.raises(NonFiniteError, match=match), debug_nans():
        transform(f)(np.array([1.0, 2.0]))


def test_non_finite_inputs_propagate_without_an_error():
    x = np.array([np.nan, 1.0])
    with debug_nans():
        g = grad(lambda v: np.sin(v).sum())(x)
    np.testing.assert_array_equal(np.isnan(g), [True, False])
    np.testing.assert_allclose(g[1], np.cos(1.0))


def test_nan_made_from_inf_is_still_new():
    with pytest.raises(NonFiniteError, match="'sin' made nan from finite values"), debug_nans():
        grad(lambda v: np.sin(v).sum())(np.array([np.inf, 1.0]))


def test_finite_computations_are_unchanged():
    x = np.array([0.5, 1.5])
    with debug_nans():
        g = grad(sqrt_sum)(x)
        h = hessian(lambda v: np.sum(np.tanh(v) ** 2))(x)
    np.testing.assert_allclose(g, 0.5 / np.sqrt(x))
    t = np.tanh(x)
    np.testing.assert_allclose(np.diag(h), 2 * (1 - t**2) * (1 - 3 * t**2))


def test_without_debug_nans_nothing_is_checked():
    with np.errstate(divide="ignore"):
        g = grad(sqrt_sum)(np.array([1.0, 0.0]))
    assert np.isinf(g[1])


def test_the_flag_is_reset_after_an_error_and_is_per_thread():
    with pytest.raises(NonFiniteError), debug_nans():
        grad(sqrt_sum)(np.array([0.0]))
    assert not checking_nans()
    seen = []
    with debug_nans():
        thread = threading.Thread(target=lambda: seen.append(checking_nans()))
        thread.start()
        thread.join()
        assert checking_nans()
    assert seen == [False]
