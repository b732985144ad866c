"""Registry records: elementwise functions."""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import (
    above_one,
    away_from_zero,
    cplx,
    distinct,
    ints,
    mask,
    positive,
    real,
    unit,
)


def s(*args, label="", **kwargs):
    diff = kwargs.pop("diff", None)
    return Sample(tuple(args), kwargs, label, diff)


# name -> (domain of the argument, whether a complex sample applies)
UNARY = {
    "negative": (real, True),
    "positive": (real, True),
    "reciprocal": (away_from_zero, True),
    "square": (real, True),
    "sqrt": (positive, True),
    "cbrt": (positive, False),
    "absolute": (away_from_zero, True),
    "abs": (away_from_zero, True),
    "fabs": (away_from_zero, False),
    "exp": (real, True),
    "exp2": (real, True),
    "expm1": (real, True),
    "log": (positive, True),
    "log2": (positive, True),
    "log10": (positive, True),
    "log1p": (positive, True),
    "sin": (real, True),
    "cos": (real, True),
    "tan": (unit, True),
    "arcsin": (unit, True),
    "arccos": (unit, True),
    "arctan": (real, True),
    "sinh": (real, True),
    "cosh": (real, True),
    "tanh": (real, True),
    "arcsinh": (real, True),
    "arccosh": (above_one, False),
    "arctanh": (unit, True),
    "deg2rad": (real, False),
    "rad2deg": (real, False),
    "degrees": (real, False),
    "radians": (real, False),
    "sinc": (away_from_zero, False),
    "real": (real, True),
    "imag": (real, True),
    "conj": (real, True),
    "conjugate": (real, True),
    "angle": (away_from_zero, True),
    # the array API's names for the same ufuncs
    "acos": (unit, True),
    "asin": (unit, True),
    "atan": (real, True),
    "acosh": (above_one, False),
    "asinh": (real, True),
    "atanh": (unit, True),
}

# name -> (domains of x and y, whether a complex sample applies)
BINARY = {
    "add": ((real, real), True),
    "subtract": ((real, real), True),
    "multiply": ((real, real), True),
    "divide": ((real, away_from_zero), True),
    "true_divide": ((real, away_from_zero), True),
    "power": ((positive, real), True),
    "float_power": ((positive, real), False),
    "remainder": ((lambda *s: positive(*s) * 3, positive), False),
    "mod": ((lambda *s: positive(*s) * 3, positive), False),
    "fmod": ((lambda *s: away_from_zero(*s) * 3, positive), False),
    "logaddexp": ((real, real), False),
    "logaddexp2": ((real, real), False),
    "arctan2": ((away_from_zero, away_from_zero), False),
    "hypot": ((away_from_zero, away_from_zero), False),
    "maximum": ((distinct, lambda *s: distinct(*s) + 0.05), False),
    "minimum": ((distinct, lambda *s: distinct(*s) + 0.05), False),
    "fmax": ((distinct, lambda *s: distinct(*s) + 0.05), False),
    "fmin": ((distinct, lambda *s: distinct(*s) + 0.05), False),
    "copysign": ((away_from_zero, away_from_zero), False),
    "atan2": ((away_from_zero, away_from_zero), False),
    "pow": ((positive, real), True),
}

NONDIFF_UNARY = ["isnan", "isinf", "isfinite", "signbit", "sign", "floor", "ceil", "rint",
                 "trunc", "fix", "logical_not"]  # fmt: skip
NONDIFF_BINARY = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                  "logical_and", "logical_or", "logical_xor", "floor_divide",
                  "heaviside"]  # fmt: skip

OPS = []
for name, (domain, complex_ok) in UNARY.items():
    samples = [s(domain(2, 3)), s(domain(), label="0-d")]
    if complex_ok:
        samples.append(s(cplx(3) * 0.5, label="complex"))
    OPS.append(OpInfo(name, samples))

