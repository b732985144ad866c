"""Products: matmul (every ndim case, with stack broadcasting), and dot
(a composition of matmul and reshapes, with NumPy's ``dot`` semantics);
einsum (a primitive for any subscripts: ``...`` broadcasting, repeated indices,
any number of operands, implicit output), and the compositions vdot, inner,
outer, tensordot and kron; cross (a primitive for 3-vectors).

einsum is linear in each operand, so its JVP and VJP are einsums again.  The
cotangent of an operand whose subscripts repeat an index (``'ii->i'``) is
spread back onto the diagonal by identity matrices; indices that only that
operand has (summed over in the forward pass) are broadcast back.  Complex
operands follow JAX's convention: the VJP is the plain (non-conjugating)
transpose."""

from __future__ import annotations

import math
import operator
import string
from collections import Counter
from typing import Any

import numpy as np

from autodiff.core.arrays import dtype_of, eye_like, ndim_of, normalize_axes, shape_of
from autodiff.core.lowering import Gufunc, NotLowered
from autodiff.core.numpy_args import warn_caller
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import multilinear_taylor
from autodiff.core.tracer import register_numpy
from autodiff.rules._helpers import implements, move_to_front, to_front_padded, unbroadcast
from autodiff.rules._sparsity import contraction, shape_of_operand

__all__ = [
    "dot", "einsum", "inner", "kron", "matmul", "outer", "tensordot", "vdot",
    # the array API standard's products (NumPy 2 gufuncs)
    "vecdot", "matvec", "vecmat",
    "cross",
]  # fmt: skip


def _as_matrix_ct(ct, a, b):
    """The cotangent with the axes matmul dropped for 1-D operands restored."""
    if ndim_of(a) == 1:
        ct = _shp.expand_dims(ct, ndim_of(ct) - (ndim_of(b) != 1) if ndim_of(ct) else 0)
    if ndim_of(b) == 1:
        ct = _shp.expand_dims(ct, ndim_of(ct))
    return ct


def _matmul_vjp_a(ct, ans, a, b):
    # Reads b only (see vjp_reads): a's role is its shape.
    a2_shape = (1, *shape_of(a)) if ndim_of(a) == 1 else shape_of(a)
    b2 = _shp.expand_dims(b, 1) if ndim_of(b) == 1 else b
    ct_a = matmul(_as_matrix_ct(ct, a, b), _shp.swapaxes(b2, -1, -2))
    return _shp.reshape(unbroadcast(ct_a, a2_shape), shape_of(a))


def _matmul_vjp_b(ct, ans, a, b):
    # Reads a only (see vjp_reads): b's role is its shape.
    if ndim_of(a) == 2 and ndim_of(b) == 1:  # A @ v: the cotangent is A^T @ ct
        return matmul(_shp.swapaxes(a, 0, 1), ct)
    a2 = _shp.expand_dims(a, 0) if ndim_of(a) == 1 else a
    b2_shape = (*shape_of(b), 1) if ndim_of(b) == 1 else shape_of(b)
    ct_b = matmul(_shp.swapaxes(a2, -1, -2), _as_matrix_ct(ct, a, b))
    return _shp.reshape(unbroadcast(ct_b, b2_shape), shape_of(b))


def _matmul_batch(args, dims):
    (a, b), (ad, bd) = args, dims
    a_nd, b_nd = ndim_of(a) - (ad is not None), ndim_of(b) - (bd is not None)
    # Fast paths: the batch axis rides along as a row/stack axis of one operand.
    if bd is None and b_nd == 2 and ad != ndim_of(a) - 1:
        return matmul(a, b), ad  # (.., B, .., n) @ (n, p): e.g. per-example x @ W
    if ad is None and a_nd == 2 and b_nd >= 2 and bd < ndim_of(b) - 2:
        return matmul(a, b), bd
    if ad is None and a_nd == 2 and b_nd == 1:  # per-example A @ v is V @ A^T, batch first
        return matmul(move_to_front(b, bd), _shp.swapaxes(a, 0, 1)), 0
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
    vjp_reads=[(1,), (0,)],  # each cotangent reads the other operand (and shapes)
)


