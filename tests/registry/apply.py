"""Registry records: functions that apply a Python function (``numpy/_apply.py``).

The functions applied are written as NumPy code (``np.sin`` on traced values reaches
autodiff), as a user's would be.  ``vectorize`` and ``frompyfunc`` have no plain NumPy
call on traced values (NumPy's objects convert them); their reference is NumPy's own
loop on plain arrays (``frompyfunc``'s object array cast to floats).
"""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import positive, real


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


def _numpys(call):
    """``call`` with NumPy's own vectorize, on plain arrays: the reference."""
    return lambda *args: call(np, *args)


def _moments(v):
    return np.mean(v), np.sqrt(np.mean(v * v))


def _pieces(lib, x):
    # x < 0: a cubic; 0 <= x <= 1: 0.5 (a constant); x > 1: a logarithm (NaN below 0)
    return lib.piecewise(x, [x < 0, x > 1], [lambda v: v**3 - v, np.log, 0.5])


def _otherwise(lib, x):
    return lib.piecewise(x, [x < 0], [np.negative, np.sqrt])  # the second: "otherwise"


# Values inside the pieces of _pieces, away from the joins at 0 and 1.
_piecewise_x = np.array([-1.3, -0.4, 0.35, 0.8, 1.6, 2.4])

OPS = [
    OpInfo(
        "vectorize",
        [s(real(3, 1), real(4)), s(real(5), np.array(0.5), label="0-d")],
        call=lambda lib, a, b: lib.vectorize(lambda x, y: np.sin(x) * y + x * x)(a, b),
        numpy_name=None,
        reference=_numpys(
            lambda lib, a, b: lib.vectorize(lambda x, y: np.sin(x) * y + x * x)(a, b)
        ),
    ),
    OpInfo(
        "vectorize",
        [s(real(2, 3, 4), real(4), label="(m,n),(n)->(m)")],
        call=lambda lib, a, v: lib.vectorize(np.matmul, signature="(m,n),(n)->(m)")(a, v),
        numpy_name=None,
        reference=_numpys(
            lambda lib, a, v: lib.vectorize(np.matmul, signature="(m,n),(n)->(m)")(a, v)
        ),
    ),
    OpInfo(
        "vectorize",
        [s(real(3, 5), label="(n)->(),()")],
        call=lambda lib, x: lib.vectorize(_moments, signature="(n)->(),()")(x),
        numpy_name=None,
        reference=_numpys(lambda lib, x: lib.vectorize(_moments, signature="(n)->(),()")(x)),
    ),
    OpInfo(
        "vectorize",
        [s(real(2, 3), real(4), label="excluded")],
        call=lambda lib, x, p: lib.vectorize(lambda x, p: np.polyval(p, x), excluded={1})(x, p),
        numpy_name=None,
        reference=_numpys(
            lambda lib, x, p: lib.vectorize(lambda x, p: np.polyval(p, x), excluded={1})(x, p)
        ),
    ),
    OpInfo(
        "frompyfunc",
        [s(positive(3, 1), positive(4))],
        call=lambda lib, a, b: lib.frompyfunc(np.hypot, 2, 1)(a, b),
        numpy_name=None,
        reference=lambda a, b: np.frompyfunc(np.hypot, 2, 1)(a, b).astype(float),
    ),
    OpInfo(
        "apply_along_axis",
        [
            s(real(2, 3, 4), label="vector out"),
            s(real(3, 4), label="scalar out"),
            s(real(4, 2), real(4), label="extra argument"),
        ],
        call=lambda lib, x, *extra: (
            lib.apply_along_axis(lambda v: np.cumsum(v) * v[0], 1, x)
            if x.ndim == 3
            else lib.apply_along_axis(lambda v: np.sum(v**2), -1, x)
            if not extra
            else lib.apply_along_axis(lambda v, w: v @ w, 0, x, extra[0])
        ),
        numpy_dispatch=(0,),  # numpy.apply_along_axis looks at arr only
    ),
    OpInfo(
        "apply_over_axes",
        [s(real(2, 3, 4)), s(real(3, 4), label="one axis")],
        call=lambda lib, x: lib.apply_over_axes(np.sum, x, (0, 2) if x.ndim == 3 else -1),
    ),
    OpInfo(
        "piecewise", [s(_piecewise_x), s(_piecewise_x.reshape(2, 3), label="2-d")], call=_pieces
    ),
    OpInfo("piecewise", [s(positive(5) - 1.2, label="otherwise")], call=_otherwise),
]
