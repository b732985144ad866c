"""The fast paths behind gathers, their VJPs and rolls (issue 13's speed target).

``index_add`` (the transpose of ``x[i]``) turns an index of whole slices around
adjacent index arrays into one flat index for ``np.add.at``, and ``getitem`` into one
``np.take``; other indices keep NumPy's own indexing.  Both must give NumPy's results
exactly, for every index form, dtype, repeated and negative position; out-of-bounds
positions raise NumPy's IndexError.  Timing is measured in ``benchmarks/fluid.py``
(W7), never here.
"""

from __future__ import annotations

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad
from autodiff.rules import indexing
from autodiff.testing import check_grads

rng = np.random.default_rng(7)

INDICES = [
    ((6,), (np.array([1, 3, 1, -1, 0, 5, 5]),), "1-d, repeats, negative: add.at"),
    ((5, 4), (np.array([1, 3, 1, -1]),), "rows"),
    ((5, 4), (slice(None), np.array([[1, 3], [1, -4]])), "columns, 2-d index"),
    ((5, 4, 3), (slice(None), np.array([[1, 3], [1, -1]]), np.array([0, 2])), "adjacent pair"),
    ((4, 4), (np.array([[0, 1], [3, 3]]), np.array([[2, 2], [0, 0]])), "a full gather"),
    ((5, 4), (2, np.array([1, 1, 0, 3, 3, 2, 1, 0])), "int then array"),
    ((5, 4, 3), (np.array([1, 1, 4]), slice(None), np.array([0, 2, 2])), "split: add.at"),
    ((5, 4), (slice(1, 4), np.array([1, 1, 3])), "partial slice: add.at"),
    ((40, 2), (np.array([3, 3]),), "sparse"),
]


@pytest.mark.parametrize(("shape", "index", "label"), INDICES, ids=[i[2] for i in INDICES])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.complex128])
def test_index_add_sums_like_numpy_add_at(shape, index, label, dtype):
    x = rng.standard_normal(shape).astype(dtype)
    static, arrays = indexing._normalize_index(shape, index)
    y = rng.standard_normal(x[index].shape)
    if dtype == np.complex128:
        y = y + 1j * rng.standard_normal(y.shape)
    y = y.astype(dtype)
    want = x.copy()
    np.add.at(want, index, y)
    flat = indexing._flat_add(x.copy(), y, arrays, static)
    assert flat != label.endswith("add.at")  # the path the label names
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    got = indexing.index_add_p.bind(x, y, *arrays, index=static)
    assert got.dtype == x.dtype
    np.testing.assert_allclose(got, want, rtol=rtol)
    # the VJP of x[index]: the same, into zeros
    spread = indexing.untake_p.bind(y, *arrays, index=static, shape=shape)
    assert spread.dtype == x.dtype
    np.testing.assert_allclose(spread, want - x, rtol=rtol, atol=rtol)


def test_index_add_of_integers():
    x = np.zeros((4, 2), np.int64)
    static, arrays = indexing._normalize_index(x.shape, np.array([0, 0, 3, 1]))
    got = indexing.index_add_p.bind(x, np.arange(8).reshape(4, 2), *arrays, index=static)
    np.testing.assert_array_equal(got, [[2, 4], [6, 7], [0, 0], [4, 5]])


@pytest.mark.parametrize("bad", [4, -5])
@pytest.mark.parametrize("shape", [(4,), (4, 2)])
def test_index_add_out_of_bounds_raises_numpys_error(bad, shape):
    # in a 2-D array a column out of bounds may still name a valid flat position
    index = (
        (np.array([0, bad, 1, 2]),) if len(shape) == 1 else (np.array([0, 1]), np.array([1, bad]))
    )
    static, arrays = indexing._normalize_index(shape, index)
    x = np.zeros(shape)
    with pytest.raises(IndexError, match="out of bounds"):
        indexing.index_add_p.bind(x, np.ones(x[index].shape), *arrays, index=static)
    with pytest.raises(IndexError, match="out of bounds"):
        indexing.getitem_p.bind(x, *arrays, index=static)


@pytest.mark.parametrize(("shape", "index", "label"), INDICES, ids=[i[2] for i in INDICES])
def test_getitem_gathers_like_numpy(shape, index, label):
    x = rng.standard_normal(shape)
    static, arrays = indexing._normalize_index(shape, index)
    merged = indexing._merged_take(x, static, arrays)
    if len(arrays) > 1 and not label.endswith("add.at"):
        assert merged is not None
        np.testing.assert_array_equal(merged, x[index])
    np.testing.assert_array_equal(indexing.getitem_p.bind(x, *arrays, index=static), x[index])


def test_gather_gradients_accumulate_repeated_positions():
    rows, cols = np.array([[0, 0], [2, 0]]), np.array([[1, 1], [0, 1]])
    g = grad(lambda f: anp.sum(f[rows, cols] * np.array([[1.0, 2.0], [3.0, 4.0]])))(np.ones((3, 2)))
    np.testing.assert_array_equal(g, [[0.0, 7.0], [0.0, 0.0], [3.0, 0.0]])


@pytest.mark.parametrize(
    ("shift", "axis"),
    [(1, None), (-2, 1), ((1, 2), (0, 1)), ((1, 2), 0), ((1, -1), (1, 1)), (7, 0), (0, 0)],
)
def test_roll_agrees_with_numpy_and_its_vjp_rolls_back(shift, axis):
    x = rng.standard_normal((3, 4))
    np.testing.assert_array_equal(anp.roll(x, shift, axis), np.roll(x, shift, axis))
    check_grads(lambda v: anp.roll(v, shift, axis) * np.arange(12.0).reshape(3, 4), (x,))


def test_the_fluid_benchmark_is_differentiated_correctly():
    """W7's workload, small: its gradient against finite differences."""
    from benchmarks import fluid

    velocity, smoke, target = fluid.data(8)
    check_grads(lambda v: fluid.loss(anp, v, smoke, target), (velocity,), order=1)
