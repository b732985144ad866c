"""Elementwise primitives, one line each.  Their compositions (``isclose``, ``divmod``,
``modf``, ...) are in ``autodiff/numpy/_elementwise.py``, ``clip`` (which a
transform calls) in ``compositions.py``.

``unary(name, impl, deriv)`` and ``broadcasting(name, impl, *derivs)`` (see
``_helpers``) take, per argument, ``deriv(g, ans, *args)``: how a perturbation
``g`` of that argument moves the output.  It serves as both JVP and VJP,
since an elementwise Jacobian is diagonal; the helper handles broadcasting
(sum back down in the VJP) and batching.

Complex numbers follow JAX's convention: for a holomorphic function the VJP
and the JVP are both multiplication by f'(z), and ``grad`` of a real function
of ``z`` is the conjugate of df/dz̄ times 2 (``grad(abs(z)**2)(z) == 2 conj(z)``).
Only the functions where real and complex meet (``abs``, ``real``, ``imag``,
``angle``) need separate rules.

Sub-gradient conventions at kinks (pinned by tests/test_primitives.py):
``abs``/``fabs``/``copysign`` use ``sign(x)`` (0 at 0); ties in
``maximum``/``minimum``/``fmax``/``fmin``/``clip`` split the derivative
equally (0.5 each); ``sinc`` has derivative 0 at 0; ``sqrt``, ``log`` and
``power`` give inf at 0 where the true derivative is unbounded; the
exponent-derivative of ``x**y`` is taken as 0 at ``x == 0``;
``nan_to_num`` passes derivatives only where ``x`` is finite.
"""

from __future__ import annotations

import math

import numpy as np

from autodiff.core.arrays import (
    dtype_of,
    is_complex,
)
from autodiff.core.lowering import Elementwise
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import jvp_taylor, linear_taylor, multilinear_taylor
from autodiff.errors import TransformValueError
from autodiff.rules._helpers import (
    broadcasting,
    evaluated_shape,
    implements,
    numpy_impl,
    shaped_like,
    sparsity_kit,
    taylor_kit,
    unary,
)

__all__ = [
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "remainder", "mod",
    "fmod", "power", "float_power", "negative", "positive", "reciprocal", "square", "sqrt",
    "cbrt", "absolute", "abs", "fabs", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
    "logaddexp", "logaddexp2", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "arctan2",
    "hypot", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "deg2rad", "rad2deg",
    "degrees", "radians", "sinc", "i0", "ldexp", "nextafter", "spacing", "maximum", "minimum",
    "fmax", "fmin", "where", "copysign", "nan_to_num", "real", "imag", "conj", "conjugate",
    "angle", "real_if_close", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not", "isnan",
    "isinf", "isfinite", "signbit", "sign", "floor", "ceil", "rint", "trunc", "fix", "round",
    "around", "heaviside", "gcd", "lcm", "bitwise_and", "bitwise_or", "bitwise_xor", "invert",
    "bitwise_not", "bitwise_invert", "left_shift", "right_shift", "bitwise_left_shift",
    "bitwise_right_shift", "bitwise_count", "acos", "asin", "atan", "atan2", "acosh", "asinh",
    "atanh", "pow", "astype", "stop_gradient",
]  # fmt: skip


_linear = sparsity_kit.elementwise([True], ())
_nonlinear = sparsity_kit.elementwise([True])

# --- arithmetic -------------------------------------------------------------------------
add_p, add = broadcasting(
    "add",
    np.add,
    lambda g, a, x, y: g,
    lambda g, a, x, y: g,
    numpy=[np.add],
    reads=[(), ()],
    pairs=(),
)
subtract_p, subtract = broadcasting(
    "subtract",
    np.subtract,
    lambda g, a, x, y: g,
    lambda g, a, x, y: -g,
    numpy=[np.subtract],
    reads=[(), ()],
    pairs=(),
)
multiply_p, multiply = broadcasting(
    "multiply",
    np.multiply,
    lambda g, a, x, y: g * y,
    lambda g, a, x, y: x * g,
    numpy=[np.multiply],
    reads=[(1,), (0,)],
    pairs=[(0, 1)],
)
_multiply_taylor = multilinear_taylor(multiply_p)
# (collapsed mode)
_multiply_taylor.partials = taylor_kit.plain("product_partials")  # type: ignore[attr-defined]
multiply_p.def_taylor(_multiply_taylor)
divide_p, divide = broadcasting(
    "divide",
    np.divide,
    lambda g, a, x, y: g / y,
    lambda g, a, x, y: -g * a / y,
    numpy=[np.divide],
    reads=[(1,), (1, "ans")],
    pairs=[(0, 1), (1, 1)],
)
divide_p.def_taylor(taylor_kit.quotient(divide))
true_divide = divide
negative_p, negative = unary(
    "negative", np.negative, lambda g, a, x: -g, numpy=[np.negative], reads=(), linear=True
)
positive_p, positive = unary(
    "positive", np.positive, lambda g, a, x: g, numpy=[np.positive], linear=True
)
reciprocal_p, reciprocal = unary(
    "reciprocal", np.reciprocal, lambda g, a, x: -g * a * a, numpy=[np.reciprocal]
)
reciprocal_p.def_taylor(taylor_kit.by_recurrence(reciprocal, taylor_kit.plain("reciprocal_like")))
square_p, square = unary(
    "square", np.square, lambda g, a, x: g * (2 * x), numpy=[np.square], reads=(0,)
)
square_p.def_taylor(taylor_kit.by_recurrence(square, taylor_kit.plain("square_like")))
sqrt_p, sqrt = unary("sqrt", np.sqrt, lambda g, a, x: g / (2 * a), numpy=[np.sqrt], reads=("ans",))
sqrt_p.def_taylor(taylor_kit.by_recurrence(sqrt, taylor_kit.plain("sqrt_like")))
cbrt_p, cbrt = unary("cbrt", np.cbrt, lambda g, a, x: g / (3 * a * a), numpy=[np.cbrt])