for name, ((dx, dy), complex_ok) in BINARY.items():
    samples = [
        s(dx(3, 4), dy(3, 4)),
        s(dx(2, 1, 3), dy(4, 3), label="broadcast"),
        s(dx(), dy(3), label="scalar"),
    ]
    if complex_ok:
        samples.append(s(cplx(3) + 2.0, cplx(2, 3) * 0.5 + 1.5, label="complex"))
    OPS.append(OpInfo(name, samples, keeps_float32=name != "float_power"))

OPS += [
    OpInfo(
        "power",
        [s(real(4), label="x**3"), s(real(2, 3), label="x**0")],
        call=lambda lib, x: x**3 if x.ndim == 1 else x**0,
        numpy_name=None,
        reference=lambda x: x * x * x if x.ndim == 1 else np.ones_like(x),
    ),
    OpInfo(
        "where", [s(mask(3, 4), real(3, 4), real(4)), s(mask(4), real(2, 4), real(), label="bcast")]
    ),
    OpInfo(
        "clip",
        [
            s(distinct(6) / 3 + 0.011, a_min=-0.5, a_max=0.5),
            s(distinct(2, 3) / 3 + 0.011, a_min=None, a_max=0.2, label="upper only"),
            s(distinct(4) / 3, label="no bounds"),  # a new array, as NumPy's: not x
            s(distinct(2, 3) / 3, distinct(3) / 5 - 0.013, a_max=0.9, label="array bound"),
        ],
    ),
    OpInfo(
        "clip",
        [s(distinct(6) / 3 + 0.011, label="method")],
        call=lambda lib, x: x.clip(None, 0.2) if hasattr(x, "clip") else np.clip(x, None, 0.2),
        numpy_name=None,
        reference=lambda x: np.minimum(x, 0.2),
    ),
    OpInfo(
        "nan_to_num",
        [
            s(np.array([1.5, np.nan, np.inf, -np.inf, -0.5]), label="specials", diff=()),
            s(real(2, 3), posinf=9.0),
        ],
    ),
    OpInfo("round", [s(real(3) * 3, decimals=1)], differentiable=False),
    OpInfo("around", [s(real(3) * 3)], differentiable=False),
    OpInfo(
        "astype",
        [
            s(real(3).astype(np.float32), dtype=np.float64, label="float32->float64"),
            s(real(3), dtype=np.float64, label="same dtype"),  # a copy, as NumPy's
        ],
        call=lambda lib, x, dtype: lib.astype(x, dtype),
        keeps_float32=False,
    ),
    # NumPy warns on complex -> real; autodiff keeps the real part, like JAX.
    OpInfo(
        "astype",
        [s(cplx(3), dtype=np.float64, label="complex->real")],
        call=lambda lib, x, dtype: lib.astype(x, dtype),
        numpy_name=None,
        reference=lambda x, dtype: np.real(x).astype(dtype),
        keeps_float32=False,
    ),
    OpInfo(
        "astype",
        [s(real(3) * 4, dtype=np.int64, label="to int")],
        call=lambda lib, x, dtype: lib.astype(x, dtype),
        differentiable=False,
    ),
    OpInfo(
        "stop_gradient",
        [s(real(3))],
        differentiable=False,
        numpy_name=None,
        reference=lambda x: x,
    ),
]
for name in NONDIFF_UNARY:
    OPS.append(OpInfo(name, [s(real(3, 4) * 2)], differentiable=False))
for name in NONDIFF_BINARY:
    OPS.append(
        OpInfo(
            name,
            [s(ints(3, 3, 4).astype(float), ints(3, 4).astype(float) + 0.5)],
            differentiable=False,
        )
    )

# Integer functions: bitwise operations, shifts, gcd and lcm.
INTEGER_UNARY = ["invert", "bitwise_not", "bitwise_invert", "bitwise_count"]
INTEGER_BINARY = ["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
                  "bitwise_left_shift", "bitwise_right_shift", "gcd", "lcm"]  # fmt: skip
for name in INTEGER_UNARY:
    OPS.append(OpInfo(name, [s(ints(64, 3, 4)), s(mask(4), label="bool")], differentiable=False))
