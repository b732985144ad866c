"""Products: matmul (every ndim case, with stack broadcasting), and dot
(a composition of matmul and reshapes, with NumPy's ``dot`` semantics)."""

from __future__ import annotations

import math

import numpy as np

from autodiff._core import Primitive
from autodiff._tracer import register_numpy
from autodiff.rules._helpers import move_to_front, ndim_of, shape_of, unbroadcast

__all__ = ["dot", "matmul"]


def _as_matrices(a, b):
    """Promote 1-D operands to matrices the way matmul does: a -> (1, n), b -> (n, 1)."""
    a2 = _shp.expand_dims(a, 0) if ndim_of(a) == 1 else a
    b2 = _shp.expand_dims(b, 1) if ndim_of(b) == 1 else b
    return a2, b2


def _as_matrix_ct(ct, a, b):
    """The cotangent with the axes matmul dropped for 1-D operands restored."""
    if ndim_of(a) == 1:
        ct = _shp.expand_dims(ct, ndim_of(ct) - (ndim_of(b) != 1) if ndim_of(ct) else 0)
    if ndim_of(b) == 1:
        ct = _shp.expand_dims(ct, ndim_of(ct))
    return ct


def _matmul_vjp_a(ct, ans, a, b):
    a2, b2 = _as_matrices(a, b)
    ct_a = matmul(_as_matrix_ct(ct, a, b), _shp.swapaxes(b2, -1, -2))
    return _shp.reshape(unbroadcast(ct_a, shape_of(a2)), shape_of(a))


def _matmul_vjp_b(ct, ans, a, b):
    a2, b2 = _as_matrices(a, b)
    ct_b = matmul(_shp.swapaxes(a2, -1, -2), _as_matrix_ct(ct, a, b))
    return _shp.reshape(unbroadcast(ct_b, shape_of(b2)), shape_of(b))


def _matmul_batch(args, dims):
    (a, b), (ad, bd) = args, dims
    a_nd, b_nd = ndim_of(a) - (ad is not None), ndim_of(b) - (bd is not None)
    # Fast paths: the batch axis rides along as a row/stack axis of one operand.
    if bd is None and b_nd == 2 and ad != ndim_of(a) - 1:
        return matmul(a, b), ad  # (.., B, .., n) @ (n, p): e.g. per-example x @ W
    if ad is None and a_nd == 2 and b_nd >= 2 and bd < ndim_of(b) - 2:
        return matmul(a, b), bd
    if ad is None and a_nd == 2 and b_nd == 1:
        return matmul(a, _shp.moveaxis(b, bd, -1)), 1  # (m, n) @ (n, B) -> (m, B)
    # General case: batch axes first, vectors as matrices, stacks aligned.
    stack = max(a_nd, b_nd, 2) - 2

    def prepare(x, d, nd, vector_axis):
        if d is None:
            return _shp.expand_dims(x, vector_axis % (nd + 1)) if nd == 1 else x
        x = move_to_front(x, d)
        if nd == 1:
            x = _shp.expand_dims(x, 1 + (vector_axis % 2))
        pad = stack - (max(nd, 2) - 2)
        return _shp.expand_dims(x, tuple(range(1, 1 + pad))) if pad else x

    out = matmul(prepare(a, ad, a_nd, 0), prepare(b, bd, b_nd, 1))
    if a_nd == 1 and b_nd == 1:
        return _shp.reshape(out, shape_of(out)[:1]), 0
    if a_nd == 1:
        out = _shp.squeeze(out, -2)
    elif b_nd == 1:
        out = _shp.squeeze(out, -1)
    return out, 0


matmul_p = Primitive(
    "matmul",
    np.matmul,
    vjp=[_matmul_vjp_a, _matmul_vjp_b],
    jvp=[
        lambda t, ans, a, b: matmul_p.bind(t, b),
        lambda t, ans, a, b: matmul_p.bind(a, t),
    ],
    batch=_matmul_batch,
)


@register_numpy(np.matmul)
def matmul(x1, x2, /):
    """Like numpy.matmul (``@``): matrix products with broadcasting over stacks;
    1-D operands act as row/column vectors."""
    for x in (x1, x2):
        if ndim_of(x) == 0:
            raise ValueError("matmul: Input operand does not have enough dimensions (a 0-d array)")
    return matmul_p.bind(x1, x2)


@register_numpy(np.dot)
def dot(a, b, out=None):
    """Like numpy.dot: products over the last axis of ``a`` and the
    second-to-last of ``b`` (the last, if ``b`` is 1-D)."""
    if out is not None:
        raise NotImplementedError("dot(..., out=...) is not supported; use the returned value")
    a_nd, b_nd = ndim_of(a), ndim_of(b)
    if a_nd == 0 or b_nd == 0:
        return _elt.multiply(a, b)
    if b_nd <= 2:
        return matmul(a, b)
    # N-D b: contract a's last axis with b's second-to-last, keep all other axes.
    n = shape_of(b)[-2]
    kept = shape_of(b)[:-2] + shape_of(b)[-1:]
    b_mat = _shp.reshape(_shp.moveaxis(b, -2, 0), (n, math.prod(kept)))
    out = matmul(_shp.reshape(a, (math.prod(shape_of(a)[:-1]), n)), b_mat)
    return _shp.reshape(out, shape_of(a)[:-1] + shape_of(b)[:-2] + shape_of(b)[-1:])


from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
