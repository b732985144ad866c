"""``autodiff.numpy.fft``: like ``numpy.fft``, differentiable and batchable.

Every public name of ``numpy.fft`` exists; those without rules are NumPy's own.

The primitives (``fft``, ``ifft``, ``rfft``, ``irfft``, ... and ``fftshift``) are
declared, with their rules, in ``autodiff/rules/fft.py``; their compositions
(``rfftn``, ``irfftn``, ``hfft``, ``ihfft``, ``fftfreq``, ...) are here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autodiff.core.arrays import array_like, shape_of
from autodiff.core.overrides import register_numpy
from autodiff.numpy._borrow import borrow as _borrow
from autodiff.rules.elementwise import conj
from autodiff.rules.fft import *  # noqa: F403
from autodiff.rules.fft import DUAL, _axis, _c2c_nd, _check_no_out, _cook, _norm, irfft, rfft
from autodiff.rules.fft import __all__ as _primitives

_compositions = ["rfft2", "irfft2", "rfftn", "irfftn", "hfft", "ihfft", "fftfreq", "rfftfreq"]


# --- real n-d transforms, Hermitian transforms ------------------------------------------------


def _real_nd(a, s, axes, norm):
    s, axes = _cook(a, s, axes)
    if not axes:
        raise ValueError("rfftn: no axes to transform (give at least one)")
    a = rfft(a, s[-1], axes[-1], norm)
    return _c2c_nd(a, s[:-1], axes[:-1], _norm(norm), inverse=False)


def _inverse_real_nd(a, s, axes, norm):
    s, axes = _cook(a, s, axes, invreal=True)
    if not axes:
        raise ValueError("irfftn: no axes to transform (give at least one)")
    a = _c2c_nd(a, s[:-1], axes[:-1], _norm(norm), inverse=True)
    return irfft(a, s[-1], axes[-1], norm)


@register_numpy(np.fft.rfftn)
def rfftn(a, s=None, axes=None, norm=None, out=None):
    """Like numpy.fft.rfftn: rfft over the last of ``axes``, then fft over the others.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.rfftn(np.ones((2, 4))).real
    array([[8., 0., 0.],
           [0., 0., 0.]])
    """
    _check_no_out("rfftn", out)
    return _real_nd(a, s, axes, norm)


@register_numpy(np.fft.rfft2)
def rfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """Like numpy.fft.rfft2: rfftn over the last two axes by default.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.rfft2(np.ones((2, 2))).real
    array([[4., 0.],
           [0., 0.]])
    """
    _check_no_out("rfft2", out)
    return _real_nd(a, s, axes, norm)


@register_numpy(np.fft.irfftn)
def irfftn(a, s=None, axes=None, norm=None, out=None):
    """Like numpy.fft.irfftn: ifft over all but the last of ``axes``, then irfft over
    it (default length ``2 (m - 1)``), the inverse of rfftn.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.irfftn(np.array([[8.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    array([[1., 1., 1., 1.],
           [1., 1., 1., 1.]])
    """
    _check_no_out("irfftn", out)
    return _inverse_real_nd(a, s, axes, norm)


@register_numpy(np.fft.irfft2)
def irfft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """Like numpy.fft.irfft2: irfftn over the last two axes by default.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.irfft2(np.array([[4.0, 0.0], [0.0, 0.0]]))
    array([[1., 1.],
           [1., 1.]])
    """
    _check_no_out("irfft2", out)
    return _inverse_real_nd(a, s, axes, norm)


@register_numpy(np.fft.hfft)
def hfft(a, n=None, axis=-1, norm=None, out=None):
    """Like numpy.fft.hfft: the real spectrum of a signal with Hermitian symmetry given
    by its first half ``a``: ``irfft(conj(a), n)`` with the opposite ``norm``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.hfft(np.array([1.0, 0.0, 0.0]))
    array([1., 1., 1., 1.])
    """
    _check_no_out("hfft", out)
    axis = _axis(a, axis)
    if n is None:
        n = 2 * (shape_of(a)[axis] - 1)
    return irfft(conj(a), n, axis, DUAL[_norm(norm)])


@register_numpy(np.fft.ihfft)
def ihfft(a, n=None, axis=-1, norm=None, out=None):
    """Like numpy.fft.ihfft: the inverse of hfft, ``conj(rfft(a, n))`` with the
    opposite ``norm``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.ihfft(np.array([1.0, 1.0, 1.0, 1.0]))
    array([1.-0.j, 0.-0.j, 0.-0.j])
    """
    _check_no_out("ihfft", out)
    return conj(rfft(a, n, axis, DUAL[_norm(norm)]))


# --- sample frequencies ----------------------------------------------------------------
# Integer bins times 1 / (n d), computed as NumPy computes them; a traced ``d`` makes them
# differentiable in ``d`` (as in JAX), a plain one makes them constants.


def _bins(n: Any, d: Any, device: Any, *ranges: tuple[int, int]) -> Any:
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise ValueError("n should be an integer")
    kwargs = {} if device is None else {"device": device}
    like = array_like(d)
    parts = [np.arange(lo, hi, dtype=int, like=like, **kwargs) for lo, hi in ranges]
    bins = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return bins * (1.0 / (n * d))


@register_numpy(np.fft.fftfreq)
def fftfreq(n, d=1.0, device=None):
    """Like numpy.fft.fftfreq: the sample frequencies of an ``n``-point DFT with sample
    spacing ``d`` (``[0, 1, ..., -1] / (n d)``); differentiable in a traced ``d``.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> anp.fft.fftfreq(4, 0.5).tolist()
    [0.0, 0.5, -1.0, -0.5]
    >>> float(autodiff.grad(lambda d: anp.fft.fftfreq(4, d)[1])(0.5))
    -1.0
    """
    return _bins(n, d, device, (0, (n - 1) // 2 + 1), (-(n // 2), 0))


@register_numpy(np.fft.rfftfreq)
def rfftfreq(n, d=1.0, device=None):
    """Like numpy.fft.rfftfreq: the ``n//2 + 1`` non-negative sample frequencies of
    rfft; differentiable in a traced ``d``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.rfftfreq(4, 0.5).tolist()
    [0.0, 0.5, 1.0]
    """
    return _bins(n, d, device, (0, n // 2 + 1))


# The rest of numpy.fft, as NumPy's own objects (see autodiff/numpy/_borrow.py).
_borrowed, __getattr__ = _borrow(globals(), np.fft)
_own = frozenset([*_primitives, *_compositions])
__all__ = sorted(_own | set(_borrowed))