def _matmul_gufunc(avals):
    """NumPy's matmul of vectors and matrices of one dtype (its BLAS call for floats)."""
    a, b = avals
    if a.dtype != b.dtype or not (1 <= a.ndim <= 2 and 1 <= b.ndim <= 2):
        raise NotLowered("matmul of stacks, or of mixed dtypes")
    return np.matmul


def _matmul_core(ufunc, shapes, out_shape):
    """(n, k, m); a vector lacks n (or m): size 1, stride 0, as NumPy passes it."""
    a, b = shapes
    matrix_a, matrix_b = len(a) == 2, len(b) == 2
    out = (0 if matrix_a else None, (1 if matrix_a else 0) if matrix_b else None)
    dims = [a[0] if matrix_a else 1, a[-1], b[1] if matrix_b else 1]
    return dims, [(0, 1) if matrix_a else (None, 0), (0, 1) if matrix_b else (0, None), out]


matmul_p.def_lowering(Gufunc(_matmul_gufunc, _matmul_core))


@matmul_p.def_sparsity
def _matmul_sparsity(a, b):
    a_shape, b_shape = shape_of_operand(a), shape_of_operand(b)
    stack = "".join(_LABELS[: max(len(a_shape), len(b_shape), 2) - 2])
    a_term = "k" if len(a_shape) == 1 else stack[len(stack) - len(a_shape) + 2 :] + "mk"
    b_term = "k" if len(b_shape) == 1 else stack[len(stack) - len(b_shape) + 2 :] + "kn"
    out = stack[: max(len(a_term), len(b_term)) - 2] if len(a_shape) > 1 or len(b_shape) > 1 else ""
    out += ("m" if len(a_shape) > 1 else "") + ("n" if len(b_shape) > 1 else "")
    return contraction([a_term, b_term], out, [a_shape, b_shape])


@implements(matmul_p, np.matmul)
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


# --- einsum ------------------------------------------------------------------------
#
# The primitive sees canonical subscripts: explicit output, letters only (no
# '...', no spaces), and no broadcasting of unit axes (the public function
# squeezes them away), so every index has one size across the operands.

# The labels np.einsum accepts; in the sublist form, integer k is _LABELS[k].
_LABELS = string.ascii_uppercase + string.ascii_lowercase
_MAX_OPERANDS = 64  # NumPy's limit on the number of einsum operands


def _split(subscripts: str) -> tuple[list[str], str]:
    """Canonical ``'ab,bc->ac'`` as ``(['ab', 'bc'], 'ac')``."""
    ins, out = subscripts.split("->")
    return ins.split(","), out


def _fresh(used: str, count: int = 1) -> str:
    """``count`` labels that do not occur in ``used``."""
    free = [c for c in _LABELS if c not in used]
    if len(free) < count:
        raise ValueError("einsum: too many distinct indices (NumPy allows 52 letters)")
    return "".join(free[:count])


def _real_dtype(x: Any) -> np.dtype:
    dtype = dtype_of(x)
    return np.finfo(dtype).dtype if dtype.kind in "fc" else np.dtype(np.float64)


def _internal_optimize(n_operands: int) -> Any:
    return "greedy" if n_operands > 2 else False


def _einsum_jvp(k: int):
    def jvp(t, ans, *operands, subscripts, optimize):
        ops = list(operands)
        ops[k] = t
        return einsum_p.bind(*ops, subscripts=subscripts, optimize=optimize)

    return jvp


