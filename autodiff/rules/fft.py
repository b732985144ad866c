"""Discrete Fourier transforms (``autodiff.numpy.fft``), differentiable and batchable.

Four primitives; the public functions are thin wrappers that normalise NumPy's
parameters (``n``/``s``, ``axis``/``axes``, ``norm``) and bind them:

``fft_c2c``
    The complex-to-complex DFT over given axes (``inverse`` flag), for
    fft/ifft/fft2/ifft2/fftn/ifftn.  The DFT matrix is symmetric, so in the
    non-conjugating convention of the package (``<ct, J v> = Re sum(ct * J v)``,
    see ``elementwise.py``) the VJP is the same transform with the same
    ``norm``; the JVP too (it is linear).
``rfft`` (real input ``x`` of length ``n``, ``m = n//2 + 1`` complex bins)
    ``y_k = c sum_j x_j w^(jk)`` with ``w = exp(-2 pi i / n)`` and ``c`` the
    norm's scale.  For a real ``x`` only the real part of the pairing counts:
    ``Re sum_k ct_k y_k = sum_j x_j Re(c sum_{k<m} ct_k w^(jk))``, so the VJP is
    ``real(fft(pad(ct, n)))`` with the same ``norm``.
``irfft`` (``m`` complex bins in, ``n`` real values out)
    ``x_j = c Re sum_{k<m} d_k z_k w^(-jk)`` with ``d_k = 2`` for the bins that
    stand for a conjugate pair and ``d_k = 1`` for bin 0 and, for even ``n``,
    bin ``n/2`` (whose imaginary parts irfft ignores).  Hence
    ``z̄_k = c d_k sum_j ct_j w^(-jk) = d_k conj(rfft(ct))_k``, where this rfft
    carries the same scale ``c`` (the "dual" norm: backward <-> forward).
``fft_resize``
    Zero-padding or cropping one axis to ``n`` (NumPy's ``n``/``s``); its
    transpose resizes back.  ``fftshift`` is a roll (transpose: the opposite roll).

Batching keeps the batch axis where it is and remaps the transformed axes.
The compositions (``rfftn``, ``irfftn``, ``hfft``, ``ihfft``, ``fftfreq``, ...) are
in ``autodiff/numpy/fft.py``.
float32/complex64 stay single precision (as NumPy >= 2 does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autodiff.core.arrays import is_complex, ndim_of, normalize_axes, shape_of
from autodiff.core.graph import ShapedArray
from autodiff.core.numpy_args import warn_caller
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import linear_taylor
from autodiff.rules._helpers import example_dtype, implements, shaped_like
from autodiff.rules._sparsity import along_axes, moves
from autodiff.rules.elementwise import conj, real
from autodiff.rules.indexing import getitem
from autodiff.rules.shape import concatenate

__all__ = [
    "fft", "ifft", "rfft", "irfft", "fft2", "ifft2", "fftn", "ifftn", "fftshift", "ifftshift",
]  # fmt: skip

_NORMS = ("backward", "ortho", "forward")
# The norm whose scale is the same as the given one's for the opposite direction.
DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def _physical(axis: int, bdim: int) -> int:
    """A logical axis of one example as an axis of the batched array."""
    return axis + (axis >= bdim)


def _with_length(shape: tuple, axis: int, n: int) -> tuple:
    return (*shape[:axis], n, *shape[axis + 1 :])


# --- pad-or-crop one axis ---------------------------------------------------------------


def _resize_impl(x, *, axis, n):
    length = x.shape[axis]
    if n <= length:
        return x[(slice(None),) * axis + (slice(0, n),)]
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, n - length)
    return np.pad(x, widths)


fft_resize_p = Primitive(
    "fft_resize",
    _resize_impl,
    vjp=[lambda ct, ans, x, *, axis, n: fft_resize_p.bind(ct, axis=axis, n=shape_of(x)[axis])],
    jvp=[lambda t, ans, x, *, axis, n: fft_resize_p.bind(t, axis=axis, n=n)],
    batch=lambda args, dims, *, axis, n: (
        fft_resize_p.bind(args[0], axis=_physical(axis, dims[0]), n=n),
        dims[0],
    ),
)
fft_resize_p.def_sparsity(moves(_resize_impl))
fft_resize_p.def_shape(lambda x, *, axis, n: shaped_like(x, _with_length(x.shape, axis, n)))
fft_resize_p.def_taylor(linear_taylor(fft_resize_p))  # linear


def _resize(x: Any, axis: int, n: int | None) -> Any:
    """``x`` zero-padded or cropped to length ``n`` along ``axis`` (None: as it is)."""
    if n is None:
        return x
    n = _points(n)
    return x if n == shape_of(x)[axis] else fft_resize_p.bind(x, axis=axis, n=n)


# --- complex-to-complex over axes -------------------------------------------------------


def _c2c_impl(x, *, axes, inverse, norm):
    return (np.fft.ifftn if inverse else np.fft.fftn)(x, axes=axes, norm=norm)


def _c2c_linear(t, ans, x, *, axes, inverse, norm):
    return fft_c2c_p.bind(t, axes=axes, inverse=inverse, norm=norm)


fft_c2c_p = Primitive(
    "fft_c2c",
    _c2c_impl,
    vjp=[_c2c_linear],  # the DFT matrix is symmetric: its transpose is itself
    jvp=[_c2c_linear],
    batch=lambda args, dims, *, axes, inverse, norm: (
        fft_c2c_p.bind(
            args[0],
            axes=tuple(_physical(a, dims[0]) for a in axes),
            inverse=inverse,
            norm=norm,
        ),
        dims[0],
    ),
)
fft_c2c_p.def_sparsity(along_axes(lambda shape, *, axes, **p: axes, pairs=()))
fft_c2c_p.def_taylor(linear_taylor(fft_c2c_p))  # linear


def _complex(dtype: np.dtype) -> np.dtype:
    """The dtype of a transform of ``dtype`` (NumPy's business: complex128 for float32)."""
    return example_dtype(np.fft.fft, dtype)


fft_c2c_p.def_shape(lambda x, *, axes, inverse, norm: shaped_like(x, dtype=_complex(x.dtype)))


# --- real-to-complex and complex-to-real along one axis -----------------------------------


def _rfft_vjp(ct, ans, x, *, axis, norm):
    n = shape_of(x)[axis]
    return real(fft_c2c_p.bind(_resize(ct, axis, n), axes=(axis,), inverse=False, norm=norm))


rfft_p = Primitive(
    "rfft",
    lambda x, *, axis, norm: np.fft.rfft(x, axis=axis, norm=norm),
    vjp=[_rfft_vjp],
    jvp=[lambda t, ans, x, *, axis, norm: rfft_p.bind(t, axis=axis, norm=norm)],
    batch=lambda args, dims, *, axis, norm: (
        rfft_p.bind(args[0], axis=_physical(axis, dims[0]), norm=norm),
        dims[0],
    ),
)
rfft_p.def_sparsity(
    along_axes(
        lambda shape, *, axis, **p: [axis],
        lambda shape, *, axis, **p: _with_length(shape, axis, shape[axis] // 2 + 1),
        (),
    )
)
rfft_p.def_shape(
    lambda x, *, axis, norm: ShapedArray(
        _with_length(x.shape, axis, x.shape[axis] // 2 + 1), _complex(x.dtype)
    )
)
rfft_p.def_taylor(linear_taylor(rfft_p))  # linear


def _double_paired_bins(z: Any, axis: int, n: int) -> Any:
    """``z`` (``n//2 + 1`` bins along ``axis``) with the bins that stand for a
    conjugate pair (1 .. (n-1)//2) doubled; bin 0 and bin n/2 stay as they are."""
    last = (n - 1) // 2

    def part(start, stop):
        return getitem(z, (slice(None),) * axis + (slice(start, stop),))

    pieces = [part(0, 1), part(1, last + 1) * 2.0]
    if n % 2 == 0:
        pieces.append(part(last + 1, last + 2))
    return concatenate(pieces, axis=axis) if last > 0 else z


def _irfft_vjp(ct, ans, z, *, axis, n, norm):
    if is_complex(ct):  # the output is real, so is its cotangent
        ct = real(ct)
    spectrum = conj(rfft_p.bind(ct, axis=axis, norm=DUAL[norm]))
    return _double_paired_bins(spectrum, axis, n)


irfft_p = Primitive(
    "irfft",
    lambda z, *, axis, n, norm: np.fft.irfft(z, n=n, axis=axis, norm=norm),
    vjp=[_irfft_vjp],
    jvp=[lambda t, ans, z, *, axis, n, norm: irfft_p.bind(t, axis=axis, n=n, norm=norm)],
    batch=lambda args, dims, *, axis, n, norm: (
        irfft_p.bind(args[0], axis=_physical(axis, dims[0]), n=n, norm=norm),
        dims[0],
    ),
)
irfft_p.def_sparsity(
    along_axes(
        lambda shape, *, axis, **p: [axis],
        lambda shape, *, axis, n, **p: _with_length(shape, axis, n),
        (),
    )
)
irfft_p.def_shape(
    lambda z, *, axis, n, norm: ShapedArray(
        _with_length(z.shape, axis, n), example_dtype(np.fft.irfft, _complex(z.dtype), n=1)
    )
)
irfft_p.def_taylor(linear_taylor(irfft_p))  # linear


# --- roll (fftshift) ---------------------------------------------------------------------

fftshift_p = Primitive(
    "fftshift",
    lambda x, *, shifts, axes: np.roll(x, shifts, axes),
    vjp=[
        lambda ct, ans, x, *, shifts, axes: fftshift_p.bind(
            ct, shifts=tuple(-s for s in shifts), axes=axes
        )
    ],
    jvp=[lambda t, ans, x, *, shifts, axes: fftshift_p.bind(t, shifts=shifts, axes=axes)],
    batch=lambda args, dims, *, shifts, axes: (
        fftshift_p.bind(args[0], shifts=shifts, axes=tuple(_physical(a, dims[0]) for a in axes)),
        dims[0],
    ),
)
fftshift_p.def_sparsity(moves(fftshift_p.impl))
fftshift_p.def_shape(lambda x, *, shifts, axes: shaped_like(x))
fftshift_p.def_taylor(linear_taylor(fftshift_p))  # linear


# --- parameter normalisation ---------------------------------------------------------------


def _norm(norm: str | None) -> str:
    if norm is None:
        return "backward"
    if norm not in _NORMS:
        raise ValueError(f'Invalid norm value {norm}; should be "backward", "ortho" or "forward".')
    return norm


def _points(n: Any) -> int:
    n = int(n)
    if n < 1:
        raise ValueError(f"Invalid number of FFT data points ({n}) specified.")
    return n


def _check_no_out(name: str, out: Any) -> None:
    if out is not None:
        raise NotImplementedError(f"fft.{name}(..., out=...) is not supported; use the result")


def _axis(a: Any, axis: Any) -> int:
    return normalize_axes(int(axis), ndim_of(a))[0]


def _c2c(x: Any, axes: Sequence[int], inverse: bool, norm: str) -> Any:
    if not axes:  # like NumPy: no axes, no transform
        return x
    return fft_c2c_p.bind(x, axes=tuple(sorted(axes)), inverse=inverse, norm=norm)


def _transform_1d(a, n, axis, norm, inverse):
    axis = _axis(a, axis)
    return _c2c(_resize(a, axis, n), (axis,), inverse, _norm(norm))


_S_WITHOUT_AXES = (
    "`axes` should not be `None` if `s` is not `None` (Deprecated in NumPy 2.0). In a future "
    "version of NumPy, this will raise an error and `s[i]` will correspond to the size along "
    "the transformed axis specified by `axes[i]`. To retain current behaviour, pass a "
    "sequence [0, ..., k-1] to `axes` for an array of dimension k."
)
_NONE_IN_S = (
    "Passing an array containing `None` values to `s` is deprecated in NumPy 2.0 and will "
    "raise an error in a future version of NumPy. To use the default behaviour of the "
    "corresponding 1-D transform, pass the value matching the default for its `n` "
    "parameter. To use the default behaviour for every axis, the `s` argument can be omitted."
)


def _cook(a, s, axes, invreal=False):
    """NumPy's ``s`` and ``axes`` of an n-d transform, paired: non-negative axes, and a
    length (or None: the 1-D transform's default) per axis."""
    shape = shape_of(a)
    if axes is None:  # all axes; with s alone, the last len(s) axes
        if s is not None:
            warn_caller(_S_WITHOUT_AXES, DeprecationWarning)
        axes = range(len(shape)) if s is None else range(-len(s), 0)
    axes = [normalize_axes(int(ax), len(shape))[0] for ax in np.atleast_1d(axes)]
    if s is None:
        s = [shape[ax] for ax in axes]
        if invreal and axes:
            s[-1] = 2 * (shape[axes[-1]] - 1)
    else:
        s = list(s)
        if len(s) != len(axes):
            raise ValueError("Shape and axes have different lengths.")
        if any(k is None for k in s):
            warn_caller(_NONE_IN_S, DeprecationWarning)
        s = [shape[ax] if k is not None and int(k) == -1 else k for k, ax in zip(s, axes)]
    return s, axes


def _transform_nd(a, s, axes, norm, inverse):
    """NumPy's fftn/ifftn: ``s`` and ``axes`` paired, -1 in ``s`` keeps a length."""
    s, axes = _cook(a, s, axes)
    return _c2c_nd(a, s, axes, _norm(norm), inverse)


def _c2c_nd(a, s, axes, norm, inverse):
    if len(set(axes)) == len(axes):
        for k, ax in zip(s, axes):
            a = _resize(a, ax, k)
        return _c2c(a, axes, inverse, norm)
    # Repeated axes: one 1-D transform per entry, last first (as NumPy does).
    for k, ax in reversed(list(zip(s, axes))):
        a = _c2c(_resize(a, ax, k), (ax,), inverse, norm)
    return a


# --- public functions -------------------------------------------------------------------------


@implements(fft_c2c_p, np.fft.fft)
def fft(a, n=None, axis=-1, norm=None, out=None):
    """Like numpy.fft.fft: the DFT along ``axis``, ``a`` padded/cropped to ``n``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.fft(np.array([1.0, 0.0, 0.0, 0.0]))
    array([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
    """
    _check_no_out("fft", out)
    return _transform_1d(a, n, axis, norm, inverse=False)


@implements(fft_c2c_p, np.fft.ifft)
def ifft(a, n=None, axis=-1, norm=None, out=None):
    """Like numpy.fft.ifft: the inverse DFT along ``axis``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.ifft(np.array([4.0, 4.0, 4.0, 4.0]))
    array([4.+0.j, 0.+0.j, 0.+0.j, 0.+0.j])
    """
    _check_no_out("ifft", out)
    return _transform_1d(a, n, axis, norm, inverse=True)


@implements(rfft_p, np.fft.rfft)
def rfft(a, n=None, axis=-1, norm=None, out=None):
    """Like numpy.fft.rfft: the ``n//2 + 1`` non-negative frequency bins of a real ``a``.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> anp.fft.rfft(np.array([1.0, 1.0, 1.0, 1.0]))
    array([4.+0.j, 0.+0.j, 0.+0.j])
    >>> autodiff.grad(lambda x: anp.real(anp.fft.rfft(x)[0]))(np.array([1.0, 2.0]))
    array([1., 1.])
    """
    _check_no_out("rfft", out)
    axis = _axis(a, axis)
    return rfft_p.bind(_resize(a, axis, n), axis=axis, norm=_norm(norm))


@implements(irfft_p, np.fft.irfft)
def irfft(a, n=None, axis=-1, norm=None, out=None):
    """Like numpy.fft.irfft: the real signal of length ``n`` (default ``2 (m - 1)``)
    whose half-spectrum is ``a``; the imaginary parts of bin 0 and (for even
    ``n``) bin ``n/2`` are ignored, so they get no derivative.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.irfft(np.array([4.0, 0.0, 0.0]))
    array([1., 1., 1., 1.])
    """
    _check_no_out("irfft", out)
    axis = _axis(a, axis)
    n = _points(2 * (shape_of(a)[axis] - 1) if n is None else n)
    return irfft_p.bind(_resize(a, axis, n // 2 + 1), axis=axis, n=n, norm=_norm(norm))


@implements(fft_c2c_p, np.fft.fftn)
def fftn(a, s=None, axes=None, norm=None, out=None):
    """Like numpy.fft.fftn: the DFT over ``axes`` (default all), each padded/cropped to ``s``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.fftn(np.ones((2, 2))).real
    array([[4., 0.],
           [0., 0.]])
    """
    _check_no_out("fftn", out)
    return _transform_nd(a, s, axes, norm, inverse=False)


@implements(fft_c2c_p, np.fft.ifftn)
def ifftn(a, s=None, axes=None, norm=None, out=None):
    """Like numpy.fft.ifftn: the inverse DFT over ``axes`` (default all).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.ifftn(np.full((2, 2), 4.0)).real
    array([[4., 0.],
           [0., 0.]])
    """
    _check_no_out("ifftn", out)
    return _transform_nd(a, s, axes, norm, inverse=True)


@implements(fft_c2c_p, np.fft.fft2)
def fft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """Like numpy.fft.fft2: fftn over the last two axes by default.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.fft2(np.ones((2, 2))).real
    array([[4., 0.],
           [0., 0.]])
    """
    _check_no_out("fft2", out)
    return _transform_nd(a, s, axes, norm, inverse=False)


@implements(fft_c2c_p, np.fft.ifft2)
def ifft2(a, s=None, axes=(-2, -1), norm=None, out=None):
    """Like numpy.fft.ifft2: ifftn over the last two axes by default.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.ifft2(np.full((2, 2), 4.0)).real
    array([[4., 0.],
           [0., 0.]])
    """
    _check_no_out("ifft2", out)
    return _transform_nd(a, s, axes, norm, inverse=True)


def _shift(x: Any, axes: Any, sign: int) -> Any:
    shape = shape_of(x)
    axes = normalize_axes(axes, len(shape))
    if not axes:
        return x
    shifts = tuple(sign * (shape[ax] // 2) for ax in axes)
    return fftshift_p.bind(x, shifts=shifts, axes=axes)


@implements(fftshift_p, np.fft.fftshift)
def fftshift(x, axes=None):
    """Like numpy.fft.fftshift: roll the zero frequency to the centre of ``axes``.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.fftshift(np.array([0.0, 1.0, 2.0, -2.0, -1.0]))
    array([-2., -1.,  0.,  1.,  2.])
    """
    return _shift(x, axes, 1)


@implements(fftshift_p, np.fft.ifftshift)
def ifftshift(x, axes=None):
    """Like numpy.fft.ifftshift: the inverse of fftshift.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.fft.ifftshift(np.array([-2.0, -1.0, 0.0, 1.0, 2.0]))
    array([ 0.,  1.,  2., -2., -1.])
    """
    return _shift(x, axes, -1)
