"""scipy.signal: N-dimensional convolution and correlation (``autodiff.scipy.signal``).
Needs SciPy.

One primitive, ``convolve`` (every mode), whose leading ``nbatch`` axes are batch
axes (broadcast, not convolved: what ``vmap`` adds); ``correlate`` and
``fftconvolve`` are compositions of it (``autodiff/scipy/signal.py``).

Convolution is bilinear, so the JVP is ``convolve(da, b) + convolve(a, db)``.  The
VJP in ``a`` pads the cotangent (zeros) to the shape of the ``'full'`` output and
convolves it, in ``'valid'`` mode, with ``b`` flipped along the convolved axes
(``flip(b)``, not its conjugate: JAX's convention); in ``b`` likewise with ``flip(a)``.
Both are convolutions again, so every order and every nesting of transforms works.

Unbatched, the implementation is ``scipy.signal.convolve`` (``method='auto'``);
batched, SciPy's choice of method for one example decides between
``scipy.signal.fftconvolve`` over the convolved axes and a direct sum (an
``einsum`` over sliding windows, exact for integers).
"""

from __future__ import annotations

import numpy as np
import scipy.signal as _ss

from autodiff.core.arrays import ndim_of, shape_of
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import multilinear_taylor
from autodiff.rules import compositions as _comp
from autodiff.rules import shape as _shp
from autodiff.rules._helpers import implements, move_to_front, unbroadcast
from autodiff.rules._scipy import scipy_impl
from autodiff.rules._sparsity import shape_of_operand, sliding

__all__ = ["convolve"]

_MODES = ("full", "same", "valid")


def _window(na: int, nb: int, mode: str) -> tuple[int, int]:
    """Where the ``mode`` output lies in the ``'full'`` one, along one axis: (start, length)."""
    if mode == "full":
        return 0, na + nb - 1
    if mode == "same":
        return (nb - 1) // 2, na
    return min(na, nb) - 1, abs(na - nb) + 1


def _direct(a, b, mode: str, nbatch: int):
    """The convolution by its definition, over all but the first ``nbatch`` axes: each
    output is the sum of a window of ``a`` times ``b`` flipped (no copy of the windows)."""
    axes = tuple(range(nbatch, a.ndim))
    kernel = b.shape[nbatch:]
    padded = np.pad(a, [(0, 0)] * nbatch + [(n - 1, n - 1) for n in kernel])
    windows = np.lib.stride_tricks.sliding_window_view(padded, kernel, axis=axes)
    out, win = "abcdefghijklm"[: len(axes)], "nopqrstuvwxyz"[: len(axes)]
    full = np.einsum(f"...{out}{win},...{win}->...{out}", windows, np.flip(b, axes))
    crop = [_window(na, nb, mode) for na, nb in zip(a.shape[nbatch:], kernel)]
    index = (Ellipsis, *[slice(s, s + n) for s, n in crop])
    return full[index]


def _convolve_impl(a, b, *, mode, nbatch):
    if nbatch == 0:
        return _ss.convolve(a, b, mode=mode)
    if a.ndim == nbatch:  # nothing to convolve: 0-d examples
        return a * b
    example = (0,) * nbatch
    if 0 in np.broadcast_shapes(a.shape[:nbatch], b.shape[:nbatch]):  # an empty batch
        return _direct(a, b, mode, nbatch)
    if _ss.choose_conv_method(a[example], b[example], mode=mode) == "fft":
        return _ss.fftconvolve(a, b, mode=mode, axes=tuple(range(nbatch, a.ndim)))
    return _direct(a, b, mode, nbatch)


def _full_cotangent(ct, a, b, mode, nbatch):
    """``ct`` padded with zeros to the shape of the ``'full'`` output."""
    pads = [(0, 0)] * nbatch
    for na, nb, n in zip(shape_of(a)[nbatch:], shape_of(b)[nbatch:], shape_of(ct)[nbatch:]):
        start, _ = _window(na, nb, mode)
        pads.append((start, na + nb - 1 - start - n))
    return ct if all(p == (0, 0) for p in pads) else _shp.pad(ct, pads)


