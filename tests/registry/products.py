"""Registry records: matrix and tensor products."""

from __future__ import annotations

import numpy as np

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
        reference=np.matmul,
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


def _einsum(lib, *operands, subscripts):
    return lib.einsum(subscripts, *operands)


EINSUM = {
    "ij,jk->ik": ((2, 3), (3, 4)),
    "bij,bjk->bik": ((2, 2, 3), (2, 3, 2)),
    "ii->": ((3, 3),),
    "ii->i": ((3, 3),),
    "ii": ((3, 3),),
    "iij->j": ((2, 2, 3),),
    "ij->j": ((2, 3),),
    "ij->ji": ((2, 3),),
    "i,j->ij": ((2,), (3,)),
    "i,i": ((3,), (3,)),
    "ij,jk": ((2, 3), (3, 2)),
    "ij,j->": ((2, 3), (3,)),
    "...ij,...jk->...ik": ((2, 1, 2, 3), (3, 3, 2)),
    "...ii->...i": ((2, 3, 3),),
    "i...,...i": ((2, 3), (3, 2)),
    "...ij,jk": ((2, 2, 3), (3, 2)),
    "ij,jk,kl->il": ((2, 3), (3, 2), (2, 2)),
    "ij,ij,ij->i": ((2, 3), (2, 3), (2, 3)),
    "i,ij,j": ((2,), (2, 3), (3,)),
    "ij, j k -> k i": ((2, 3), (3, 2)),
}

OPS += [
    OpInfo(
        "einsum",
        [
            s(*(real(*shape) for shape in shapes), subscripts=k, label=k)
            for k, shapes in EINSUM.items()
        ]
        + [
            s(cplx(2, 3), cplx(3, 2), subscripts="ij,jk->ik", label="complex"),
            s(cplx(3, 3), subscripts="ii->i", label="complex diagonal"),
            s(real(2, 3), cplx(3), subscripts="ij,j->i", label="real,complex"),
        ],
        call=_einsum,
    ),
    OpInfo(
        "einsum",
        [
            s(real(2, 3), real(3, 2), label="sublists"),
            s(real(3), real(3), label="sublists implicit"),
        ],
        call=lambda lib, a, b: (
            lib.einsum(a, [0, 1], b, [1, 2], [0, 2])
            if a.ndim == 2
            else lib.einsum(a, [Ellipsis, 0], b, [0])
        ),
    ),
    OpInfo(
        "vdot",
        [
            s(real(3), real(3), label="vec"),
            s(real(2, 3), real(3, 2), label="flattened"),
            s(cplx(3), cplx(3), label="complex"),
        ],
    ),
    OpInfo(
        "inner",
        [
            s(real(3), real(3), label="vec"),
            s(real(2, 3), real(4, 3), label="mat"),
            s(real(2, 2, 3), real(3), label="3-d,vec"),
            s(real(), real(3), label="scalar"),
            s(cplx(2, 3), cplx(3), label="complex"),
        ],
    ),
    OpInfo(
        "outer",
        [
            s(real(3), real(2), label="vec"),
            s(real(2, 2), real(3), label="flattened"),
            s(cplx(2), cplx(3), label="complex"),
        ],
    ),
    OpInfo(
        "tensordot",
        [
            s(real(2, 3, 2), real(3, 2, 2), label="axes=2"),
            s(real(2, 3), real(3, 2), axes=1, label="axes=1"),
            s(real(2), real(3), axes=0, label="axes=0"),
            s(real(2, 3), real(3, 2), axes=([0, 1], [1, 0]), label="pairs"),
            s(real(2, 3, 2), real(2, 2), axes=([2], [0]), label="pair of ints"),
            s(real(2, 3, 2), real(2, 3), axes=(-1, 0), label="negative"),
            s(cplx(2, 3), cplx(3, 2), axes=1, label="complex"),
        ],
    ),
    OpInfo(
        "kron",
        [
            s(real(2), real(3), label="1-d"),
            s(real(2, 2), real(2, 3), label="2-d"),
            s(real(2), real(2, 2), label="1-d,2-d"),
            s(real(), real(2, 2), label="scalar"),
            s(cplx(2, 2), cplx(2), label="complex"),
        ],
    ),
]

# The array API's products.
OPS += [
    OpInfo(
        "vecdot",
        [
            s(real(2, 3), real(3)),
            s(real(3), real(3), label="vectors"),  # a scalar, as NumPy's
            s(real(3, 2), real(3, 1), axis=0, label="axis=0"),
            s(cplx(2, 3), cplx(3), label="complex"),
        ],
    ),
    OpInfo("matvec", [s(real(2, 3), real(3)), s(real(4, 2, 3), real(1, 3), label="stack bcast")]),
    OpInfo(
        "vecmat",
        [s(real(3), real(3, 2)), s(real(4, 3), real(3, 2), label="stack"), s(cplx(3), cplx(3, 2))],
    ),
]

# cross: 3-vectors (NumPy's deprecated 2-vectors: tests/test_linalg_fft.py).
OPS += [
    OpInfo(
        "cross",
        [
            s(real(3), real(3), label="vectors"),
            s(real(4, 3), real(2, 1, 3), label="broadcast"),
            s(real(3, 2), real(2, 3), axisa=0, axisc=0, label="axisa=0 axisc=0"),
            s(cplx(3, 2), cplx(3, 2), axis=0, label="complex axis=0"),
        ],
    ),
]
