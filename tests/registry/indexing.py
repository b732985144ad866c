"""Registry records: indexing and index updates."""

from __future__ import annotations

import numpy as np

import autodiff.numpy as anp
from tests.registry import OpInfo, Sample
from tests.registry.domains import distinct, ints, mask, real


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


def _update(mode):
    """x.at[where].<mode>(y), through anp.at so plain arrays work too."""

    def call(lib, x, y, *arrays, where):
        it = iter(arrays)
        index = tuple(next(it) if w is None else w for w in where) if arrays else where
        return getattr(anp.at(x)[index], mode)(y)

    return call


OPS += [
    OpInfo(
        f"at.{mode}",
        [
            s(real(5), real(2), where=(np.array([1, 3]),), label="array"),
            s(real(5), real(3), where=(np.array([1, 3, 1]),), label="repeated"),
            s(real(4, 3), real(2, 3), where=(slice(1, 3),), label="slice"),
            s(real(4, 3), real(3), where=(None,), label="broadcast"),
            s(real(6, 2), real(2), ints(6, 2), where=(None, 0), label="batched index"),
        ]
        if mode != "multiply"
        else [
            s(real(5), real(2), where=(np.array([1, 3]),), label="array"),
            s(real(4, 3), real(2, 3), where=(slice(1, 3),), label="slice"),
        ],
        call=_update(mode),
        numpy_name=None,
    )
    for mode in ["set", "add", "multiply", "min", "max"]
]
OPS += [
    OpInfo("take", [s(real(5), indices=[4, 0, 0]), s(real(3, 4), indices=[[1], [3]], axis=1)]),
    OpInfo(
        "take",
        [s(real(5, 2), ints(5, 3), axis=0, label="traced indices")],
        call=lambda lib, a, i, **kw: lib.take(a, i, **kw),
        numpy_dispatch=(0,),
    ),
    OpInfo(
        "take_along_axis",
        [
            s(real(3, 4), ints(4, 3, 2), axis=1),
            s(real(3, 4), ints(3, 2, 4), axis=0, label="axis=0"),
        ],
        call=lambda lib, a, i, **kw: lib.take_along_axis(a, i, **kw),
    ),
    OpInfo("sort", [s(distinct(5)), s(distinct(3, 4), axis=0), s(distinct(2, 3), axis=None)]),
    OpInfo("argsort", [s(distinct(5)), s(distinct(3, 4), axis=0)], differentiable=False),
    OpInfo(
        "searchsorted",
        [
            s(np.sort(real(6)), real(4)),
            s(
                np.array([1.0, 2.0, 2.0, 3.0]),
                np.array([2.0, 0.5]),
                side="right",
                label="right, ties",
            ),
        ],
        differentiable=False,
    ),
]

# --- gathers, NumPy's in-place functions (as inplace=False), value-dependent shapes --------------


def _functional(name):
    """NumPy's in-place ``name`` as the form that returns the result (inplace=False):
    NumPy's own call would write into the sample's arrays (test_in_place.py checks it)."""
    return lambda lib, *args, **kw: getattr(anp, name)(*args, inplace=False, **kw)


OPS += [
    OpInfo(
        "compress",
        [
            s(real(3, 4), condition=np.array([True, False, True]), axis=0),
            s(real(2, 3), condition=[False, True], label="flattened, short condition"),
        ],
        call=lambda lib, a, condition, **kw: lib.compress(condition, a, **kw),
    ),
    OpInfo(
        "compress",
        [s(real(5, 2), mask(5), axis=0, size=3, fill_value=0.5, label="size=3, traced condition")],
        call=lambda lib, a, condition, **kw: lib.compress(condition, a, **kw),
        numpy_name=None,  # numpy.compress has no size=
    ),
    OpInfo(
        "choose",
        [
            s(ints(3, 2, 4), real(2, 4), real(4), real(2, 1), label="broadcast choices"),
            s(ints(5, 3), real(3), real(3), mode="wrap", label="wrap"),
            s(ints(4, 3), real(3), real(3), mode="clip", label="clip"),
        ],
        call=lambda lib, a, *choices, **kw: lib.choose(a, list(choices), **kw),
    ),
    OpInfo(
        "put_along_axis",
        [
            s(real(3, 4), ints(4, 3, 2), real(3, 2), axis=1),
            s(real(2, 3), np.array([5, 0]), real(2), axis=None, label="axis=None"),
        ],
        call=_functional("put_along_axis"),
        numpy_name=None,
    ),
    OpInfo(
        "fill_diagonal",
        [s(real(3, 3), real(2), label="cycled"), s(real(5, 3), real(), wrap=True, label="wrap")],
        call=_functional("fill_diagonal"),
        numpy_name=None,
    ),
    OpInfo(
        "place", [s(real(2, 3), mask(2, 3), real(2))], call=_functional("place"), numpy_name=None
    ),
    OpInfo(
        "put",
        [
            s(real(2, 3), ints(6, 4), real(2), label="cycled, repeats"),
            s(real(5), np.array([7, -1]), real(2), mode="wrap", label="wrap"),
        ],
        call=_functional("put"),
        numpy_name=None,
    ),
    OpInfo(
        "putmask",
        [s(real(2, 3), mask(2, 3), real(4))],
        call=_functional("putmask"),
        numpy_name=None,
    ),
    OpInfo(
        "copyto",
        [s(real(2, 3), real(3), mask(2, 3), label="where"), s(real(2, 3), real(1, 3))],
        call=lambda lib, dst, src, where=True: anp.copyto(dst, src, where=where, inplace=False),
        numpy_name=None,
    ),
]
# JAX's size=: the first k positions, or padded with fill_value (test_value_dependent.py
# checks the unsized forms against NumPy, and the error under vmap).
OPS += [
    OpInfo(
        name,
        [
            s(ints(3, 3, 4), size=5, label="size=5"),
            s(ints(2, 2, 3), size=4, fill_value=-1, label="padded"),
        ],
        differentiable=False,
        numpy_name=None,
    )
    for name in ["nonzero", "argwhere", "flatnonzero"]
]
OPS += [
    OpInfo(
        "extract",
        [
            s(mask(2, 3), real(2, 3), size=4, fill_value=0.5, label="size=4"),
            s(ints(2, 5), real(5), size=2, label="truncated"),
        ],
        numpy_name=None,
    ),
]