def _einsum_vjp(k: int):
    """Cotangent of operand ``k``: the einsum of the cotangent with the other operands."""

    def vjp(ct, ans, *operands, subscripts, optimize):
        terms, out = _split(subscripts)
        term, shape = terms[k], shape_of(operands[k])
        in_terms = [t for j, t in enumerate(terms) if j != k] + [out]
        in_ops = [o for j, o in enumerate(operands) if j != k] + [ct]
        # A repeated index ('ii') becomes a fresh one tied to the first by an identity
        # matrix: the cotangent lives on the diagonal only.
        fresh = iter(_fresh(subscripts, len(term) - len(set(term))))
        target = ""
        for c, n in zip(term, shape):
            if c in target:
                f = next(fresh)
                in_terms.append(c + f)
                in_ops.append(eye_like(n, _real_dtype(ct), ct))
                target += f
            else:
                target += c
        # Indices no other operand has were summed over: the cotangent is constant
        # along them, so it is broadcast back.
        have = set("".join(in_terms))
        spread = tuple(i for i, c in enumerate(target) if c not in have)
        kept = "".join(c for c in target if c in have)
        if len(in_ops) == 1 and in_terms[0] == kept:
            g = ct
        else:
            g = einsum_p.bind(
                *in_ops,
                subscripts=",".join(in_terms) + "->" + kept,
                optimize=_internal_optimize(len(in_ops)),
            )
        if spread:
            g = _shp.broadcast_to(_shp.expand_dims(g, spread), shape)
        return g

    return vjp


def _einsum_batch(args, dims, *, subscripts, optimize):
    """A fresh index for the batch axis, on every batched operand and the output."""
    terms, out = _split(subscripts)
    b = _fresh(subscripts)
    terms = [t if d is None else t[:d] + b + t[d:] for t, d in zip(terms, dims)]
    spec = ",".join(terms) + "->" + b + out
    return einsum_p.bind(*args, subscripts=spec, optimize=optimize), 0


einsum_p = Primitive(
    "einsum",
    lambda *operands, subscripts, optimize: np.einsum(subscripts, *operands, optimize=optimize),
    vjp=[_einsum_vjp(k) for k in range(_MAX_OPERANDS)],
    jvp=[_einsum_jvp(k) for k in range(_MAX_OPERANDS)],
    batch=_einsum_batch,
    sparsity=lambda *operands, subscripts, optimize: contraction(
        *_split(subscripts), [shape_of_operand(x) for x in operands]
    ),
)


def _from_sublists(args: tuple) -> tuple[str, list]:
    """``einsum(op0, sublist0, op1, sublist1, ..., [sublistout])`` as a subscripts string."""

    def labels(sub: Any) -> str:
        out = ""
        for s in sub:
            if s is Ellipsis:
                out += "..."
            elif 0 <= int(s) < len(_LABELS):
                out += _LABELS[int(s)]
            else:
                raise ValueError(f"einsum: subscript {s} is not within the valid range [0, 52)")
        return out

    ops, subs = list(args[0::2]), list(args[1::2])
    out = ops.pop() if len(args) % 2 else None
    spec = ",".join(labels(s) for s in subs)
    return (spec if out is None else spec + "->" + labels(out)), ops


