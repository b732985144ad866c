"""Convolution: ``convolve`` and ``correlate``, the primitive under ``numpy``'s polynomials.

One primitive carries the convolutions: ``correlate_p``, a sliding dot product along
the last axis.  Every mode of ``correlate`` and ``convolve`` is a window of it, and
polynomial multiplication is convolution: the polynomials (``poly*``, ``vander``) and
``interp`` are compositions in ``autodiff/numpy/_polynomial.py``.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from autodiff.core.arrays import is_complex, ndim_of, shape_of
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import multilinear_taylor
from autodiff.rules import compositions as _comp
from autodiff.rules import elementwise as _elt
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import implements, to_front_padded, unbroadcast
from autodiff.rules._sparsity import shape_of_operand, sliding

__all__ = ["convolve", "correlate"]


# --- the sliding dot product ------------------------------------------------------------
# correlate_p(a, w, offset=o, length=L)[..., i] = sum_j a[..., i + j + o] * w[..., j] for
# i < L, with ``a`` taken as 0 outside its n entries: the full correlation of a with w is
# the window o = -(m - 1), L = n + m - 1, and every mode of correlate and convolve is a
# window of that.  Leading axes broadcast (batches; poly's tree of products).  The
# result is linear in each operand, and its transposes are sliding dot products too.


def _correlate_impl(a, w, *, offset, length):
    if type(a) is type(w) is np.ndarray:  # NumPy's own kernel where it serves
        if w.ndim == 1 and (out := _numpy_kernel(a, w, offset, length)) is not None:
            return out
        if a.ndim == 1 and (out := _numpy_kernel(w, a, 1 - offset - length, length)) is not None:
            return np.flip(out, -1)
    if w.shape[-1] > a.shape[-1]:  # slide the shorter operand: the same sums, reversed
        return np.flip(_sliding_dot(w, a, 1 - offset - length, length), -1)
    return _sliding_dot(a, w, offset, length)


def _numpy_kernel(a, w, offset, length):
    """The window by ``np.convolve`` (2 to 8 times faster than strided windows) for a
    1-d ``w``, or None where it would not serve: where the window is one of its modes
    for one sequence (it computes only those sums), or most of the full correlation
    (a slice of it; the transposes ask for windows of a few entries, which would cost
    n * m).  Several sequences are laid end to end, m - 1 zeros apart, so that one call
    correlates them all (the zeros add exact zeros)."""
    n, m = a.shape[-1], w.shape[-1]
    start = offset + m - 1  # where the window starts in the full correlation
    if a.ndim == 1:
        modes = {(0, n + m - 1): "full", ((min(n, m) - 1) // 2, max(n, m)): "same",
                 (min(n, m) - 1, abs(n - m) + 1): "valid"}  # fmt: skip
        if (start, length) in modes:
            return np.convolve(a, w[::-1], modes[start, length])
    if a.size == 0 or start < 0 or start + length > n + m - 1 or 2 * length < n + m - 1:
        return None
    spaced = np.pad(a.reshape(-1, n), [(0, 0), (0, m - 1)])
    full = np.convolve(spaced.ravel(), w[::-1])[: spaced.size].reshape(spaced.shape)
    return full[:, start : start + length].reshape(*a.shape[:-1], length)


def _sliding_dot(a, w, offset, length):
    """The windows of ``a`` (a strided view for NumPy arrays) against ``w``."""
    n, m = a.shape[-1], w.shape[-1]
    left, right = max(0, -offset), max(0, offset + length + m - 1 - n)
    if left or right:
        a = np.pad(a, [(0, 0)] * (a.ndim - 1) + [(left, right)])
    windows = sliding_window_view(a, m, axis=-1)[..., offset + left : offset + left + length, :]
    return np.einsum("...ij,...j->...i", windows, w)


def _correlate_vjp_a(ct, ans, a, w, *, offset, length):
    n, m = shape_of(a)[-1], shape_of(w)[-1]
    out = correlate_p.bind(ct, _comp.flip(w, -1), offset=-(m - 1) - offset, length=n)
    return unbroadcast(out, shape_of(a))


def _correlate_vjp_w(ct, ans, a, w, *, offset, length):
    out = correlate_p.bind(a, ct, offset=offset, length=shape_of(w)[-1])
    return unbroadcast(out, shape_of(w))


def _correlate_batch(args, dims, **params):
    # Batch axes first, padded so the leading (broadcast) axes of both operands align.
    lead = [ndim_of(x) - 1 - (d is not None) for x, d in zip(args, dims)]
    top = max(lead)
    moved = [
        x if d is None else to_front_padded(x, d, top - k) for x, d, k in zip(args, dims, lead)
    ]
    return correlate_p.bind(*moved, **params), 0


correlate_p = Primitive(
    "correlate",
    _correlate_impl,
    vjp=[_correlate_vjp_a, _correlate_vjp_w],
    jvp=[
        lambda t, ans, a, w, **window: correlate_p.bind(t, w, **window),
        lambda t, ans, a, w, **window: correlate_p.bind(a, t, **window),
    ],
    batch=_correlate_batch,
    vjp_reads=[(1,), (0,)],
    sparsity=lambda a, w, *, offset, length: sliding(
        [shape_of_operand(a), shape_of_operand(w)], 1, [(offset, length)], correlate=True
    ),  # c[k] reads a[k + offset + n] and w[n]: a band
)
correlate_p.def_taylor(multilinear_taylor(correlate_p))  # bilinear: Leibniz's rule through it


def _sequence(x, name):
    """``x`` as a non-empty 1-d array, as NumPy's convolve takes it."""
    x = _elt.as_operands(x)
    if ndim_of(x) == 0:
        x = _shp.reshape(x, (1,))
    if ndim_of(x) != 1:
        raise ValueError(f"{name}: the sequences must be 1-d (got shape {shape_of(x)})")
    if shape_of(x)[0] == 0:
        raise ValueError(f"{name}: the sequences cannot be empty")
    return x


