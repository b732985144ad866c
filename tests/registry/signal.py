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
