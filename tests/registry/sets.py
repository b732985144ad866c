"""Registry records: sets.  The number of results depends on the values, so every
sample gives JAX's ``size=`` (NumPy has none: no plain NumPy call), which makes them
batchable; the references are NumPy's results padded or truncated as JAX defines it,
and ``tests/test_value_dependent.py`` checks the unsized forms against NumPy.
Differentiable samples have no ties, within or across the inputs (finite differences
would split them); ties are in integer samples."""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import distinct, ints
from tests.registry.indexing import padded


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


ALL = dict(return_index=True, return_inverse=True, return_counts=True)


def _unique(ar, return_index=False, return_inverse=False, return_counts=False, *, size,
            fill_value=None):  # fmt: skip
    """JAX's sized unique: values padded with fill_value (default the smallest), the
    index of each one's first occurrence padded with the smallest's, counts with 0."""
    values, index, inverse, counts = np.unique(ar, True, True, True)
    out = [padded(values, size, values[0] if fill_value is None else fill_value)]
    out += [padded(index, size, index[0])] if return_index else []
    out += [inverse] if return_inverse else []
    out += [padded(counts, size, 0)] if return_counts else []
    return out[0] if len(out) == 1 else tuple(out)


def _array_api(*outputs):
    """unique_all & co. as the sized unique's outputs."""
    flags = {k: k in outputs for k in ALL}
    return lambda x, size, fill_value=None: _unique(x, **flags, size=size, fill_value=fill_value)


def _kept(values, size, fill_value, smallest):
    """A sized set function's values: padded with fill_value, by default the smallest
    value kept (or, if none is, the smallest input value)."""
    default = values[0] if len(values) else smallest
    return padded(values, size, default if fill_value is None else fill_value)


def _intersect1d(a, b, return_indices=False, *, size, fill_value=None):
    values, i1, i2 = np.intersect1d(a, b, return_indices=True)
    kept = _kept(values, size, fill_value, np.min(a))
    if not return_indices:
        return kept
    first1, first2 = (i1[0], i2[0]) if len(values) else (np.argmin(a), np.argmin(b))
    return kept, padded(i1, size, first1), padded(i2, size, first2)


OPS = [
    OpInfo(
        "isin",
        [
            s(ints(5, 3, 4), ints(5, 6)),
            s(ints(4, 5), ints(4, 2, 2), invert=True, label="invert"),
            # floats: scaled copies of the test set (vmap's other examples) match less
            s(np.array([1.0, 2.0, 3.0, 5.0]), np.array([2.0, 5.0, 7.0]), label="floats"),
        ],
        differentiable=False,
    ),
    OpInfo(
        "unique",
        [
            s(distinct(2, 3), size=6, label="size=6"),
            s(distinct(5), size=7, fill_value=0.5, label="padded"),
        ],
        numpy_name=None,
        reference=_unique,
    ),
    OpInfo(
        "unique",
        [s(ints(4, 8), size=3, **ALL, label="ties, truncated, every output")],
        numpy_name=None,
        reference=_unique,
    ),
    # The values are differentiable; indices and counts are integers (no derivative).
    *[
        OpInfo(
            name,
            [s(distinct(5), size=5, label="values")],
            call=lambda lib, x, name=name, **kw: getattr(lib, name)(x, **kw)[0],
            numpy_name=None,
            reference=_array_api(),
        )
        for name in ["unique_all", "unique_counts", "unique_inverse"]
    ],
    *[
        OpInfo(
            name,
            [s(ints(4, 2, 4), size=5, label="ties, padded")],
            numpy_name=None,
            reference=_array_api(*outputs),
        )
        for name, outputs in [
            ("unique_all", ALL),
            ("unique_counts", ["return_counts"]),
            ("unique_inverse", ["return_inverse"]),
        ]
    ],
    OpInfo(
        "unique_values",
        [s(distinct(5), size=5), s(ints(4, 2, 4), size=5, label="ties, padded")],
        numpy_name=None,
        reference=_array_api(),
    ),
    OpInfo(
        "union1d",
        [s(distinct(4), distinct(3), size=8, fill_value=0.5), s(ints(5, 6), ints(5, 4), size=4)],
        numpy_name=None,
        reference=lambda a, b, size, fill_value=None: _kept(
            np.union1d(a, b), size, fill_value, None
        ),
    ),
    OpInfo(
        "intersect1d",
        [
            s(ints(5, 6), ints(5, 4), size=3, label="ties"),
            s(ints(4, 7), ints(4, 3), size=4, return_indices=True, label="indices"),
        ],
        numpy_name=None,
        reference=_intersect1d,
    ),
    OpInfo(
        "setdiff1d",
        [s(distinct(5), distinct(2), size=6, fill_value=0.0), s(ints(5, 6), ints(5, 3), size=3)],
        numpy_name=None,
        reference=lambda a, b, size, fill_value=None: _kept(
            np.setdiff1d(a, b), size, fill_value, np.min(a)
        ),
    ),
    OpInfo(
        "setxor1d",
        [s(distinct(3), distinct(3), size=5), s(ints(5, 6), ints(5, 4), size=4)],
        numpy_name=None,
        reference=lambda a, b, size, fill_value=None: _kept(
            np.setxor1d(a, b), size, fill_value, min(np.min(a), np.min(b))
        ),
    ),
]
