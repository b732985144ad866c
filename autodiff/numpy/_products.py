"""Compositions of the products: ``dot`` (matmul and reshapes, with NumPy's ``dot``
semantics), ``vdot``, ``inner``, ``outer``, ``tensordot``, ``kron``, and the array API
standard's ``vecdot``, ``matvec``, ``vecmat``, all written with ``matmul`` and
``einsum`` (``autodiff/rules/products.py``).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from autodiff.core.arrays import dtype_of, ndim_of, shape_of
from autodiff.core.overrides import register_numpy
from autodiff.rules import compositions as _comp
from autodiff.rules import elementwise as _elt
from autodiff.rules import shape as _shp
from autodiff.rules.creation import as_output
from autodiff.rules.products import LABELS, einsum, jax_options, matmul

__all__ = ["dot", "inner", "kron", "outer", "tensordot", "vdot", "vecdot", "matvec", "vecmat"]


@register_numpy(np.dot)
def dot(a, b, out=None, *, precision=None, preferred_element_type=None):
    """Like numpy.dot: products over the last axis of ``a`` and the
    second-to-last of ``b`` (the last, if ``b`` is 1-D).  ``precision`` and
    ``preferred_element_type`` as in jax.numpy.dot (the first changes nothing).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.dot(np.ones(3), np.arange(3.0), precision="highest")
    np.float64(3.0)
    """
    if out is not None:
        raise NotImplementedError("dot(..., out=...) is not supported; use the returned value")
    out = _dot(a, b)
    if precision is None and preferred_element_type is None:  # (the common call)
        return out
    return jax_options(out, "dot", precision, preferred_element_type)


def _dot(a, b):
    a_nd, b_nd = ndim_of(a), ndim_of(b)
    if a_nd == 0 or b_nd == 0:
        return _elt.multiply(a, b)
    if b_nd <= 2:
        return matmul(a, b)
    # N-D b: contract a's last axis with b's second-to-last, keep all other axes.
    n = shape_of(b)[-2]
    kept = shape_of(b)[:-2] + shape_of(b)[-1:]
    b_mat = _shp.reshape(_comp.moveaxis(b, -2, 0), (n, math.prod(kept)))
    out = matmul(_shp.reshape(a, (math.prod(shape_of(a)[:-1]), n)), b_mat)
    return _shp.reshape(out, shape_of(a)[:-1] + shape_of(b)[:-2] + shape_of(b)[-1:])


# --- vdot, inner, outer, tensordot, kron ----------------------------------------------


@register_numpy(np.vdot)
def vdot(a, b, /, *, precision=None, preferred_element_type=None):
    """Like numpy.vdot: the dot product of the flattened arrays, conjugating ``a``
    (``precision``, ``preferred_element_type``: as in jax.numpy.vdot).

    >>> import numpy as np, autodiff.numpy as anp
    >>> complex(anp.vdot(np.array([1j, 2.0]), np.array([1j, 3.0])))
    (7+0j)
    """
    a, b = _comp.ravel(a), _comp.ravel(b)
    if shape_of(a) != shape_of(b):
        raise ValueError("vdot: vectors have different lengths")
    if dtype_of(a).kind == "c":
        a = _elt.conj(a)
    return matmul(a, b, precision=precision, preferred_element_type=preferred_element_type)


@register_numpy(np.vecdot)
def vecdot(x1, x2, /, *, axis=-1):
    """Like numpy.vecdot: ``sum(conj(x1) * x2)`` over ``axis``, the other axes broadcast.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.vecdot(np.ones((2, 3)), np.arange(3.0)).tolist()
    [3.0, 3.0]
    """
    if ndim_of(x1) == 0 or ndim_of(x2) == 0:
        raise ValueError("vecdot: both arguments need at least one axis (the vector axis)")
    x1, x2 = _comp.moveaxis(x1, axis, -1), _comp.moveaxis(x2, axis, -1)
    if shape_of(x1)[-1] != shape_of(x2)[-1]:
        raise ValueError(
            f"vecdot: the vector axes differ in length ({shape_of(x1)[-1]} and "
            f"{shape_of(x2)[-1]}; shapes {shape_of(x1)} and {shape_of(x2)} after moving axis)"
        )
    if dtype_of(x1).kind == "c":
        x1 = _elt.conj(x1)
    return _comp.scalar_if_0d(matmul(_shp.expand_dims(x1, -2), _shp.expand_dims(x2, -1))[..., 0, 0])


@register_numpy(np.matvec)
def matvec(x1, x2, /):
    """Like numpy.matvec: matrix (``x1``, ``(..., m, n)``) times vector (``x2``, ``(..., n)``).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.matvec(np.eye(2), np.array([3.0, 4.0])).tolist()
    [3.0, 4.0]
    """
    if ndim_of(x1) < 2 or ndim_of(x2) < 1:
        raise ValueError("matvec: x1 must be a (stack of) matrices and x2 of vectors")
    return matmul(x1, _shp.expand_dims(x2, -1))[..., 0]


@register_numpy(np.vecmat)
def vecmat(x1, x2, /):
    """Like numpy.vecmat: the conjugate of vector ``x1`` (``(..., n)``) times matrix ``x2``
    (``(..., n, m)``).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.vecmat(np.array([1.0, 2.0]), np.ones((2, 3))).tolist()
    [3.0, 3.0, 3.0]
    """
    if ndim_of(x1) < 1 or ndim_of(x2) < 2:
        raise ValueError("vecmat: x1 must be a (stack of) vectors and x2 of matrices")
    if dtype_of(x1).kind == "c":
        x1 = _elt.conj(x1)
    return matmul(_shp.expand_dims(x1, -2), x2)[..., 0, :]


@register_numpy(np.inner)
def inner(a, b, /, *, precision=None, preferred_element_type=None):
    """Like numpy.inner: sums of products over the last axes of ``a`` and ``b``
    (the result has ``a``'s other axes, then ``b``'s; ``precision``,
    ``preferred_element_type``: as in jax.numpy.inner).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.inner(np.ones((2, 3)), np.arange(3.0)).tolist()
    [3.0, 3.0]
    """
    na, nb = ndim_of(a), ndim_of(b)
    if na == 0 or nb == 0:
        return jax_options(_elt.multiply(a, b), "inner", precision, preferred_element_type)
    if shape_of(a)[-1] != shape_of(b)[-1]:
        raise ValueError(
            f"inner: shapes {shape_of(a)} and {shape_of(b)} not aligned in the last axis"
        )
    la, lb, c = LABELS[: na - 1], LABELS[na - 1 : na + nb - 2], LABELS[na + nb - 2]
    return einsum(f"{la}{c},{lb}{c}->{la}{lb}", a, b, precision=precision,
                  preferred_element_type=preferred_element_type)  # fmt: skip


@register_numpy(np.outer)
def outer(a, b, out=None):
    """Like numpy.outer: ``ravel(a)[:, None] * ravel(b)[None, :]``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.outer(np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0])).shape
    (2, 3)
    """
    if out is not None:
        raise NotImplementedError("outer(..., out=...) is not supported; use the returned value")
    return _elt.multiply(_shp.expand_dims(_comp.ravel(a), 1), _comp.ravel(b))


def _axes_list(axes: Any, ndim: int) -> list[int]:
    axes = [axes] if np.ndim(axes) == 0 else list(axes)
    out = []
    for ax in axes:
        ax = int(ax)
        if not -ndim <= ax < ndim:
            raise np.exceptions.AxisError(ax, ndim)
        out.append(ax % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"tensordot: repeated axis in {axes}")
    return out


@register_numpy(np.tensordot)
def tensordot(a, b, axes=2, *, precision=None, preferred_element_type=None):
    """Like numpy.tensordot: ``axes=N`` sums over ``a``'s last N and ``b``'s first N
    axes; ``axes=(axes_a, axes_b)`` names the summed axes pairwise.  ``precision`` and
    ``preferred_element_type`` as in jax.numpy.tensordot (the first changes nothing).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.tensordot(np.ones((2, 3, 4)), np.ones((3, 4, 5))).shape
    (2, 5)
    >>> float(anp.tensordot(np.ones((2, 3)), np.ones((3, 2)), axes=([0, 1], [1, 0])))
    6.0
    """
    na, nb = ndim_of(a), ndim_of(b)
    try:
        axes_a, axes_b = axes
    except TypeError:  # an int n: a's last n axes with b's first n
        n = operator.index(axes)
        if n < 0 or n > min(na, nb):
            raise ValueError(
                f"tensordot: axes={n} does not fit arrays with {na} and {nb} dims"
            ) from None
        axes_a, axes_b = list(range(na - n, na)), list(range(n))
    axes_a, axes_b = _axes_list(axes_a, na), _axes_list(axes_b, nb)
    if len(axes_a) != len(axes_b) or any(
        shape_of(a)[i] != shape_of(b)[j] for i, j in zip(axes_a, axes_b)
    ):
        raise ValueError("shape-mismatch for sum")
    la = LABELS[:na]
    extra = iter(LABELS[na:])
    lb = "".join(la[axes_a[axes_b.index(j)]] if j in axes_b else next(extra) for j in range(nb))
    out = "".join(c for i, c in enumerate(la) if i not in axes_a)
    out += "".join(c for j, c in enumerate(lb) if j not in axes_b)
    ans = einsum(f"{la},{lb}->{out}", a, b, precision=precision,
                 preferred_element_type=preferred_element_type)  # fmt: skip
    return as_output(ans)  # NumPy's reshapes a dot product: a 0-d array


@register_numpy(np.kron)
def kron(a, b):
    """Like numpy.kron: the Kronecker product (block ``[i, j]`` is ``a[i, j] * b``);
    the operand with fewer dimensions gets leading unit axes.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.kron(np.array([1.0, 2.0]), np.array([1.0, 10.0])).tolist()
    [1.0, 10.0, 2.0, 20.0]
    """
    na, nb = ndim_of(a), ndim_of(b)
    if na == 0 or nb == 0:
        return _elt.multiply(a, b)
    nd = max(na, nb)
    if na < nd:
        a = _shp.expand_dims(a, tuple(range(nd - na)))
    if nb < nd:
        b = _shp.expand_dims(b, tuple(range(nd - nb)))
    shape = tuple(x * y for x, y in zip(shape_of(a), shape_of(b)))
    a = _shp.expand_dims(a, tuple(range(1, 2 * nd, 2)))
    b = _shp.expand_dims(b, tuple(range(0, 2 * nd, 2)))
    return _shp.reshape(_elt.multiply(a, b), shape)
