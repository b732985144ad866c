"""Registry records: scipy.stats distributions (``autodiff.scipy.stats``).

One record per method (``scipy.stats.norm.logpdf``, ...).  To keep the vmap
tests (every in_dims combination of the positional arguments) small, ``loc``
and ``scale`` are positional, so traced, only for the distributions without
shape parameters; elsewhere they are static keywords.  The ``cdf``/``sf``
family of ``t``, ``beta``, ``gamma`` and ``chi2`` differentiates in ``x`` only
(the incomplete integrals have no derivative in their shape parameters).
SciPy converts traced values (``numpy_name=None``); the ``reference`` field gives each
record's forward value by SciPy on plain arrays (``tests/test_scipy.py``).
Empty when SciPy is not installed.
"""

from __future__ import annotations

import importlib.util

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import domain

_rng = np.random.default_rng(97531)  # local: these draws don't shift other families'


TAILS = ("cdf", "logcdf", "sf", "logsf")


def uniform(low, high):
    @domain(_rng)
    def draw(rng, *shape):
        return rng.uniform(low, high, shape)

    return draw


@domain(_rng)
def counts_below(rng, high, *shape):
    """Integer data in [0, high): the k of a discrete distribution."""
    return rng.integers(0, high, shape)


real = uniform(-2.0, 2.0)

# name: (domain of x, domains of the shape parameters)
CONTINUOUS = {
    "norm": (real, ()),
    "t": (real, (uniform(2.0, 6.0),)),
    "beta": (uniform(0.1, 0.75), (uniform(1.5, 3.0), uniform(1.5, 3.0))),
    "gamma": (uniform(0.5, 3.0), (uniform(1.5, 3.0),)),
    "expon": (uniform(1.0, 3.0), ()),
    "laplace": (real, ()),
    "chi2": (uniform(0.5, 3.0), (uniform(2.5, 5.0),)),
}


def _continuous(name, x, shapes) -> list[tuple[str, list[Sample]]]:
    out = []
    for method in ("logpdf", "pdf", *TAILS):
        if not shapes:  # loc and scale traced
            samples = [Sample((x(2, 3), uniform(-0.5, 0.3)(3), uniform(0.8, 1.6)(2, 1)))]
        else:
            diff = (0,) if method in TAILS else None
            samples = [
                Sample(
                    (x(2, 3), *(d(3) for d in shapes)),
                    {"loc": 0.1, "scale": 0.9},
                    "loc,scale static",
                    diff,
                )
            ]
        if method == "logpdf":
            samples.append(Sample((x(), *(d() for d in shapes)), {}, "0-d"))
        out.append((method, samples))
    return out


def _records() -> list[OpInfo]:
    import scipy.stats as st

    def op(dist, method, samples, **kwargs):
        record = OpInfo(f"scipy.stats.{dist}.{method}", samples, numpy_name=None, **kwargs)
        record.reference = getattr(getattr(st, dist), method)
        return record

    ops = []
    for name, (x, shapes) in CONTINUOUS.items():
        for method, samples in _continuous(name, x, shapes):
            # differentiating in x only, the float32 test leaves the shapes float64: the
            # result is float64, as NumPy promotes (tests/test_scipy.py checks all-float32)
            float32 = not shapes or method not in TAILS
            ops.append(op(name, method, samples, keeps_float32=float32))

    # Discrete: k is integer data; the parameter differentiates.  An integer k promotes
    # a float32 parameter to float64, as in NumPy, so float32 is not asked for.
    counts, probabilities = uniform(0.5, 3.0), uniform(0.2, 0.7)
    for name, k_high, param in (("poisson", 6, counts), ("bernoulli", 2, probabilities)):
        for method in ("logpmf", "pmf", *TAILS):
            k = counts_below(k_high, 2, 3)
            if (name, method) == ("bernoulli", "logsf"):
                k = k - 1  # -1 and 0: log(sf) is -inf at 1, where nothing can be checked
            samples = [Sample((k, param(3)), {}, "", (1,))]
            if method == "logpmf":
                samples.append(Sample((k + 1, param()), {"loc": 1}, "loc=1", (1,)))
            ops.append(op(name, method, samples, keeps_float32=False))

    spd = _rng.standard_normal((3, 3))
    spd = spd @ spd.T / 3 + np.eye(3)
    ops += [
        op(
            "multivariate_normal",
            "logpdf",
            [
                Sample((real(4, 3), real(3), spd), {}, "points,full cov"),
                Sample((real(3), real(3), uniform(0.5, 2.0)(3)), {}, "one point,diagonal cov"),
                # the full covariance is one primitive (autodiff/rules/stats.py): one point,
                # and points in a (2, 2) grid (reshaped around it), under every transform
                Sample((real(3), real(3), spd), {}, "one point,full cov"),
                Sample((real(2, 2, 3), real(3), spd), {}, "grid of points,full cov"),
            ],
        ),
        op(
            "multivariate_normal",
            "pdf",
            [Sample((real(2), real(2), spd[:2, :2]), {}, "full cov")],
        ),
        # x with K - 1 components: the last is 1 - sum, so every perturbation stays
        # on the simplex that SciPy (and autodiff, on plain arrays) checks.
        op(
            "dirichlet",
            "logpdf",
            [
                Sample((uniform(0.1, 0.3)(2, 4), uniform(1.5, 3.0)(3)), {}, "4 points"),
                Sample((uniform(0.1, 0.3)(2), uniform(0.5, 3.0)(3)), {}, "one point"),
            ],
        ),
        op("dirichlet", "pdf", [Sample((uniform(0.1, 0.3)(3), uniform(1.5, 3.0)(4)), {}, "")]),
    ]
    return ops


OPS: list = _records() if importlib.util.find_spec("scipy") is not None else []
