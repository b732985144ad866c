"""The checkers themselves (``autodiff.testing``): ``check_grads`` and ``check_vmap``
pass on right rules and fail on known-wrong ones (``check_primitive``'s own cases
are in ``tests/test_check_primitive.py``).  A checker that never fails would let
every test built on it pass."""

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import stop_gradient
from autodiff.extend import Primitive
from autodiff.testing import check_grads, check_vmap

X = np.array([0.3, -1.2, 2.0])
XS = np.array([[0.3, -1.2, 2.0], [1.5, 0.4, -0.7], [-2.0, 0.9, 0.1]])


def cube(*, vjp=None, jvp=None, batch=None):
    """x**3 with right rules unless others are given."""
    p = Primitive(
        "cube",
        lambda x: x**3,
        vjp=[vjp or (lambda ct, ans, x: ct * 3 * x**2)],
        jvp=[jvp or (lambda t, ans, x: t * 3 * x**2)],
        batch=batch or (lambda args, dims: (p.bind(*args), dims[0])),
    )
    return p


# --- check_grads ------------------------------------------------------------------------------


def test_check_grads_passes_right_rules():
    check_grads(cube().bind, (X,), order=2)
    check_grads(lambda x, y: anp.sin(x) * y, (X, X[::-1]), order=2)
    check_grads(lambda z: anp.sum(z**2), (X + 1j * X[::-1],), order=2)


def test_check_grads_fails_a_sign_flip_in_either_mode():
    flipped_vjp = cube(vjp=lambda ct, ans, x: -ct * 3 * x**2)
    with pytest.raises(AssertionError, match=r"check_grads: derivatives of .* disagree"):
        check_grads(flipped_vjp.bind, (X,), order=1, modes=("rev",))
    flipped_jvp = cube(jvp=lambda t, ans, x: -t * 3 * x**2)
    with pytest.raises(AssertionError, match=r"forward mode <ct, jvp\(v\)> = "):
        check_grads(flipped_jvp.bind, (X,), order=1, modes=("fwd",))
    # each mode checks its own rule: the other one's flip is not seen
    check_grads(flipped_vjp.bind, (X,), order=1, modes=("fwd",))
    check_grads(flipped_jvp.bind, (X,), order=1, modes=("rev",))


def test_check_grads_fails_a_small_error_and_a_wrong_second_derivative():
    off = cube(vjp=lambda ct, ans, x: ct * 3 * x**2 * (1 + 1e-4))
    with pytest.raises(AssertionError, match="disagree"):
        check_grads(off.bind, (X,), order=1)
    # right first derivatives whose own derivative is wrong (a constant of the rule)
    frozen = cube(
        vjp=lambda ct, ans, x: ct * 3 * stop_gradient(x) ** 2,
        jvp=lambda t, ans, x: t * 3 * stop_gradient(x) ** 2,
    )
    check_grads(frozen.bind, (X,), order=1)
    with pytest.raises(AssertionError, match="disagree"):
        check_grads(frozen.bind, (X,), order=2)


def test_check_grads_fails_when_forward_and_reverse_disagree():
    # both within finite-difference accuracy of the truth, but not of each other
    vjp_off = cube(vjp=lambda ct, ans, x: ct * 3 * x**2 * (1 + 1e-8))
    with pytest.raises(AssertionError, match="disagree"):
        check_grads(vjp_off.bind, (X,), order=1)


# --- check_vmap -------------------------------------------------------------------------------


def _per_row(fn, batch):
    """A primitive applying ``fn`` to each row, with the batching rule ``batch``."""
    p = Primitive("per_row", fn, differentiable=False)
    p.def_batch(batch)
    return p


def _front(args, dims):
    return np.moveaxis(args[0], dims[0], 0)


def test_check_vmap_passes_right_rules_for_every_out_dims():
    right = _per_row(np.sort, lambda args, dims: (np.sort(_front(args, dims), axis=-1), 0))
    for in_dims in (0, 1, -1):
        for out_dims in (0, 1, -1, -2):
            check_vmap(right.bind, in_dims, (XS,), out_dims=out_dims)
    check_vmap(lambda x, y: (x * y, anp.sum(y)), (0, None), (XS, X), out_dims=(1, None))


def test_check_vmap_fails_a_rule_that_swaps_or_repeats_examples():
    swapped = _per_row(np.sort, lambda args, dims: (np.sort(_front(args, dims), axis=-1)[::-1], 0))
    with pytest.raises(AssertionError, match="at batch size 3 differs from a loop"):
        check_vmap(swapped.bind, 0, (XS,))

    def first_order(args, dims):  # every example in the first one's order
        xs = _front(args, dims)
        return (np.take(xs, np.argsort(xs[0]), axis=1) if len(xs) else xs), 0

    repeated = _per_row(np.sort, first_order)
    with pytest.raises(AssertionError, match="differs from a loop"):
        check_vmap(repeated.bind, 0, (XS,))


def test_check_vmap_fails_a_missing_output():
    p = Primitive("sincos", lambda x: (np.sin(x), np.cos(x)), multiple_results=True)
    p.def_batch(lambda args, dims: ((np.sin(args[0]),), (dims[0],)))  # drops cos
    with pytest.raises(AssertionError, match="returns PyTreeSpec"):
        check_vmap(p.bind, 0, (XS,))


def test_check_vmap_fails_a_wrong_dtype_and_a_wrong_out_dim():
    single = _per_row(np.sin, lambda args, dims: (np.sin(args[0]).astype(np.float32), dims[0]))
    with pytest.raises(AssertionError, match=r"got float32 of shape \(\d, 3\), expected float64"):
        check_vmap(single.bind, 0, (XS,))
    # claims the batch axis stays where it came in, but moves it to the end
    moved = _per_row(np.sin, lambda args, dims: (np.moveaxis(np.sin(args[0]), dims[0], -1), 0))
    with pytest.raises(AssertionError, match="differs from a loop"):
        check_vmap(moved.bind, 0, (XS,))


def test_check_vmap_fails_an_output_that_depends_on_the_batch_under_out_dims_none():
    with pytest.raises(Exception, match="out_dims is None"):
        check_vmap(lambda x: 2 * x, 0, (XS,), out_dims=None)
