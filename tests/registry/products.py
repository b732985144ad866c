"""Registry records: matrix and tensor products."""

from __future__ import annotations

from tests.registry import OpInfo, Sample
from tests.registry.domains import cplx, real


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


MATMUL_SHAPES = {
    "vec@vec": ((3,), (3,)),
    "vec@mat": ((3,), (3, 4)),
    "mat@vec": ((4, 3), (3,)),
    "mat@mat": ((2, 3), (3, 4)),
    "stack@mat": ((5, 2, 3), (3, 4)),
    "mat@stack": ((2, 3), (5, 3, 4)),
    "stack@stack bcast": ((5, 1, 2, 3), (4, 3, 2)),
    "vec@stack": ((3,), (5, 3, 4)),
    "stack@vec": ((5, 4, 3), (3,)),
}

OPS = [
    OpInfo(
        "matmul",
        [s(real(*a), real(*b), label=k) for k, (a, b) in MATMUL_SHAPES.items()]
        + [s(cplx(2, 3), cplx(3, 2), label="complex")],
    ),
    OpInfo(
        "matmul",
        [s(real(2, 3), real(3), label="operator @")],
        call=lambda lib, a, b: a @ b,
        numpy_name=None,
    ),
    OpInfo(
        "dot",
        [
            s(real(3), real(3), label="vec"),
            s(real(2, 3), real(3, 4), label="mat"),
            s(real(2, 3), real(4, 3, 2), label="N-d"),
            s(real(), real(3), label="scalar"),
        ],
    ),
]