def _power_dx(g, ans, x, y):
    if isinstance(y, (int, float)):  # a Python exponent: no select needed
        if y == 2:  # the common x**2, in two multiplications
            return g * (2.0 * x)
        return g * (y * x ** (y - 1)) if y != 0 else g * 0.0
    # d/dx x**y = y x**(y-1), and 0 where y == 0 (avoiding 0 * 0**-1 = nan).
    return g * (y * x ** where(equal(y, 0), 1, y - 1))


def _power_dy(g, ans, x, y):
    # d/dy x**y = x**y log(x), taken as 0 at x == 0 (the limit for y > 0).
    if isinstance(x, (int, float)) and x >= 0:  # a Python base: log(x) stays a weak scalar
        return g * (ans * (math.log(x) if x > 0 else 0.0))  # (where() makes a float64 array)
    at_zero = equal(x, 0)
    return g * (ans * where(at_zero, 0.0, log(where(at_zero, 1.0, x))))


power_p, power = broadcasting(
    "power", np.power, _power_dx, _power_dy, numpy=[np.power], reads=[(0, 1), (0, "ans")]
)
power_p.def_taylor(taylor_kit.constant_power(power, jvp_taylor(power_p)))
float_power_p, float_power = broadcasting(
    "float_power", np.float_power, _power_dx, _power_dy, numpy=[np.float_power]
)
float_power_p.def_taylor(taylor_kit.constant_power(float_power, jvp_taylor(float_power_p)))


def _constant_powers(rule):
    """The sparsity rule of ``x**y`` where an operand is known: ``x**0`` and ``1**y`` are
    1 whatever the other operand, so no derivative flows from it there (the JVP rules
    give exact zeros); elsewhere ``rule``'s."""

    def of_power(x, y):
        from autodiff.core.index_sets import Gather, Sparsity  # (see sparsity_kit)
        from autodiff.rules._sparsity import is_known, shape_of_operand

        spec = rule(x, y)
        reads = list(spec.reads)
        out = np.broadcast_shapes(shape_of_operand(x), shape_of_operand(y))
        for i, known, constant in ((0, y, 0), (1, x, 1)):
            if is_known(known) and isinstance(reads[i], Gather):
                fixed = np.broadcast_to(np.asarray(known) == constant, out).ravel()
                reads[i] = Gather(np.where(fixed, -1, reads[i].src))
        return Sparsity(reads, spec.pairs)

    return of_power


power_p.def_sparsity(_constant_powers(power_p.sparsity))
float_power_p.def_sparsity(_constant_powers(float_power_p.sparsity))
remainder_p, remainder = broadcasting(
    "remainder",
    np.remainder,
    lambda g, a, x, y: g,
    lambda g, a, x, y: -g * floor_divide(x, y),
    numpy=[np.remainder],
    pairs=(),  # piecewise linear
)
mod = remainder
fmod_p, fmod = broadcasting(
    "fmod",
    np.fmod,
    lambda g, a, x, y: g,
    lambda g, a, x, y: -g * trunc(x / y),
    numpy=[np.fmod],
    pairs=(),  # piecewise linear
)
floor_divide_p, floor_divide = broadcasting(
    "floor_divide", np.floor_divide, nargs=2, numpy=[np.floor_divide], differentiable=False
)


# --- absolute values (where real and complex meet) ---------------------------------------
def _unit(z, ans):
    """z / |z|, and 0 at 0; differentiable, unlike sign(), so second derivatives work."""
    at_zero = equal(ans, 0)
    return where(at_zero, 0.0, z / where(at_zero, 1.0, ans))


def _abs_jvp(g, ans, x):
    if is_complex(x):  # d|z| = Re(conj(z)/|z| dz)
        return real(g * conj(_unit(x, ans)))
    return g * sign(x)


