"""No silent wrong answer: a conversion that leaves the transforms refuses a value whose
derivative or batch it would drop, naming the transform and the fix; the conversions
that keep meaning (``bool()`` for Python control flow under ``grad``/``jvp``, ``print``)
work.

Every conversion is tried under every transform that carries something it would drop
(reverse, forward, batching) and their compositions; NumPy's scalar types and the
``math`` module are enumerated, so a conversion added to either is tried too.
"""

import math
import operator
import re
import sys

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import grad, jacfwd, jvp, no_grad, stop_gradient, vjp, vmap
from autodiff.errors import ConcretizationError

QUOTES = sys.version_info >= (3, 11)  # Python records each expression's source since 3.11


def _store(x):
    out = np.zeros(3)
    out[0] = x
    return out


def _slice_store(x):
    out = np.zeros(3)
    out[0:1] = x
    return out


def _fill(x):
    np.zeros(3).fill(x)


# name -> a conversion of a 0-d traced value ``x``
CONVERSIONS = {
    "float": lambda x: float(x),
    "int": lambda x: int(x),
    "complex": lambda x: complex(x),
    "item": lambda x: x.item(),
    "tolist": lambda x: x.tolist(),
    "math.sqrt": lambda x: math.sqrt(x),
    "math.exp": lambda x: math.exp(x),
    "math.floor": lambda x: math.floor(x),
    "math.trunc": lambda x: math.trunc(x),
    "math.isfinite": lambda x: math.isfinite(x),
    "round": lambda x: round(x),
    "%f": lambda x: "%f" % x,  # noqa: UP031  (the %-formatting is what is tried)
    "%d": lambda x: "%d" % x,  # noqa: UP031
    "%.3e": lambda x: "%.3e" % x,  # noqa: UP031
    "format": lambda x: format(x, ".3f"),
    "f-string": lambda x: f"{x:.2f}",
    "np.float64": lambda x: np.float64(x),
    "np.float32": lambda x: np.float32(x),
    "np.int64": lambda x: np.int64(x),
    "np.complex128": lambda x: np.complex128(x),
    "operator.index": lambda x: operator.index(x),
    "range": lambda x: range(x),
    "np.asarray": lambda x: np.asarray(x),
    "np.array of a list": lambda x: np.array([x, 2 * x]),
    "np.mean of a list": lambda x: np.mean([x, 2 * x]),
    "store": _store,
    "slice store": _slice_store,
    "ndarray.fill": _fill,
}

# name -> how a function of one 0-d float runs under the transform
TRANSFORMS = {
    "grad": lambda f: grad(f)(1.5),
    "vjp": lambda f: vjp(f, 1.5),
    "jvp": lambda f: jvp(f, (1.5,), (1.0,)),
    "vmap": lambda f: vmap(f)(np.array([1.5, 2.5])),
    "jacfwd": lambda f: jacfwd(f)(1.5),
    "grad(grad)": lambda f: grad(grad(f))(1.5),
    "vmap(grad)": lambda f: vmap(grad(f))(np.array([1.5, 2.5])),
    "grad(vmap)": lambda f: grad(lambda x: vmap(f)(x).sum())(np.array([1.5, 2.5])),
    "jvp(grad)": lambda f: jvp(grad(f), (1.5,), (1.0,)),
    "vmap(jvp)": lambda f: vmap(lambda x: jvp(f, (x,), (1.0,))[1])(np.array([1.5, 2.5])),
}
# What the message names: the transform a conversion meets first (the innermost).
NAMED = {"grad(grad)": "grad", "vmap(grad)": "grad", "grad(vmap)": "vmap",
         "jvp(grad)": "grad", "vmap(jvp)": "jvp", "vjp": "vjp", "jacfwd": "jvp"}  # fmt: skip


def _converting(conversion):
    def f(x):
        conversion(x)
        return x * 2.0

    return f


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("conversion", CONVERSIONS)
def test_a_conversion_that_would_drop_a_derivative_or_a_batch_raises(conversion, transform):
    with pytest.raises(ConcretizationError) as info:
        TRANSFORMS[transform](_converting(CONVERSIONS[conversion]))
    message = str(info.value)
    named = NAMED.get(transform, transform)
    assert re.search(rf"\b{re.escape(named)} \(level \d+\)", message), message
    if named in ("grad", "vjp", "jvp"):  # the fixes: anp's spelling or stop_gradient, has_aux
        assert "anp." in message or "stop_gradient" in message, message
    elif named == "vmap":
        assert "anp.where" in message, message


