"""Products: matmul (every ndim case, with stack broadcasting); einsum (a primitive
for any subscripts: ``...`` broadcasting, repeated indices, any number of operands,
implicit output); cross (a primitive for 3-vectors).  Their compositions (``dot``,
``vdot``, ``inner``, ``outer``, ``tensordot``, ``kron`` and the array API's products)
are in ``autodiff/numpy/_products.py``.

einsum is linear in each operand, so its JVP and VJP are einsums again.  The
cotangent of an operand whose subscripts repeat an index (``'ii->i'``) is
spread back onto the diagonal by identity matrices; indices that only that
operand has (summed over in the forward pass) are broadcast back.  Complex
operands follow JAX's convention: the VJP is the plain (non-conjugating)
transpose."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np

from autodiff.core.arrays import (
    broadcast_shapes,
    dtype_of,
    eye_like,
    ndim_of,
    normalize_axes,
    shape_of,
)
from autodiff.core.loading import load
from autodiff.core.lowering import Gufunc, NotLowered
from autodiff.core.numpy_args import warn_caller
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import multilinear_taylor
from autodiff.rules import compositions as _comp
from autodiff.rules import elementwise as _elt
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import (
    implements,
    move_to_front,
    shaped_like,
    to_front_padded,
    unbroadcast,
)

__all__ = ["einsum", "matmul", "cross"]


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
    ct_a = matmul(_as_matrix_ct(ct, a, b), _shp.swap_last_two(b2))
    return _shp.reshape(unbroadcast(ct_a, a2_shape), shape_of(a))


def _matmul_vjp_b(ct, ans, a, b):
    # Reads a only (see vjp_reads): b's role is its shape.
    if ndim_of(a) == 2 and ndim_of(b) == 1:  # A @ v: the cotangent is A^T @ ct
        return matmul(_shp.swap_last_two(a), ct)
    a2 = _shp.expand_dims(a, 0) if ndim_of(a) == 1 else a
    b2_shape = (*shape_of(b), 1) if ndim_of(b) == 1 else shape_of(b)
    ct_b = matmul(_shp.swap_last_two(a2), _as_matrix_ct(ct, a, b))
    return _shp.reshape(unbroadcast(ct_b, b2_shape), shape_of(b))


def _matmul_batch(args, dims):
    (a, b), (ad, bd) = args, dims
    a_nd, b_nd = ndim_of(a) - (ad is not None), ndim_of(b) - (bd is not None)
    # Fast paths: the batch axis rides along as a row/stack axis of one operand.
    if bd is None and b_nd == 2 and ad != ndim_of(a) - 1:
        return matmul(a, b), ad  # (.., B, .., n) @ (n, p): e.g. per-example x @ W
    if bd is None and b_nd == 1 and ad != ndim_of(a) - 1:
        return matmul(a, b), ad  # (.., B, .., n) @ (n,): e.g. per-example x @ w
    if ad is None and a_nd == 2 and b_nd >= 2 and bd < ndim_of(b) - 2:
        return matmul(a, b), bd
    if ad is None and a_nd == 2 and b_nd == 1:  # per-example A @ v is V @ A^T, batch first
        return matmul(move_to_front(b, bd), _shp.swap_last_two(a)), 0
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
matmul_p.def_taylor(multilinear_taylor(matmul_p))  # multilinear: Leibniz's rule through it


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


@matmul_p.def_shape
def _matmul_shape(a, b):
    a_shape = a.shape if a.ndim > 1 else (1, *a.shape)
    b_shape = b.shape if b.ndim > 1 else (*b.shape, 1)
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(
            f"matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc "
            f"signature (n?,k),(k,m?)->(n?,m?) (size {b_shape[-2]} is different from "
            f"{a_shape[-1]})"
        )
    shape = (*broadcast_shapes(a_shape[:-2], b_shape[:-2]), a_shape[-2], b_shape[-1])
    if a.ndim == 1:
        shape = shape[:-2] + shape[-1:]
    if b.ndim == 1:
        shape = shape[:-1]
    return shaped_like(a, shape, np.result_type(a.dtype, b.dtype))


@matmul_p.def_sparsity
def _matmul_sparsity(a, b):
    # sparsity detection's kit, loaded at its first use (rules/_helpers.py's sparsity_kit)
    from autodiff.rules._sparsity import contraction, shape_of_operand

    a_shape, b_shape = shape_of_operand(a), shape_of_operand(b)
    stack = "".join(LABELS[: max(len(a_shape), len(b_shape), 2) - 2])
    a_term = "k" if len(a_shape) == 1 else stack[len(stack) - len(a_shape) + 2 :] + "mk"
    b_term = "k" if len(b_shape) == 1 else stack[len(stack) - len(b_shape) + 2 :] + "kn"
    out = stack[: max(len(a_term), len(b_term)) - 2] if len(a_shape) > 1 or len(b_shape) > 1 else ""
    out += ("m" if len(a_shape) > 1 else "") + ("n" if len(b_shape) > 1 else "")
    return contraction([a_term, b_term], out, [a_shape, b_shape])


def jax_options(out, name: str, precision: Any, preferred_element_type: Any):
    """JAX's keywords of its products: ``precision`` checked (NumPy computes in the
    operands' dtype whatever it says), ``preferred_element_type`` the result's dtype."""
    if precision is not None:  # (its module loads here: a program seldom names one)
        load("autodiff.core.precision").check_precision(precision, name)
    return out if preferred_element_type is None else _elt.astype(out, preferred_element_type)


@implements(matmul_p, np.matmul)
def matmul(x1, x2, /, *, precision=None, preferred_element_type=None):
    """Like numpy.matmul (``@``): matrix products with broadcasting over stacks;
    1-D operands act as row/column vectors.  ``precision`` and
    ``preferred_element_type`` as in jax.numpy.matmul (the first changes nothing)."""
    for x in (x1, x2):
        if ndim_of(x) == 0:
            raise ValueError("matmul: Input operand does not have enough dimensions (a 0-d array)")
    out = matmul_p.bind(x1, x2)
    if precision is None and preferred_element_type is None:  # (the common call)
        return out
    return jax_options(out, "matmul", precision, preferred_element_type)


# --- einsum ------------------------------------------------------------------------
#
# The primitive sees canonical subscripts: explicit output, letters only (no
# '...', no spaces), and no broadcasting of unit axes (the public function
# squeezes them away), so every index has one size across the operands.

# The labels np.einsum accepts; in the sublist form, integer k is LABELS[k].
LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"  # (not the string module: 1 ms)


def _split(subscripts: str) -> tuple[list[str], str]:
    """Canonical ``'ab,bc->ac'`` as ``(['ab', 'bc'], 'ac')``."""
    ins, out = subscripts.split("->")
    return ins.split(","), out


def _fresh(used: str, count: int = 1) -> str:
    """``count`` labels that do not occur in ``used``."""
    free = [c for c in LABELS if c not in used]
    if len(free) < count:
        raise ValueError("einsum: too many distinct indices (NumPy allows 52 letters)")
    return "".join(free[:count])


def _real_dtype(x: Any) -> np.dtype:
    dtype = dtype_of(x)
    return np.finfo(dtype).dtype if dtype.kind in "fc" else np.dtype(np.float64)


def _internal_optimize(n_operands: int) -> Any:
    return "greedy" if n_operands > 2 else False


# einsum's VJP and JVP rules are packed (``core/rule_forms.py``): one function each serves
# every operand, where per-argument rules would be a closure per operand NumPy allows
# (64), made at import for the collector to walk and a program's shutdown to free.


def _einsum_jvp(tangents, ans, operands, params):
    """The sum, over the operands with a tangent, of the einsum with that operand
    replaced by its tangent (einsum is linear in each)."""
    out = None
    for k, t in enumerate(tangents):
        if t is not None:
            ops = list(operands)
            ops[k] = t
            term = einsum_p.bind(*ops, **params)
            out = term if out is None else out + term
    return out


def _einsum_vjp(ct, ans, operands, params, argnums):
    """The cotangents of the operands at ``argnums`` (only those computed)."""
    return [_einsum_cotangent(k, ct, operands, **params) for k in argnums]


def _einsum_cotangent(k, ct, operands, *, subscripts, optimize):
    """Cotangent of operand ``k``: the einsum of the cotangent with the other operands."""
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


def _einsum_batch(args, dims, *, subscripts, optimize):
    """A fresh index for the batch axis, on every batched operand and the output."""
    terms, out = _split(subscripts)
    b = _fresh(subscripts)
    terms = [t if d is None else t[:d] + b + t[d:] for t, d in zip(terms, dims)]
    spec = ",".join(terms) + "->" + b + out
    return einsum_p.bind(*args, subscripts=spec, optimize=optimize), 0


def _contraction_sparsity(terms, out, operands):
    """einsum's sparsity rule: the contraction of ``terms`` into ``out``."""
    from autodiff.rules._sparsity import contraction, shape_of_operand  # (see _matmul_sparsity)

    return contraction(terms, out, [shape_of_operand(x) for x in operands])