def _abs_vjp(ct, ans, x):
    return ct * conj(_unit(x, ans)) if is_complex(x) else ct * sign(x)


absolute_p, absolute = unary("absolute", np.absolute, _abs_jvp, vjp=_abs_vjp, numpy=[np.absolute])
# piecewise linear for real numbers; a complex modulus, sqrt(re**2 + im**2), is not
absolute_p.def_sparsity(
    lambda x: (_linear if getattr(x, "dtype", np.dtype(float)).kind != "c" else _nonlinear)(x)
)
abs = absolute
fabs_p, fabs = unary("fabs", np.fabs, lambda g, a, x: g * sign(x), numpy=[np.fabs], linear=True)

# --- exponentials and logarithms ----------------------------------------------------------
_LN2, _LN10 = math.log(2), math.log(10)  # Python floats: they keep float32 float32
exp_p, exp = unary("exp", np.exp, lambda g, a, x: g * a, numpy=[np.exp], reads=("ans",))
exp_p.def_taylor(taylor_kit.by_recurrence(exp, taylor_kit.exp_like()))
exp2_p, exp2 = unary("exp2", np.exp2, lambda g, a, x: g * (a * _LN2), numpy=[np.exp2])
exp2_p.def_taylor(taylor_kit.by_recurrence(exp2, taylor_kit.exp_like(scale=_LN2)))
expm1_p, expm1 = unary("expm1", np.expm1, lambda g, a, x: g * (a + 1), numpy=[np.expm1])
expm1_p.def_taylor(taylor_kit.by_recurrence(expm1, taylor_kit.exp_like(shift=1)))
log_p, log = unary("log", np.log, lambda g, a, x: g / x, numpy=[np.log], reads=(0,))
log_p.def_taylor(taylor_kit.by_recurrence(log, taylor_kit.log_like()))
log2_p, log2 = unary("log2", np.log2, lambda g, a, x: g / (x * _LN2), numpy=[np.log2])
log2_p.def_taylor(taylor_kit.by_recurrence(log2, taylor_kit.log_like(scale=_LN2)))
log10_p, log10 = unary("log10", np.log10, lambda g, a, x: g / (x * _LN10), numpy=[np.log10])
log10_p.def_taylor(taylor_kit.by_recurrence(log10, taylor_kit.log_like(scale=_LN10)))
log1p_p, log1p = unary("log1p", np.log1p, lambda g, a, x: g / (1 + x), numpy=[np.log1p])
log1p_p.def_taylor(taylor_kit.by_recurrence(log1p, taylor_kit.log_like(lambda x0: 1 + x0)))
logaddexp_p, logaddexp = broadcasting(
    "logaddexp",
    np.logaddexp,
    lambda g, a, x, y: g * exp(x - a),
    lambda g, a, x, y: g * exp(y - a),
    numpy=[np.logaddexp],
)
logaddexp_p.def_taylor(taylor_kit.logaddexp_like(logaddexp, exp))
logaddexp2_p, logaddexp2 = broadcasting(
    "logaddexp2",
    np.logaddexp2,
    lambda g, a, x, y: g * exp2(x - a),
    lambda g, a, x, y: g * exp2(y - a),
    numpy=[np.logaddexp2],
)
logaddexp2_p.def_taylor(taylor_kit.logaddexp_like(logaddexp2, exp2, scale=_LN2))

# --- trigonometric and hyperbolic ----------------------------------------------------------
sin_p, sin = unary("sin", np.sin, lambda g, a, x: g * cos(x), numpy=[np.sin], reads=(0,))
sin_p.def_taylor(taylor_kit.by_recurrence(sin, taylor_kit.sine_like(lambda x0: cos(x0), -1)))
cos_p, cos = unary("cos", np.cos, lambda g, a, x: -g * sin(x), numpy=[np.cos], reads=(0,))
cos_p.def_taylor(taylor_kit.by_recurrence(cos, taylor_kit.sine_like(sin, -1, cosine=True)))
tan_p, tan = unary("tan", np.tan, lambda g, a, x: g * (1 + a * a), numpy=[np.tan])
tan_p.def_taylor(taylor_kit.by_recurrence(tan, taylor_kit.riccati(1)))
arcsin_p, arcsin = unary(
    "arcsin", np.arcsin, lambda g, a, x: g / sqrt(1 - x * x), numpy=[np.arcsin]
)
arccos_p, arccos = unary(
    "arccos", np.arccos, lambda g, a, x: -g / sqrt(1 - x * x), numpy=[np.arccos]
)
arctan_p, arctan = unary("arctan", np.arctan, lambda g, a, x: g / (1 + x * x), numpy=[np.arctan])
arctan2_p, arctan2 = broadcasting(
    "arctan2",
    np.arctan2,
    lambda g, a, y, x: g * x / (x * x + y * y),
    lambda g, a, y, x: -g * y / (x * x + y * y),
    numpy=[np.arctan2],
)
hypot_p, hypot = broadcasting(
    "hypot", np.hypot, lambda g, a, x, y: g * x / a, lambda g, a, x, y: g * y / a, numpy=[np.hypot]
)
sinh_p, sinh = unary("sinh", np.sinh, lambda g, a, x: g * cosh(x), numpy=[np.sinh])
sinh_p.def_taylor(taylor_kit.by_recurrence(sinh, taylor_kit.sine_like(lambda x0: cosh(x0), 1)))
cosh_p, cosh = unary("cosh", np.cosh, lambda g, a, x: g * sinh(x), numpy=[np.cosh])
cosh_p.def_taylor(taylor_kit.by_recurrence(cosh, taylor_kit.sine_like(sinh, 1, cosine=True)))