def _numpy_scalar_types():
    """NumPy's scalar types that make one from a Python float (not datetime64's)."""
    types = []
    for t in {t for t in np.sctypeDict.values() if issubclass(t, (np.number, np.bool_))}:
        try:
            t(1.5)
        except (TypeError, ValueError):
            continue
        types.append(t)
    assert len(types) >= 12  # the ints, floats, complexes and bool_
    return sorted(types, key=str)


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
def test_no_numpy_scalar_type_converts_silently(transform):
    # Every NumPy scalar type there is (a new one is tried too).
    silent = []
    for scalar_type in _numpy_scalar_types():
        try:
            TRANSFORMS[transform](_converting(scalar_type))
        except ConcretizationError:
            continue
        silent.append(scalar_type.__name__)
    assert not silent, f"{silent} convert a traced value silently under {transform}"


def _math_functions_of_one_float():
    names = []
    for name in dir(math):
        func = getattr(math, name)
        if not callable(func):
            continue
        try:
            func(1.5)
        except (TypeError, ValueError):
            continue
        names.append(name)
    return names


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
def test_no_math_function_converts_silently(transform):
    names = _math_functions_of_one_float()
    assert {"sqrt", "exp", "floor", "isnan", "trunc", "lgamma"} <= set(names)
    silent = []
    for name in names:
        try:
            TRANSFORMS[transform](_converting(getattr(math, name)))
        except ConcretizationError:
            continue
        silent.append(name)
    assert not silent, f"math.{silent} convert a traced value silently under {transform}"


def test_every_conversion_protocol_of_a_tracer_is_tried_here():
    # A conversion method added to the tracer base class must be added to CONVERSIONS.
    protocols = {"__float__", "__int__", "__complex__", "__index__", "__round__", "__trunc__",
                 "__floor__", "__ceil__", "__format__", "__bytes__", "__array__", "item",
                 "tolist", "tobytes"}  # fmt: skip
    defined = protocols & set(vars(autodiff.core.tracer.Tracer))
    covered = {"__float__", "__int__", "__complex__", "__index__", "__round__", "__trunc__",
               "__format__", "__array__", "item", "tolist"}  # fmt: skip
    assert defined <= covered, f"try {defined - covered} in CONVERSIONS"


# --- the messages: what was done, and the fix, first ------------------------------------


def _error(transform, conversion):
    with pytest.raises(ConcretizationError) as info:
        TRANSFORMS[transform](_converting(conversion))
    return str(info.value)


def _first_sentence(message):
    """The first sentence, its levels written with 3 digits (tests/test_messages.py)."""
    first = re.split(r"(?<=[.!?])\s", message, maxsplit=1)[0]
    return re.sub(r"\(level \d+\)", "(level 999)", first)


@pytest.mark.parametrize(
    ("conversion", "fix"),
    [
        (lambda s: float(s), "float(autodiff.stop_gradient(s))"),
        (lambda s: s.item(), "autodiff.stop_gradient(s).item()"),
        (lambda s: math.sqrt(s), "anp.sqrt(s)"),
        (lambda s: np.float64(s), "anp.float64(s)"),
        (lambda s: np.asarray(s), "anp.asarray(s)"),
        (lambda s: np.array([s, 2 * s]), "anp.array([s, 2 * s])"),
        (lambda s: np.mean([s, 2 * s]), "anp.mean([s, 2 * s])"),
    ],
    ids=["float", "item", "math.sqrt", "np.float64", "np.asarray", "np.array", "np.mean"],
)
@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_the_first_sentence_names_the_conversion_and_its_fix(conversion, fix, transform):
    first = _first_sentence(_error(transform, conversion))
    assert len(first) <= 200, first
    assert f"{transform} (level" in first, first
    if QUOTES:
        assert fix in first, first
    else:
        assert "stop_gradient" in first or "anp." in first, first


def test_the_rest_of_the_message_says_how_to_see_and_log_a_value():
    message = _error("grad", lambda s: float(s))
    assert "print(x)" in message and "has_aux=True" in message
    assert "bool() and comparisons" in message  # what still works


def test_python_control_flow_on_a_batched_value_names_where_and_cond():
    def relu(x):
        return x if x > 0 else 0.0 * x

    with pytest.raises(ConcretizationError) as info:
        vmap(relu)(np.array([-1.0, 2.0]))
    first = _first_sentence(str(info.value))
    assert len(first) <= 200, first
    assert "anp.where(" in first and "autodiff.cond(" in first, first
    if QUOTES:
        assert first.startswith("the condition x > 0 needs one truth value"), first


# --- the error is what reaches the user's code -------------------------------------------


