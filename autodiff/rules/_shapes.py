"""Shape rules for the primitives not declared through an elementwise helper.

Staging (``jit``, ``make_graph``) needs each result's shape and dtype without
computing it.  The elementwise helpers give their primitives a rule (``_helpers``);
the rest are here, one line per primitive, so the family modules stay as they are.
A primitive without a rule still stages, by running its implementation once per
signature on placeholder zeros; the rules here are for the families where that
fails (linear algebra on singular zeros) or costs a computation of the full size
(products, reductions, FFTs), and for indexing, whose errors (an index out of range)
must reach the user as they are.  Where a dtype is NumPy's business (the dtype of a
sum of int8, of an FFT of float32), it comes from a one-element example, cached.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from autodiff.core.arrays import broadcast_shapes
from autodiff.core.graph import ShapedArray
from autodiff.errors import ConcretizationError
from autodiff.rules import (
    creation,
    elementwise,
    fft,
    indexing,
    linalg,
    products,
    reductions,
    sorting,
)
from autodiff.rules import shape as shp

_examples: dict = {}


def _example_dtype(fn: Any, *dtypes: np.dtype, ndim: int = 1, **params: Any) -> np.dtype:
    """The dtype of ``fn`` on one-element arrays (of ``ndim`` axes) of ``dtypes``."""
    key = (fn, dtypes, ndim, tuple(params.items()))
    found = _examples.get(key)
    if found is None:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*(np.ones((1,) * ndim, d) for d in dtypes), **params)
        found = _examples[key] = np.result_type(out)
    return found


def _like(x: Any, shape: Any = None, dtype: Any = None) -> ShapedArray:
    return ShapedArray(x.shape if shape is None else shape, x.dtype if dtype is None else dtype)


def _evaluated(prim: Any):
    """A rule that runs the implementation on placeholders (read-only zero-strided
    views: indexing them costs nothing), letting its errors through as they are."""

    def rule(*avals, **params):
        args = [
            {"f": 0.0, "c": 0j}.get(a.dtype.kind, 0)
            if a.weak_type
            else np.broadcast_to(np.zeros((), a.dtype), a.shape)
            for a in avals
        ]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = prim.impl(*args, **params)
        if prim.multiple_results:
            return tuple(ShapedArray(np.shape(o), np.result_type(o)) for o in out)
        return ShapedArray(np.shape(out), np.result_type(out))

    return rule


# --- reductions and scans ------------------------------------------------------------------------


def _reduced(x: Any, axis: tuple, keepdims: bool) -> tuple:
    if keepdims:
        return tuple(1 if i in axis else n for i, n in enumerate(x.shape))
    return tuple(n for i, n in enumerate(x.shape) if i not in axis)


def _reduction(numpy_fn: Any):
    def rule(x, *, axis, keepdims):
        dtype = _example_dtype(numpy_fn, x.dtype, axis=0)
        return ShapedArray(_reduced(x, axis, keepdims), dtype)

    return rule


def _arg_reduction(x, *, axis, keepdims):
    if axis is not None:
        return ShapedArray(_reduced(x, (axis,), keepdims), np.intp)
    return ShapedArray((1,) * x.ndim if keepdims else (), np.intp)


for _prim, _fn in [(reductions.sum_p, np.sum), (reductions.prod_p, np.prod),
                   (reductions.max_p, np.max), (reductions.min_p, np.min),
                   (reductions.all_p, np.all), (reductions.any_p, np.any)]:  # fmt: skip
    _prim.def_shape(_reduction(_fn))
reductions.argmax_p.def_shape(_arg_reduction)
reductions.argmin_p.def_shape(_arg_reduction)
reductions.cumsum_p.def_shape(
    lambda x, *, axis: _like(x, dtype=_example_dtype(np.cumsum, x.dtype, axis=0))
)

# --- shape functions ----------------------------------------------------------------------------


def _expand_dims(x, *, axis):
    shape = list(x.shape)
    for a in sorted(axis):
        shape.insert(a, 1)
    return _like(x, tuple(shape))


def _joined(xs: tuple) -> np.dtype:
    return np.result_type(*(x.dtype for x in xs))


def _concatenate(*xs, axis):
    shape = list(xs[0].shape)
    shape[axis] = sum(x.shape[axis] for x in xs)
    return ShapedArray(tuple(shape), _joined(xs))


def _stack(*xs, axis):
    shape = list(xs[0].shape)
    shape.insert(axis, len(xs))
    return ShapedArray(tuple(shape), _joined(xs))


def _pad(x, *, pad_width, constant_values):
    return _like(x, tuple(n + lo + hi for n, (lo, hi) in zip(x.shape, pad_width)))


shp.reshape_p.def_shape(lambda x, *, shape: _like(x, shape))
shp.transpose_p.def_shape(lambda x, *, axes: _like(x, tuple(x.shape[a] for a in axes)))
shp.broadcast_to_p.def_shape(lambda x, *, shape: _like(x, shape))
shp.expand_dims_p.def_shape(_expand_dims)
shp.squeeze_p.def_shape(
    lambda x, *, axis: _like(x, tuple(n for i, n in enumerate(x.shape) if i not in axis))
)
shp.concatenate_p.def_shape(_concatenate)
shp.stack_p.def_shape(_stack)
shp.pad_p.def_shape(_pad)

# --- dtypes, creation, elementwise primitives of their own ----------------------------------------

creation.zeros_like.primitive.def_shape(lambda x, *, dtype: _like(x, dtype=dtype))
creation.ones_like.primitive.def_shape(lambda x, *, dtype: _like(x, dtype=dtype))
elementwise.astype_p.def_shape(lambda x, *, dtype: _like(x, dtype=dtype))
elementwise.astype_discrete_p.def_shape(lambda x, *, dtype: _like(x, dtype=dtype))
elementwise._nan_to_num_p.def_shape(_evaluated(elementwise._nan_to_num_p))
elementwise._round_p.def_shape(_evaluated(elementwise._round_p))

# --- indexing and sorting -----------------------------------------------------------------------

indexing.getitem_p.def_shape(_evaluated(indexing.getitem_p))
for _prim in vars(indexing).values():
    if isinstance(_prim, type(indexing.getitem_p)) and _prim.name.startswith("index_"):
        _prim.def_shape(lambda x, y, *arrays, index: _like(x))  # a copy of x, updated
sorting.argsort_p.def_shape(lambda x, *, axis, stable: _like(x, dtype=np.intp))
sorting.searchsorted_p.def_shape(lambda a, v, *, side: _like(v, dtype=np.intp))

# --- products -----------------------------------------------------------------------------------


def _matmul(a, b):
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
    return ShapedArray(shape, np.result_type(a.dtype, b.dtype))


def _einsum(*operands, subscripts, optimize):
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
    return ShapedArray(shape, np.result_type(*(x.dtype for x in operands)))


products.matmul_p.def_shape(_matmul)
products.einsum_p.def_shape(_einsum)

# --- linear algebra: NumPy computes in float64, float32 or complex --------------------------------


def _la(dtype: np.dtype) -> np.dtype:
    return dtype if dtype.kind in "fc" and dtype.itemsize >= 4 else np.dtype(np.float64)


def _la_real(dtype: np.dtype) -> np.dtype:
    return np.finfo(_la(dtype)).dtype


def _solve(a, b):
    dtype = np.result_type(_la(a.dtype), _la(b.dtype))
    if b.ndim == 1:
        return ShapedArray(a.shape[:-1], dtype)
    return ShapedArray((*broadcast_shapes(a.shape[:-2], b.shape[:-2]), *b.shape[-2:]), dtype)


def _svd(a, *, full_matrices, hermitian):
    *stack, m, n = a.shape
    k = min(m, n)
    u = (m, m) if full_matrices else (m, k)
    vh = (n, n) if full_matrices else (k, n)
    d = _la(a.dtype)
    return (ShapedArray((*stack, *u), d), ShapedArray((*stack, k), _la_real(a.dtype)),
            ShapedArray((*stack, *vh), d))  # fmt: skip


def _qr(a, *, mode):
    *stack, m, n = a.shape
    k = min(m, n)
    q, r = ((m, m), (m, n)) if mode == "complete" else ((m, k), (k, n))
    d = _la(a.dtype)
    return ShapedArray((*stack, *q), d), ShapedArray((*stack, *r), d)


def _stack_of(a, *tail):
    return (*a.shape[:-2], *tail)


linalg.solve_p.def_shape(_solve)
linalg.inv_p.def_shape(lambda a: _like(a, dtype=_la(a.dtype)))
linalg.det_p.def_shape(lambda a: ShapedArray(a.shape[:-2], _la(a.dtype)))
linalg.slogdet_p.def_shape(
    lambda a: (
        ShapedArray(a.shape[:-2], _la(a.dtype)),
        ShapedArray(a.shape[:-2], _la_real(a.dtype)),
    )
)
linalg.cholesky_p.def_shape(lambda a, *, upper: _like(a, dtype=_la(a.dtype)))
linalg.eigh_p.def_shape(
    lambda a, *, UPLO: (ShapedArray(a.shape[:-1], _la_real(a.dtype)), _like(a, dtype=_la(a.dtype)))
)
linalg.svd_p.def_shape(_svd)
linalg.svdvals_p.def_shape(
    lambda a, *, hermitian: ShapedArray(_stack_of(a, min(a.shape[-2:])), _la_real(a.dtype))
)
linalg.qr_p.def_shape(_qr)
linalg.pinv_p.def_shape(
    lambda a, *, hermitian, options: ShapedArray(
        _stack_of(a, a.shape[-1], a.shape[-2]), _la(a.dtype)
    )
)

# --- FFTs ---------------------------------------------------------------------------------------


def _with(shape: tuple, axis: int, n: int) -> tuple:
    return (*shape[:axis], n, *shape[axis + 1 :])


def _complex(dtype: np.dtype) -> np.dtype:
    return _example_dtype(np.fft.fft, dtype)


def _real(dtype: np.dtype) -> np.dtype:
    return _example_dtype(np.fft.irfft, _complex(dtype), n=1)


fft.fft_resize_p.def_shape(lambda x, *, axis, n: _like(x, _with(x.shape, axis, n)))
fft.fft_c2c_p.def_shape(lambda x, *, axes, inverse, norm: _like(x, dtype=_complex(x.dtype)))
fft.rfft_p.def_shape(
    lambda x, *, axis, norm: ShapedArray(
        _with(x.shape, axis, x.shape[axis] // 2 + 1), _complex(x.dtype)
    )
)
fft.irfft_p.def_shape(
    lambda z, *, axis, n, norm: ShapedArray(_with(z.shape, axis, n), _real(z.dtype))
)
fft.fftshift_p.def_shape(lambda x, *, shifts, axes: _like(x))

__all__: list[str] = []


# --- results whose shape or dtype depends on the values ----------------------------------------
# Staging knows shapes and dtypes, not values: these refuse it, saying what to do instead,
# rather than guess a dtype the replay may not give.


def _eig(a):
    if a.dtype.kind != "c":
        raise ConcretizationError(
            "linalg.eig and linalg.eigvals of a real matrix are real where every eigenvalue "
            "is real and complex otherwise: their dtype depends on the values, which jit does "
            "not know. Pass a complex matrix (a.astype(complex)) to get complex results "
            "always, or call it outside jit."
        )
    return _like(a, a.shape[:-1]), _like(a)


def _roots(p):
    raise ConcretizationError(
        "roots under jit: how many roots there are (NumPy strips leading and trailing zero "
        "coefficients) and whether they are real depend on the values, which jit does not "
        "know. Compute the eigenvalues of the companion matrix of a complex polynomial with "
        "anp.linalg.eigvals, or call roots outside jit."
    )


linalg.eig_p.def_shape(_eig)
linalg.eigvals_p.def_shape(lambda a: _eig(a)[0])
# NumPy gives residuals only for full column rank: staging assumes it (a rank-deficient
# problem then gives an empty array, as NumPy does, which the staged code expected full).
linalg.lstsq_residuals_p.def_shape(lambda r, rank, *, n: _like(r))
linalg.roots_p.def_shape(_roots)
