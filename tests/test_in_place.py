"""NumPy's in-place functions on traced values: put_along_axis, fill_diagonal, place,
put, putmask, copyto.

The registry runs their functional forms (``inplace=False``) through every transform;
here: those forms against NumPy's in-place call on a copy (the forward reference for
the records with ``numpy_name=None``); NumPy's own calls on a traced destination,
which is rebound (as ``x[i] = v`` rebinds it), under grad, jvp and vmap; and the
errors for a plain destination that would have to hold traced values.
"""

from __future__ import annotations

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, jvp, vmap
from autodiff.errors import ConcretizationError
from autodiff.testing import check_grads

rng = np.random.default_rng(5)
MASK = np.array([[True, False, True], [True, False, True]])

# (name, destination, the other arguments, keywords)
CASES = [
    ("put_along_axis", rng.standard_normal((3, 4)), (np.array([[1], [0], [3]]), 9.0), {"axis": 1}),
    ("put_along_axis", rng.standard_normal((2, 3)), (np.array([5, 0]), [1.0, 2.0]),
     {"axis": None}),
    ("fill_diagonal", rng.standard_normal((3, 3)), ([1.0, 2.0],), {}),
    ("fill_diagonal", rng.standard_normal((5, 3)), ([1.0, 2.0],), {"wrap": True}),
    ("fill_diagonal", rng.standard_normal((2, 2, 2)), (5.0,), {}),
    ("place", rng.standard_normal((2, 3)), (MASK, [1.0, 2.0, 3.0]), {}),
    ("put", rng.standard_normal((2, 3)), ([-1, 0, 2, 2], [1.0, 2.0, 3.0]), {}),
    ("put", rng.standard_normal(5), ([7, -8], [1.0, 2.0]), {"mode": "wrap"}),
    ("put", rng.standard_normal(5), ([-1, 9], [1.0, 2.0]), {"mode": "clip"}),
    ("putmask", rng.standard_normal((2, 3)), (MASK, [1.0, 2.0]), {}),
    ("copyto", rng.standard_normal((2, 3)), ([1.0, 2.0, 3.0],), {"where": MASK}),
    ("copyto", rng.standard_normal((2, 3)), (5.0,), {}),
]  # fmt: skip
IDS = [f"{name}-{i}" for i, (name, *_) in enumerate(CASES)]


def _numpy_in_place(name, dest, args, kwargs):
    out = dest.copy()
    assert getattr(np, name)(out, *args, **kwargs) is None
    return out


@pytest.mark.parametrize(("name", "dest", "args", "kwargs"), CASES, ids=IDS)
def test_functional_form_agrees_with_numpy_and_leaves_its_input(name, dest, args, kwargs):
    before = dest.copy()
    got = getattr(anp, name)(dest, *args, inplace=False, **kwargs)
    np.testing.assert_array_equal(got, _numpy_in_place(name, dest, args, kwargs))
    np.testing.assert_array_equal(dest, before)


@pytest.mark.parametrize(("name", "dest", "args", "kwargs"), CASES, ids=IDS)
def test_anp_on_plain_arrays_is_numpys_in_place_call(name, dest, args, kwargs):
    out = dest.copy()
    assert getattr(anp, name)(out, *args, **kwargs) is None
    np.testing.assert_array_equal(out, _numpy_in_place(name, dest, args, kwargs))


@pytest.mark.parametrize(("name", "dest", "args", "kwargs"), CASES, ids=IDS)
def test_numpys_call_rebinds_a_traced_destination(name, dest, args, kwargs):
    def f(x):
        y = x * 1.0  # an alias of x must keep its value, as for an ndarray
        assert getattr(np, name)(y, *args, **kwargs) is None
        return y * x

    want = _numpy_in_place(name, dest, args, kwargs) * dest
    np.testing.assert_allclose(jvp(f, (dest,), (np.ones_like(dest),))[0], want)
    check_grads(f, (dest,), order=2)
    xs = np.stack([dest, 2 * dest])
    np.testing.assert_allclose(vmap(f)(xs), [f(x) for x in xs])


def test_traced_values_reach_the_destination_with_their_derivative():
    def f(x, v):
        y = x + 0.0 * anp.sum(v)  # traced whenever v is (a plain x cannot hold v)
        np.put_along_axis(y, np.array([[1], [0]]), v, axis=1)
        return y

    x, v = rng.standard_normal((2, 3)), rng.standard_normal((2, 1))
    check_grads(f, (x, v), order=2)
    gv = grad(lambda x, v: anp.sum(f(x, v)), argnums=1)(x, v)
    np.testing.assert_array_equal(gv, np.ones((2, 1)))


@pytest.mark.parametrize(
    ("call", "functional"),
    [
        (lambda d, v: np.put_along_axis(d, np.array([0]), v, axis=0), "put_along_axis"),
        (lambda d, v: np.place(d, d > 0, v), "place"),
        (lambda d, v: np.put(d, [0], v), "put"),
        (lambda d, v: np.putmask(d, d > 0, v), "putmask"),
        (lambda d, v: np.copyto(d, v), "copyto"),
        # numpy.fill_diagonal dispatches on its destination only: NumPy converts val
        # itself, and the error names anp.fill_diagonal
        (lambda d, v: np.fill_diagonal(d, v), "converts"),
    ],
    ids=["put_along_axis", "place", "put", "putmask", "copyto", "fill_diagonal"],
)
def test_a_plain_destination_cannot_hold_traced_values(call, functional):
    dest = np.ones((2, 2))
    message = rf"writes into its first argument.*anp\.{functional}\(.*inplace=False\)"
    if functional == "converts":
        message = r"fill_diagonal\(.*\) converts a value traced by grad.*anp\.fill_diagonal\("
    with pytest.raises(ConcretizationError, match=message):
        grad(lambda v: anp.sum(call(dest, v)))(np.float64(2.0))
    np.testing.assert_array_equal(dest, np.ones((2, 2)))  # nothing was written


def test_values_of_an_inner_transform_cannot_be_written_into_an_outer_destination():
    def outer(x):
        def inner(v):
            np.put(x, [0], v)
            return anp.sum(x)

        return grad(inner)(np.float64(1.0))

    with pytest.raises(TypeError, match=r"a = anp\.put\(a, ind, v, mode, inplace=False\)"):
        grad(outer)(np.ones(3))


def test_place_with_a_batched_mask_is_a_select():
    xs = rng.standard_normal((3, 5))
    got = vmap(lambda x: anp.place(x, x > 0, [7.0, 8.0], inplace=False))(xs)
    want = [_numpy_in_place("place", x, (x > 0, [7.0, 8.0]), {}) for x in xs]
    np.testing.assert_array_equal(got, want)


def test_place_needs_values_for_selected_entries():
    with pytest.raises(ValueError, match="Cannot insert from an empty array"):
        anp.place(np.ones(3), np.array([True, False, False]), [], inplace=False)
    np.testing.assert_array_equal(
        anp.place(np.ones(3), np.zeros(3, bool), [], inplace=False), np.ones(3)
    )


def test_copyto_checks_casting_as_numpy_does():
    with pytest.raises(TypeError, match="Cannot cast"):
        anp.copyto(np.zeros(3, int), 1.5, inplace=False)