def _canonical_einsum(subscripts: str, operands: list) -> tuple[str, list]:
    """Explicit, letters-only subscripts; unit axes that broadcast are squeezed away."""
    spec = subscripts.replace(" ", "")
    ins, arrow, out = spec.partition("->")
    terms = ins.split(",")
    if len(terms) != len(operands):
        raise ValueError(
            f"einsum: the subscripts '{subscripts}' name {len(terms)} operands, "
            f"but {len(operands)} were given"
        )
    for t in [*terms, out]:
        bad = [c for c in t.replace("...", "", 1) if c not in _LABELS]
        if bad:
            raise ValueError(f"einsum: invalid subscript {bad[0]!r} in '{subscripts}'")
    shapes = [shape_of(op) for op in operands]
    n_ell = []
    for t, shape in zip(terms, shapes):
        extra = len(shape) - (len(t) - 3 * ("..." in t))
        if extra < 0 or (extra and "..." not in t):
            raise ValueError(
                f"einsum: operand of shape {shape} does not match its subscripts '{t}'"
            )
        n_ell.append(extra)
    width = max(n_ell, default=0)
    ell = _fresh(spec, width)
    # Ellipsis axes align from the right, like broadcasting.
    terms = [t.replace("...", ell[width - e :]) for t, e in zip(terms, n_ell)]
    if not arrow:  # implicit output: '...' first, then the indices used once, sorted
        counts = Counter("".join(terms))
        out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
    elif "..." in out:
        out = out.replace("...", ell)
    elif width:
        raise ValueError(
            "output has more dimensions than subscripts given in einstein sum, but no "
            "'...' ellipsis provided to broadcast the extra dimensions."
        )
    if len(set(out)) != len(out) or any(c not in "".join(terms) for c in out):
        raise ValueError(f"einsum: invalid output subscripts in '{subscripts}'")
    sizes: dict[str, int] = {}
    for t, shape in zip(terms, shapes):
        for c in set(t):
            within = {n for ci, n in zip(t, shape) if ci == c}
            if len(within) > 1:
                raise ValueError(
                    f"einsum: dimensions in single operand for collapsing index '{c}' "
                    f"don't match ({shape})"
                )
        for c, n in zip(t, shape):
            if n != 1 and sizes.setdefault(c, n) != n:
                raise ValueError(
                    f"einsum: operands could not be broadcast together: index '{c}' "
                    f"has sizes {sizes[c]} and {n}"
                )
    new_terms, new_ops = [], []
    for t, op, shape in zip(terms, operands, shapes):
        drop = tuple(i for i, (c, n) in enumerate(zip(t, shape)) if n == 1 and sizes.get(c, 1) != 1)
        if drop:
            op = _shp.squeeze(op, drop)
            t = "".join(c for i, c in enumerate(t) if i not in drop)
        new_terms.append(t)
        new_ops.append(op)
    return ",".join(new_terms) + "->" + out, new_ops


@implements(einsum_p, np.einsum)
def einsum(*operands, out=None, optimize=False, dtype=None, order="K", casting="safe"):
    """Like numpy.einsum: any subscripts (``...`` broadcasting, repeated indices such
    as ``'ii->i'``, implicit output), any number of operands, or the sublist form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> a = np.arange(4.0).reshape(2, 2)
    >>> anp.einsum("ij,jk->ik", a, a).tolist()
    [[2.0, 3.0], [6.0, 11.0]]
    >>> float(anp.einsum("ii", a))
    3.0
    >>> autodiff.grad(lambda x: anp.einsum("ii->", x))(a).tolist()
    [[1.0, 0.0], [0.0, 1.0]]
    """
    if out is not None:
        raise NotImplementedError("einsum(..., out=...) is not supported; use the returned value")
    if not operands:
        raise ValueError("einsum: no operands given")
    if isinstance(operands[0], str):
        subscripts, ops = operands[0], list(operands[1:])
    else:
        subscripts, ops = _from_sublists(operands)
    if dtype is not None:
        ops = [_elt.cast(op, dtype, casting, "einsum") for op in ops]
    spec, ops = _canonical_einsum(subscripts, ops)
    return einsum_p.bind(*ops, subscripts=spec, optimize=optimize)


# --- compositions: vdot, inner, outer, tensordot, kron --------------------------------


@register_numpy(np.vdot)
def vdot(a, b, /):
    """Like numpy.vdot: the dot product of the flattened arrays, conjugating ``a``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> complex(anp.vdot(np.array([1j, 2.0]), np.array([1j, 3.0])))
    (7+0j)
    """
    a, b = _shp.ravel(a), _shp.ravel(b)
    if shape_of(a) != shape_of(b):
        raise ValueError("vdot: vectors have different lengths")
    if dtype_of(a).kind == "c":
        a = _elt.conj(a)
    return matmul(a, b)