_MODES = {"f": "full", "s": "same", "v": "valid"}


def _window(n, m, mode, same_start):
    """(offset, length) of ``mode``'s part of the full correlation of n and m entries."""
    if mode in (0, 1, 2) and not isinstance(mode, bool):  # NumPy's numbers for the modes
        mode = ("valid", "same", "full")[mode]
    name = _MODES.get(mode[:1].lower()) if isinstance(mode, str) else None
    if name is None:
        raise ValueError(f"mode must be 'full', 'same' or 'valid', not {mode!r}")
    start, length = {
        "full": (0, n + m - 1),
        "same": (same_start, max(n, m)),
        "valid": (min(n, m) - 1, abs(n - m) + 1),
    }[name]
    return {"offset": start - (m - 1), "length": length}


@implements(correlate_p, np.convolve)
def convolve(a, v, mode="full"):
    """Like numpy.convolve: the discrete linear convolution of two 1-d sequences, in
    mode 'full' (every overlap), 'same' (the length of the longer one, centred) or
    'valid' (complete overlaps only).  Differentiable and batchable in both.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]))
    array([0. , 1. , 2.5, 4. , 1.5])
    >>> anp.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]), "same")
    array([1. , 2.5, 4. ])
    """
    a, v = _sequence(a, "convolve"), _sequence(v, "convolve")
    n, m = shape_of(a)[0], shape_of(v)[0]
    window = _window(n, m, mode, (min(n, m) - 1) // 2)
    return correlate_p.bind(a, _comp.flip(v), **window)


@implements(correlate_p, np.correlate)
def correlate(a, v, mode="valid"):
    """Like numpy.correlate: ``c[k] = sum_n a[n + k] * conj(v[n])``, in mode 'valid'
    (the default), 'same' or 'full'.  Differentiable and batchable in both.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.correlate(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]), "full")
    array([0.5, 2. , 3.5, 3. , 0. ])
    """
    a, v = _sequence(a, "correlate"), _sequence(v, "correlate")
    n, m = shape_of(a)[0], shape_of(v)[0]
    window = _window(n, m, mode, (m - 1) // 2 if n >= m else n // 2)  # NumPy's centring
    return correlate_p.bind(a, _elt.conj(v) if is_complex(v) else v, **window)


# The rules above call these families, which import the helpers first.
