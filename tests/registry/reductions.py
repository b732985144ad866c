"""Registry records: reductions."""

from __future__ import annotations

from tests.registry import OpInfo, Sample
from tests.registry.domains import cplx, distinct, real


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
        [*_axis_samples(real), s(real(), label="0-d"), s(cplx(2, 3), axis=1, label="complex")],
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
