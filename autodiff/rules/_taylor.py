"""The Taylor-rule kit: recurrences for elementwise functions.

A Taylor rule (``Primitive.taylor``) gets each argument's normalised coefficients
``x1..xK`` (``x(t) = x0 + x1 t + ... + xK t^K``; ``None`` for a zero one) and returns the
result's.  Elementwise functions that satisfy a simple differential equation have a
recurrence (Griewank and Walther, *Evaluating Derivatives*, ch. 13): from ``y' = y x'``,
``exp``'s coefficients are ``y_k = (1/k) sum_(j=1..k) j x_j y_(k-j)``; ``log``, ``sqrt``,
``sin``/``cos``, ``tanh``, ``tan``, ``reciprocal``, ``divide`` likewise.  Each costs
O(K^2) elementwise products; the rules here are written with primitives, so they are
differentiable and batchable themselves (``grad`` of a Laplacian, ``vmap`` of a ``jet``).

Elementwise functions without a recurrence here use the one derived from their JVP rule
(``core.rule_forms.jvp_taylor``), which ``unary`` and ``broadcasting`` declare for them;
(piecewise) linear ones map each coefficient through the JVP rule (``linear_taylor``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

__all__ = [
    "add_series",
    "by_recurrence",
    "composed",
    "constant_power",
    "exp_like",
    "log_like",
    "logaddexp_like",
    "product_partials",
    "quotient",
    "reciprocal_like",
    "riccati",
    "sine_like",
    "sqrt_like",
    "square_like",
    "total",
]


def total(terms: Iterable[Any]) -> Any:
    """The sum of the terms that are not None (None if all are)."""
    out = None
    for t in terms:
        if t is not None:
            out = t if out is None else out + t
    return out


def _products(pairs: Iterable[tuple[float, Any, Any]]) -> Any:
    """``sum(c * a * b)`` over the pairs where neither factor is None (a zero)."""
    return total(
        (a * b if c == 1 else c * (a * b)) for c, a, b in pairs if a is not None and b is not None
    )


def add_series(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else a + b


def _weighted(x: list, y: list, k: int, start: int = 1) -> Any:
    """``(1/k) sum_(j=start..k) j x_j y_(k-j)``: coefficient k of the product of ``x'``
    and ``y``, integrated."""
    return _products((j / k, x[j], y[k - j]) for j in range(start, k + 1))


def by_recurrence(fn: Callable, recurrence: Callable) -> Callable:
    """The Taylor rule of the elementwise function ``fn`` of one argument whose
    coefficients follow ``recurrence(x, y0) -> y`` (``x`` and ``y`` lists of
    coefficients from order 0, None for zeros; ``y0 = fn(x0)``)."""

    def taylor(primals, series):
        (x0,), (xs,) = primals, series
        y = recurrence([x0, *xs], fn(x0))
        return y[0], y[1:]

    taylor.elementwise = True  # type: ignore[attr-defined]  # (collapsed Taylor mode uses it)
    second = getattr(recurrence, "second", None)
    if second is not None:
        taylor.second = lambda x0: (y0 := fn(x0), *second(x0, y0))  # type: ignore[attr-defined]
    return taylor


def _with_second(recurrence: Callable, second: Callable) -> Callable:
    """``recurrence`` with ``second(x0, y0) -> (c1, c2)``: the function's own first two
    normalised coefficients, ``f'(x0)`` and ``f''(x0) / 2``, in closed form.  They are
    what the recurrence gives along ``x0 + t``, for a few operations instead of its
    dozen and a half; collapsed Taylor mode of order 2 (a Laplacian) takes them
    (``by_recurrence`` passes them on as its rule's ``second``)."""
    recurrence.second = second  # type: ignore[attr-defined]
    return recurrence


def exp_like(shift: Any = None, scale: float = 1.0) -> Callable:
    """``y' = (y + shift) scale x'``: ``exp`` (``exp_like()``), ``expm1`` (``shift=1``),
    ``exp2`` (``scale=log 2``)."""

    def recurrence(x: list, y0: Any) -> list:
        if scale != 1.0:
            x = [None if c is None else c * scale for c in x]
        y = [y0]
        base = y0 if shift is None else y0 + shift
        for k in range(1, len(x)):
            y.append(_weighted(x, [base, *y[1:]], k))
        return y

    def second(x0: Any, y0: Any) -> tuple:  # y' = (y + shift) scale, y'' = y' scale
        c1 = y0 if shift is None else y0 + shift
        c1 = c1 if scale == 1.0 else c1 * scale
        return c1, c1 * (scale / 2)

    return _with_second(recurrence, second)


def log_like(base_of: Callable = lambda x0: x0, scale: float = 1.0) -> Callable:
    """``y = log(u) / scale`` with ``u_0 = base_of(x_0)`` and ``u_k = x_k``: ``u y' = u' /
    scale``, so ``y_k = (x_k / scale - (1/k) sum_(j=1..k-1) j y_j x_(k-j)) / u_0``:
    ``log``, ``log1p`` (``base_of=1 + x0``), ``log2``, ``log10``."""

    def recurrence(x: list, y0: Any) -> list:
        base = base_of(x[0])
        y = [y0]
        for k in range(1, len(x)):
            head = None if x[k] is None else (x[k] if scale == 1 else x[k] / scale)
            rest = _products((j / k, y[j], x[k - j]) for j in range(1, k))
            y.append(_over(_minus(head, rest), base))
        return y

    def second(x0: Any, y0: Any) -> tuple:  # y' = 1 / (u scale), y'' / 2 = -y' / (2 u)
        base = base_of(x0)
        c1 = 1 / base if scale == 1 else 1 / (base * scale)
        return c1, -0.5 * c1 / base

    return _with_second(recurrence, second)


def _minus(a: Any, b: Any) -> Any:
    return a if b is None else (-b if a is None else a - b)


def _over(a: Any, b: Any) -> Any:
    return None if a is None else a / b


def sqrt_like(x: list, y0: Any) -> list:
    """``y^2 = x``: ``y_k = (x_k - sum_(j=1..k-1) y_j y_(k-j)) / (2 y_0)``."""
    y = [y0]
    twice = 2 * y0
    for k in range(1, len(x)):
        y.append(_over(_minus(x[k], _products((1, y[j], y[k - j]) for j in range(1, k))), twice))
    return y


def reciprocal_like(x: list, y0: Any) -> list:
    """``x y = 1``: ``y_k = -y_0 sum_(j=1..k) x_j y_(k-j)``."""
    y = [y0]
    for k in range(1, len(x)):
        rest = _products((1, x[j], y[k - j]) for j in range(1, k + 1))
        y.append(None if rest is None else -rest * y0)
    return y


def square_like(x: list, y0: Any) -> list:
    """``y = x^2``: Leibniz, ``y_k = sum_j x_j x_(k-j)``."""
    return [y0, *(_products((1, x[j], x[k - j]) for j in range(k + 1)) for k in range(1, len(x)))]


def sine_like(partner: Callable, sign: int, cosine: bool = False) -> Callable:
    """``s' = c x'`` and ``c' = sign s x'``, built together: ``sin``/``cos`` (``sign=-1``)
    and ``sinh``/``cosh`` (``sign=1``); ``partner`` gives the other of the pair at x_0."""

    def recurrence(x: list, y0: Any) -> list:
        s, c = ([partner(x[0])], [y0]) if cosine else ([y0], [partner(x[0])])
        for k in range(1, len(x)):
            s.append(_weighted(x, c, k))
            term = _weighted(x, s, k)
            c.append(term if term is None or sign == 1 else -term)
        return c if cosine else s

    def second(x0: Any, y0: Any) -> tuple:  # s' = c, c' = sign s; either's f'' = sign f
        c1 = partner(x0) if not cosine else (partner(x0) if sign == 1 else -partner(x0))
        return c1, y0 * (sign / 2)

    return _with_second(recurrence, second)


def riccati(sign: int) -> Callable:
    """``y' = (1 + sign y^2) x'``: ``tan`` (``sign=1``) and ``tanh`` (``sign=-1``), with
    ``z = 1 + sign y^2`` built alongside ``y``."""

    def recurrence(x: list, y0: Any) -> list:
        y = [y0]
        z = [1 + sign * (y0 * y0)]
        for k in range(1, len(x)):
            y.append(_weighted(x, z, k))
            square = _products((1, y[i], y[k - i]) for i in range(k + 1))
            z.append(None if square is None else (square if sign == 1 else -square))
        return y

    def second(x0: Any, y0: Any) -> tuple:  # y' = 1 + sign y^2, y'' / 2 = sign y y'
        c1 = 1 + sign * (y0 * y0)
        return c1, (y0 * c1 if sign == 1 else -(y0 * c1))

    return _with_second(recurrence, second)


def quotient(divide: Callable) -> Callable:
    """The Taylor rule of ``u / v``: ``u = q v``, so ``q_k = (u_k - sum_(j=1..k) v_j
    q_(k-j)) / v_0``."""

    def taylor(primals, series):
        (u0, v0), (us, vs) = primals, series
        u, v = [u0, *us], [v0, *vs]
        q = [divide(u0, v0)]
        for k in range(1, len(u)):
            rest = _products((1, v[j], q[k - j]) for j in range(1, k + 1))
            q.append(_over(_minus(u[k], rest), v0))
        return q[0], q[1:]

    def partials(u0: Any, v0: Any) -> tuple:  # q = u / v: q_u = 1/v, q_v = -q/v, ...
        q, r = divide(u0, v0), 1 / v0
        return q, (r, -(q * r)), (None, -(r * r), q * (r * r))

    taylor.elementwise = True  # type: ignore[attr-defined]  # (collapsed Taylor mode uses it)
    taylor.partials = partials  # type: ignore[attr-defined]
    return taylor


def product_partials(u0: Any, v0: Any) -> tuple:
    """``u * v``'s value and derivatives at ``(u0, v0)``, the rule's ``partials``: a
    binary elementwise function's ``(f, (f_u, f_v), (f_uu / 2, f_uv, f_vv / 2))``, None
    for a zero; collapsed Taylor mode of order 2 takes them where both arguments move."""
    return u0 * v0, (v0, u0), (None, 1.0, None)


def composed(c: list, xs: Sequence[Any]) -> list:
    """Coefficients 1..K of ``f(x(t))`` from ``f``'s own, ``c[j] = f^(j)(x0) / j!``
    (``c[0]`` unused; None for a zero), and ``x``'s ``x1..xK``: ``sum_j c_j d(t)^j`` with
    ``d(t) = x(t) - x0``, the powers of ``d`` by Cauchy products."""
    order = len(xs)
    d = [None, *xs]
    power, out = d, [_times(c[1], x) for x in xs]
    for j in range(2, order + 1):
        power = [_products((1, power[i], d[k - i]) for i in range(k)) for k in range(order + 1)]
        for k in range(j, order + 1):
            out[k - 1] = add_series(out[k - 1], _times(c[j], power[k]))
    return out


def _times(c: Any, x: Any) -> Any:
    return None if c is None or x is None else c * x


def constant_power(power: Callable, fallback: Callable) -> Callable:
    """The Taylor rule of ``x ** p``: with ``p`` a Python number (``x**2``, ``x**0.5``),
    by composition with ``c_j = binom(p, j) x0^(p - j)`` (no division by ``x0``, so exact
    at ``x0 = 0`` where a recurrence is not; zero beyond ``j = p`` for an integer ``p``);
    otherwise ``fallback`` (the rule derived from the JVP)."""

    def coefficients(x0: Any, p: Any, order: int) -> list:
        c: list = [None]
        binomial = 1.0
        for j in range(1, order + 1):
            binomial *= (p - j + 1) / j
            c.append(None if binomial == 0 else (binomial * x0 if p - j == 1 else
                     binomial * power(x0, p - j) if p - j != 0 else binomial))  # fmt: skip
        return c

    def number(p: Any) -> bool:
        return not isinstance(p, bool) and isinstance(p, (int, float))

    def taylor(primals, series, **params):
        (x0, p), (xs, ps) = primals, series
        if not number(p) or any(c is not None for c in ps):
            return fallback(primals, series, **params)
        return power(x0, p), composed(coefficients(x0, p, len(xs)), xs)

    def second(x0: Any, p: Any) -> tuple | None:  # of x alone, p a number; else None
        return (power(x0, p), *coefficients(x0, p, 2)[1:]) if number(p) else None

    taylor.elementwise = True  # type: ignore[attr-defined]  # (collapsed Taylor mode uses it)
    taylor.second = second  # type: ignore[attr-defined]
    return taylor


def logaddexp_like(fn: Callable, exp: Callable, scale: float = 1.0) -> Callable:
    """The Taylor rule of ``y = log_b(b^a + b^c)`` (``logaddexp``: ``b = e``, ``exp``;
    ``logaddexp2``: ``b = 2``, ``exp2``, ``scale = log 2``): ``y' = s a' + u c'`` with the
    weights ``s = b^(a - y)``, ``u = b^(c - y)``, and ``s' = scale s (a' - y')`` (``u``
    likewise), so ``y_k = (1/k) sum_j j (a_j s_(k-j) + c_j u_(k-j))``."""

    def taylor(primals, series, **params):
        (a0, c0), (As, Cs) = primals, series
        y = [fn(a0, c0)]
        a, c = [a0, *As], [c0, *Cs]
        s, u = [exp(a0 - y[0])], [exp(c0 - y[0])]
        for k in range(1, len(a)):
            y.append(add_series(_weighted(a, s, k), _weighted(c, u, k)))
            for w, x in ((s, a), (u, c)):
                moved = [None, *(_minus(x[j], y[j]) for j in range(1, k + 1))]
                term = _weighted(moved, w, k)
                w.append(term if term is None or scale == 1 else term * scale)
        return y[0], y[1:]

    def partials(a0: Any, c0: Any) -> tuple:  # y_a = s, y_c = u, y_aa = scale s u = -y_ac
        y = fn(a0, c0)
        s, u = exp(a0 - y), exp(c0 - y)
        curvature = s * u if scale == 1 else scale * (s * u)
        half = 0.5 * curvature
        return y, (s, u), (half, -curvature, half)

    taylor.elementwise = True  # type: ignore[attr-defined]  # (collapsed Taylor mode uses it)
    taylor.partials = partials  # type: ignore[attr-defined]
    return taylor