@register_numpy(np.vecdot)
def vecdot(x1, x2, /, *, axis=-1):
    """Like numpy.vecdot: ``sum(conj(x1) * x2)`` over ``axis``, the other axes broadcast.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.vecdot(np.ones((2, 3)), np.arange(3.0)).tolist()
    [3.0, 3.0]
    """
    if ndim_of(x1) == 0 or ndim_of(x2) == 0:
        raise ValueError("vecdot: both arguments need at least one axis (the vector axis)")
    x1, x2 = _shp.moveaxis(x1, axis, -1), _shp.moveaxis(x2, axis, -1)
    if shape_of(x1)[-1] != shape_of(x2)[-1]:
        raise ValueError(
            f"vecdot: the vector axes differ in length ({shape_of(x1)[-1]} and "
            f"{shape_of(x2)[-1]}; shapes {shape_of(x1)} and {shape_of(x2)} after moving axis)"
        )
    if dtype_of(x1).kind == "c":
        x1 = _elt.conj(x1)
    return matmul(_shp.expand_dims(x1, -2), _shp.expand_dims(x2, -1))[..., 0, 0]


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
def inner(a, b, /):
    """Like numpy.inner: sums of products over the last axes of ``a`` and ``b``
    (the result has ``a``'s other axes, then ``b``'s).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.inner(np.ones((2, 3)), np.arange(3.0)).tolist()
    [3.0, 3.0]
    """
    na, nb = ndim_of(a), ndim_of(b)
    if na == 0 or nb == 0:
        return _elt.multiply(a, b)
    if shape_of(a)[-1] != shape_of(b)[-1]:
        raise ValueError(
            f"inner: shapes {shape_of(a)} and {shape_of(b)} not aligned in the last axis"
        )
    la, lb, c = _LABELS[: na - 1], _LABELS[na - 1 : na + nb - 2], _LABELS[na + nb - 2]
    return einsum(f"{la}{c},{lb}{c}->{la}{lb}", a, b)


