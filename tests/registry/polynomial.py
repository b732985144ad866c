"""Registry records: convolution (``rules/polynomial.py``), polynomials and interpolation
(``numpy/_polynomial.py``).

Samples keep away from the kinks of ``interp`` (sample points, the ends) and give
``polydiv`` a divisor whose leading coefficient is away from 0.  Complex roots in
``poly`` (whose real-or-complex result reads values) are tested in
``tests/test_elementwise_polynomial_apply.py``, as are forward references NumPy has no call for.
"""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import away_from_zero, cplx, distinct, positive, real


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


_xs = distinct(8) / 3  # fitting abscissae: distinct, about -1.4 to 1.2
_xp = np.array([-1.0, -0.4, 0.3, 0.9, 1.6, 2.0])
_x = np.array([-1.5, -0.7, 0.0, 0.5, 1.2, 1.8, 2.5])  # two outside [xp[0], xp[-1]]
_divisor = np.concatenate([away_from_zero(1), real(2)])


def _full(lib, x, y):
    c, resids, _rank, sv, _rcond = lib.polyfit(x, y, 2, full=True)
    return c, resids, sv  # the rank is an integer: no derivative


OPS = [
    OpInfo(
        "convolve",
        [
            s(real(5), real(3)),
            s(real(3), real(5), mode="same", label="same, v longer"),
            s(cplx(6), cplx(4), mode="valid", label="valid complex"),
        ],
    ),
    OpInfo(
        "correlate",
        [
            s(real(6), real(3)),
            s(cplx(3), cplx(5), mode="full", label="full complex"),
            s(real(4), real(6), mode="same", label="same, v longer"),
        ],
    ),
    OpInfo(
        "polyval",
        [
            s(real(4), real(2, 3)),
            s(cplx(3), cplx(2), label="complex"),
            s(real(3, 2), real(4, 1), label="2-d p"),
        ],
    ),
    OpInfo("polyfit", [s(_xs, real(8), deg=2), s(_xs, real(8, 2), deg=1, label="2-d y")]),
    OpInfo(
        "polyfit",
        [s(_xs, real(8), positive(8), label="weights")],
        call=lambda lib, x, y, w: lib.polyfit(x, y, 2, w=w),
    ),
    OpInfo("polyfit", [s(_xs, real(8), label="full")], call=_full),
    OpInfo(
        "polyfit",
        [s(_xs, real(8), label="cov")],
        call=lambda lib, x, y: lib.polyfit(x, y, 2, cov=True),
    ),
    OpInfo("polyadd", [s(real(2), real(4)), s(cplx(4), real(2), label="complex")]),
    OpInfo("polysub", [s(real(4), real(2)), s(real(3), real(3), label="same length")]),
    OpInfo("polymul", [s(real(3), real(4)), s(cplx(2), real(3), label="complex")]),
    OpInfo(
        "polydiv",
        [
            s(real(5), _divisor),
            s(real(2), _divisor, label="lower degree"),
            s(real(4), away_from_zero(1), label="by a constant"),
        ],
    ),
    OpInfo("polyder", [s(real(5)), s(cplx(4), m=2, label="m=2 complex")]),
    OpInfo("polyint", [s(real(4)), s(real(3), m=3, k=1.5, label="m=3")]),
    OpInfo(
        "polyint",
        [s(real(3), real(2), label="traced k")],
        call=lambda lib, p, k: lib.polyint(p, m=2, k=k),
        numpy_dispatch=(0,),  # numpy.polyint looks at p only
    ),
    OpInfo("poly", [s(real(4)), s(real(1), label="one root"), s(real(3) * 2, label="three")]),
    OpInfo(
        "vander",
        [
            s(real(4)),
            s(real(3), N=5, increasing=True, label="N, increasing"),
            s(cplx(3), N=2, label="complex"),
        ],
    ),
    OpInfo(
        "interp",
        [
            s(_x, _xp, real(6)),
            s(_x[1:5], _xp, cplx(6), left=-5.0, right=7.0, label="complex, left, right"),
            s(real(5) * 4, np.sort(positive(5) * 3), real(5), period=2 * np.pi, label="period"),
        ],
    ),
]