einsum_p = Primitive(
    "einsum",
    lambda *operands, subscripts, optimize: np.einsum(subscripts, *operands, optimize=optimize),
    batch=_einsum_batch,
    sparsity=lambda *operands, subscripts, optimize: _contraction_sparsity(
        *_split(subscripts), operands
    ),
)
einsum_p.def_vjp(_einsum_vjp, packed=True)
einsum_p.def_jvp(_einsum_jvp, packed=True)
einsum_p.def_taylor(multilinear_taylor(einsum_p))  # multilinear: Leibniz's rule through it


@einsum_p.def_shape
def _einsum_shape(*operands, subscripts, optimize):
    terms, out = subscripts.split("->")
    sizes: dict[str, int] = {}
    ellipsis: list[tuple] = []
    for term, x in zip(terms.split(","), operands):
        shape = x.shape
        if "..." in term:
            left, right = term.split("...")
            ellipsis.append(shape[len(left) : len(shape) - len(right)])
            term, shape = left + right, shape[: len(left)] + shape[len(shape) - len(right) :]
        for label, n in zip(term, shape):
            if sizes.get(label, 1) not in (1, n) and n != 1:
                raise ValueError(f"einsum: operands could not be broadcast for label {label!r}")
            sizes[label] = n if sizes.get(label, 1) == 1 else sizes[label]
    middle = broadcast_shapes(*ellipsis) if ellipsis else ()
    left, _, right = out.partition("...")
    shape = (
        tuple(sizes[c] for c in left)
        + (middle if "..." in out else ())
        + tuple(sizes[c] for c in right)
    )
    return shaped_like(operands[0], shape, np.result_type(*(x.dtype for x in operands)))


