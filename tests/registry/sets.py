"""Registry records: sets.  The number of results depends on the values, so every
sample gives JAX's ``size=`` (NumPy has none: no plain NumPy call), which makes them
batchable; ``tests/test_value_dependent.py`` checks the unsized forms against NumPy.
Differentiable samples have no ties, within or across the inputs (finite differences
would split them); ties are in integer samples."""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import distinct, ints


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


ALL = dict(return_index=True, return_inverse=True, return_counts=True)

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
    ),
    OpInfo(
        "unique",
        [s(ints(4, 8), size=3, **ALL, label="ties, truncated, every output")],
        numpy_name=None,
    ),
    # The values are differentiable; indices and counts are integers (no derivative).
    *[
        OpInfo(
            name,
            [s(distinct(5), size=5, label="values")],
            call=lambda lib, x, name=name, **kw: getattr(lib, name)(x, **kw)[0],
            numpy_name=None,
        )
        for name in ["unique_all", "unique_counts", "unique_inverse"]
    ],
    *[
        OpInfo(name, [s(ints(4, 2, 4), size=5, label="ties, padded")], numpy_name=None)
        for name in ["unique_all", "unique_counts", "unique_inverse"]
    ],
    OpInfo(
        "unique_values",
        [s(distinct(5), size=5), s(ints(4, 2, 4), size=5, label="ties, padded")],
        numpy_name=None,
    ),
    OpInfo(
        "union1d",
        [s(distinct(4), distinct(3), size=8, fill_value=0.5), s(ints(5, 6), ints(5, 4), size=4)],
        numpy_name=None,
    ),
    OpInfo(
        "intersect1d",
        [
            s(ints(5, 6), ints(5, 4), size=3, label="ties"),
            s(ints(4, 7), ints(4, 3), size=4, return_indices=True, label="indices"),
        ],
        numpy_name=None,
    ),
    OpInfo(
        "setdiff1d",
        [s(distinct(5), distinct(2), size=6, fill_value=0.0), s(ints(5, 6), ints(5, 3), size=3)],
        numpy_name=None,
    ),
    OpInfo(
        "setxor1d",
        [s(distinct(3), distinct(3), size=5), s(ints(5, 6), ints(5, 4), size=4)],
        numpy_name=None,
    ),
]
