"""Registry records: partitions, lexicographic and complex sorts (``sort``, ``argsort``
and ``searchsorted`` are with indexing)."""

from __future__ import annotations

from tests.registry import OpInfo, Sample
from tests.registry.domains import cplx, distinct, ints


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


PARTITIONS = [
    s(distinct(6), kth=2),
    s(distinct(4, 3), kth=[0, 2], axis=0, label="kth list, axis=0"),
    s(distinct(2, 3), kth=-1, axis=None, label="axis=None"),
]

OPS = [
    OpInfo("partition", PARTITIONS),
    OpInfo("argpartition", PARTITIONS, differentiable=False),
    OpInfo(
        "lexsort",
        [
            s(ints(3, 6), ints(2, 6), label="ties broken by the first key"),
            s(distinct(2, 3), ints(2, 2, 3), axis=0, label="axis=0"),
        ],
        differentiable=False,
        # NumPy dispatches on a tuple of keys (a list would be converted)
        call=lambda lib, *keys, **kw: lib.lexsort(keys, **kw),
    ),
    OpInfo("sort_complex", [s(cplx(5)), s(cplx(2, 3), label="2-d")]),
    # Real input: NumPy returns complex128, even for float32
    OpInfo("sort_complex", [s(distinct(4), label="real")], keeps_float32=False),
]
