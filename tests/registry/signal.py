"""Registry records: scipy.signal (``autodiff.scipy.signal``).

SciPy's functions convert traced values with ``asarray`` (``numpy_name=None``);
the ``reference`` field gives each record's forward value by SciPy on plain arrays
(``tests/test_scipy.py``).  Empty when SciPy is not installed.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from tests.registry import OpInfo, Sample

_rng = np.random.default_rng(1357)  # local: these draws don't shift other families'


def s(*args, label="", **kwargs):
    return Sample(tuple(args), kwargs, label)


def real(*shape):
    return _rng.standard_normal(shape)


def cplx(*shape):
    return _rng.standard_normal(shape) + 1j * _rng.standard_normal(shape)


def _autograd_form(a, b, *, axes, dot_axes, mode):
    """HIPS autograd's convolve(A, B, axes, dot_axes, mode) by its definition: SciPy's
    convolution of every pair of slices along the convolved axes, summed over the dot axes,
    the other axes of A then B kept, the convolved ones last."""
    import scipy.signal as ss

    (ca, cb), (da, db) = axes, dot_axes
    ra = [i for i in range(a.ndim) if i not in ca and i not in da]
    rb = [i for i in range(b.ndim) if i not in cb and i not in db]
    a, b = np.transpose(a, ra + list(da) + list(ca)), np.transpose(b, rb + list(db) + list(cb))
    out = None
    for i in np.ndindex(*a.shape[: len(ra)]):
        for j in np.ndindex(*b.shape[: len(rb)]):
            total = sum(ss.convolve(a[i + k], b[j + k], mode)
                        for k in np.ndindex(*a.shape[len(ra) : len(ra) + len(da)]))  # fmt: skip
            if out is None:
                out = np.zeros(a.shape[: len(ra)] + b.shape[: len(rb)] + total.shape)
            out[i + j] = total
    return out


def _records() -> list[OpInfo]:
    import scipy.signal as ss

    def op(name, samples):
        record = OpInfo(f"scipy.signal.{name}", samples, numpy_name=None)
        record.reference = getattr(ss, name)
        return record

    return [
        op(
            "convolve",
            [
                s(real(5), real(3), label="full"),
                s(real(4, 5), real(2, 3), mode="same", label="2-d,same"),
                s(real(3), real(5), mode="valid", label="valid,in2 larger"),
                s(cplx(4), cplx(3), mode="same", label="complex,same"),
            ],
        ),
        OpInfo(
            "scipy.signal.convolve",
            [
                s(
                    real(3, 2, 6, 5),
                    real(2, 4, 3, 2),
                    axes=([2, 3], [2, 3]),
                    dot_axes=([1], [0]),
                    mode="valid",
                    label="autograd's form,layer",
                ),
                s(
                    real(2, 7),
                    real(3, 4),
                    axes=([1], [1]),
                    dot_axes=([], []),
                    mode="full",
                    label="autograd's form,outer",
                ),
                s(
                    real(4, 3),
                    real(3, 6),
                    axes=([0], [1]),
                    dot_axes=([1], [0]),
                    mode="same",
                    label="autograd's form,same",
                ),
            ],
            numpy_name=None,
            reference=_autograd_form,
        ),
        op(
            "correlate",
            [
                s(real(6), real(3), mode="valid", label="valid"),
                s(cplx(3, 4), cplx(2, 2), label="2-d,complex,full"),
                s(real(3), real(4), mode="same", label="same,in2 larger"),
            ],
        ),
        op(
            "fftconvolve",
            [
                s(real(2, 6), real(1, 3), mode="same", axes=1, label="axes=1,broadcast"),
                s(real(5), real(2), mode="valid", label="valid"),
            ],
        ),
    ]


OPS: list = _records() if importlib.util.find_spec("scipy") is not None else []
