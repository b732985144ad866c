"""Input domains for samples: each draws reproducible arrays where the
function is smooth (away from kinks, poles and domain edges), so finite
differences are meaningful.  Behaviour at kinks is pinned separately."""

from __future__ import annotations

import numpy as np

_rng = np.random.default_rng(1234)


def real(*shape):
    return _rng.standard_normal(shape)


def positive(*shape):
    return _rng.uniform(0.5, 2.0, shape)


def unit(*shape):
    """Inside (-1, 1), away from the ends."""
    return _rng.uniform(-0.8, 0.8, shape)


def above_one(*shape):
    return _rng.uniform(1.2, 3.0, shape)


def away_from_zero(*shape):
    return _rng.choice([-1.0, 1.0], shape) * _rng.uniform(0.5, 2.0, shape)


def distinct(*shape):
    """No ties anywhere (so max, min, sort and maximum are smooth)."""
    n = int(np.prod(shape))
    return (_rng.permutation(n) * 0.37 + _rng.uniform(0, 0.1)).reshape(shape) - n * 0.18


def cplx(*shape):
    return _rng.standard_normal(shape) + 1j * _rng.standard_normal(shape)


def ints(high, *shape):
    return _rng.integers(0, high, shape)


def mask(*shape):
    return _rng.random(shape) > 0.5


def spd(n, *batch):
    """Symmetric positive definite matrices, well conditioned."""
    a = _rng.standard_normal((*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) / n + np.eye(n)


def well_conditioned(n, *batch):
    """Square matrices with singular values in [1, 3]."""
    q1, _ = np.linalg.qr(_rng.standard_normal((*batch, n, n)))
    q2, _ = np.linalg.qr(_rng.standard_normal((*batch, n, n)))
    s = _rng.uniform(1.0, 3.0, (*batch, n))
    return (q1 * s[..., None, :]) @ q2


def distinct_spectrum(n, *batch):
    """Symmetric matrices with well-separated eigenvalues (eigh is smooth there)."""
    q, _ = np.linalg.qr(_rng.standard_normal((*batch, n, n)))
    w = np.arange(1, n + 1) * 1.5 + _rng.uniform(0, 0.2, n)
    return (q * w) @ np.swapaxes(q, -1, -2)
