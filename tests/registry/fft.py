"""Registry records: numpy.fft (``anp.fft``)."""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import domain

_rng = np.random.default_rng(2024)  # local: these draws don't shift other families'


@domain(_rng)
def real(rng, *shape):
    return rng.standard_normal(shape)


@domain(_rng)
def cplx(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def s(*args, label="", **kwargs):
    return Sample(tuple(args), kwargs, label)


def _one_axis(domain, label):
    """fft/ifft samples: n cropping and padding, axes, every norm, real and complex input."""
    return [
        s(domain(8), label=f"{label}"),
        s(domain(6), n=4, label=f"{label},n=4<6"),
        s(domain(5), n=8, label=f"{label},n=8>5"),
        s(domain(3, 4), axis=0, label=f"{label},2-d,axis=0"),
        s(domain(2, 3, 4), axis=1, norm="ortho", label=f"{label},3-d,axis=1,ortho"),
        s(domain(6), norm="forward", label=f"{label},forward"),
        s(domain(6), norm="backward", label=f"{label},backward"),
        s(domain(2, 5), n=7, axis=-1, norm="ortho", label=f"{label},2-d,n=7,ortho"),
    ]


def _many_axes(default_axes_ndim):
    """fftn/fft2 samples; ``default_axes_ndim``: the dimension for the default axes."""
    shape = (3, 4) if default_axes_ndim == 2 else (2, 3, 4)
    return [
        s(cplx(*shape), label="complex"),
        s(real(*shape), label="real"),
        s(cplx(2, 3, 4), axes=(0, 2), label="3-d,axes=(0,2)"),
        s(cplx(3, 5), s=(2, 6), axes=(0, 1), label="s crops and pads"),
        s(cplx(2, 3, 4), s=(4, -1), axes=(-1, 0), label="s=(4,-1),axes=(-1,0)"),
        s(cplx(3, 4), axes=(0, 1), norm="ortho", label="ortho"),
        s(cplx(3, 4), axes=(1, 0), norm="forward", label="forward"),
        s(cplx(3, 4), axes=(0, 1), norm="backward", label="backward"),
    ]


_RFFT = [
    s(real(8), label="even"),
    s(real(7), label="odd"),
    s(real(6), n=4, label="n=4<6"),
    s(real(5), n=8, label="n=8>5"),
    s(real(5), n=7, label="n=7>5,odd"),
    s(real(3, 4), axis=0, label="2-d,axis=0"),
    s(real(2, 3, 5), axis=1, norm="ortho", label="3-d,axis=1,ortho"),
    s(real(6), norm="forward", label="forward"),
    s(real(7), norm="ortho", label="odd,ortho"),
    s(real(6), norm="backward", label="backward"),
]

_IRFFT = [
    s(cplx(5), label="default n=8"),
    s(cplx(5), n=9, label="n=9,odd"),
    s(cplx(5), n=6, label="n=6,crop"),
    s(cplx(3), n=10, label="n=10,pad"),
    s(cplx(3), n=1, label="n=1"),
    s(cplx(4, 3), axis=0, label="2-d,axis=0"),
    s(cplx(2, 4, 3), axis=1, norm="ortho", label="3-d,axis=1,ortho"),
    s(cplx(4), n=7, norm="forward", label="odd,forward"),
    s(cplx(4), norm="forward", label="forward"),
    s(cplx(4), n=6, norm="backward", label="backward"),
    s(real(4), label="real input"),
]

_SHIFT = [
    s(real(5), label="odd"),
    s(real(4, 5), label="2-d"),
    s(cplx(3, 4), axes=1, label="complex,axes=1"),
    s(real(4, 5), axes=(0,), label="axes=(0,)"),
    s(real(2, 3, 4), axes=(0, 2), label="3-d,axes=(0,2)"),
]

OPS = [
    OpInfo("fft.fft", [*_one_axis(cplx, "complex"), *_one_axis(real, "real")[:3]]),
    OpInfo("fft.ifft", [*_one_axis(cplx, "complex"), *_one_axis(real, "real")[:3]]),
    OpInfo("fft.rfft", _RFFT),
    OpInfo("fft.irfft", _IRFFT),
    OpInfo("fft.fft2", _many_axes(2)),
    OpInfo("fft.ifft2", _many_axes(2)),
    OpInfo(
        "fft.fftn",
        [
            *_many_axes(3),
            s(cplx(3, 4), axes=(1,), label="one axis"),
            s(cplx(3, 4), s=(3, 5), axes=(1, 1), label="repeated axis"),
        ],
    ),
    OpInfo(
        "fft.ifftn",
        [
            *_many_axes(3),
            s(cplx(3, 4), axes=(1,), label="one axis"),
            s(cplx(3, 4), s=(3, 5), axes=(1, 1), label="repeated axis"),
        ],
    ),
    OpInfo("fft.fftshift", _SHIFT),
    OpInfo("fft.ifftshift", _SHIFT),
]

# Real n-d and Hermitian transforms: default axes, s that crops and pads with explicit
# axes, every norm across the samples.
OPS += [
    OpInfo(
        "fft.rfftn",
        [
            s(real(3, 4), label="default"),
            s(real(2, 3, 5), s=(4, 6), axes=(0, 2), norm="ortho", label="s crops and pads,ortho"),
            s(real(3, 4), axes=(1, 0), norm="forward", label="axes=(1,0),forward"),
        ],
    ),
    OpInfo(
        "fft.rfft2",
        [
            s(real(2, 3, 4), label="3-d"),
            s(real(3, 5), s=(4, 3), norm="ortho", label="s,ortho"),
        ],
    ),
    OpInfo(
        "fft.irfftn",
        [
            s(cplx(3, 3), label="default n=4"),
            s(cplx(2, 3, 4), s=(3, 7), axes=(2, 0), norm="ortho", label="s odd,axes=(2,0),ortho"),
            s(cplx(4, 3), axes=(1, 0), norm="forward", label="axes=(1,0),forward"),
        ],
    ),
    OpInfo(
        "fft.irfft2",
        [
            s(cplx(2, 3, 3), label="3-d"),
            s(cplx(3, 4), s=(2, 5), norm="forward", label="s,forward"),
        ],
    ),
    OpInfo(
        "fft.hfft",
        [
            s(cplx(5), label="default n=8"),
            s(cplx(3, 4), n=7, axis=0, norm="ortho", label="n=7,axis=0,ortho"),
            s(real(4), norm="forward", label="real input,forward"),
        ],
    ),
    OpInfo(
        "fft.ihfft",
        [
            s(real(8), label="even"),
            s(real(5, 3), n=6, axis=0, norm="ortho", label="n=6,axis=0,ortho"),
            s(real(7), norm="forward", label="odd,forward"),
        ],
    ),
]

# Sample frequencies: differentiable in a traced spacing d (NumPy's results are float64
# whatever d's precision).
OPS += [
    OpInfo(
        name,
        [s(np.array(0.3), n=8, label="n=8"), s(np.array(2.5), n=7, label="n=7")],
        call=lambda lib, d, n, name=name: getattr(lib.fft, name.split(".")[1])(n, d),
        keeps_float32=False,
    )
    for name in ("fft.fftfreq", "fft.rfftfreq")
]
