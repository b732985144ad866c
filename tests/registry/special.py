"""Registry records: scipy.special (``autodiff.scipy.special``).

Empty when SciPy is not installed (``autodiff.scipy.special`` is optional).
"""

from __future__ import annotations

import importlib.util

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import domain

_rng = np.random.default_rng(4321)  # local: these draws don't shift other families'


@domain(_rng)
def real(rng, *shape):
    return rng.standard_normal(shape)


@domain(_rng)
def positive(rng, *shape):
    return rng.uniform(0.5, 2.0, shape)


@domain(_rng)
def open_unit(rng, *shape):
    """Inside (0, 1), away from the ends (logit's domain)."""
    return rng.uniform(0.1, 0.9, shape)


@domain(_rng)
def away_from_zero(rng, *shape):
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.3, 2.0, shape)


@domain(_rng)
def between_poles(rng, *shape):
    """Inside (-2, -1), away from Gamma's poles at -2 and -1."""
    return rng.uniform(-1.75, -1.25, shape)


@domain(_rng)
def cplx(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


@domain(_rng)
def orders(rng, *shape):
    """Integer orders of polygamma, 0 to 3."""
    return rng.integers(0, 4, shape)


def s(*args, label="", **kwargs):
    return Sample(tuple(args), kwargs, label)


def _logsumexp_with_b(lib, a, b, **kwargs):
    import autodiff.scipy.special as ss

    return ss.logsumexp(a, b=b, **kwargs)


def uniform(low, high):
    @domain(_rng)
    def draw(rng, *shape):
        return rng.uniform(low, high, shape)

    return draw


@domain(_rng)
def real_orders(rng, *shape):
    """Real orders of the Bessel functions (no derivative in them)."""
    return rng.uniform(0.0, 2.5, shape)


def _records() -> list[OpInfo]:
    unary = {
        "erf": (real, True),
        "erfc": (real, True),
        "erfinv": (uniform(-0.7, 0.7), False),
        "erfcinv": (uniform(0.3, 1.5), False),
        "ndtr": (real, True),
        "log_ndtr": (real, False),
        "ndtri": (uniform(0.1, 0.7), False),
        "expit": (real, False),
        "log_expit": (real, False),
        "logit": (open_unit, False),
        "gamma": (positive, False),
        "gammaln": (positive, False),
        "digamma": (positive, False),
        "i0": (real, False),
        "i1": (real, False),
        "i0e": (away_from_zero, False),
        "i1e": (away_from_zero, False),
        "j0": (real, False),
        "j1": (real, False),
        "y0": (positive, False),
        "y1": (positive, False),
        "entr": (positive, False),
    }
    ops = []
    for name, (draw, complex_ok) in unary.items():
        samples = [s(draw(2, 3)), s(draw(), label="0-d")]
        if complex_ok:
            samples.append(s(cplx(3) * 0.7, label="complex"))
        if name in ("gamma", "gammaln", "digamma"):
            samples.append(s(between_poles(4), label="negative"))
        ops.append(OpInfo(f"special.{name}", samples))

    # Two arguments, both differentiable.
    for name, (x_domain, y_domain) in {
        "beta": (positive, positive),
        "betaln": (positive, positive),
        "rel_entr": (positive, positive),
        "kl_div": (positive, positive),
    }.items():
        samples = [
            s(x_domain(3, 4), y_domain(3, 4)),
            s(x_domain(2, 1, 3), y_domain(4, 3), label="broadcast"),
            s(x_domain(), y_domain(3), label="scalar"),
        ]
        ops.append(OpInfo(f"special.{name}", samples))

    # Orders and shape parameters without a derivative first, then x: only x differentiates.
    def in_x(name, *domains):
        x = len(domains) - 1
        samples = [
            Sample(tuple(d(2, 3) for d in domains), {}, "", (x,)),
            Sample((*(d(3) for d in domains[:-1]), domains[-1](2, 3)), {}, "broadcast", (x,)),
        ]
        # The float32 test makes only x float32; a float64 order then promotes the result
        # to float64, as NumPy does (tests/test_scipy.py checks all-float32 calls).
        return OpInfo(f"special.{name}", samples, keeps_float32=name == "yn")

    ops += [
        in_x("iv", real_orders, positive),
        in_x("ive", real_orders, positive),
        in_x("jv", real_orders, positive),
        in_x("jn", real_orders, positive),
        in_x("yv", real_orders, positive),
        in_x("yn", orders, positive),
        in_x("gammainc", positive, positive),
        in_x("gammaincc", positive, positive),
        in_x("betainc", positive, positive, open_unit),
        in_x("stdtr", uniform(1.5, 6.0), real),
        OpInfo(
            "special.multigammaln",
            [s(positive(2, 3) + 1.0, d=3, label="d=3"), s(positive() + 0.5, d=1, label="d=1")],
            numpy_name=None,  # scipy.special.multigammaln calls asarray on its argument
        ),
    ]

    for name, y_domain in (("xlogy", positive), ("xlog1py", positive)):
        samples = [
            s(real(3, 4), y_domain(3, 4)),
            s(real(2, 1, 3), y_domain(4, 3), label="broadcast"),
            s(real(), y_domain(3), label="scalar"),
            s(cplx(3), cplx(2, 3) * 0.3 + 1.5, label="complex"),
        ]
        ops.append(OpInfo(f"special.{name}", samples))

    ops.append(
        OpInfo(
            "special.polygamma",
            [
                s(orders(2, 3), positive(2, 3), label="orders 0-3"),
                s(np.array(1), positive(4), label="n=1"),
                s(orders(3), between_poles(2, 3), label="negative,broadcast"),
            ],
            numpy_name=None,  # scipy.special.polygamma calls asarray on its arguments
        )
    )

    reductions = [
        s(real(2, 3), label="axis=None"),
        s(real(2, 3), axis=1, label="axis=1"),
        s(real(2, 3, 4), axis=-1, label="3-d,axis=-1"),
        s(real(2, 3, 4), axis=(0, 2), label="axes=(0,2)"),
        s(real(4), label="1-d"),
        s(real(), label="0-d"),
        s(real(3, 2) * 30.0, axis=0, label="large values"),
    ]
    # SciPy's logsumexp, softmax and log_softmax call asarray on their inputs.
    ops += [
        OpInfo(
            "special.logsumexp",
            [
                *reductions,
                s(real(2, 3), axis=0, keepdims=True, label="keepdims"),
                s(real(2, 3), axis=(0, 1), keepdims=True, label="all axes,keepdims"),
                s(real(2, 3), axis=1, return_sign=True, label="return_sign"),
            ],
            numpy_name=None,
        ),
        OpInfo(
            "special.logsumexp",
            [
                s(real(2, 3), positive(2, 3), axis=1, label="b"),
                s(real(2, 3), positive(3), label="b broadcast"),
                s(real(3), -positive(2, 3), axis=1, return_sign=True, label="b<0,return_sign"),
            ],
            call=_logsumexp_with_b,
            numpy_name=None,
        ),
        OpInfo("special.softmax", reductions, numpy_name=None),
        OpInfo("special.log_softmax", reductions, numpy_name=None),
    ]
    _add_references(ops)
    return ops


def _add_references(ops: list[OpInfo]) -> None:
    """The forward value by SciPy on plain arrays, for the records that have no plain
    SciPy call on traced values (numpy_name=None): SciPy converts them itself."""
    import scipy.special as sp

    for op in ops:
        if op.has_numpy:
            continue
        if op.call is _logsumexp_with_b:
            op.reference = lambda a, b, **kwargs: sp.logsumexp(a, b=b, **kwargs)
        else:
            op.reference = getattr(sp, op.name.removeprefix("special."))


OPS: list = _records() if importlib.util.find_spec("scipy") is not None else []
