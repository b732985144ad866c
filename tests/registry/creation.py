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
        [Sample((real(2, 3), real()), label="traced fill")],
        call=lambda lib, a, v: lib.full_like(a, v),
        numpy_dispatch=(0,),
    ),
    OpInfo("empty_like", [Sample((real(2, 3),))], differentiable=False, numpy_name=None),
]

# Arrays built from nested lists that hold traced values.  NumPy's own np.array cannot
# take them (no protocol hands a list to autodiff), so there is no plain NumPy call;
# tests/test_namespace.py compares the values with np.array on plain arrays.
OPS += [
    OpInfo(
        "array",
        [Sample((real(), real()), label="2x2 of scalars and constants")],
        call=lambda lib, x, y: lib.array([[x, 2.0 * y], [y * x, 1.5]]),
        numpy_name=None,
        keeps_float32=False,  # NumPy's array() takes the Python floats as float64
    ),
    OpInfo(
        "array",
        [Sample((real(3), real(3)), label="rows"), Sample((real(2), cplx(2)), label="complex")],
        call=lambda lib, x, y: lib.array((x, y)),
        numpy_name=None,
    ),
    OpInfo(
        "array",
        [Sample((real(2), real()), label="nested, mixed depths")],
        call=lambda lib, x, y: lib.array([[x, [y, 3.0]], [[1.0, y], x * y]], ndmin=4),
        numpy_name=None,
        keeps_float32=False,
    ),
    OpInfo(
        "asarray",
        [Sample((real(2, 3), real()), label="list of a row and a constant")],
        call=lambda lib, x, y: lib.asarray([x[0], [y, 0.5, -y]]),
        numpy_name=None,
        keeps_float32=False,
    ),
    OpInfo(
        "asanyarray",
        [Sample((real(3),))],
        call=lambda lib, x: lib.asanyarray((x, x * x)),
        numpy_name=None,
    ),
    OpInfo(
        "ascontiguousarray",
        [Sample((real(3),))],
        call=lambda lib, x: lib.ascontiguousarray([x]),
        numpy_name=None,
    ),
    OpInfo(
        "asfortranarray",
        [Sample((real(2, 3),))],
        call=lambda lib, x: lib.asfortranarray([x, 2.0 * x]),
        numpy_name=None,
    ),
    OpInfo("copy", [Sample((real(2, 3),))]),
    OpInfo(
        "full",
        [Sample((real(),), label="scalar fill"), Sample((real(3),), label="row fill")],
        call=lambda lib, v: lib.full((2, 3), v),
        numpy_name=None,
    ),
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
        [Sample((cplx(3).real + 1j * np.array([1.0, 0.0, 1.0]),)), Sample((real(3),))],
        differentiable=False,
    ),
    OpInfo("isreal", [Sample((cplx(2, 2).real + 0j,)), Sample((cplx(3),))], differentiable=False),
]
