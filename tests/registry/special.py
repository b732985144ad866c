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


def _scipy(name):
    """SciPy's own function on plain arrays: the reference where SciPy can't take
    traced values."""

    def reference(*args, **kwargs):
        import scipy.special

        return getattr(scipy.special, name)(*args, **kwargs)

    return reference


def _logsumexp_b_reference(a, b, axis=None, keepdims=False, return_sign=False):
    """log |sum(b * exp(a))| over ``axis``, and its sign: the closed form."""
    total = np.sum(b * np.exp(a), axis=axis, keepdims=keepdims)
    value = np.log(np.abs(total))
    return (value, np.sign(total)) if return_sign else value


def _records() -> list[OpInfo]:
    unary = {
        "erf": (real, True),
        "erfc": (real, True),
        "expit": (real, False),
        "logit": (open_unit, False),
        "gammaln": (positive, False),
        "digamma": (positive, False),
    }
    ops = []
    for name, (draw, complex_ok) in unary.items():
        samples = [s(draw(2, 3)), s(draw(), label="0-d")]
        if complex_ok:
            samples.append(s(cplx(3) * 0.7, label="complex"))
        if name in ("gammaln", "digamma"):
            samples.append(s(between_poles(4), label="negative"))
        ops.append(OpInfo(f"special.{name}", samples))

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
            reference=_scipy("polygamma"),
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
            reference=_scipy("logsumexp"),
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
            reference=_logsumexp_b_reference,
        ),
        OpInfo("special.softmax", reductions, numpy_name=None, reference=_scipy("softmax")),
        OpInfo("special.log_softmax", reductions, numpy_name=None, reference=_scipy("log_softmax")),
    ]
    return ops


OPS: list = _records() if importlib.util.find_spec("scipy") is not None else []