def _tanh_deriv(g, ans, x):
    # On large plain arrays of one shape and dtype (the backward pass of a grad with
    # no transform outside it), the same arithmetic in one buffer instead of three:
    # the backward pass of a tanh layer then needs one activation-sized temporary,
    # as torch's fused kernel does, not two (benchmark W6).  Small arrays gain
    # nothing (NumPy reuses small blocks) and traced values must take the expression,
    # which keeps the rule differentiable and batchable.
    plain = type(g) is type(ans) is np.ndarray and ans.nbytes >= _LARGE
    if plain and g.shape == ans.shape and g.dtype == ans.dtype:
        out = np.multiply(ans, ans)
        np.subtract(1, out, out=out)
        return np.multiply(g, out, out=out)
    return g * (1 - ans * ans)


_LARGE = 1 << 18  # bytes: NumPy's own threshold for reusing a temporary's buffer


tanh_p, tanh = unary("tanh", np.tanh, _tanh_deriv, numpy=[np.tanh], reads=("ans",))
tanh_p.def_taylor(taylor_kit.by_recurrence(tanh, taylor_kit.riccati(-1)))

arcsinh_p, arcsinh = unary(
    "arcsinh", np.arcsinh, lambda g, a, x: g / sqrt(x * x + 1), numpy=[np.arcsinh]
)
arccosh_p, arccosh = unary(
    "arccosh", np.arccosh, lambda g, a, x: g / sqrt(x * x - 1), numpy=[np.arccosh]
)
arctanh_p, arctanh = unary(
    "arctanh", np.arctanh, lambda g, a, x: g / (1 - x * x), numpy=[np.arctanh]
)
_DEG = math.pi / 180
deg2rad_p, deg2rad = unary(
    "deg2rad", np.deg2rad, lambda g, a, x: g * _DEG, numpy=[np.deg2rad, np.radians], linear=True
)
rad2deg_p, rad2deg = unary(
    "rad2deg", np.rad2deg, lambda g, a, x: g / _DEG, numpy=[np.rad2deg, np.degrees], linear=True
)
radians, degrees = deg2rad, rad2deg


def _sinc_deriv(g, ans, x):
    # d/dx sin(pi x)/(pi x) = (cos(pi x) - sinc(x)) / x, which tends to 0 at 0.
    at_zero = equal(x, 0)
    safe = where(at_zero, 1.0, x)
    return g * where(at_zero, 0.0, (cos(math.pi * safe) - sinc(safe)) / safe)


sinc_p, sinc = unary("sinc", np.sinc, _sinc_deriv, numpy=[np.sinc])


# --- the modified Bessel function I0 -----------------------------------------------------------
# np.i0's derivative is I1, which NumPy lacks: I1 is a primitive of its own here, computed
# from its power series below |x| = 20 and its asymptotic expansion above (relative error
# about 2e-15 in float64), so that every derivative of i0 is again a primitive:
# I0' = I1 and I1' = I0 - I1 / x (1/2 at 0).
_I1_CUT = 20.0
# I1(x) = (x/2) sum_k (x/2)^(2k) / (k! (k+1)!): 32 terms reach the cut.
_I1_SERIES = [1 / (math.factorial(k) * math.factorial(k + 1)) for k in range(32)]


def _i1_asymptotic_terms(count):
    """a_k of I1(x) ~ e^x / sqrt(2 pi x) sum_k a_k / x^k (DLMF 10.40.1 with nu = 1)."""
    terms, a = [1.0], 1.0
    for k in range(1, count):
        a *= ((2 * k - 1) ** 2 - 4) / (8 * k)
        terms.append(a)
    return terms


_I1_ASYMPTOTIC = _i1_asymptotic_terms(21)


def _horner(coefficients, t):
    """sum_k coefficients[k] t^k (on NumPy arrays: an implementation, not a rule)."""
    out = coefficients[-1]
    for c in coefficients[-2::-1]:
        out = out * t + c
    return out


