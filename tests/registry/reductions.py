"""Registry records: reductions."""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import cplx, distinct, ints, mask, positive, real


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


AXES = [None, 0, -1, (0, 2)]


def _axis_samples(domain, keepdims=True):
    out = []
    for axis in AXES:
        for kd in [False, True] if keepdims else [False]:
            out.append(s(domain(2, 3, 4), axis=axis, keepdims=kd, label=f"axis={axis},kd={kd}"))
    return out


OPS = [
    OpInfo(
        "sum",
        [
            *_axis_samples(real),
            s(real(), label="0-d"),
            s(real(2, 3), axis=(), label="no axis"),  # a new array, as NumPy's: not x
            s(cplx(2, 3), axis=1, label="complex"),
        ],
    ),
    OpInfo(
        "mean", [s(real(3, 4)), s(real(3, 4), axis=1), s(real(2, 3, 4), axis=(0, 2), keepdims=True)]
    ),
    OpInfo("max", _axis_samples(distinct)),
    OpInfo("amax", [s(distinct(3, 4), axis=1)]),
    OpInfo("min", [s(distinct(3, 4), axis=0), s(distinct(5))]),
    OpInfo("amin", [s(distinct(3, 4), axis=-1, keepdims=True)]),
    OpInfo(
        "argmax",
        [s(distinct(3, 4)), s(distinct(3, 4), axis=1), s(distinct(3, 4), axis=0, keepdims=True)],
        differentiable=False,
    ),
    OpInfo("argmin", [s(distinct(3, 4), axis=-1)], differentiable=False),
]


def _ufunc_method(ufunc, method):
    """np.add.reduce and friends: only NumPy spells them, for traced values too."""
    return lambda lib, *xs, **kw: getattr(getattr(np, ufunc), method)(*xs, **kw)


def _running(reduce):
    """A closed form of ``ufunc.accumulate``: ``reduce`` over each prefix along ``axis``."""

    def accumulate(x, axis=0):
        prefixes = [
            reduce(np.take(x, range(k + 1), axis=axis), axis=axis) for k in range(x.shape[axis])
        ]
        return np.stack(prefixes, axis=axis)

    return accumulate


def _outer(op):
    """A closed form of ``ufunc.outer``: every pair of elements."""
    return lambda a, b: op(np.reshape(a, np.shape(a) + (1,) * np.ndim(b)), b)


