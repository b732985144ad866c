"""The bad-input table: every public function against wrong types, wrong dtypes,
mismatched shapes, empty and 0-d arrays, NaN and inf, many dimensions, unusual
memory layouts, functions that update their inputs in place, bad transform
arguments and bad tangents and cotangents.

Each case either gives the right result (checked against NumPy or a closed form)
or raises the right exception class with a message that names the problem and
what to do instead (or, where NumPy itself raises, exactly NumPy's error). After
every case the library still works and no input was changed: the shared inputs
are read-only, so a write into one raises. Misuse that ``test_errors.py`` already
covers is not repeated here.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import optree
import pytest

import autodiff.numpy as anp
from autodiff import (
    checkpoint,
    custom_jvp,
    custom_vjp,
    explain,
    grad,
    grad_and_value,
    hessian,
    jacfwd,
    jacrev,
    jvp,
    linearize,
    stop_gradient,
    value_and_grad,
    vjp,
    vmap,
)
from autodiff.core.stack import current_interpreters
from autodiff.errors import (
    AutodiffError,
    ConcretizationError,
    TransformTypeError,
    TransformValueError,
)
from autodiff.interpreters import reverse as _reverse
from autodiff.testing import check_grads, check_primitive, check_vmap


def _ro(a: Any, dtype: Any = float) -> np.ndarray:
    """A read-only array: the library (or a test) writing into it raises."""
    a = np.array(a, dtype=dtype)
    a.flags.writeable = False
    return a


X = _ro([0.3, -1.2, 2.0])
XS = _ro(np.linspace(-1.0, 1.0, 12).reshape(4, 3))
Z = _ro([0.5 + 1.0j, -1.0 + 0.25j], complex)
ONES = _ro(np.ones(3))


def f(x):  # scalar
    return anp.sum(anp.sin(x) * x)


def g(x):  # elementwise
    return anp.sin(x) * x


def g_np(x):
    return np.sin(x) * x


def dg(x):  # g', which is also f's gradient
    return np.cos(x) * x + np.sin(x)


def d2g(x):  # g'', the diagonal of f's Hessian
    return 2 * np.cos(x) - x * np.sin(x)


def diag_jac(d: np.ndarray) -> np.ndarray:
    """The Jacobian of an elementwise function with derivative ``d``."""
    return np.diag(d.ravel()).reshape(d.shape + d.shape)


# --- outcomes ---------------------------------------------------------------------------


class Raises(NamedTuple):
    """The call raises ``cls`` (exactly: not a parent); ``pattern`` is searched in
    the message and names the problem and the fix."""

    cls: type[BaseException]
    pattern: str


class Gives(NamedTuple):
    """The call returns ``expected()`` (same structure, shapes, dtypes; NaN in the
    expected value means "not finite here": NaN or an infinity)."""

    expected: Callable[[], Any]
    rtol: float = 1e-12


class SameAsNumPy(NamedTuple):
    """NumPy itself rejects this input: the call raises NumPy's exception, with
    NumPy's message (autodiff adds nothing and loses nothing)."""

    numpy_call: Callable[[], Any]


CASES: list[tuple[str, str, Callable[[], Any], Any]] = []


def case(category: str, name: str, call: Callable[[], Any], outcome: Any) -> None:
    CASES.append((category, name, call, outcome))


def _close(got: Any, want: Any, rtol: float) -> None:
    assert optree.tree_structure(got) == optree.tree_structure(want), (got, want)
    for a, b in zip(optree.tree_leaves(got), optree.tree_leaves(want), strict=True):
        if not isinstance(b, (np.ndarray, np.generic, float, int, complex)):
            assert a == b
            continue
        a, b = np.asarray(a), np.asarray(b)
        assert a.shape == b.shape, (a.shape, b.shape)
        assert a.dtype == b.dtype, (a.dtype, b.dtype)
        if b.dtype.kind not in "fc":
            np.testing.assert_array_equal(a, b)
            continue
        nan = np.isnan(b)
        assert not np.isfinite(a[nan]).any(), f"finite where NaN must propagate: {a}"
        np.testing.assert_allclose(a[~nan], b[~nan], rtol=rtol, atol=rtol)


def _library_still_works() -> None:
    """Nothing was left half-updated: no interpreter, no no_grad, the next call works."""
    assert current_interpreters() == ()
    assert _reverse.no_grad_below.get() == 0
    np.testing.assert_allclose(grad(f)(X), dg(X), rtol=1e-13)
    np.testing.assert_allclose(vmap(grad(f))(XS), dg(XS), rtol=1e-13)
    np.testing.assert_allclose(jvp(g, (X,), (ONES,))[1], dg(X), rtol=1e-13)


def _unchanged(fn: Callable[[np.ndarray], Any], x: np.ndarray) -> Any:
    """``fn(x)``, checking that ``x`` (a writeable array) is not modified."""
    before = x.copy()
    out = fn(x)
    np.testing.assert_array_equal(x, before)
    return out