for name in INTEGER_BINARY:
    samples = [s(ints(64, 3, 4), ints(5, 4) + 1)]
    if "shift" not in name and name not in ("gcd", "lcm"):
        samples.append(s(mask(3, 4), mask(4), label="bool"))
    OPS.append(OpInfo(name, samples, differentiable=False))

OPS += [
    OpInfo(
        "select",
        [s(mask(3, 4), mask(4), real(3, 4), real(3, 4), real(4))],
        call=lambda lib, c1, c2, x1, x2, d: lib.select([c1, c2], [x1, x2], d),
        numpy_dispatch=(0, 1, 2, 3),
    ),
]

# --- issue 13: Bessel I0, floating-point representation, whole-array comparisons, phases ---
_specials = np.array([np.inf, -np.inf, 1.5, np.nan, -0.0, 3.0])
_near = real(3, 4)
_near_b = _near + np.where(ints(2, 3, 4) == 1, 1e-9, 0.5)  # some entries within tolerance


def _phase(*shape):
    """A smooth phase (steps well inside (-pi, pi)), wrapped to (-pi, pi]: jumps of about
    2 pi where it crosses pi, far from unwrap's thresholds."""
    return np.angle(np.exp(1j * np.cumsum(unit(*shape) * 1.5, axis=-1)))


OPS += [
    OpInfo("i0", [s(real(2, 3) * 2), s(np.array(0.7), label="0-d")]),
    OpInfo("modf", [s(real(2, 3) * 3), s(np.array(-2.3), label="0-d")]),
    OpInfo(  # the mantissa (the exponent is an integer: the record below)
        "frexp",
        [s(away_from_zero(2, 3) * 5), s(np.array(-0.3), label="0-d")],
        call=lambda lib, x: lib.frexp(x)[0],
    ),
    OpInfo("frexp", [s(away_from_zero(2, 3) * 5, label="both")], differentiable=False),
    OpInfo(
        "ldexp", [s(real(3, 4), ints(5, 3, 4) - 2), s(real(2, 1, 3), ints(4, 4, 3), label="bcast")]
    ),
    OpInfo("nextafter", [s(real(3, 4), real(4)), s(real(2, 3), np.array(np.inf), label="to inf")]),
    OpInfo("spacing", [s(real(3, 4) * 100)], differentiable=False),
    OpInfo(
        "divmod",
        [
            s(positive(3, 4) * 3, positive(4)),
            s(-positive(2, 3) * 5, np.array(1.5), label="negative"),
        ],
    ),
    OpInfo("isposinf", [s(_specials)], differentiable=False),
    OpInfo("isneginf", [s(_specials.reshape(2, 3))], differentiable=False),
    OpInfo(
        "isclose",
        [
            s(_near, _near_b),
            s(_near, _near_b[0], rtol=0.3, atol=0.0, label="bcast rtol"),
            s(_specials, _specials[::-1], equal_nan=True, label="equal_nan"),
        ],
        differentiable=False,
    ),
    OpInfo(
        "allclose",
        [s(_near, _near_b), s(_near, _near + 1e-10, label="close")],
        differentiable=False,
    ),
    OpInfo(
        "array_equal",
        [
            s(_near, _near),
            s(_near, _near_b, label="unequal"),
            s(_specials, _specials, equal_nan=True, label="equal_nan"),
            s(_near, _near[0], label="shapes differ"),
        ],
        differentiable=False,
    ),
    OpInfo(
        "array_equiv",
        [
            s(_near, _near[1:2]),
            s(_near, _near_b, label="unequal"),
            s(_near, real(2), label="not broadcastable"),
        ],
        differentiable=False,
    ),
    # Complex values are tested in tests/test_elementwise_polynomial_apply.py: the choice
    # of result reads them, which the strict arrays of tests/test_backends.py refuse.
    OpInfo("real_if_close", [s(real(2, 3)), s(real(3), tol=0.5, label="tol")]),
    OpInfo(
        "unwrap",
        [
            s(_phase(7)),
            s(_phase(2, 6).T.copy(), axis=0, label="axis 0"),
            s(np.degrees(_phase(6)), period=360.0, label="degrees"),
            s(_phase(3, 5), discont=4.0, label="discont"),
        ],
    ),
]