OPS += [
    OpInfo(
        "prod",
        [
            *_axis_samples(positive, keepdims=False),
            s(np.array([2.0, 0.0, 3.0, 0.5]), label="a zero"),
            s(np.array([[2.0, 0.0], [0.0, 3.0]]), axis=1, keepdims=True, label="zeros,kd"),
            s(cplx(2, 3) * 0.7, axis=0, label="complex"),
            s(positive(3), axis=(), label="no axis"),
        ],
    ),
    OpInfo(
        "cumsum",
        [
            s(real(3, 4)),
            s(real(3, 4), axis=1),
            s(real(2, 3, 4), axis=-2),
            s(cplx(4), label="complex"),
        ],
    ),
    OpInfo(
        "cumprod",
        [
            s(positive(5)),
            s(real(3, 4), axis=0),
            s(np.array([1.5, 0.0, 2.0, -1.0, 0.5]), label="a zero"),
        ],
    ),
    OpInfo(
        "cumulative_sum",
        [
            s(real(4)),
            s(real(), label="0-d"),  # NumPy's: a 1-d array of one entry
            s(real(3, 4), axis=1, include_initial=True, label="initial"),
            s(real(2, 3, 4), axis=-2),
            s(cplx(4), include_initial=True, label="complex"),
        ],
    ),
    OpInfo(
        "cumulative_prod",
        [
            s(positive(5)),
            s(positive(), label="0-d"),
            s(real(3, 4), axis=0, include_initial=True, label="initial"),
            s(np.array([1.5, 0.0, 2.0, -1.0, 0.5]), label="a zero"),
        ],
    ),
    OpInfo(
        "var",
        [
            s(real(3, 4)),
            s(real(3, 4), axis=1, ddof=1, label="ddof=1"),
            s(real(2, 3, 4), axis=(0, 2), keepdims=True),
            s(cplx(5), label="complex"),
        ],
    ),
    OpInfo("std", [s(real(3, 4), axis=0), s(real(5), ddof=1, label="ddof=1")]),
    OpInfo(
        "average",
        [
            s(real(3, 4)),
            s(real(3, 4), positive(4), axis=1, label="1-d weights"),
            s(real(3, 4), positive(3, 4), label="full weights"),
        ],
        call=lambda lib, a, w=None, **kw: lib.average(a, weights=w, **kw),
    ),
    OpInfo("ptp", [s(distinct(3, 4)), s(distinct(3, 4), axis=1, keepdims=True)]),
    OpInfo("nansum", [s(np.array([[1.0, np.nan], [2.0, 3.0]]), axis=0), s(real(3, 4))]),
    OpInfo("nansum", [s(ints(3, 4), label="ints")], differentiable=False),  # of NumPy's dtype
    OpInfo("nanmean", [s(np.array([[1.0, np.nan], [2.0, 3.0]]), axis=1), s(real(3, 4))]),
    OpInfo("all", [s(mask(3, 4)), s(mask(3, 4), axis=1)], differentiable=False),
    OpInfo("any", [s(mask(3, 4), axis=0, keepdims=True)], differentiable=False),
    OpInfo(
        "add.reduce",
        [s(real(3, 4)), s(real(2, 3, 4), axis=(0, 2))],
        call=_ufunc_method("add", "reduce"),
        numpy_name=None,
        reference=lambda x, axis=0: np.sum(x, axis=axis),
    ),
    OpInfo(
        "multiply.reduce",
        [s(positive(3, 4), axis=1)],
        call=_ufunc_method("multiply", "reduce"),
        numpy_name=None,
        reference=lambda x, axis=0: np.prod(x, axis=axis),
    ),
    OpInfo(
        "maximum.reduce",
        [s(distinct(3, 4))],
        call=_ufunc_method("maximum", "reduce"),
        numpy_name=None,
        reference=lambda x, axis=0: np.max(x, axis=axis),
    ),
    OpInfo(
        "minimum.reduce",
        [s(distinct(3, 4), axis=1)],
        call=_ufunc_method("minimum", "reduce"),
        numpy_name=None,
        reference=lambda x, axis=0: np.min(x, axis=axis),
    ),
    OpInfo(
        "add.accumulate",
        [s(real(3, 4), axis=1)],
        call=_ufunc_method("add", "accumulate"),
        numpy_name=None,
        reference=_running(np.sum),
    ),
    OpInfo(
        "multiply.accumulate",
        [s(positive(5))],
        call=_ufunc_method("multiply", "accumulate"),
        numpy_name=None,
        reference=_running(np.prod),
    ),
    OpInfo(
        "maximum.accumulate",
        [s(distinct(6)), s(distinct(3, 4), axis=1)],
        call=_ufunc_method("maximum", "accumulate"),
        numpy_name=None,
        reference=_running(np.max),
    ),
    OpInfo(
        "minimum.accumulate",
        [s(distinct(6))],
        call=_ufunc_method("minimum", "accumulate"),
        numpy_name=None,
        reference=_running(np.min),
    ),
    OpInfo(
        "add.outer",
        [s(real(3), real(2, 2))],
        call=_ufunc_method("add", "outer"),
        numpy_name=None,
        reference=_outer(np.add),
    ),
    OpInfo(
        "multiply.outer",
        [s(real(3), real(4))],
        call=_ufunc_method("multiply", "outer"),
        numpy_name=None,
        reference=_outer(np.multiply),
    ),
]


def nans(*shape):
    """Distinct values with every fourth entry NaN (no slice of the shapes used here is
    all NaN)."""
    x = distinct(*shape)
    x.reshape(-1)[np.arange(x.size) % 4 == 1] = np.nan
    return x


OPS += [
    OpInfo(
        "nanvar",
        [
            s(nans(3, 5), axis=1),
            s(nans(4, 3), ddof=1, label="ddof=1"),
            s(nans(3, 5) + 1j * real(3, 5), axis=0, keepdims=True, label="complex"),
        ],
    ),
    OpInfo("nanstd", [s(nans(3, 5), axis=1), s(nans(6), ddof=1, label="ddof=1")]),
    OpInfo("nanmax", [s(nans(3, 5), axis=1), s(nans(4, 3), axis=0, keepdims=True)]),
    OpInfo("nanmin", [s(nans(3, 5)), s(nans(4, 3), axis=-1)]),
    OpInfo("nanargmax", [s(nans(3, 5), axis=1), s(nans(6))], differentiable=False),
    OpInfo("nanargmin", [s(nans(4, 3), axis=0, keepdims=True)], differentiable=False),
    OpInfo("nanprod", [s(np.abs(nans(3, 5)) * 0.3 + 0.5, axis=1), s(np.abs(nans(6)) * 0.2 + 0.5)]),
    OpInfo("nancumsum", [s(nans(3, 5), axis=1), s(nans(6))]),
    OpInfo(
        "nancumprod", [s(np.abs(nans(3, 5)) * 0.3 + 0.5, axis=0), s(np.abs(nans(6)) * 0.2 + 0.5)]
    ),
    OpInfo(
        "count_nonzero",
        [s(ints(3, 3, 4)), s(ints(3, 3, 4), axis=1, keepdims=True), s(mask(2, 3), axis=0)],
        differentiable=False,
    ),
    OpInfo(
        "trapezoid",
        [
            s(real(3, 5)),
            s(real(3, 5), np.cumsum(positive(5)), label="x 1-d"),
            s(real(4, 3), real(4, 3), axis=0, label="x like y"),
            s(real(6), dx=0.5, label="dx"),
        ],
    ),
]
