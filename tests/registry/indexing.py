"""Registry records: indexing and index updates."""

from __future__ import annotations

import numpy as np

import autodiff.numpy as anp
from tests.registry import OpInfo, Sample
from tests.registry.domains import distinct, drawn_as, ints, mask, real, unique_ints


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
    index = _fill(where, arrays)
    return lib.getitem(x, index) if hasattr(lib, "getitem") else x[index]


def _fill(where, arrays):
    """``where`` with its ARRAY slots (None) filled from ``arrays``, in order."""
    if not arrays:
        return where
    it = iter(arrays)
    index = tuple(next(it) if w is None else w for w in where)
    assert next(it, None) is None, "more index arrays than slots"
    return index


def _index_reference(x, *arrays, where):
    return x[_fill(where, arrays)]


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
        reference=_index_reference,
    ),
    OpInfo(
        "getitem",
        [s(real(4, 3, 3), where=index, label=f"x[{label}]") for label, index in STATIC_INDICES],
        call=lambda lib, x, where: x[where],
        numpy_name=None,
        reference=lambda x, where: x[where],
    ),
]


def _update(mode):
    """x.at[where].<mode>(y), through anp.at so plain arrays work too."""

    def call(lib, x, y, *arrays, where):
        return getattr(anp.at(x)[_fill(where, arrays)], mode)(y)

    return call


def _update_reference(mode):
    """x.at[where].<mode>(y) with NumPy: an assignment (the last of repeated
    positions wins, as in NumPy) or the ufunc's unbuffered ``at``."""

    def reference(x, y, *arrays, where):
        out, index = x.copy(), _fill(where, arrays)
        if mode == "set":
            out[index] = y
        else:
            ufunc = {"add": np.add, "multiply": np.multiply, "min": np.minimum, "max": np.maximum}
            ufunc[mode].at(out, index, y)
        return out

    return reference


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
            # no repeated index in any example: the derivative in y needs that
            s(real(6, 2), real(2), unique_ints(6, 2), where=(None, 0), label="batched index"),
        ],
        call=_update(mode),
        numpy_name=None,
        reference=_update_reference(mode),
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
    OpInfo(
        "argsort",
        [s(distinct(5)), s(distinct(3, 4), axis=0), s(real(), label="0-d")],  # 0-d: array([0])
        differentiable=False,
    ),
    OpInfo(
        "searchsorted",
        [
            s(np.sort(real(6)), real(4)),
            s(
                # other examples: sorted with ties too, values on the ties
                drawn_as([1.0, 2.0, 2.0, 3.0], lambda rng: np.sort(rng.integers(0, 4, 4)) * 1.0),
                drawn_as([2.0, 0.5], lambda rng: rng.integers(0, 8, 2) / 2),
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
    NumPy's own call would write into the sample's arrays (test_in_place.py runs it)."""
    return lambda lib, *args, **kw: getattr(anp, name)(*args, inplace=False, **kw)


def _in_place_reference(name):
    """NumPy's in-place ``name`` on a copy of the destination."""

    def reference(dest, *args, **kw):
        out = np.array(dest, copy=True)
        getattr(np, name)(out, *args, **kw)
        return out

    return reference


def padded(a, size, fill):
    """JAX's ``size=``: the first ``size`` entries of ``a`` (along axis 0), then
    ``fill`` (the references of the sized forms; also used by ``sets``)."""
    a = np.asarray(a)[:size]
    pad = np.full((size - len(a), *a.shape[1:]), fill, a.dtype)
    return np.concatenate([a, pad])


def _sized_nonzero(a, size, fill_value=None):
    fills = fill_value if isinstance(fill_value, tuple) else (fill_value or 0,) * a.ndim
    return tuple(padded(i, size, f) for i, f in zip(np.nonzero(a), fills))


def _sized_compress(a, condition, axis, size, fill_value=0):
    kept = np.moveaxis(np.compress(condition, a, axis), axis, 0)
    return np.moveaxis(padded(kept, size, fill_value), 0, axis)


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
        reference=_sized_compress,
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
            s(real(2, 3), ints(6, 2), real(2), axis=None, label="axis=None"),
        ],
        call=_functional("put_along_axis"),
        numpy_name=None,
        reference=_in_place_reference("put_along_axis"),
    ),
    OpInfo(
        "fill_diagonal",
        [s(real(3, 3), real(2), label="cycled"), s(real(5, 3), real(), wrap=True, label="wrap")],
        call=_functional("fill_diagonal"),
        numpy_name=None,
        reference=_in_place_reference("fill_diagonal"),
    ),
    OpInfo(
        "place",
        [s(real(2, 3), mask(2, 3), real(2))],
        call=_functional("place"),
        numpy_name=None,
        reference=_in_place_reference("place"),
    ),
    OpInfo(
        "put",
        [
            s(real(2, 3), ints(6, 4), real(2), label="cycled, repeats"),
            s(real(5), ints(20, 2) - 7, real(2), mode="wrap", label="wrap"),
        ],
        call=_functional("put"),
        numpy_name=None,
        reference=_in_place_reference("put"),
    ),
    OpInfo(
        "putmask",
        [s(real(2, 3), mask(2, 3), real(4))],
        call=_functional("putmask"),
        numpy_name=None,
        reference=_in_place_reference("putmask"),
    ),
    OpInfo(
        "copyto",
        [s(real(2, 3), real(3), mask(2, 3), label="where"), s(real(2, 3), real(1, 3))],
        call=lambda lib, dst, src, where=True: anp.copyto(dst, src, where=where, inplace=False),
        numpy_name=None,
        reference=lambda dst, src, where=True: _in_place_reference("copyto")(dst, src, where=where),
    ),
]
# JAX's size=: the first k positions, or padded with fill_value (test_value_dependent.py
# checks the unsized forms against NumPy, and the error under vmap).
SIZED_POSITIONS = {
    "nonzero": _sized_nonzero,
    "argwhere": lambda a, **kw: np.stack(_sized_nonzero(a, **kw), axis=-1),
    "flatnonzero": lambda a, **kw: _sized_nonzero(a.ravel(), **kw)[0],
}
OPS += [
    OpInfo(
        name,
        [
            s(ints(3, 3, 4), size=5, label="size=5"),
            s(ints(2, 2, 3), size=4, fill_value=-1, label="padded"),
        ],
        differentiable=False,
        numpy_name=None,
        reference=reference,
    )
    for name, reference in SIZED_POSITIONS.items()
]
OPS += [
    OpInfo(
        "extract",
        [
            s(mask(2, 3), real(2, 3), size=4, fill_value=0.5, label="size=4"),
            s(ints(2, 5), real(5), size=2, label="truncated"),
        ],
        numpy_name=None,
        reference=lambda c, a, size, fill_value=0: padded(np.extract(c, a), size, fill_value),
    ),
]
