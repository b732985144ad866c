"""Registry records: indexing and index updates."""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import ints, real


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


STATIC_INDICES = [
    ("int", 1),
    ("negative int", -1),
    ("slice", slice(1, 3)),
    ("step", slice(None, None, 2)),
    ("reverse", slice(None, None, -1)),
    ("ellipsis", (Ellipsis, 1)),
    ("newaxis", (None, slice(None), 0)),
    ("int,slice", (1, slice(0, 2))),
    ("array", np.array([2, 0, 2])),
    ("array 2-d", np.array([[0, 1], [3, 3]])),
    (":,array", (slice(None), np.array([1, 0]))),
    ("array,:,array (split)", (np.array([0, 1]), slice(None), np.array([2, 0]))),
    ("int,array (adjacent)", (1, np.array([0, 2]))),
    ("int,:,array (split)", (0, slice(None), np.array([1, 1]))),
    ("mask", np.array([True, False, True, True])),
    ("list", [3, 1]),
]


def _index(lib, x, *arrays, where):
    """x[where], with ARRAY slots in ``where`` filled from ``arrays`` (so they batch).

    Called as anp.getitem: a plain-array x indexed by a traced index cannot go
    through x[i] (NumPy would convert the index itself).
    """
    it = iter(arrays)
    index = tuple(next(it) if w is None else w for w in where) if arrays else where
    return lib.getitem(x, index) if hasattr(lib, "getitem") else x[index]


OPS = [
    OpInfo(
        "getitem",
        [s(real(4, 3, 3), where=index, label=label) for label, index in STATIC_INDICES]
        + [
            s(real(5, 2), ints(5, 3), where=(None,), label="batched index"),
            s(real(2, 5, 3), ints(5, 4), where=(slice(None), None), label=":,batched index"),
            s(
                real(4, 2, 3),
                ints(4, 2),
                ints(3, 2),
                where=(None, slice(None), None),
                label="a,:,b",
            ),
            s(
                real(2, 4, 3),
                ints(4, 2),
                ints(3, 2),
                where=(slice(None), None, None),
                label=":,a,b",
            ),
            s(real(3, 2, 4), ints(4, 5), where=(slice(1, None), 0, None), label="1:,int,a"),
        ],
        call=_index,
        numpy_name=None,
    ),
    OpInfo(
        "getitem",
        [s(real(4, 3, 3), where=index, label=f"x[{label}]") for label, index in STATIC_INDICES],
        call=lambda lib, x, where: x[where],
        numpy_name=None,
    ),
]