def _i1_impl(x):
    ax = np.abs(x)
    half = np.minimum(ax, _I1_CUT) / 2  # each branch sees only the inputs it is accurate for
    small = half * _horner(_I1_SERIES, half * half)
    big = np.maximum(ax, _I1_CUT)
    root = np.exp(big / 2)  # e^x in two halves: overflows only where I1 itself does
    large = root * _horner(_I1_ASYMPTOTIC, 1 / big) / np.sqrt((2 * math.pi) * big) * root
    out = np.where(ax < _I1_CUT, small, large)
    return np.where(x < 0, -out, out)


def _i1_deriv(g, ans, x):
    at_zero = equal(x, 0)
    safe = where(at_zero, 1.0, x)
    return g * where(at_zero, 0.5, i0(x) - ans / safe)


# Named apart from SciPy's i0 and i1 (rules/special.py), which are primitives too.
_i1_p, _i1 = unary("numpy_i1", _i1_impl, _i1_deriv)
i0_p, _i0 = unary("numpy_i0", numpy_impl(np.i0), lambda g, a, x: g * _i1(x), reads=(0,))


@implements(i0_p, np.i0)
def i0(x):
    """Like numpy.i0, the modified Bessel function of the first kind of order 0; its
    derivative is I1 (computed by autodiff to about 2e-15, relative).

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> print(f"{float(anp.i0(1.0)):.12f} {float(autodiff.grad(anp.i0)(1.0)):.12f}")
    1.266065877752 0.565159103992
    """
    x = as_operands(x)
    if is_complex(x):
        raise TypeError("i0 is not supported for complex values")
    return _i0(x)


# --- floating-point representation ---------------------------------------------------------------
# The integral part, the exponent and the gaps between floats are piecewise constant: no
# derivative.  The fractional part and the mantissa move with x (slopes 1 and 2**-exponent),
# and so does nextafter(x, y), which is x moved by one rounding step.
_modf_fraction_p, _modf_fraction = unary(
    "modf_fraction",
    numpy_impl(np.modf, lambda x: np.modf(x)[0]),
    lambda g, a, x: g,
    reads=(),
    linear=True,
)
_modf_integral_p, _modf_integral = unary(
    "modf_integral", numpy_impl(np.modf, lambda x: np.modf(x)[1]), differentiable=False
)


_frexp_exponent_p, _frexp_exponent = unary(
    "frexp_exponent", numpy_impl(np.frexp, lambda x: np.frexp(x)[1]), differentiable=False
)
_frexp_mantissa_p, _frexp_mantissa = unary(
    "frexp_mantissa",
    numpy_impl(np.frexp, lambda x: np.frexp(x)[0]),
    lambda g, a, x: ldexp(g, -_frexp_exponent(x)),
    reads=(0,),
)


ldexp_p, ldexp = broadcasting(
    "ldexp",
    np.ldexp,
    lambda g, a, x, e: ldexp(g, e),
    None,  # the exponent is an integer
    numpy=[np.ldexp],
    reads=[(1,), ()],
    pairs=(),
)
nextafter_p, nextafter = broadcasting(
    "nextafter",
    np.nextafter,
    lambda g, a, x, y: g,
    None,  # the direction only picks the rounding step
    numpy=[np.nextafter],
    reads=[(), ()],
    pairs=(),
)


# --- piecewise and selection ------------------------------------------------------------------
def _won(g, x, y):
    """``g`` where x beats y, half of it on ties, 0 where y wins."""
    dtype = dtype_of(g)  # comparisons give constants: no derivative flows through them
    return g * (astype(greater(x, y), dtype) + 0.5 * astype(equal(x, y), dtype))


def _won_ignoring_nan(g, x, y):
    """Like _won for fmax/fmin: a NaN loses to any number."""
    return where(isnan(y), where(isnan(x), 0.0, g), where(isnan(x), 0.0, _won(g, x, y)))


maximum_p, maximum = broadcasting(
    "maximum",
    np.maximum,
    lambda g, a, x, y: _won(g, x, y),
    lambda g, a, x, y: _won(g, y, x),
    numpy=[np.maximum],
    pairs=(),  # piecewise linear
)
minimum_p, minimum = broadcasting(
    "minimum",
    np.minimum,
    lambda g, a, x, y: _won(g, y, x),
    lambda g, a, x, y: _won(g, x, y),
    numpy=[np.minimum],
    pairs=(),  # piecewise linear
)
fmax_p, fmax = broadcasting(
    "fmax",
    np.fmax,
    lambda g, a, x, y: _won_ignoring_nan(g, x, y),
    lambda g, a, x, y: _won_ignoring_nan(g, y, x),
    numpy=[np.fmax],
    pairs=(),  # piecewise linear
)
fmin_p, fmin = broadcasting(
    "fmin",
    np.fmin,
    lambda g, a, x, y: _won_ignoring_nan(-g, -x, -y) * -1.0,
    lambda g, a, x, y: _won_ignoring_nan(-g, -y, -x) * -1.0,
    numpy=[np.fmin],
    pairs=(),  # piecewise linear
)


