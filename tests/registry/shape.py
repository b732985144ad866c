"""Registry records: shape manipulation."""

from __future__ import annotations

from tests.registry import OpInfo, Sample
from tests.registry.domains import cplx, real


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


OPS = [
    OpInfo("reshape", [s(real(2, 3, 4), shape=(4, -1)), s(cplx(6), shape=(2, 3), label="complex")]),
    OpInfo("ravel", [s(real(2, 3))]),
    OpInfo("transpose", [s(real(2, 3, 4)), s(real(2, 3, 4), axes=(1, 2, 0), label="axes")]),
    OpInfo(
        "moveaxis",
        [
            s(real(2, 3, 4), source=0, destination=-1),
            s(real(2, 3, 4), source=(0, 1), destination=(2, 0), label="tuple"),
        ],
    ),
    OpInfo("swapaxes", [s(real(2, 3, 4), axis1=0, axis2=2)]),
    OpInfo("broadcast_to", [s(real(3, 1), shape=(2, 3, 4))]),
    OpInfo("expand_dims", [s(real(2, 3), axis=1), s(real(2, 3), axis=(0, -1), label="tuple")]),
    OpInfo("squeeze", [s(real(2, 1, 3, 1)), s(real(2, 1, 3, 1), axis=-1, label="axis")]),
    OpInfo(
        "concatenate",
        [
            s(real(2, 3), real(1, 3), real(4, 3)),
            s(real(2, 3), real(2, 1), axis=-1, label="axis=-1"),
        ],
        call=lambda lib, *xs, **kw: lib.concatenate(xs, **kw),
    ),
    OpInfo(
        "stack",
        [s(real(2, 3), real(2, 3)), s(real(2, 3), real(2, 3), real(2, 3), axis=2)],
        call=lambda lib, *xs, **kw: lib.stack(xs, **kw),
    ),
]
