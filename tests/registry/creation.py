"""Registry records: arrays created from other arrays."""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import cplx, positive, real

OPS = [
    OpInfo("zeros_like", [Sample((real(2, 3),))], differentiable=False),
    OpInfo("ones_like", [Sample((real(2, 3),))], differentiable=False),
]
OPS += [
    OpInfo(
        "full_like",
        [Sample((real(2, 3),), {"fill_value": 2.5}, label="constant")],
        differentiable=False,
    ),
    OpInfo(
        "full_like",
        [Sample((real(2, 3), real()), label="traced fill"), Sample((real(), real()), label="0-d")],
        call=lambda lib, a, v: lib.full_like(a, v),
        numpy_dispatch=(0,),
    ),
    # NumPy leaves the entries unspecified; autodiff documents zeros.
    OpInfo(
        "empty_like",
        [Sample((real(2, 3),))],
        differentiable=False,
        numpy_name=None,
        reference=np.zeros_like,
    ),
]


# Arrays built from nested lists that hold traced values.  NumPy's own np.array cannot
# take them (no protocol hands a list to autodiff), so there is no plain NumPy call to
# make on traced values; the reference is the same call with NumPy on plain arrays.
def _from_lists(name, samples, call, **kwargs):
    reference = lambda *args: call(np, *args)
    return OpInfo(name, samples, call=call, numpy_name=None, reference=reference, **kwargs)


OPS += [
    _from_lists(
        "array",
        [Sample((real(), real()), label="2x2 of scalars and constants")],
        lambda lib, x, y: lib.array([[x, 2.0 * y], [y * x, 1.5]]),
        keeps_float32=False,  # NumPy's array() takes the Python floats as float64
    ),
    _from_lists(
        "array",
        [Sample((real(3), real(3)), label="rows"), Sample((real(2), cplx(2)), label="complex")],
        lambda lib, x, y: lib.array((x, y)),
    ),
    _from_lists(
        "array",
        [Sample((real(2), real()), label="nested, mixed depths")],
        lambda lib, x, y: lib.array([[x, [y, 3.0]], [[1.0, y], x * y]], ndmin=4),
        keeps_float32=False,
    ),
    _from_lists(
        "asarray",
        [Sample((real(2, 3), real()), label="list of a row and a constant")],
        lambda lib, x, y: lib.asarray([x[0], [y, 0.5, -y]]),
        keeps_float32=False,
    ),
    _from_lists("asanyarray", [Sample((real(3),))], lambda lib, x: lib.asanyarray((x, x * x))),
    _from_lists(
        "ascontiguousarray", [Sample((real(3),))], lambda lib, x: lib.ascontiguousarray([x])
    ),
    _from_lists(
        "asfortranarray", [Sample((real(2, 3),))], lambda lib, x: lib.asfortranarray([x, 2 * x])
    ),
    _from_lists(
        "full",
        [Sample((real(),), label="scalar fill"), Sample((real(3),), label="row fill")],
        lambda lib, v: lib.full((2, 3), v),
    ),
    OpInfo("copy", [Sample((real(2, 3),))]),
    OpInfo(
        "linspace",
        [
            Sample((real(), real()), {"num": 5}),
            Sample((real(), real()), {"num": 4, "endpoint": False}, label="no endpoint"),
            Sample((real(2), real(3, 1)), {"num": 3, "axis": -1}, label="array ends"),
            Sample((real(), real()), {"num": 1}, label="one sample"),
        ],
    ),
    OpInfo(
        "linspace",
        [Sample((real(), real()), {"num": 4}, label="retstep")],
        call=lambda lib, a, b, num: lib.linspace(a, b, num, retstep=True),
    ),
    OpInfo(
        "logspace",
        [
            Sample((real(), real()), {"num": 4}),
            Sample((real(2), real()), {"num": 3, "base": 2.0, "axis": 1}, label="base 2"),
        ],
    ),
    OpInfo(
        "logspace",
        [Sample((real(), real(), positive()), {"num": 4}, label="traced base")],
        call=lambda lib, a, b, base, num: lib.logspace(a, b, num, base=base),
    ),
    OpInfo(
        "geomspace",
        [
            Sample((positive(), positive() * 4), {"num": 4}),
            Sample((-positive(2), -positive(2) * 3), {"num": 3, "axis": 1}, label="negative"),
        ],
        keeps_float32=False,  # NumPy's geomspace computes in float64 at least
    ),
    OpInfo(
        "meshgrid",
        [Sample((real(3), real(2))), Sample((real(2), real(3), real(4)), label="3-d")],
        call=lambda lib, *xs: lib.meshgrid(*xs),
    ),
    OpInfo(
        "meshgrid",
        [Sample((real(3), real(2)), label="ij, sparse")],
        call=lambda lib, *xs: lib.meshgrid(*xs, indexing="ij", sparse=True),
    ),
]

# iscomplex and isreal: elementwise questions about the imaginary part.
OPS += [
    OpInfo(
        "iscomplex",
        [
            Sample((cplx(3).real + 1j * np.array([1.0, 0.0, 1.0]),)),
            Sample((real(3),)),
            Sample((real(),), label="0-d"),  # NumPy's answer: a scalar
        ],
        differentiable=False,
    ),
    OpInfo(
        "isreal",
        [Sample((cplx(2, 2).real + 0j,)), Sample((cplx(3),)), Sample((real(),), label="0-d")],
        differentiable=False,
    ),
]