def _positions(*args):
    """``where(condition)``, NumPy's one-argument form: NumPy's ``nonzero``, which
    hands a traced condition on to ``anp.nonzero``."""
    if len(args) != 1:
        raise ValueError("either both or neither of x and y should be given")
    return np.nonzero(args[0])


where_p, where = broadcasting(
    "where",
    np.where,
    None,
    lambda g, a, c, x, y: where(c, g, 0.0),
    lambda g, a, c, x, y: where(c, 0.0, g),
    numpy=[np.where],
    pairs=(),
    otherwise=_positions,
)


def _select(c, x, y):
    """where's lowering: traced, it is one selection per element."""
    return np.where(c, x, y)


where_p.def_lowering(Elementwise(_select, kinds="fbiu"))
copysign_p, copysign = broadcasting(
    "copysign",
    np.copysign,
    lambda g, a, x, y: g * (copysign(1.0, x) * copysign(1.0, y)),
    None,  # the sign of y is piecewise constant: no derivative
    numpy=[np.copysign],
    pairs=(),
)

_nan_to_num_p = Primitive(
    "nan_to_num",
    numpy_impl(
        np.nan_to_num,
        lambda x, *, nan, posinf, neginf: np.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf),
    ),
    vjp=[lambda ct, a, x, **_: where(isfinite(x), ct, 0.0)],
    jvp=[lambda t, a, x, **_: where(isfinite(x), t, 0.0)],
    batch=lambda args, dims, **p: (_nan_to_num_p.bind(args[0], **p), dims[0]),
    sparsity=_linear,
)
_nan_to_num_p.def_shape(evaluated_shape(_nan_to_num_p))


@implements(_nan_to_num_p, np.nan_to_num)
def nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None):
    """Like numpy.nan_to_num; the replaced entries are constants (no derivative).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.nan_to_num(np.array([1.0, np.nan, np.inf]), posinf=9.0)
    array([1., 0., 9.])
    """
    return _nan_to_num_p.bind(x, nan=nan, posinf=posinf, neginf=neginf)


# --- complex ----------------------------------------------------------------------------------
def _to_dtype_of(ct, ans, x):
    """``ct`` as x's dtype (a real cotangent for a complex input becomes complex)."""
    return astype(ct, dtype_of(x))


real_p, real = unary(
    "real", np.real, lambda g, a, x: real(g), vjp=_to_dtype_of, numpy=[np.real], linear=True
)
imag_p, imag = unary(
    "imag",
    np.imag,
    lambda g, a, x: imag(g),
    vjp=lambda ct, a, x: -1j * ct if is_complex(x) else ct * 0.0,
    numpy=[np.imag],
    linear=True,
)
conj_p, conj = unary(
    "conj", np.conj, lambda g, a, x: conj(g), numpy=[np.conj, np.conjugate], linear=True
)
conjugate = conj


def _angle_jvp(g, ans, x):
    # d angle(z) = Im(conj(z) dz) / |z|^2; a real x has constant angle (0 or pi)
    return imag(conj(x) * g) / real(x * conj(x)) if is_complex(x) else g * 0.0


def _angle_vjp(ct, ans, x):
    return -1j * ct * conj(x) / real(x * conj(x)) if is_complex(x) else ct * 0.0


angle_p, angle = unary("angle", np.angle, _angle_jvp, vjp=_angle_vjp, numpy=[np.angle])


def _of_complex_only(rule):
    """The sparsity rule of a function whose derivative is zero at real arguments
    (``imag``, ``angle``): ``rule``'s reads for a complex argument, none for a real one."""

    def of_complex(x, **params):
        from autodiff.core.index_sets import Sparsity  # (see rules/_helpers.py's sparsity_kit)
        from autodiff.rules._sparsity import is_complex_operand

        return rule(x, **params) if is_complex_operand(x) else Sparsity([None])

    return of_complex


imag_p.def_sparsity(_of_complex_only(imag_p.sparsity))
angle_p.def_sparsity(_of_complex_only(angle_p.sparsity))


def _real_if_impl(a, keep):
    # Under vmap ``keep`` holds one flag per example: the results must share one dtype
    # (an empty batch has no example to say which: it keeps ``a``).
    if keep.size and np.all(keep):
        return np.real(a)
    if np.any(keep):
        raise TransformValueError(
            "real_if_close under vmap: the imaginary parts are within tol of zero for some "
            "examples and not for others, whose results would then differ in dtype. Take "
            "anp.real(a) to drop them for every example, or keep the complex values."
        )
    return a


def _real_if_deriv(g, ans, a, keep):
    return real(g) if is_complex(g) and not is_complex(ans) else g


# real(a) where ``keep`` (an array of flags, all equal) holds, else a.  The choice reads the
# flags' value, as the result's dtype depends on it: the one primitive that does.
real_if_p = Primitive(
    "real_if",
    _real_if_impl,
    vjp=[lambda ct, ans, a, keep: astype(ct, dtype_of(a)), None],
    jvp=[_real_if_deriv, None],
    batch=lambda args, dims: (real_if_p.bind(*args), dims[0]),
    sparsity=lambda a, keep: _linear(a),
)


