"""Functions whose output shape depends on the values: nonzero, argwhere, flatnonzero,
extract, compress, x[mask], unique and the set functions.

The registry runs their ``size=`` forms (JAX's) through every transform; here:

* the forms without ``size=`` against NumPy, on plain arrays and on traced values
  (under ``jvp``, whose primal output is the function's value), since NumPy cannot
  be called with ``size=`` (these are the records with ``numpy_name=None``);
* the ``size=`` forms against NumPy's result padded or truncated by hand, as JAX
  defines them;
* derivatives under ``grad`` and ``jvp`` without ``size=`` (against finite
  differences, and where ties make the choice, against the first occurrence);
* the error under ``vmap`` without ``size=``, which must say what to do.
"""

from __future__ import annotations

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import grad, jvp, vmap
from autodiff.errors import ConcretizationError
from autodiff.testing import check_grads

rng = np.random.default_rng(13)
X = np.array([[0.0, 1.5, 0.0, -2.0], [3.0, 0.0, 0.0, 0.5], [0.0, 0.0, 4.0, 0.0]])
TIES = np.array([[3.0, 1.0, 3.0], [np.nan, 2.0, 1.0], [np.nan, 3.0, 0.5]])
A1, A2 = np.array([3.0, 1.0, 2.0, 1.0, 7.0]), np.array([2.0, 3.0, 5.0, 3.0])


def _equal(got, want):
    got, want = optree.tree_leaves(got), optree.tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_array_equal(g, w)


def _traced_value(f, x):
    """f(x) computed on a traced x (the primal output of jvp)."""
    return jvp(f, (x,), (np.ones_like(x),))[0]


UNSIZED = [
    ("nonzero", lambda lib, x: lib.nonzero(x)),
    ("argwhere", lambda lib, x: lib.argwhere(x)),
    ("flatnonzero", lambda lib, x: lib.flatnonzero(x)),
    ("extract", lambda lib, x: lib.extract(x > 0.7, x)),
    ("compress", lambda lib, x: lib.compress([True, False, True], x, axis=0)),
    ("compress flat", lambda lib, x: lib.compress([False, True], x)),
    ("x[mask]", lambda lib, x: x[x != 0]),
    ("unique", lambda lib, x: lib.unique(x)),
    ("unique, every output", lambda lib, x: lib.unique(x, True, True, True)),
    ("unique, NaNs apart", lambda lib, x: lib.unique(x, return_counts=True, equal_nan=False)),
    (
        "unique axis=1",
        lambda lib, x: lib.unique(lib.atleast_2d(x)[:, [0, 1, 0]], axis=1, return_inverse=True),
    ),
    ("unique_all", lambda lib, x: tuple(lib.unique_all(x))),
    ("unique_counts", lambda lib, x: tuple(lib.unique_counts(x))),
    ("unique_inverse", lambda lib, x: tuple(lib.unique_inverse(x))),
    ("union1d", lambda lib, x: lib.union1d(x, A2)),
    ("intersect1d", lambda lib, x: lib.intersect1d(x, A2, return_indices=True)),
    ("setdiff1d", lambda lib, x: lib.setdiff1d(x, A2)),
    ("setxor1d", lambda lib, x: lib.setxor1d(x, A2)),
]


@pytest.mark.parametrize(("name", "f"), UNSIZED, ids=[n for n, _ in UNSIZED])
@pytest.mark.parametrize("x", [X, TIES, A1], ids=["zeros", "ties and NaNs", "1-d"])
def test_without_size_agrees_with_numpy(name, f, x):
    if name.startswith(("union", "intersect", "setdiff", "setxor")) and x.ndim > 1:
        x = x.ravel()
    want = f(np, x)
    _equal(f(anp, x), want)
    _equal(_traced_value(lambda v: f(anp, v), x), want)


def test_unique_values_are_sorted_distinct_values():
    # NumPy 2.3+ may give unique_values in another order; ours are sorted, as JAX's
    x = np.array([5.0, 1.0, 5.0, np.nan, np.nan])
    _equal(anp.unique_values(x), np.sort(np.unique_values(x)))