def _quiet(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` with NumPy's floating-point warnings off (NaN and inf inputs)."""

    def run():
        with np.errstate(all="ignore"):
            return fn()

    return run


# --- 1. wrong types where an array is expected -------------------------------------------

ONE_INPUT = {  # a transform applied to f or g at one input x
    "grad": lambda x: grad(f)(x),
    "grad_and_value": lambda x: grad_and_value(f)(x),
    "value_and_grad": lambda x: value_and_grad(f)(x),
    "vjp": lambda x: vjp(g, x),
    "jvp": lambda x: jvp(g, (x,), (x,)),
    "jacrev": lambda x: jacrev(g)(x),
    "jacfwd": lambda x: jacfwd(g)(x),
    "hessian": lambda x: hessian(f)(x),
    "linearize": lambda x: linearize(g, x),
    "check_grads": lambda x: check_grads(g, (x,)),
}
# (transform, input) pairs test_errors.py already checks
COVERED = {("grad", "str"), ("vjp", "str"), ("jvp", "str")}
COVERED |= {
    (t, v) for t in ("grad", "vjp", "jvp") for v in ("object", "int64", "bool", "int", "pybool")
}


def _arg(name: str) -> str:
    return "the primal for argument 0" if name == "jvp" else "argument 0"


for _name, _call in ONE_INPUT.items():
    _a = _arg(_name)
    for _value, _label, _pattern in [
        ("abc", "str", rf"^{_name}: {_a} is a str, not an array\. Pass NumPy arrays"),
        (None, "None", rf"^{_name}: {_a} is None, so there is nothing to differentiate\. Pass"),
        (object(), "object", rf"^{_name}: {_a} is an object, not an array\. Pass NumPy arrays"),
        (
            {"w": X, "n": "abc"},
            "dict-with-str",
            rf"^{_name}: {_a}\['n'\] is a str, not an array.*through a closure",
        ),
    ]:
        if (_name, _label) not in COVERED:
            case(
                "type",
                f"{_name}-{_label}",
                lambda c=_call, v=_value: c(v),
                Raises(TransformTypeError, _pattern),
            )

for _value, _label, _pattern in [
    ("abc", "str", r"argument 0 is a str, which has no axis 0 to map over.*in_dims=None"),
    (None, "None", r"no input is batched.*at least one input must be mapped"),
    (object(), "object", r"argument 0 is an object, which has no axis 0.*in_dims=None"),
    ({"w": XS, "n": "abc"}, "dict-with-str", r"argument 0\['n'\] is a str, which has no axis 0"),
]:
    case(
        "type",
        f"vmap-{_label}",
        lambda v=_value: vmap(g)(v),
        Raises(TransformValueError, _pattern),
    )
    case(
        "type",
        f"check_vmap-{_label}",
        lambda v=_value: check_vmap(g, 0, (v,)),
        Raises(TransformValueError, _pattern),
    )

# A list of arrays is a pytree: it works where the function indexes it ...
case(
    "type",
    "grad-list-pytree",
    lambda: grad(lambda p: f(p[0]) + f(p[1]))([X, 2 * X]),
    Gives(lambda: [dg(X), dg(2 * X)]),
)
case(
    "type",
    "vjp-list-pytree",
    lambda: vjp(lambda p: p[0] * p[1], [X, 2 * X])[1](ONES),
    Gives(lambda: ([2 * X, X],)),
)
case(
    "type",
    "jvp-list-pytree",
    lambda: jvp(lambda p: p[0] * p[1], ([X, X],), ([ONES, ONES],)),
    Gives(lambda: (X * X, 2 * X)),
)
case(
    "type",
    "jacfwd-list-pytree",
    lambda: jacfwd(lambda p: p[0] * p[1])([X, 2 * X]),
    Gives(lambda: [np.diag(2 * X), np.diag(X)]),
)
case(
    "type",
    "vmap-list-pytree",
    lambda: vmap(lambda p: p[0] * p[1])([XS, XS]),
    Gives(lambda: XS * XS),
)
case(
    "type",
    "linearize-list-pytree",
    lambda: linearize(lambda p: p[0] * p[1], [X, 2 * X])[1]([ONES, ONES]),
    Gives(lambda: 3 * X),
)
# ... and where the function treats it as one array, anp's functions take it as NumPy's
# take a list (an array of the items), traced items included.
case(
    "type",
    "grad-list-as-array",
    lambda: grad(f)([X, X]),
    Gives(lambda: [dg(X), dg(X)]),
)
case(
    "type",
    "vmap-list-as-array",
    lambda: vmap(g)([XS, XS]),
    Gives(lambda: np.stack([g_np(XS), g_np(XS)], axis=1)),
)
case(
    "type",
    "jvp-list-as-array",
    lambda: jvp(g, ([X, X],), ([X, X],)),
    Gives(lambda: (g_np(np.stack([X, X])), dg(np.stack([X, X])) * np.stack([X, X]))),
)
# NumPy's own function cannot take the list (it has no __array_function__ for NumPy to
# hand the call over): the message names autodiff's.
case(
    "type",
    "grad-list-to-numpy",
    lambda: grad(lambda p: np.sum(p))([X, X]),
    Raises(ConcretizationError, r"sum\(.*\) converts a value traced by grad.*: write anp\.sum\("),
)
case(
    "type",
    "vmap-list-to-numpy",
    lambda: vmap(lambda p: np.mean(p, axis=0))([XS, XS]),
    Raises(ConcretizationError, r"mean\(.*\) converts a value traced by vmap.*: write anp\.mean"),
)
# A dict where an array is expected reaches NumPy, which rejects it as it would untraced.
case(
    "type",
    "grad-dict-as-array",
    lambda: grad(f)({"a": X}),
    SameAsNumPy(lambda: np.sin({"a": X})),
)
# Non-array values work where nothing is differentiated or batched.
case(
    "type",
    "grad-str-not-differentiated",
    lambda: grad(lambda x, s: f(x) * len(s))(X, "abc"),
    Gives(lambda: 3 * dg(X)),
)
case(
    "type",
    "grad-None-leaf-in-pytree",
    lambda: grad(lambda p: f(p["w"]))({"w": X, "b": None}),
    Gives(lambda: {"w": dg(X), "b": None}),
)
case(
    "type",
    "jacrev-None-leaf-in-pytree",
    lambda: jacrev(lambda p: g(p["w"]))({"w": X, "b": None}),
    Gives(lambda: {"w": np.diag(dg(X)), "b": None}),
)
case(
    "type",
    "vmap-str-unbatched",
    lambda: vmap(lambda x, s: x * len(s), in_dims=(0, None))(XS, "abc"),
    Gives(lambda: XS * 3),
)
case(
    "type",
    "custom_vjp-str",
    lambda: _identity_vjp()("abc"),
    Raises(TransformTypeError, r"every argument leaf must be an array, got str.*closure"),
)
case(
    "type",
    "checkpoint-str",
    lambda: checkpoint(g)("abc"),
    SameAsNumPy(lambda: np.sin("abc")),
)
case("type", "explain-str", lambda: explain(g)("abc"), SameAsNumPy(lambda: np.sin("abc")))
case("type", "anp.sin-str", lambda: anp.sin("abc"), SameAsNumPy(lambda: np.sin("abc")))
case("type", "anp.sin-None", lambda: anp.sin(None), SameAsNumPy(lambda: np.sin(None)))
case(
    "type",
    "anp.add-str",
    lambda: anp.add(X, "abc"),
    SameAsNumPy(lambda: np.add(X, "abc")),
)
case("type", "stop_gradient-str", lambda: stop_gradient("abc"), Gives(lambda: "abc"))
case(
    "type",
    "stop_gradient-mixed-pytree",
    lambda: stop_gradient({"a": X, "s": "abc", "n": None}),
    Gives(lambda: {"a": X, "s": "abc", "n": None}),
)
case(
    "type",
    "stop_gradient-under-grad",
    lambda: grad(lambda x: f(stop_gradient(x)) + f(x))(X),
    Gives(lambda: dg(X)),
)


def _identity_vjp():
    @custom_vjp
    def ident(x):
        return x

    ident.defvjp(lambda x: (x, None), lambda res, ct: (ct,))
    return ident


def _keywords_vjp():
    @custom_vjp
    def scaled(x, **kw):
        return x * kw["scale"]

    scaled.defvjp(lambda x, **kw: (scaled(x, **kw), None), lambda res, ct: (ct,))
    return scaled


def _nondiff_vjp(bwd=lambda n, res, ct: (ct * n,)):
    def scaled(n, x):
        return n * x

    f = custom_vjp(scaled, nondiff_argnums=(0,))
    f.defvjp(lambda n, x: (n * x, None), bwd)
    return f


# --- 2. integer, bool and complex inputs ------------------------------------------------

INT = _ro([1, 2, 3], np.int64)
BOOL = _ro([True, False, True], bool)
for _name, _call in ONE_INPUT.items():
    _a = _arg(_name)
    for _value, _label, _pattern in [
        (
            INT,
            "int64",
            rf"^{_name}: {_a} has dtype int64, and {_name} differentiates float.*astype",
        ),
        (BOOL, "bool", rf"^{_name}: {_a} has dtype bool, and {_name} differentiates floating-"),
        (3, "int", rf"^{_name}: {_a} is the int 3, and {_name} differentiates .*: pass 3\.0\."),
        (True, "pybool", rf"^{_name}: {_a} is the bool True, .*not differentiated \(argnums\)"),
        (
            np.array(["a", "b"]),
            "str-array",
            rf"^{_name}: {_a} has dtype <U1, and {_name} differentiates floating-point",
        ),
        (
            np.array([1.0, 2.0], dtype=object),
            "object-array",
            rf"^{_name}: {_a} has dtype object, and {_name} differentiates floating-point",
        ),
    ]:
        if (_name, _label) not in COVERED:
            case(
                "dtype",
                f"{_name}-{_label}",
                lambda c=_call, v=_value: c(v),
                Raises(TransformTypeError, _pattern),
            )

case(
    "dtype",
    "grad-int-not-differentiated",
    lambda: grad(lambda x, n: f(x) * n)(X, 3),
    Gives(lambda: 3 * dg(X)),
)
case(
    "dtype",
    "vmap-int",  # as NumPy does: vmap needs no floats
    lambda: vmap(lambda r: r * 2)(np.arange(6).reshape(2, 3)),
    Gives(lambda: np.arange(6).reshape(2, 3) * 2),
)
case(
    "dtype",
    "vmap-bool",
    lambda: vmap(anp.sum)(np.array([[True, False, True], [False, False, True]])),
    Gives(lambda: np.array([2, 1])),
)
for _name, _call in [
    ("jacrev", lambda: jacrev(lambda x: x * (1 + 1j))(X)),
    ("jacfwd", lambda: jacfwd(lambda x: x * (1 + 1j))(X)),
]:
    case(
        "dtype",
        f"{_name}-complex-output",
        _call,
        Raises(TransformTypeError, rf"^{_name}: complex outputs are not supported.*use vjp or jvp"),
    )
case(
    "dtype",
    "hessian-complex-input",
    lambda: hessian(lambda z: anp.sum(anp.abs(z) ** 2))(Z),
    Raises(TransformTypeError, r"^hessian: complex inputs are not supported.*use vjp or jvp"),
)
case(
    "dtype",
    "grad-complex-input-real-output",  # JAX's convention: 2 conj(z)
    lambda: grad(lambda z: anp.sum(anp.abs(z) ** 2))(Z),
    Gives(lambda: 2 * np.conj(Z)),
)
case(
    "dtype",
    "vjp-complex",
    lambda: vjp(lambda z: z * z, Z)[1](np.ones(2, complex)),
    Gives(lambda: (2 * Z,)),
)
case(
    "dtype",
    "jvp-real-tangent-for-complex-primal",
    lambda: jvp(lambda z: z * z, (Z,), (np.ones(2),)),
    Gives(lambda: (Z * Z, 2 * Z)),
)
case(
    "dtype",
    "jvp-complex-tangent-for-real-primal",
    lambda: jvp(g, (X,), (X + 1j,)),
    Raises(TransformTypeError, r"tangent for argument 0 is complex.*primal is real.*only has real"),
)
X32 = _ro(X, np.float32)
case(
    "dtype",
    "grad-float32",  # float32 stays float32
    lambda: grad(f)(X32),
    Gives(lambda: dg(X).astype(np.float32), rtol=1e-6),
)
case(
    "dtype",
    "jvp-float64-tangent-for-float32-primal",
    lambda: jvp(g, (X32,), (ONES,)),
    Gives(lambda: (g_np(X).astype(np.float32), dg(X).astype(np.float32)), rtol=1e-6),
)
case(
    "dtype",
    "vmap-grad-float16",
    lambda: vmap(grad(f))(XS.astype(np.float16)),
    Gives(lambda: dg(XS).astype(np.float16), rtol=1e-2),
)


# --- 3. mismatched shapes ---------------------------------------------------------------


def _pair(x):
    return g(x), anp.sum(x)


case(
    "shape",
    "vjp_fn-scalar-cotangent-for-vector",
    lambda: vjp(g, X)[1](1.0),
    Raises(TransformValueError, r"cotangent 0 has shape \(\) but .* shape \(3,\).*ones_like"),
)
case(
    "shape",
    "vjp_fn-column-cotangent",
    lambda: vjp(g, X)[1](np.ones((3, 1))),
    Raises(TransformValueError, r"cotangent 0 has shape \(3, 1\) but .* shape \(3,\)"),
)
case(
    "shape",
    "vjp_fn-second-output",
    lambda: vjp(_pair, X)[1]((ONES, ONES)),
    Raises(TransformValueError, r"cotangent 1 has shape \(3,\) but .* shape \(\)"),
)
case(
    "shape",
    "jvp-tangent-in-dict",
    lambda: jvp(lambda p: g(p["w"]), ({"w": X},), ({"w": np.ones(2)},)),
    Raises(TransformValueError, r"tangent for argument 0\['w'\] has shape \(2,\) but its primal"),
)
case(
    "shape",
    "linearize-tangent",
    lambda: linearize(g, X)[1](np.ones(4)),
    Raises(
        TransformValueError,
        r"tangent for argument 0 has shape \(4,\) but its primal has shape \(3,\); each",
    ),
)
case(
    "shape",
    "linearize-second-tangent",
    lambda: linearize(lambda x, y: x * y, X, X)[1](ONES, np.ones(2)),
    Raises(TransformValueError, r"tangent for argument 1 has shape \(2,\)"),
)
case(
    "shape",
    "vmap-batch-sizes-in-pytree",
    lambda: vmap(lambda p: p["a"] + p["b"])({"a": XS, "b": np.ones((5, 3))}),
    Raises(TransformValueError, r"argument 0\['a'\] has size 4, argument 0\['b'\] has size 5"),
)
case(
    "shape",
    "vmap-batch-sizes-in_dims-1",
    lambda: vmap(lambda a, b: a * b, in_dims=1)(XS, np.ones((3, 4))),
    Raises(TransformValueError, r"argument 0 has size 3, argument 1 has size 4"),
)
case(
    "shape",
    "vmap-out_dims-out-of-range",
    lambda: vmap(g, out_dims=2)(XS),
    Raises(TransformValueError, r"out_dims 2 is out of range for output 0.*\[-2, 2\)"),
)
ONES4 = _ro(np.ones(4))
for _label, _call, _numpy in [
    ("anp.add", lambda: anp.add(X, ONES4), lambda: np.add(X, ONES4)),
    ("grad-add", lambda: grad(lambda x: anp.sum(x + ONES4))(X), lambda: X + ONES4),
    ("jvp-add", lambda: jvp(lambda x: x + ONES4, (X,), (ONES,)), lambda: X + ONES4),
    ("vjp-matmul", lambda: vjp(lambda x: x @ np.ones((4, 2)), X), lambda: X @ np.ones((4, 2))),
    ("anp.reshape", lambda: anp.reshape(X, (4,)), lambda: np.reshape(X, (4,))),
    ("grad-reshape", lambda: grad(lambda x: anp.sum(x.reshape(4)))(X), lambda: X.reshape(4)),
    ("anp.sum-axis", lambda: anp.sum(X, axis=3), lambda: np.sum(X, axis=3)),
    ("grad-sum-axis", lambda: grad(lambda x: anp.sum(x, axis=1))(X), lambda: X.sum(axis=1)),
]:
    case("shape", _label, _call, SameAsNumPy(_numpy))
# Under vmap NumPy's message shows batched shapes: autodiff names the per-example ones.
for _label, _call, _prim, _shapes in [
    ("vmap-add", lambda: vmap(lambda r: r + ONES4)(XS), "add", r"\(3,\), \(4,\)"),
    (
        "vmap-matmul",
        lambda: vmap(lambda r: r @ np.ones((4, 2)))(XS),
        "matmul",
        r"\(3,\), \(4, 2\)",
    ),
    (
        "vmap-grad-add",
        lambda: vmap(grad(lambda x: anp.sum(x + ONES4)))(XS),
        "add",
        r"\(3,\), \(4,\)",
    ),
]:
    case(
        "shape",
        _label,
        _call,
        Raises(
            TransformValueError,
            rf"^{_prim} under vmap \(level \d+\): .* include the batch axis \(size 4\); per "
            rf"example, the arguments of {_prim} have shapes {_shapes}\..*in_dims",
        ),
    )


# --- 4. empty (size 0) and 0-d arrays ---------------------------------------------------

EMPTY = _ro(np.zeros(0))
EMPTY3 = _ro(np.zeros((2, 0, 3)))
SCALAR = _ro(0.7)
for _label, _x in [("empty", EMPTY), ("empty-2x0x3", EMPTY3), ("0d", SCALAR), ("pyfloat", 0.7)]:
    _v = np.asarray(_x)
    _t = np.ones_like(_v)
    for _name, _call, _expected in [
        ("grad", lambda x: grad(f)(x), lambda v: dg(v)),
        ("value_and_grad", lambda x: value_and_grad(f)(x), lambda v: (np.sum(g_np(v)), dg(v))),
        ("vjp", lambda x, t=_t: vjp(g, x)[1](t), lambda v: (dg(v),)),
        ("jvp", lambda x, t=_t: jvp(g, (x,), (t,)), lambda v: (g_np(v), dg(v))),
        ("jacrev", lambda x: jacrev(g)(x), lambda v: diag_jac(dg(v))),
        ("jacfwd", lambda x: jacfwd(g)(x), lambda v: diag_jac(dg(v))),
        ("hessian", lambda x: hessian(f)(x), lambda v: diag_jac(d2g(v))),
        ("linearize", lambda x, t=_t: linearize(g, x)[1](t), lambda v: dg(v)),
        (
            "checkpoint",
            lambda x: grad(lambda y: anp.sum(checkpoint(g)(y)))(x),
            lambda v: dg(v),
        ),
        ("check_grads", lambda x: check_grads(g, (x,)), lambda v: None),
    ]:
        case(
            "empty-0d",
            f"{_name}-{_label}",
            lambda c=_call, x=_x: c(x),
            Gives(lambda e=_expected, v=_v: e(v)),
        )
for _label, _xs in [("per-example-empty", EMPTY3), ("batch-of-0", _ro(np.zeros((0, 3))))]:
    for _name, _call, _expected in [
        ("vmap", lambda x: vmap(g)(x), g_np),
        ("vmap-chunk2", lambda x: vmap(g, chunk_size=2)(x), g_np),
        ("vmap-chunk1", lambda x: vmap(g, chunk_size=1)(x), g_np),
        ("vmap-grad", lambda x: vmap(grad(f))(x), dg),
        ("vmap-jacrev", lambda x: vmap(jacrev(g))(x), lambda v: np.zeros(v.shape + v.shape[1:])),
        ("vmap-sum", lambda x: vmap(f)(x), lambda v: np.sum(g_np(v), axis=tuple(range(1, v.ndim)))),
    ]:
        case(
            "empty-0d",
            f"{_name}-{_label}",
            lambda c=_call, x=_xs: c(x),
            Gives(lambda e=_expected, x=_xs: e(x)),
        )
case(
    "empty-0d",
    "jacrev-empty-batch",
    lambda: jacrev(lambda x: anp.sum(x, axis=0))(np.zeros((0, 3))),
    Gives(lambda: np.zeros((3, 0, 3))),
)
case("empty-0d", "anp.sum-empty", lambda: anp.sum(EMPTY), Gives(lambda: np.sum(EMPTY)))
case("empty-0d", "anp.max-empty", lambda: anp.max(EMPTY), SameAsNumPy(lambda: np.max(EMPTY)))
case(
    "empty-0d",
    "grad-max-empty",
    lambda: grad(anp.max)(EMPTY),
    SameAsNumPy(lambda: np.max(EMPTY)),
)
case(
    "empty-0d",
    "vmap-max-empty",
    lambda: vmap(anp.max)(np.zeros((2, 0))),
    Raises(
        TransformValueError, r"^max under vmap \(level \d+\): zero-size array.*per example.*\(0,\)"
    ),
)
case(
    "empty-0d",
    "vjp_fn-python-float-for-0d",
    lambda: vjp(f, X)[1](2.0),
    Gives(lambda: (2 * dg(X),)),
)
case(
    "empty-0d",
    "vmap-0d",
    lambda: vmap(g)(SCALAR),
    Raises(TransformValueError, r"argument 0 over axis 0, but that input is 0-d.*in_dims=None"),
)
case(
    "empty-0d",
    "vmap-0d-unbatched",
    lambda: vmap(lambda s, r: s * r, in_dims=(None, 0))(SCALAR, XS),
    Gives(lambda: 0.7 * XS),
)
case(
    "empty-0d",
    "check_vmap-batch-of-0",
    lambda: check_vmap(g, 0, (np.zeros((0, 3)),)),
    Raises(TransformValueError, r"^check_vmap: the mapped axes have size 0.*at least one example"),
)


# --- 5. NaN and inf: propagated by every transform, never a crash -----------------------

NF = _ro([np.nan, np.inf, -np.inf, 1.0, 0.5])
NFS = _ro(np.stack([NF, NF[::-1]]))
FIN = np.isfinite(NF)
CT_NF = _ro([np.nan, np.inf, 1.0])


def _jac_parts(jac: np.ndarray) -> tuple:
    """The diagonal (NaN where the input is not finite) and the block of finite inputs."""
    return np.diagonal(jac), jac[np.ix_(FIN, FIN)]


for _name, _call, _expected in [
    ("grad", lambda: grad(f)(NF), lambda: dg(NF)),
    ("vjp", lambda: vjp(g, NF)[1](np.ones(5)), lambda: (dg(NF),)),
    ("vjp-cotangent", lambda: vjp(g, X)[1](CT_NF), lambda: (CT_NF * dg(X),)),
    ("jvp", lambda: jvp(g, (NF,), (np.ones(5),)), lambda: (g_np(NF), dg(NF))),
    ("jvp-tangent", lambda: jvp(g, (X,), (CT_NF,)), lambda: (g_np(X), CT_NF * dg(X))),
    (
        "jacrev",
        lambda: _jac_parts(jacrev(g)(NF)),
        lambda: (dg(NF), np.diag(dg(NF[FIN]))),
    ),
    (
        "jacfwd",
        lambda: _jac_parts(jacfwd(g)(NF)),
        lambda: (dg(NF), np.diag(dg(NF[FIN]))),
    ),
    (
        "hessian",
        lambda: _jac_parts(hessian(f)(NF)),
        lambda: (d2g(NF), np.diag(d2g(NF[FIN]))),
    ),
    ("linearize", lambda: linearize(g, NF)[1](np.ones(5)), lambda: dg(NF)),
    ("vmap", lambda: vmap(g)(NFS), lambda: g_np(NFS)),
    ("vmap-grad", lambda: vmap(grad(f))(NFS), lambda: dg(NFS)),
    ("vmap-chunk1", lambda: vmap(g, chunk_size=1)(NFS), lambda: g_np(NFS)),
    ("checkpoint", lambda: grad(lambda x: anp.sum(checkpoint(g)(x)))(NF), lambda: dg(NF)),
    ("explain", lambda: explain(grad(f))(NF).result, lambda: dg(NF)),
    ("python-nan", lambda: grad(f)(float("nan")), lambda: np.array(np.nan)),
    ("python-inf", lambda: grad(lambda x: x * 2.0)(float("inf")), lambda: np.array(2.0)),
    # derivatives that route cotangents: NaN inputs do not poison the others
    (
        "sort",
        lambda: grad(lambda x: anp.sum(anp.sort(x) * np.arange(5.0)))(NF),
        lambda: np.array([4.0, 3.0, 0.0, 2.0, 1.0]),
    ),
    (
        "where",
        lambda: grad(lambda x: anp.sum(anp.where(x > 0, x, 0.0)))(NF),
        lambda: np.array([0.0, 1.0, 0.0, 1.0, 1.0]),
    ),
    (
        "solve",  # sum(1 / (1 + x)) through a linear solve
        lambda: grad(lambda x: anp.sum(anp.linalg.solve(np.eye(5) + anp.diag(x), np.ones(5))))(NF),
        lambda: -1 / (1 + NF) ** 2,
    ),
    # and where the result is NaN, every entry of the gradient says so
    ("max", lambda: grad(anp.max)(NF), lambda: np.full(5, np.nan)),
    ("norm", lambda: grad(anp.linalg.norm)(NF), lambda: np.full(5, np.nan)),
]:
    case("nonfinite", _name, _quiet(_call), Gives(_quiet(_expected)))
_NAN_MATRIX = _ro([[np.nan, 1.0], [1.0, 2.0]])
case(
    "nonfinite",
    "svd",  # NumPy's own LinAlgError, under grad too
    _quiet(lambda: grad(lambda a: anp.sum(anp.linalg.svd(a)[1]))(_NAN_MATRIX)),
    SameAsNumPy(_quiet(lambda: np.linalg.svd(_NAN_MATRIX))),
)
case(
    "nonfinite",
    "check_grads",  # NaN compares False: a check on NaN must fail, not pass
    _quiet(lambda: check_grads(g, (NF,))),
    Raises(AssertionError, r"are not finite \(check at a point where f and its derivatives"),
)
case(
    "nonfinite",
    "check_vmap",  # NaN where the loop has NaN agrees
    _quiet(lambda: check_vmap(g, 0, (NFS,))),
    Gives(lambda: None),
)


# --- 6. many dimensions -----------------------------------------------------------------

H25 = _ro(np.full((1,) * 25, 0.7))
H16 = _ro(np.full((1,) * 16, 0.7))
H64 = _ro(np.full((1,) * 64, 0.7))  # NumPy's limit
for _name, _call, _expected in [
    ("grad", lambda: grad(f)(H25), lambda: dg(H25)),
    ("grad-64d", lambda: grad(f)(H64), lambda: dg(H64)),
    ("vjp", lambda: vjp(g, H25)[1](np.ones_like(H25)), lambda: (dg(H25),)),
    ("jvp", lambda: jvp(g, (H25,), (np.ones_like(H25),)), lambda: (g_np(H25), dg(H25))),
    ("vmap", lambda: vmap(g)(H25), lambda: g_np(H25)),
    ("vmap-64d", lambda: vmap(g)(H64), lambda: g_np(H64)),
    ("vmap-last-axis", lambda: vmap(g, in_dims=-1, out_dims=-1)(H25), lambda: g_np(H25)),
    ("vmap-vmap", lambda: vmap(vmap(g, in_dims=3), in_dims=-2)(H25), lambda: g_np(H25)),
    ("vmap-grad", lambda: vmap(grad(f))(H25), lambda: dg(H25)),
    ("jacrev", lambda: jacrev(g)(H16), lambda: diag_jac(dg(H16))),
    ("jacfwd", lambda: jacfwd(g)(H16), lambda: diag_jac(dg(H16))),
    ("hessian", lambda: hessian(f)(H16), lambda: diag_jac(d2g(H16))),
    ("linearize", lambda: linearize(g, H25)[1](np.ones_like(H25)), lambda: dg(H25)),
    ("checkpoint", lambda: grad(lambda x: anp.sum(checkpoint(g)(x)))(H25), lambda: dg(H25)),
    (
        "reductions",
        lambda: grad(lambda x: anp.sum(anp.sum(x, axis=(0, 7, 24)) ** 2))(H25),
        lambda: 2 * H25,
    ),
    ("transpose", lambda: grad(lambda x: anp.sum(anp.transpose(x) ** 2))(H25), lambda: 2 * H25),
    ("matmul", lambda: grad(lambda x: anp.sum(x @ x))(H25), lambda: 2 * H25),
    ("vmap-matmul", lambda: vmap(lambda x: x @ x)(H25), lambda: H25 @ H25),
]:
    case("ndim", _name, _call, Gives(_expected))


# --- 7. memory layouts, read-only arrays, and inputs never modified ---------------------

_A = np.arange(24.0).reshape(4, 6) / 10 - 1.1
_RO = _A.copy()
_RO.flags.writeable = False
LAYOUTS = {
    "strided": _A[:, ::2],
    "transposed": _A.T,
    "negative-stride": _A[::-1, ::-2],
    "fortran": np.asfortranarray(_A),
    "broadcast": np.broadcast_to(np.arange(3.0), (4, 3)),  # read-only, zero strides
    "readonly": _RO,
}


def h(x):
    return anp.tanh(x) @ x.T


LAYOUT_CALLS = {
    "grad": lambda a: grad(lambda x: anp.sum(h(x)))(a),
    "vjp": lambda a: vjp(h, a)[1](np.ones((a.shape[0],) * 2)),
    "jvp": lambda a: jvp(h, (a,), (a,)),
    "vmap": lambda a: vmap(h)(a),
    "vmap-in_dims-1": lambda a: vmap(h, in_dims=1)(a),
    "vmap-chunk1": lambda a: vmap(h, chunk_size=1)(a),
    "vmap-grad": lambda a: vmap(grad(f))(a),
    "jacrev": lambda a: jacrev(h)(a),
    "jacfwd": lambda a: jacfwd(h)(a),
    "hessian": lambda a: hessian(f)(a),
    "linearize": lambda a: linearize(h, a)[1](a),
    "checkpoint": lambda a: grad(lambda x: anp.sum(checkpoint(h)(x)))(a),
}
for _layout, _view in LAYOUTS.items():
    for _name, _call in LAYOUT_CALLS.items():
        case(
            "layout",
            f"{_name}-{_layout}",
            lambda c=_call, v=_view: _unchanged(c, v),
            Gives(lambda c=_call, v=_view: c(np.ascontiguousarray(v)), rtol=1e-13),
        )
case(
    "layout",
    "vjp_fn-strided-readonly-cotangent",
    lambda: vjp(lambda x: x * 2.0, np.ones((3, 3)))[1](_RO[:3, ::2]),
    Gives(lambda: (2 * _A[:3, ::2],)),
)


def mut(x):
    """Updates its input in place: a traced value is a value, so the caller's array
    must not change (and derivatives must see the update)."""
    x[0] = 0.0
    x += 1.0
    return x * x


def mut_np(x):
    y = np.array(x, dtype=float)
    y[..., 0] = 0.0
    return (y + 1.0) ** 2


def dmut(x):
    d = 2 * (np.array(x, dtype=float) + 1.0)
    d[..., 0] = 0.0
    return d


_COL = X.reshape(3, 1)
for _name, _call, _expected in [
    ("grad", lambda a: grad(lambda x: anp.sum(mut(x)))(a), lambda: dmut(X)),
    ("vjp", lambda a: vjp(mut, a)[1](ONES), lambda: (dmut(X),)),
    ("jvp", lambda a: jvp(mut, (a,), (ONES,)), lambda: (mut_np(X), dmut(X))),
    ("vmap", lambda a: vmap(mut)(a.reshape(3, 1)), lambda: mut_np(_COL)),
    ("vmap-chunk1", lambda a: vmap(mut, chunk_size=1)(a.reshape(3, 1)), lambda: mut_np(_COL)),
    ("vmap-chunk2", lambda a: vmap(mut, chunk_size=2)(a.reshape(3, 1)), lambda: mut_np(_COL)),
    ("jacrev", lambda a: jacrev(mut)(a), lambda: np.diag(dmut(X))),
    ("jacfwd", lambda a: jacfwd(mut)(a), lambda: np.diag(dmut(X))),
    ("hessian", lambda a: hessian(lambda x: anp.sum(mut(x)))(a), lambda: np.diag([0, 2.0, 2.0])),
    ("linearize", lambda a: linearize(mut, a)[1](ONES), lambda: dmut(X)),
    ("checkpoint", lambda a: checkpoint(mut)(a), lambda: mut_np(X)),
    ("checkpoint-grad", lambda a: grad(lambda x: anp.sum(checkpoint(mut)(x)))(a), lambda: dmut(X)),
    ("explain", lambda a: explain(mut)(a).result, lambda: mut_np(X)),
]:
    case(
        "layout",
        f"in-place-update-{_name}",
        lambda c=_call: _unchanged(c, X.copy()),
        Gives(_expected),
    )


# --- 8. transform arguments: func, argnums, in_dims, out_dims, chunk_size, has_aux, ... ---

for _name, _make in [
    ("grad_and_value", lambda: grad_and_value(42)),
    ("value_and_grad", lambda: value_and_grad(42)),
    ("jacrev", lambda: jacrev(42)),
    ("jacfwd", lambda: jacfwd(42)),
    ("hessian", lambda: hessian(42)),
    ("linearize", lambda: linearize(42, X)),
    ("checkpoint", lambda: checkpoint(42)),
    ("custom_vjp", lambda: custom_vjp(42)),
    ("custom_jvp", lambda: custom_jvp(42)),
    ("explain", lambda: explain(42)),
    ("check_grads", lambda: check_grads(42, (X,))),
    ("check_vmap", lambda: check_vmap(42, 0, (XS,))),
    ("custom_vjp.defvjp", lambda: _identity_vjp().defvjp(42, lambda r, ct: (ct,))),
    ("custom_jvp.defjvp", lambda: custom_jvp(g).defjvp(42)),
]:
    case(
        "arguments",
        f"{_name}-func-not-callable",
        _make,
        Raises(TransformTypeError, rf"^{re.escape(_name)}.*func must be callable, got int 42"),
    )

for _name, _make in [
    ("grad_and_value", lambda a: grad_and_value(lambda x, y: f(x * y), argnums=a)),
    ("value_and_grad", lambda a: value_and_grad(lambda x, y: f(x * y), argnums=a)),
    ("jacrev", lambda a: jacrev(lambda x, y: g(x * y), argnums=a)),
    ("jacfwd", lambda a: jacfwd(lambda x, y: g(x * y), argnums=a)),
    ("hessian", lambda a: hessian(lambda x, y: f(x * y), argnums=a)),
]:
    for _argnums, _label in [("0", "str"), (1.0, "float"), (None, "None"), ([0, 0.5], "list")]:
        if (_name, _label) in {("jacfwd", "str")}:
            continue  # test_derived.py
        case(
            "arguments",
            f"{_name}-argnums-{_label}",
            lambda m=_make, a=_argnums: m(a),
            Raises(TransformTypeError, rf"^{_name}\(func, argnums=...\): argnums must be an int"),
        )
    case(
        "arguments",
        f"{_name}-argnums-empty",
        lambda m=_make: m(()),
        Raises(TransformValueError, r"argnums must name at least one argument"),
    )
    for _argnums, _label, _pattern in [
        (2, "out-of-range", r"argument 2 is out of range .* valid argnums are -2\.\.1"),
        (-3, "negative-out-of-range", r"argument -3 is out of range"),
        ((1, -1), "repeated", r"must not repeat an argument .*\(1, 1\)"),
    ]:
        if (_name, _label) in {("jacrev", "out-of-range")}:
            continue  # test_derived.py
        case(
            "arguments",
            f"{_name}-argnums-{_label}",
            lambda m=_make, a=_argnums: m(a)(X, X),
            Raises(TransformValueError, rf"^{_name}\(func, argnums=.*{_pattern}"),
        )
for _name, _call, _expected in [
    ("grad-argnums-tuple", lambda: grad(f, argnums=(0,))(X), lambda: (dg(X),)),
    ("grad-argnums-list", lambda: grad(f, argnums=[0])(X), lambda: (dg(X),)),
    ("grad-argnums-np.int64", lambda: grad(f, argnums=np.int64(0))(X), lambda: dg(X)),
    (
        "jacrev-argnums-negative",
        lambda: jacrev(lambda x, y: x * y, argnums=-1)(X, 2 * X),
        lambda: np.diag(X),
    ),
    (
        "vmap-in_dims-list",
        lambda: vmap(lambda a, b: a * b, in_dims=[0, None])(XS, X),
        lambda: XS * X,
    ),
    (
        "vmap-in_dims-negative",
        lambda: vmap(g, in_dims=-1, out_dims=-1)(XS),
        lambda: g_np(XS),
    ),
    ("vmap-chunk-larger-than-batch", lambda: vmap(g, chunk_size=100)(XS), lambda: g_np(XS)),
    ("vmap-chunk-np.int64", lambda: vmap(g, chunk_size=np.int64(3))(XS), lambda: g_np(XS)),
    ("jacrev-chunk", lambda: jacrev(g, chunk_size=2)(X), lambda: np.diag(dg(X))),
    ("jacfwd-randomness", lambda: jacfwd(g, randomness="same")(X), lambda: np.diag(dg(X))),
]:
    case("arguments", _name, _call, Gives(_expected))

for _name, _call, _cls, _pattern in [
    ("vmap-in_dims-negative-out-of-range", lambda: vmap(g, in_dims=-3)(XS), TransformValueError,
     r"in_dims for argument 0 is -3.*in \[-2, 2\) or None"),
    ("vmap-in_dims-nested-str", lambda: vmap(lambda p: p["a"], in_dims=({"a": "0"},)),
     TransformTypeError, r"every entry of in_dims must be an int or None, got str '0'"),
    ("vmap-in_dims-bool", lambda: vmap(g, in_dims=True), TransformTypeError,
     r"in_dims must be an int or None, got bool"),
    ("vmap-out_dims-str", lambda: vmap(g, out_dims="0"), TransformTypeError,
     r"every entry of out_dims must be an int or None, got str '0'"),
    ("vmap-out_dims-structure", lambda: vmap(_pair, out_dims=(0, 0, 0))(XS), TransformValueError,
     r"out_dims \(0, 0, 0\) does not match the structure of the function's output"),
    ("vmap-out_dims-for-non-array", lambda: vmap(lambda x: (x, "s"))(XS), TransformTypeError,
     r"output 1 of func is a str, not an array; give it out_dims=None"),
    ("vmap-chunk-str", lambda: vmap(g, chunk_size="2"), TransformTypeError,
     r"^vmap\(\.\.\., chunk_size='2'\): chunk_size must be None or a positive int, got str"),
    ("vmap-chunk-float", lambda: vmap(g, chunk_size=2.0), TransformTypeError,
     r"chunk_size must be None or a positive int, got float"),
    ("vmap-chunk-bool", lambda: vmap(g, chunk_size=True), TransformTypeError,
     r"chunk_size must be None or a positive int, got bool"),
    ("vmap-chunk-negative", lambda: vmap(g, chunk_size=-1), TransformValueError,
     r"chunk_size=-1\): chunk_size must be None or a positive int"),
    ("jacrev-chunk-0", lambda: jacrev(g, chunk_size=0), TransformValueError,
     r"^jacrev\(\.\.\., chunk_size=0\): chunk_size must be None or a positive int"),
    ("jacrev-chunk-str", lambda: jacrev(g, chunk_size="2"), TransformTypeError,
     r"^jacrev\(\.\.\., chunk_size='2'\)"),
    ("vmap-randomness-unknown", lambda: vmap(g, randomness="random"), TransformValueError,
     r"randomness='random'\): randomness must be one of \('error', 'different', 'same'\)"),
    ("vmap-randomness-None", lambda: vmap(g, randomness=None), TransformTypeError,
     r"randomness must be one of the strings .*got NoneType"),
    ("vmap-randomness-list", lambda: vmap(g, randomness=["same"]), TransformTypeError,
     r"randomness must be one of the strings .*got list"),
    ("jacfwd-randomness-unknown", lambda: jacfwd(g, randomness="x"), TransformValueError,
     r"^jacfwd\(\.\.\., randomness='x'\): randomness must be one of"),
]:  # fmt: skip
    case("arguments", _name, _call, Raises(_cls, _pattern))

for _name, _make in [
    ("vjp", lambda flag: vjp(g, X, has_aux=flag)),
    ("jvp", lambda flag: jvp(g, (X,), (X,), has_aux=flag)),
    ("grad_and_value", lambda flag: grad_and_value(f, has_aux=flag)),
    ("value_and_grad", lambda flag: value_and_grad(f, has_aux=flag)),
    ("jacrev", lambda flag: jacrev(g, has_aux=flag)),
    ("jacfwd", lambda flag: jacfwd(g, has_aux=flag)),
]:
    for _flag in (1, "yes", None):
        case(
            "arguments",
            f"{_name}-has_aux-{_flag!r}",
            lambda m=_make, flag=_flag: m(flag),
            Raises(
                TransformTypeError, rf"^{_name}\(\.\.\., has_aux=\.\.\.\): has_aux must be True"
            ),
        )
for _name, _label, _call, _got in [
    (
        "grad_and_value",
        "array",
        lambda: grad_and_value(f, has_aux=True)(X),
        r"a single array of shape \(\)",
    ),
    (
        "value_and_grad",
        "list",
        lambda: value_and_grad(lambda x: [f(x), 1.0], has_aux=True)(X),
        r"a list \(return a tuple\)",
    ),
    ("jacrev", "array", lambda: jacrev(g, has_aux=True)(X), r"a single array of shape \(3,\)"),
    ("jacfwd", "array", lambda: jacfwd(g, has_aux=True)(X), r"a single array of shape \(3,\)"),
    (
        "jacfwd",
        "triple",
        lambda: jacfwd(lambda x: (x, x, x), has_aux=True)(X),
        r"a tuple of length 3",
    ),
    ("vjp", "dict", lambda: vjp(lambda x: {"out": x}, X, has_aux=True), r"a dict"),
]:
    case(
        "arguments",
        f"{_name}-has_aux-returns-{_label}",
        _call,
        Raises(
            TransformTypeError,
            rf"^{_name}\(func, has_aux=True\): func must return a pair \(output, aux\), but it "
            rf"returned {_got}",
        ),
    )
case(
    "arguments",
    "jacrev-has_aux",
    lambda: jacrev(lambda x: (g(x), {"n": 3}), has_aux=True)(X),
    Gives(lambda: (np.diag(dg(X)), {"n": 3})),
)
case(
    "arguments",
    "jacfwd-has_aux",
    lambda: jacfwd(lambda x: (g(x), x.sum()), has_aux=True)(X),
    Gives(lambda: (np.diag(dg(X)), np.sum(X))),
)

# testing helpers
for _name, _call, _cls, _pattern in [
    ("check_grads-args-array", lambda: check_grads(g, X), TransformTypeError,
     r"^check_grads\(f, args\): args must be a tuple \(or list\).*got ndarray.*\(x,\)"),
    ("check_grads-args-float", lambda: check_grads(g, 1.0), TransformTypeError,
     r"args must be a tuple \(or list\).*got float"),
    ("check_grads-order-0", lambda: check_grads(g, (X,), order=0), TransformValueError,
     r"order=0\): order must be a positive int"),
    ("check_grads-order-float", lambda: check_grads(g, (X,), order=1.5), TransformValueError,
     r"order=1\.5\): order must be a positive int"),
    ("check_grads-modes-unknown", lambda: check_grads(g, (X,), modes=("fw",)),
     TransformValueError, r"modes must be a non-empty tuple of 'fwd' and 'rev'"),
    ("check_grads-modes-str", lambda: check_grads(g, (X,), modes="rev"), TransformValueError,
     r"modes='rev'\): modes must be a non-empty tuple"),
    ("check_grads-modes-empty", lambda: check_grads(g, (X,), modes=()), TransformValueError,
     r"modes=\(\)\): modes must be a non-empty tuple"),
    ("check_vmap-args-array", lambda: check_vmap(g, 0, XS), TransformTypeError,
     r"^check_vmap\(f, args\): args must be a tuple"),
    ("check_vmap-in_dims-out-of-range", lambda: check_vmap(g, 2, (XS,)), TransformValueError,
     r"in_dims for argument 0 is 2, but that input has shape \(4, 3\)"),
    ("check_vmap-in_dims-None", lambda: check_vmap(g, None, (XS,)), TransformValueError,
     r"no input is batched"),
    ("check_vmap-in_dims-str", lambda: check_vmap(g, "0", (XS,)), TransformTypeError,
     r"every entry of in_dims must be an int or None"),
    ("check_primitive-function", lambda: check_primitive(anp.sin, (X,)), TransformTypeError,
     r"prim must be a Primitive, got function.*anp\.sin\.primitive"),
    ("check_primitive-sample-array", lambda: check_primitive(anp.sin.primitive, X),
     TransformTypeError, r"give samples as tuples of arguments"),
]:  # fmt: skip
    case("arguments", _name, _call, Raises(_cls, _pattern))


# --- 9. cotangents and tangents of the wrong structure, shape or dtype ------------------


def _vjp_fn():
    return vjp(g, X)[1]


for _label, _ct, _cls, _pattern in [
    ("None", None, TransformValueError, r"cotangent structure PyTreeSpec\(None\) does not match"),
    ("str", "abc", TransformTypeError, r"cotangent 0 is a str, not an array\. Pass a NumPy array"),
    ("int64", INT, TransformTypeError, r"cotangent 0 has dtype int64;.*\.astype\(float64\)"),
    ("bool", BOOL, TransformTypeError, r"cotangent 0 has dtype bool;.*\.astype\(float64\)"),
    ("complex-for-real", X + 1j, TransformTypeError,
     r"cotangent 0 is complex \(complex128\) but the value it belongs to is real.*np\.real"),
    ("dict-for-array", {"a": ONES}, TransformValueError, r"cotangent structure .* does not match"),
]:  # fmt: skip
    case("cotangent", f"vjp_fn-{_label}", lambda c=_ct: _vjp_fn()(c), Raises(_cls, _pattern))
case(
    "cotangent",
    "vjp_fn-python-int",
    lambda: vjp(f, X)[1](1),
    Raises(TransformTypeError, r"cotangent 0 is the int 1;.*Pass a float \(e\.g\. 1\.0\)"),
)
case(
    "cotangent",
    "vjp_fn-no-argument",
    lambda: _vjp_fn()(),
    Raises(TransformTypeError, r"vjp_fn takes exactly one argument .*got 0"),
)
case(
    "cotangent",
    "vjp_fn-dict-keys",
    lambda: vjp(lambda x: {"a": x, "b": x}, X)[1]({"a": ONES, "c": ONES}),
    Raises(TransformValueError, r"cotangent structure .* does not match"),
)
for _name, _call, *_expected in [
    ("vjp_fn-float32-cotangent", lambda: _vjp_fn()(ONES.astype(np.float32)), lambda: (dg(X),)),
    (
        "vjp_fn-float64-cotangent-for-float32",
        lambda: vjp(g, X32)[1](ONES),
        lambda: (dg(X).astype(np.float32),),
        1e-6,
    ),
    (
        "vjp_fn-real-cotangent-for-complex",
        lambda: vjp(lambda z: z * z, Z)[1](np.ones(2)),
        lambda: (2 * Z,),
    ),
    ("vjp_fn-numpy-float", lambda: vjp(f, X)[1](np.float64(1.0)), lambda: (dg(X),)),
]:
    case("cotangent", _name, _call, Gives(*_expected))

for _label, _t, _cls, _pattern in [
    ("None", None, TransformValueError, r"tangents must have the same structure as primals"),
    ("int64", INT, TransformTypeError, r"tangent for argument 0 has dtype int64"),
    ("bool", BOOL, TransformTypeError, r"tangent for argument 0 has dtype bool"),
    ("object", object(), TransformTypeError, r"tangent for argument 0 is an object, not an array"),
    ("list", [ONES], TransformValueError, r"tangents must have the same structure as primals"),
]:  # fmt: skip
    case("tangent", f"jvp-{_label}", lambda t=_t: jvp(g, (X,), (t,)), Raises(_cls, _pattern))


def _jvp_fn():
    return linearize(g, X)[1]


for _label, _args, _cls, _pattern in [
    ("None", (None,), TransformValueError, r"tangents must be structured like the primals"),
    ("none", (), TransformValueError, r"tangents must be structured like the primals"),
    ("two", (ONES, ONES), TransformValueError, r"structured like the primals .*one tangent per"),
    ("str", ("abc",), TransformTypeError, r"tangent for argument 0 is a str, not an array"),
    ("int64", (INT,), TransformTypeError, r"tangent for argument 0 has dtype int64.*astype"),
    ("python-int", (1,), TransformTypeError, r"tangent for argument 0 is the int 1"),
    ("complex-for-real", (X + 1j,), TransformTypeError,
     r"^linearize's jvp_fn: the tangent for argument 0 is complex.*real"),
    ("tuple-for-array", ((ONES,),), TransformValueError, r"structured like the primals"),
]:  # fmt: skip
    case(
        "tangent",
        f"linearize-{_label}",
        lambda a=_args: _jvp_fn()(*a),
        Raises(_cls, _pattern),
    )
for _name, _call, _expected in [
    ("linearize-float32-tangent", lambda: _jvp_fn()(ONES.astype(np.float32)), lambda: dg(X)),
    ("linearize-python-float", lambda: linearize(g, 0.7)[1](2.0), lambda: 2 * dg(np.array(0.7))),
    (
        "linearize-readonly-tangents",
        lambda: linearize(lambda x, y: x * y, X, X)[1](ONES, ONES),
        lambda: 2 * X,
    ),
]:
    case("tangent", _name, _call, Gives(_expected))


# --- 10. custom rules that return the wrong thing ---------------------------------------


def _custom_vjp(fwd: Callable, bwd: Callable) -> Callable:
    @custom_vjp
    def product(x, y):
        return x * y

    product.defvjp(fwd, bwd)
    return lambda x, y: anp.sum(product(x, y))


def _custom_jvp(rule: Callable) -> Callable:
    @custom_jvp
    def product(x, y):
        return x * y

    product.defjvp(rule)
    return product


_FWD = lambda x, y: (x * y, (x, y))
for _label, _fwd, _bwd, _cls, _pattern in [
    ("fwd-not-a-pair", lambda x, y: x * y, lambda r, ct: (ct, ct), TransformTypeError,
     r"fwd must return a pair \(output, residuals\), got a single array of shape \(3,\)"),
    ("bwd-shape", _FWD, lambda r, ct: (np.ones(4), ct * r[0]), TransformValueError,
     r"bwd returned a cotangent of shape \(4,\) for an argument of shape \(3,\)"),
    ("bwd-structure", _FWD, lambda r, ct: ((ct, ct), ct), TransformValueError,
     r"bwd must return cotangents structured like the arguments.*None for a zero"),
    ("bwd-length", _FWD, lambda r, ct: (ct,), TransformTypeError,
     r"bwd must return a tuple with one cotangent per argument \(2\), got tuple of length 1"),
]:  # fmt: skip
    case(
        "custom",
        f"custom_vjp-{_label}",
        lambda fw=_fwd, bw=_bwd: grad(_custom_vjp(fw, bw), argnums=(0, 1))(X, 2 * X),
        Raises(_cls, _pattern),
    )
case(
    "custom",
    "custom_vjp-bwd-None-is-zero",
    lambda: grad(_custom_vjp(_FWD, lambda r, ct: (None, ct * r[0])), argnums=(0, 1))(X, 2 * X),
    Gives(lambda: (np.zeros(3), X)),
)
case(  # keywords are matched to positions, as in JAX ...
    "custom",
    "custom_vjp-keyword-argument",
    lambda: grad(lambda x: anp.sum(_identity_vjp()(x=x)))(X),
    Gives(lambda: np.ones(3)),
)
case(  # ... where they have one
    "custom",
    "custom_vjp-keyword-without-position",
    lambda: _keywords_vjp()(X, scale=X),
    Raises(TransformTypeError, r"positional arguments only .*\['scale'\].*functools\.partial"),
)
case(
    "custom",
    "custom_vjp-traced-nondiff-argument",
    lambda: grad(lambda x: anp.sum(_nondiff_vjp()(x, x)))(X),
    Raises(TransformTypeError, r"argument 0 is in nondiff_argnums but holds a traced value"),
)
case(
    "custom",
    "custom_vjp-nondiff-bwd-length",
    lambda: grad(lambda x: anp.sum(_nondiff_vjp(lambda n, r, ct: (ct, ct))(2.0, x)))(X),
    Raises(TransformTypeError, r"one cotangent per differentiable argument \(1\)"),
)
for _label, _rule, _cls, _pattern in [
    ("not-a-pair", lambda p, t: t[0] * p[1], TransformTypeError,
     r"the rule must return a pair \(output, tangent_out\), got a single array"),
    ("tangent-shape", lambda p, t: (p[0] * p[1], np.ones(4)), TransformValueError,
     r"the rule returned a tangent of shape \(4,\) for an output of shape \(3,\)"),
    ("tangent-structure", lambda p, t: (p[0] * p[1], (t[0], t[1])), TransformValueError,
     r"the rule's tangent_out must be structured like its output \(PyTreeSpec\(\*\)\)"),
    ("tangent-None", lambda p, t: (p[0] * p[1], None), TransformValueError,
     r"the rule's tangent_out must be structured like its output"),
]:  # fmt: skip
    for _transform, _run in [
        ("jvp", lambda k: jvp(k, (X, X), (ONES, ONES))),
        ("grad", lambda k: grad(lambda x: anp.sum(k(x, x)))(X)),
    ]:
        case(
            "custom",
            f"custom_jvp-{_label}-{_transform}",
            lambda r=_rule, run=_run: run(_custom_jvp(r)),
            Raises(_cls, rf"^custom_jvp function 'product': {_pattern}"),
        )
case(
    "custom",
    "custom_jvp-no-rule",
    lambda: custom_jvp(g)(X),
    Raises(TransformTypeError, r"has no rule yet: decorate one with @g\.defjvp"),
)


def _error_of(numpy_call: Callable[[], Any]) -> Exception:
    try:
        numpy_call()
    except Exception as e:
        return e
    raise AssertionError("NumPy accepts this input: the case is wrong")


# --- the table --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "outcome"),
    [pytest.param(call, outcome, id=f"{cat}-{name}") for cat, name, call, outcome in CASES],
)
def test_bad_input(call, outcome):
    if isinstance(outcome, Gives):
        _close(call(), outcome.expected(), outcome.rtol)
    elif isinstance(outcome, SameAsNumPy):
        expected = _error_of(outcome.numpy_call)
        with pytest.raises(type(expected), match=f"^{re.escape(str(expected))}$") as ours:
            call()
        assert type(ours.value) is type(expected)
    else:
        with pytest.raises(outcome.cls, match=outcome.pattern) as info:
            call()
        assert type(info.value) is outcome.cls
        assert issubclass(outcome.cls, AutodiffError) or outcome.cls is AssertionError
    _library_still_works()


def test_table_size_and_ids():
    ids = [f"{cat}-{name}" for cat, name, _, _ in CASES]
    assert len(ids) == len(set(ids)), [i for i, n in Counter(ids).items() if n > 1]
    by_category = Counter(cat for cat, _, _, _ in CASES)
    assert len(CASES) >= 400 and min(by_category.values()) >= 10, by_category


def test_vjp_fn_and_jvp_fn_still_work_after_bad_calls():
    out, vjp_fn = vjp(g, X)
    _, jvp_fn = linearize(g, X)
    for bad in (None, "abc", INT, X + 1j, np.ones(4), (ONES, ONES)):
        with pytest.raises(AutodiffError):
            vjp_fn(bad)
        with pytest.raises(AutodiffError):
            jvp_fn(bad)
    np.testing.assert_allclose(vjp_fn(ONES)[0], dg(X), rtol=1e-13)
    np.testing.assert_allclose(jvp_fn(ONES), dg(X), rtol=1e-13)
    np.testing.assert_allclose(out, g_np(X), rtol=1e-13)


def test_a_custom_rule_that_raised_can_be_fixed_and_rerun():
    @custom_vjp
    def product(x, y):
        return x * y

    product.defvjp(_FWD, lambda r, ct: (np.ones(4), ct))
    loss = lambda x, y: anp.sum(product(x, y))
    with pytest.raises(TransformValueError, match="bwd returned a cotangent of shape"):
        grad(loss, argnums=(0, 1))(X, 2 * X)
    product.defvjp(_FWD, lambda r, ct: (ct * r[1], ct * r[0]))
    _close(grad(loss, argnums=(0, 1))(X, 2 * X), (2 * X, X), 1e-13)