@implements(real_if_p, np.real_if_close)
def real_if_close(a, tol=100):
    """Like numpy.real_if_close: the real part of a complex ``a`` whose imaginary parts
    are all within ``tol`` machine epsilons (an absolute ``tol`` if below 1) of zero,
    else ``a`` itself.  Derivatives follow the value returned (``real``'s, or the
    identity's).  Under vmap every example must make the same choice.

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.real_if_close(np.array([2.1 + 4e-14j, 5.2 + 3e-15j]), tol=1000)
    array([2.1, 5.2])
    """
    a = as_operands(a)
    if not is_complex(a):
        return a
    if tol > 1:
        tol = float(np.finfo(dtype_of(a)).eps) * tol
    keep = _red.all(less(absolute(imag(a)), tol))
    return real_if_p.bind(a, keep)


# --- not differentiable -------------------------------------------------------------------------
def _nondiff(name, impl, nargs, *numpy_funcs):
    return broadcasting(name, impl, nargs=nargs, numpy=numpy_funcs, differentiable=False)


equal_p, equal = _nondiff("equal", np.equal, 2, np.equal)
not_equal_p, not_equal = _nondiff("not_equal", np.not_equal, 2, np.not_equal)
less_p, less = _nondiff("less", np.less, 2, np.less)
less_equal_p, less_equal = _nondiff("less_equal", np.less_equal, 2, np.less_equal)
greater_p, greater = _nondiff("greater", np.greater, 2, np.greater)
greater_equal_p, greater_equal = _nondiff("greater_equal", np.greater_equal, 2, np.greater_equal)
logical_and_p, logical_and = _nondiff("logical_and", np.logical_and, 2, np.logical_and)
logical_or_p, logical_or = _nondiff("logical_or", np.logical_or, 2, np.logical_or)
logical_xor_p, logical_xor = _nondiff("logical_xor", np.logical_xor, 2, np.logical_xor)
heaviside_p, heaviside = _nondiff("heaviside", np.heaviside, 2, np.heaviside)
logical_not_p, logical_not = _nondiff("logical_not", np.logical_not, 1, np.logical_not)
isnan_p, isnan = _nondiff("isnan", np.isnan, 1, np.isnan)
isinf_p, isinf = _nondiff("isinf", np.isinf, 1, np.isinf)
isfinite_p, isfinite = _nondiff("isfinite", np.isfinite, 1, np.isfinite)
signbit_p, signbit = _nondiff("signbit", np.signbit, 1, np.signbit)
spacing_p, spacing = _nondiff("spacing", np.spacing, 1, np.spacing)
sign_p, sign = _nondiff("sign", np.sign, 1, np.sign)
floor_p, floor = _nondiff("floor", np.floor, 1, np.floor)
ceil_p, ceil = _nondiff("ceil", np.ceil, 1, np.ceil)
rint_p, rint = _nondiff("rint", np.rint, 1, np.rint)
trunc_p, trunc = _nondiff("trunc", np.trunc, 1, np.trunc, np.fix)
fix = trunc
gcd_p, gcd = _nondiff("gcd", np.gcd, 2, np.gcd)
lcm_p, lcm = _nondiff("lcm", np.lcm, 2, np.lcm)
bitwise_and_p, bitwise_and = _nondiff("bitwise_and", np.bitwise_and, 2, np.bitwise_and)
bitwise_or_p, bitwise_or = _nondiff("bitwise_or", np.bitwise_or, 2, np.bitwise_or)
bitwise_xor_p, bitwise_xor = _nondiff("bitwise_xor", np.bitwise_xor, 2, np.bitwise_xor)
invert_p, invert = _nondiff("invert", np.invert, 1, np.invert)
bitwise_not = bitwise_invert = invert
left_shift_p, left_shift = _nondiff("left_shift", np.left_shift, 2, np.left_shift)
right_shift_p, right_shift = _nondiff("right_shift", np.right_shift, 2, np.right_shift)
bitwise_left_shift, bitwise_right_shift = left_shift, right_shift
bitwise_count_p, bitwise_count = _nondiff("bitwise_count", np.bitwise_count, 1, np.bitwise_count)

# The array API standard's names for functions above (in NumPy 2 the same ufuncs).
acos, asin, atan, atan2 = arccos, arcsin, arctan, arctan2
acosh, asinh, atanh, pow = arccosh, arcsinh, arctanh, power


# --- lists and tuples as operands -------------------------------------------------------------


def as_operands(*xs):
    """Lists and tuples (of numbers or traced values) as arrays, as NumPy would take them;
    arrays, traced values and Python scalars stay as they are."""
    out = tuple(_comp.asarray(x) if isinstance(x, (list, tuple)) else x for x in xs)
    return out if len(out) > 1 else out[0]