def _from_sublists(args: tuple) -> tuple[str, list]:
    """``einsum(op0, sublist0, op1, sublist1, ..., [sublistout])`` as a subscripts string."""

    def labels(sub: Any) -> str:
        out = ""
        for s in sub:
            if s is Ellipsis:
                out += "..."
            elif 0 <= int(s) < len(LABELS):
                out += LABELS[int(s)]
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
        bad = [c for c in t.replace("...", "", 1) if c not in LABELS]
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
def einsum(*operands, out=None, optimize=False, dtype=None, order="K", casting="safe",
           precision=None, preferred_element_type=None):  # fmt: skip
    """Like numpy.einsum: any subscripts (``...`` broadcasting, repeated indices such
    as ``'ii->i'``, implicit output), any number of operands, or the sublist form
    ``einsum(a, [0, 1], b, [1, 2], [0, 2])``.  ``precision`` and
    ``preferred_element_type`` as in jax.numpy.einsum (the first changes nothing).

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
    out = einsum_p.bind(*ops, subscripts=spec, optimize=optimize)
    return jax_options(out, "einsum", precision, preferred_element_type)


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
cross_p.def_taylor(multilinear_taylor(cross_p))  # multilinear: Leibniz's rule through it


@cross_p.def_sparsity
def _cross_sparsity(a, b):
    # Component i reads components i + 1 and i + 2 (mod 3) of each vector, and is the sum
    # of two products, the Hessian's terms: a[i + 1] b[i + 2] and a[i + 2] b[i + 1].
    from autodiff.core.index_sets import Sparsity  # (see _matmul_sparsity)
    from autodiff.rules._sparsity import problem_edges, shape_of_operand

    sa, sb = shape_of_operand(a), shape_of_operand(b)
    stack = broadcast_shapes(sa[:-1], sb[:-1])
    i = np.arange(3)
    after, later = (i + 1) % 3, (i + 2) % 3
    reads = [problem_edges(s, 1, (*stack, 3), 1, np.tile(i, 2), np.concatenate([after, later]))
             for s in (sa, sb)]  # fmt: skip
    pairs = ((sa, np.stack([after, later], -1).ravel()), (sb, np.stack([later, after], -1).ravel()))
    terms = [problem_edges(s, 1, (*stack, 6), 1, np.arange(6), t) for s, t in pairs]
    return Sparsity(reads, [(0, 1)], terms=terms, n_terms=6 * math.prod(stack))


def _cross_2d(a, b):
    """NumPy's deprecated 2-vector cases: the missing third component is 0 (computed
    without it, as NumPy does, so that inf and NaN entries stay where NumPy has them)."""
    a0, a1, b0, b1 = a[..., 0], a[..., 1], b[..., 0], b[..., 1]
    z = a0 * b1 - a1 * b0
    if shape_of(a)[-1] == 2 and shape_of(b)[-1] == 2:
        return z
    if shape_of(a)[-1] == 2:  # a2 = 0
        b2 = b[..., 2]
        return _shp.stack(_comp.broadcast_arrays(a1 * b2, -(a0 * b2), z), axis=-1)
    a2 = a[..., 2]  # b2 = 0
    return _shp.stack(_comp.broadcast_arrays(-(a2 * b1), a2 * b0, z), axis=-1)


@implements(cross_p, np.cross)
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
    a = _comp.moveaxis(a, normalize_axes(axisa, ndim_of(a))[0], -1)
    b = _comp.moveaxis(b, normalize_axes(axisb, ndim_of(b))[0], -1)
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
    return _comp.moveaxis(out, -1, normalize_axes(axisc, ndim_of(out))[0])
