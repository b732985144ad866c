"""Registry records: shape manipulation."""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import cplx, positive, real


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


OPS = [
    OpInfo("reshape", [s(real(2, 3, 4), shape=(4, -1)), s(cplx(6), shape=(2, 3), label="complex")]),
    OpInfo("ravel", [s(real(2, 3))]),
    OpInfo(
        "transpose",
        [
            s(real(2, 3, 4)),
            s(real(2, 3, 4), axes=(1, 2, 0), label="axes"),
            s(real(3, 4), label="matrix"),
        ],
    ),
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
        "concat",
        [s(real(2, 3), real(1, 3)), s(real(2, 3), real(2, 1), axis=None, label="axis=None")],
        call=lambda lib, *xs, **kw: lib.concat(xs, **kw),
    ),
    OpInfo("permute_dims", [s(real(2, 3, 4), axes=(2, 0, 1))]),
    OpInfo("matrix_transpose", [s(real(2, 3, 4)), s(cplx(2, 3), label="complex")]),
    OpInfo("unstack", [s(real(2, 3, 4)), s(real(2, 3, 4), axis=-2, label="axis=-2")]),
    OpInfo(
        "stack",
        [s(real(2, 3), real(2, 3)), s(real(2, 3), real(2, 3), real(2, 3), axis=2)],
        call=lambda lib, *xs, **kw: lib.stack(xs, **kw),
    ),
]


def _seq(name):
    """Functions taking a sequence of arrays, called with the sample's arrays."""
    return lambda lib, *xs, **kw: getattr(lib, name)(list(xs), **kw)


OPS += [
    OpInfo(
        "pad",
        [s(real(2, 3), pad_width=((1, 0), (2, 1))), s(real(3), pad_width=2, constant_values=1.5)],
    ),
    OpInfo("flip", [s(real(2, 3)), s(real(2, 3, 4), axis=(0, 2))]),
    OpInfo("fliplr", [s(real(2, 3))]),
    OpInfo("flipud", [s(real(2, 3))]),
    OpInfo(
        "roll",
        [
            s(real(5), shift=2),
            s(real(3, 4), shift=-1, axis=1),
            s(real(3, 4), shift=(1, 2), axis=(0, 1), label="tuple"),
        ],
    ),
    OpInfo("rot90", [s(real(2, 3)), s(real(2, 3, 4), k=3, axes=(1, 2))]),
    OpInfo("tile", [s(real(3), reps=2), s(real(2, 3), reps=(2, 1, 2))]),
    OpInfo("repeat", [s(real(3), repeats=2), s(real(2, 3), repeats=[1, 0, 2], axis=1)]),
    OpInfo("atleast_1d", [s(real())]),
    OpInfo("atleast_2d", [s(real(3))]),
    OpInfo("atleast_3d", [s(real(3)), s(real(2, 3), label="2-d")]),
    OpInfo("broadcast_arrays", [s(real(3, 1), real(4))]),
    OpInfo(
        "hstack", [s(real(2), real(3)), s(real(2, 3), real(2, 1), label="2-d")], call=_seq("hstack")
    ),
    OpInfo(
        "vstack", [s(real(3), real(3)), s(real(2, 3), real(1, 3), label="2-d")], call=_seq("vstack")
    ),
    OpInfo("dstack", [s(real(2, 3), real(2, 3))], call=_seq("dstack")),
    OpInfo("column_stack", [s(real(3), real(3, 2))], call=_seq("column_stack")),
    OpInfo(
        "split",
        [
            s(real(4, 3), indices_or_sections=2),
            s(real(2, 5), indices_or_sections=[1, 3], axis=1, label="indices"),
        ],
    ),
    OpInfo("array_split", [s(real(5, 2), indices_or_sections=3)]),
    OpInfo(
        "diagonal",
        [s(real(3, 3)), s(real(3, 4), offset=1), s(real(2, 3, 4), offset=-1, axis1=2, axis2=0)],
    ),
    OpInfo("trace", [s(real(3, 3)), s(real(2, 3, 4), offset=1, axis1=1, axis2=2)]),
    OpInfo("diag", [s(real(3)), s(real(3), k=-1, label="k=-1"), s(real(3, 4), k=1, label="2-d")]),
    OpInfo("diagflat", [s(real(2, 2))]),
    OpInfo("tril", [s(real(3, 3)), s(real(2, 3, 4), k=1), s(real(4), label="vector")]),
    OpInfo("triu", [s(real(3, 4), k=-1), s(real(3), k=1, label="vector")]),
]

# --- differences, inserting and deleting, blocks (issue 13) ------------------------------------

OPS += [
    OpInfo(
        "diff",
        [
            s(real(3, 5)),
            s(real(4, 3), n=2, axis=0, label="n=2, axis=0"),
            s(cplx(4), label="complex"),
        ],
    ),
    OpInfo(
        "diff",
        [s(real(2, 4), real(2, 1), real(2, 2), axis=1, label="prepend, append")],
        call=lambda lib, a, before, after, **kw: lib.diff(a, prepend=before, append=after, **kw),
    ),
    OpInfo(
        "ediff1d",
        [s(real(2, 3)), s(real(4), real(2), real(), label="to_begin, to_end")],
        call=lambda lib, a, begin=None, end=None: lib.ediff1d(a, to_end=end, to_begin=begin),
    ),
    OpInfo(
        "gradient",
        [
            s(real(6)),
            s(real(4, 5), edge_order=2, label="2-d, edge_order=2"),
            s(real(3, 4), axis=-1, label="axis=-1"),
        ],
    ),
    OpInfo(
        "gradient",
        [
            s(real(5), np.cumsum(positive(5)), label="coordinates"),
            s(
                real(3, 5),
                np.cumsum(positive(5)),
                axis=1,
                edge_order=2,
                label="coordinates, edge 2",
            ),
        ],
        call=lambda lib, f, x, **kw: lib.gradient(f, x, **kw),
    ),
    OpInfo(
        "append",
        [s(real(2, 3), real(1, 3), axis=0), s(real(3), real(2, 2), label="flattened")],
    ),
    OpInfo(
        "insert",
        [
            s(real(5), real(3), obj=[0, 2, 2]),
            s(real(2, 3), real(2), obj=1, axis=1, label="a column"),
            s(real(3, 2), real(), obj=slice(0, 2), axis=0, label="slice, scalar"),
        ],
        call=lambda lib, a, values, **kw: lib.insert(a, values=values, **kw),
    ),
    OpInfo(
        "delete",
        [s(real(3, 4), obj=[0, 2], axis=1), s(real(5), obj=slice(1, 3), label="flattened")],
    ),
    OpInfo("resize", [s(real(2, 3), new_shape=(4, 4)), s(cplx(3), new_shape=2, label="shrink")]),
    OpInfo(
        "block",
        [s(real(2, 2), real(2, 1), real(1, 3))],
        call=lambda lib, a, b, c: lib.block([[a, b], [c]]),
    ),
    OpInfo("block", [s(real(3), real(2), label="1-d")], call=lambda lib, a, b: lib.block([a, b])),
    OpInfo("column_stack", [s(real(), real(), label="scalars")], call=_seq("column_stack")),
    OpInfo("vsplit", [s(real(4, 3), indices_or_sections=2)]),
    OpInfo(
        "hsplit",
        [s(real(2, 4), indices_or_sections=[1]), s(real(6), indices_or_sections=3, label="1-d")],
    ),
    OpInfo("dsplit", [s(real(2, 2, 4), indices_or_sections=2)]),
    OpInfo("rollaxis", [s(real(2, 3, 4), axis=2), s(real(2, 3, 4), axis=0, start=3)]),
]