# --- stop_gradient and round (not differentiable) ----------------------------------------------

stop_gradient_p, stop_gradient = unary("stop_gradient", lambda x: x, differentiable=False)
stop_gradient_p.def_lowering(Elementwise(lambda x: x, kinds="fbiu"))
stop_gradient.__doc__ = "``x`` as a constant for every derivative; values and batching still flow."

_round_p = Primitive(
    "round",
    lambda x, *, decimals: np.round(x, decimals),
    differentiable=False,
    batch=lambda args, dims, *, decimals: (_round_p.bind(args[0], decimals=decimals), dims[0]),
)
_round_p.def_shape(evaluated_shape(_round_p))


@implements(_round_p, np.round, np.around)
def round(a, decimals=0, out=None):
    """Like numpy.round (not differentiable: piecewise constant).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.round(np.array([0.26, 1.5]), 1)
    array([0.3, 1.5])
    """
    if out is not None:
        raise NotImplementedError("round(..., out=...) is not supported; use the returned value")
    return _round_p.bind(a, decimals=int(decimals))


around = round


# --- astype -------------------------------------------------------------------------------------


def _astype_impl(x, *, dtype):
    return x.astype(dtype) if hasattr(x, "astype") else np.asarray(x, dtype=dtype)


def _cast_like(t, dtype):
    """``t`` as ``dtype``; complex to real keeps the real part (no ComplexWarning)."""
    if is_complex(t) and np.dtype(dtype).kind != "c":
        t = real(t)
    return astype(t, dtype)


astype_p = Primitive(
    "astype",
    _astype_impl,
    vjp=[lambda ct, ans, x, *, dtype: _cast_like(ct, dtype_of(x))],
    jvp=[lambda t, ans, x, *, dtype: _cast_like(t, dtype)],
    batch=lambda args, dims, *, dtype: (astype_p.bind(args[0], dtype=dtype), dims[0]),
    shape=lambda x, *, dtype: shaped_like(x, dtype=dtype),
    sparsity=_linear,
    lowering=Elementwise(lambda x: x, kinds="fbiu"),  # the cast to the result's dtype
)


def _casts_as_numpy(avals, out):
    """Casts compiled code makes as NumPy does: to bool, between integers, and from
    floats to signed integers of 32 or 64 bits (out of range, both raise the processor's
    invalid flag, and NumPy then warns); not from floats to unsigned or small integers."""
    return (
        out.dtype.kind == "b"
        or avals[0].dtype.kind in "biu"
        or (out.dtype.kind == "i" and out.dtype.itemsize >= 4)
    )


# Casting to an integer or bool type rounds: no derivative flows through it.
astype_discrete_p = Primitive(
    "astype_discrete",
    _astype_impl,
    differentiable=False,
    batch=lambda args, dims, *, dtype: (astype_discrete_p.bind(args[0], dtype=dtype), dims[0]),
    shape=lambda x, *, dtype: shaped_like(x, dtype=dtype),
    lowering=Elementwise(lambda x: x, kinds="fbiu", when=_casts_as_numpy),
)


@implements(astype_p, np.astype)
def astype(x, dtype, /, *, copy=True, device=None):
    """Like ``x.astype(dtype)``; differentiable to floating dtypes only.

    Complex to real keeps the real part (its derivative too).

    >>> import numpy as np, autodiff.numpy as anp
    >>> anp.astype(np.array([1.7, 2.2]), np.int64)
    array([1, 2])
    """
    dtype = np.dtype(dtype)
    source = dtype_of(x)
    if dtype == source:  # NumPy's astype copies unless copy=False
        return x.copy() if copy and type(x) is np.ndarray else x
    if source.kind == "c" and dtype.kind == "f":
        return astype(real(x), dtype, copy=copy)  # (real of an ndarray is a view of it)
    prim = astype_p if dtype.kind in "fc" else astype_discrete_p
    return prim.bind(x, dtype=dtype)


def cast(x, dtype, casting, name):
    """``x`` as ``dtype`` where NumPy's ``casting`` rule allows it (``"same_kind"``,
    ``"safe"``...: what ``np.concatenate(..., dtype=, casting=)`` and ``np.einsum``
    check), else NumPy's TypeError, naming ``name``."""
    dtype, source = np.dtype(dtype), dtype_of(x)
    if not np.can_cast(source, dtype, casting):
        raise TypeError(
            f"{name}: cannot cast array data from {source!r} to {dtype!r} according to "
            f"the rule {casting!r}"
        )
    return astype(x, dtype)


# Taylor mode: casts between floating types, nan_to_num and real_if_close are linear.
for _p in (astype_p, _nan_to_num_p, real_if_p):
    _p.def_taylor(linear_taylor(_p))


# Rules here call reductions and shape primitives, which import these helpers.
from autodiff.rules import compositions as _comp  # noqa: E402
from autodiff.rules import reductions as _red  # noqa: E402