# --- size= (JAX's semantics) ---------------------------------------------------------


def _padded(a, size, fill):
    a = np.asarray(a)[:size]
    return np.concatenate([a, np.full(size - len(a), fill, a.dtype)])


@pytest.mark.parametrize("size", [0, 2, 5, 9])
def test_sized_positions_are_numpys_padded_or_truncated(size):
    want = tuple(_padded(i, size, -1) for i in np.nonzero(X))
    _equal(anp.nonzero(X, size=size, fill_value=-1), want)
    _equal(anp.argwhere(X, size=size, fill_value=-1), np.stack(want, axis=-1))
    _equal(anp.flatnonzero(X, size=size), _padded(np.flatnonzero(X), size, 0))
    _equal(anp.extract(X > 0, X, size=size, fill_value=9.0), _padded(X[X > 0], size, 9.0))
    _equal(
        anp.compress(X[0] != 0, X, axis=1, size=size, fill_value=7.0)[0],
        _padded(X[0][X[0] != 0], size, 7.0),
    )


def test_sized_nonzero_takes_a_fill_value_per_axis():
    rows, cols = anp.nonzero(X, size=7, fill_value=(-1, -2))
    _equal((rows[-1], cols[-1]), (np.intp(-1), np.intp(-2)))


@pytest.mark.parametrize("size", [1, 3, 6])
def test_sized_unique_pads_like_jax(size):
    x = np.array([3.0, 1.0, 3.0, 2.0, 1.0, 3.0])
    values, index, inverse, counts = np.unique(x, True, True, True)
    smallest = values[0]
    got = anp.unique(x, True, True, True, size=size)
    _equal(got[0], _padded(values, size, smallest))  # padded with the smallest value
    _equal(got[1], _padded(index, size, index[0]))  # ... and its first position
    _equal(got[3], _padded(counts, size, 0))
    _equal(got[2], inverse)  # every entry's run, even past size (as in JAX)
    _equal(anp.unique(x, size=size, fill_value=-1.0), _padded(values, size, -1.0))


def test_sized_set_functions_pad():
    _equal(anp.union1d(A1, A2, size=6, fill_value=0.0), _padded(np.union1d(A1, A2), 6, 0.0))
    _equal(anp.setdiff1d(A1, A2, size=3, fill_value=0.0), _padded(np.setdiff1d(A1, A2), 3, 0.0))
    _equal(anp.setxor1d(A1, A2, size=4, fill_value=0.0), _padded(np.setxor1d(A1, A2), 4, 0.0))
    values, i1, i2 = np.intersect1d(A1, A2, return_indices=True)
    got = anp.intersect1d(A1, A2, return_indices=True, size=3, fill_value=0.0)
    # padded indices: those of the smallest value kept (as for unique)
    _equal(got, (_padded(values, 3, 0.0), _padded(i1, 3, i1[0]), _padded(i2, 3, i2[0])))
    # and by default the padded values are that smallest value kept
    _equal(anp.setdiff1d(A1, A2, size=3), _padded(np.setdiff1d(A1, A2), 3, 1.0))


def test_empty_inputs():
    empty = np.zeros(0)
    _equal(anp.unique(empty, return_counts=True), np.unique(empty, return_counts=True))
    _equal(anp.unique(empty, size=2, fill_value=1.0), np.ones(2))
    with pytest.raises(ValueError, match="fill_value"):
        anp.unique(empty, size=2)
    _equal(anp.intersect1d(empty, A2), np.intersect1d(empty, A2))
    _equal(anp.setdiff1d(empty, A2), np.setdiff1d(empty, A2))


def test_zero_dimensional_input_raises_as_in_numpy():
    with pytest.raises(ValueError, match="0d arrays"):
        anp.nonzero(np.float64(1.0))
    _equal(anp.argwhere(np.float64(2.0), size=1), np.argwhere(np.float64(2.0)))