@pytest.mark.parametrize("transform", ["grad", "jvp", "vmap"])
def test_a_store_into_a_plain_array_ends_on_our_error(transform):
    # NumPy converts with float() and raises its own "setting an array element with a
    # sequence" in our error's place; ours is surfaced where the store is.
    with pytest.raises(ConcretizationError) as info:
        TRANSFORMS[transform](_converting(_store))
    first = _first_sentence(str(info.value))
    assert len(first) <= 200, first
    assert "into a plain NumPy array" in first, first
    if QUOTES:
        assert "out = anp.at(out)[0].set(x)" in first, first
    assert sys.gettrace() is None  # the tracing that surfaced it is off again


def test_the_anp_at_spelling_the_store_error_gives_works():
    def f(x):
        out = np.zeros(3)
        out = anp.at(out)[0].set(x)
        return (out * np.arange(1.0, 4.0)).sum() + x

    assert grad(f)(1.5) == 2.0


def test_percent_d_ends_on_our_error():
    # Python's %d swallows a TypeError from __int__ and raises its own.
    with pytest.raises(ConcretizationError, match="stop_gradient"):
        grad(_converting(lambda x: "%d" % x))(1.5)  # noqa: UP031


def test_a_debuggers_trace_function_survives_a_surfaced_error():
    # With a trace function installed, replacing the exception would switch it off
    # (Python drops a trace function that raises): NumPy's exception keeps its class and
    # takes our message instead.
    calls = []

    def tracer(frame, event, arg):
        calls.append(event)
        return None

    sys.settrace(tracer)
    try:
        with pytest.raises(ValueError, match="into a plain NumPy array") as info:
            grad(_converting(_store))(1.5)
        assert sys.gettrace() is tracer
    finally:
        sys.settrace(None)
    assert isinstance(info.value.__cause__, ConcretizationError)
    assert calls  # it kept tracing


def test_an_error_caught_in_the_same_frame_is_ours_and_tracing_is_off():
    seen = []

    def f(x):
        try:
            float(x)
        except ConcretizationError as e:
            seen.append(type(e))
        out = np.zeros(2)
        try:
            out[0] = x
        except ConcretizationError as e:
            seen.append(type(e))
        return x * 2.0

    assert grad(f)(1.0) == 2.0
    assert seen == [ConcretizationError] * 2
    assert sys.gettrace() is None


# --- conversions that keep meaning ----------------------------------------------------------


@pytest.mark.parametrize("transform", ["grad", "jvp"])
def test_python_control_flow_on_a_differentiated_value_works(transform):
    def f(x):
        if x > 0 and bool(x < 10) and x != 3:
            return x * x
        return -x

    out = TRANSFORMS[transform](f)
    slope = out if transform == "grad" else out[1]
    assert float(slope) == 3.0  # 2 x at x = 1.5


def test_a_constant_on_purpose_converts():
    def f(x):
        return x * float(stop_gradient(x))  # the value, as a constant

    def g(x):
        with no_grad():  # reverse mode's: grad does not differentiate this block
            offset = float(x) + np.asarray(x).sum()
        return x + offset

    assert grad(f)(1.5) == 1.5 and grad(g)(1.5) == 1.0
    assert jvp(f, (1.5,), (1.0,))[1] == 1.5
    with pytest.raises(ConcretizationError, match="jvp"):  # no_grad concerns reverse mode
        jvp(g, (1.5,), (1.0,))
    with pytest.raises(ConcretizationError, match="vmap"):  # still no one value per batch
        vmap(grad(f))(np.array([1.5, 2.5]))


def test_print_shows_the_value_under_grad_and_jvp(capsys):
    def f(x):
        print(x)
        print(f"{x}")
        return (x * x).sum()

    grad(f)(np.array([1.5, -2.0]))
    grad_lines = capsys.readouterr().out.splitlines()
    assert grad_lines[0].startswith("GradTensor(value=array([ 1.5, -2. ]), grad (level ")
    assert grad_lines[1] == grad_lines[0]
    jvp(f, (np.array([1.5, -2.0]),), (np.array([1.0, 0.0]),))
    shown = capsys.readouterr().out.splitlines()[0]
    assert shown.startswith("DualTensor(primal=array([ 1.5, -2. ]), tangent=array([1., 0.]), ")
    vmap(f)(np.array([[1.5], [2.5]]))
    shown = capsys.readouterr().out
    assert shown.startswith("BatchedTensor(value=array([[1.5],\n")
    assert "[2.5]]), bdim=0, vmap (level " in shown


def test_round_with_digits_stays_traced():
    assert grad(lambda x: round(x, 1) * x)(1.26) == pytest.approx(1.3)