@register_numpy(np.outer)
def outer(a, b, out=None):
    """Like numpy.outer: ``ravel(a)[:, None] * ravel(b)[None, :]``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.outer(np.array([1.0, 2.0]), np.array([3.0, 4.0, 5.0])).shape
    (2, 3)
    """
    if out is not None:
        raise NotImplementedError("outer(..., out=...) is not supported; use the returned value")
    return _elt.multiply(_shp.expand_dims(_shp.ravel(a), 1), _shp.ravel(b))


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
def tensordot(a, b, axes=2):
    """Like numpy.tensordot: ``axes=N`` sums over ``a``'s last N and ``b``'s first N
    axes; ``axes=(axes_a, axes_b)`` names the summed axes pairwise.

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
    la = _LABELS[:na]
    extra = iter(_LABELS[na:])
    lb = "".join(la[axes_a[axes_b.index(j)]] if j in axes_b else next(extra) for j in range(nb))
    out = "".join(c for i, c in enumerate(la) if i not in axes_a)
    out += "".join(c for j, c in enumerate(lb) if j not in axes_b)
    return einsum(f"{la},{lb}->{out}", a, b)


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


# --- cross -------------------------------------------------------------------------------
# The primitive takes 3-vectors on the last axis (other axes broadcast); the public function
# moves NumPy's axisa/axisb/axisc there and back.  The product is bilinear and
# <ct, a x b> = <a, b x ct> = <b, ct x a> (also for complex values, without conjugation),
# so every rule is a cross product again.


def _cross_impl(a, b):
    """NumPy's arithmetic, term for term (so the values are NumPy's), on any array library."""
    a0, a1, a2 = (a[..., i] for i in range(3))
    b0, b1, b2 = (b[..., i] for i in range(3))
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def _cross_batch(args, dims):
    nd = max(ndim_of(x) - (d is not None) for x, d in zip(args, dims))
    moved = [
        x if d is None else to_front_padded(x, d, nd - (ndim_of(x) - 1)) for x, d in zip(args, dims)
    ]
    return cross_p.bind(*moved), 0


cross_p = Primitive(
    "cross",
    _cross_impl,
    vjp=[
        lambda ct, ans, a, b: unbroadcast(cross_p.bind(b, ct), shape_of(a)),
        lambda ct, ans, a, b: unbroadcast(cross_p.bind(ct, a), shape_of(b)),
    ],
    jvp=[lambda t, ans, a, b: cross_p.bind(t, b), lambda t, ans, a, b: cross_p.bind(a, t)],
    batch=_cross_batch,
    vjp_reads=[(1,), (0,)],
)


@cross_p.def_sparsity
def _cross_sparsity(a, b):
    # each component of the product reads the whole vectors at its stack position
    a_shape, b_shape = shape_of_operand(a), shape_of_operand(b)
    stack = _LABELS[: max(len(a_shape), len(b_shape)) - 1]
    a_term, b_term = (
        stack[len(stack) - len(a_shape) + 1 :] + "i",
        stack[len(stack) - len(b_shape) + 1 :] + "j",
    )
    return contraction([a_term, b_term], stack + "k", [a_shape, b_shape], {"k": 3})


def _cross_2d(a, b):
    """NumPy's deprecated 2-vector cases: the missing third component is 0 (computed
    without it, as NumPy does, so that inf and NaN entries stay where NumPy has them)."""
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    z = a0 * b1 - a1 * b0
    if shape_of(a)[-1] == 2 and shape_of(b)[-1] == 2:
        return z
    if shape_of(a)[-1] == 2:  # a2 = 0
        b2 = b[..., 2]
        return _shp.stack(_shp.broadcast_arrays(a1 * b2, -(a0 * b2), z), axis=-1)
    a2 = a[..., 2]  # b2 = 0
    return _shp.stack(_shp.broadcast_arrays(-(a2 * b1), a2 * b0, z), axis=-1)


@register_numpy(np.cross)
def cross(a, b, axisa=-1, axisb=-1, axisc=-1, axis=None):
    """Like numpy.cross: cross products of the 3-vectors along ``axisa`` of ``a`` and
    ``axisb`` of ``b`` (the other axes broadcast), along ``axisc`` of the result
    (``axis`` sets all three).  2-vectors are taken with a zero third component,
    as in NumPy, which deprecates them.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> anp.cross(np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0])).tolist()
    [0.0, 0.0, 1.0]
    >>> autodiff.grad(lambda a: anp.cross(a, np.array([0.0, 1.0, 0.0]))[2])(np.ones(3)).tolist()
    [1.0, 0.0, 0.0]
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    if ndim_of(a) < 1 or ndim_of(b) < 1:
        raise ValueError("At least one array has zero dimension")
    a = _shp.moveaxis(a, normalize_axes(axisa, ndim_of(a))[0], -1)
    b = _shp.moveaxis(b, normalize_axes(axisb, ndim_of(b))[0], -1)
    na, nb = shape_of(a)[-1], shape_of(b)[-1]
    if na not in (2, 3) or nb not in (2, 3):
        raise ValueError("incompatible dimensions for cross product\n(dimension must be 2 or 3)")
    if na == 2 or nb == 2:
        warn_caller(
            "Arrays of 2-dimensional vectors are deprecated. Use arrays of 3-dimensional "
            "vectors instead. (deprecated in NumPy 2.0)",
            DeprecationWarning,
        )
        out = _cross_2d(a, b)
        if na == 2 and nb == 2:
            return out
    else:
        out = cross_p.bind(a, b)
    return _shp.moveaxis(out, -1, normalize_axes(axisc, ndim_of(out))[0])


# Taylor mode: products are multilinear, so Leibniz's rule through the product itself.
for _p in (matmul_p, einsum_p, cross_p):
    _p.def_taylor(multilinear_taylor(_p))


from autodiff.rules import elementwise as _elt  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