# --- derivatives without size= ----------------------------------------------------------------


@pytest.mark.parametrize(
    "f",
    [
        lambda x: anp.extract(x > 0, x) ** 2,
        lambda x: anp.compress([True, False, True], x, axis=0) * 3.0,
        lambda x: x[x < 0.5] ** 3,
        lambda x: anp.unique(x) * np.arange(12.0),
        lambda x: anp.union1d(x[0], x[2]) + 1.0,
        lambda x: anp.setdiff1d(x, x[1]) ** 2,
    ],
    ids=["extract", "compress", "x[mask]", "unique", "union1d", "setdiff1d"],
)
def test_derivatives_against_finite_differences(f):
    x = np.linspace(-1.0, 1.0, 12).reshape(3, 4) + rng.uniform(0, 0.05, (3, 4))
    check_grads(f, (x,), order=2)


def test_derivative_of_a_repeated_value_goes_to_its_first_occurrence():
    x = np.array([2.0, 1.0, 2.0, 1.0])
    weights = np.array([10.0, 100.0])
    for f in [
        lambda v: anp.unique(v) * weights,
        lambda v: anp.unique(v, size=2) * weights,
        lambda v: anp.unique_values(v) * weights,
    ]:
        g = grad(lambda v, f=f: anp.sum(f(v)))(x)
        np.testing.assert_array_equal(g, [100.0, 10.0, 0.0, 0.0])
    # intersect1d: from ar1's first occurrence; ar2 gets nothing
    g1, g2 = grad(lambda a, b: anp.sum(anp.intersect1d(a, b) * weights), argnums=(0, 1))(x, x)
    np.testing.assert_array_equal(g1, [100.0, 10.0, 0.0, 0.0])
    np.testing.assert_array_equal(g2, np.zeros(4))


def test_padding_by_the_smallest_value_carries_its_derivative():
    x = np.array([2.0, 1.0])
    g = grad(lambda v: anp.sum(anp.unique(v, size=4)))(x)  # [1, 2, 1, 1]
    np.testing.assert_array_equal(g, [1.0, 3.0])
    g = grad(lambda v: anp.sum(anp.unique(v, size=4, fill_value=0.0)))(x)
    np.testing.assert_array_equal(g, [1.0, 1.0])


# --- under vmap ---------------------------------------------------------------------------------

XS = np.stack([X, X[::-1], np.abs(X)])

NEED_SIZE = [
    lambda x: anp.nonzero(x),
    lambda x: anp.argwhere(x),
    lambda x: anp.flatnonzero(x),
    lambda x: anp.extract(x > 0, x),
    lambda x: anp.compress(x[0] > 0, x, axis=1),
    lambda x: anp.unique(x),
    lambda x: anp.unique_counts(x),
    lambda x: anp.union1d(x[0], x[1]),
    lambda x: anp.intersect1d(x[0], x[1]),
]


@pytest.mark.parametrize("f", NEED_SIZE)
def test_vmap_without_size_names_jaxs_size_argument(f):
    with pytest.raises(ConcretizationError, match=r"differ from example to example.*size=k"):
        vmap(f)(XS)


def test_vmap_of_a_traced_mask_index_says_what_to_do():
    with pytest.raises(ConcretizationError, match=r"x\[mask\].*anp\.where\(mask, x, fill\)"):
        vmap(lambda x: x[x > 0])(XS)


def test_vmap_with_a_plain_mask_needs_no_size():
    mask = X[0] != 0
    got = vmap(lambda x: anp.sum(x[:, mask] ** 2))(XS)
    np.testing.assert_allclose(got, [np.sum(x[:, mask] ** 2) for x in XS])


def test_vmap_of_grad_with_size():
    f = lambda x: anp.sum(anp.extract(x > 0, x, size=4) ** 2)
    got = vmap(grad(f))(XS)
    np.testing.assert_allclose(got, [grad(f)(x) for x in XS])