def _flipped(x, nbatch):
    axes = tuple(range(nbatch, ndim_of(x)))
    return _comp.flip(x, axes) if axes else x


def _convolve_vjp(which: int):
    def vjp(ct, ans, a, b, *, mode, nbatch):
        other = b if which == 0 else a
        full = _full_cotangent(ct, a, b, mode, nbatch)
        out = convolve_p.bind(full, _flipped(other, nbatch), mode="valid", nbatch=nbatch)
        return unbroadcast(out, shape_of(a if which == 0 else b))

    return vjp


def _convolve_batch(args, dims, *, mode, nbatch):
    # the vmapped axis becomes the first batch axis (size 1 for an unbatched operand)
    a, b = (
        _shp.expand_dims(x, 0) if d is None else move_to_front(x, d) for x, d in zip(args, dims)
    )
    return convolve_p.bind(a, b, mode=mode, nbatch=nbatch + 1), 0


convolve_p = Primitive(
    "convolve",
    scipy_impl(_ss.convolve, _convolve_impl),
    vjp=[_convolve_vjp(0), _convolve_vjp(1)],
    jvp=[
        lambda t, ans, a, b, **p: convolve_p.bind(t, b, **p),
        lambda t, ans, a, b, **p: convolve_p.bind(a, t, **p),
    ],
    batch=_convolve_batch,
)


@convolve_p.def_sparsity
def _convolve_sparsity(a, b, *, mode, nbatch):
    # out[o] reads a[i] and b[j] with i + j the position of o in the full convolution
    sa, sb = shape_of_operand(a), shape_of_operand(b)
    window = [_window(na, nb, mode) for na, nb in zip(sa[nbatch:], sb[nbatch:])]
    return sliding([sa, sb], len(sa) - nbatch, window)


convolve_p.def_taylor(multilinear_taylor(convolve_p))  # bilinear: Leibniz's rule through it


def _check(shape1: tuple, shape2: tuple, mode: str, name: str) -> None:
    """SciPy's checks of the convolved shapes, with its messages."""
    if mode not in _MODES:
        raise ValueError(
            f"{name}: acceptable mode flags are 'valid', 'same', or 'full', not {mode!r}"
        )
    if len(shape1) != len(shape2):
        raise ValueError(
            f"{name}: in1 and in2 should have the same dimensionality ({shape1}, {shape2})"
        )
    pairs = list(zip(shape1, shape2))
    if mode == "valid" and not (all(m >= n for m, n in pairs) or all(n >= m for m, n in pairs)):
        raise ValueError(
            f"{name}: for 'valid' mode, one must be at least as large as the other in every "
            f"dimension ({shape1}, {shape2})"
        )


@implements(convolve_p)
def convolve(in1, in2, mode="full", method="auto"):
    """Like scipy.signal.convolve: the N-dimensional convolution of two arrays of the same
    number of dimensions, in ``mode`` ``'full'``, ``'same'`` (the shape of ``in1``) or
    ``'valid'``.  Differentiable in both; ``method`` is accepted and SciPy's ``'auto'``
    choice is used.

    >>> import numpy as np, autodiff, autodiff.scipy.signal as sig
    >>> sig.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5])).tolist()
    [0.0, 1.0, 2.5, 4.0, 1.5]
    >>> autodiff.grad(lambda k: sig.convolve(np.ones(3), k, "valid").sum())(np.ones(2)).tolist()
    [2.0, 2.0]
    """
    if method not in ("auto", "direct", "fft"):
        raise ValueError(
            f"convolve: acceptable method flags are 'auto', 'direct', or 'fft', not {method!r}"
        )
    _check(shape_of(in1), shape_of(in2), mode, "convolve")
    return convolve_p.bind(in1, in2, mode=mode, nbatch=0)
