"""Fault injection: an exception raised anywhere inside a transform (a primitive's
implementation, its VJP, JVP or batching rule, or the user's function) propagates
unchanged and leaves the library as it found it.

The matrix is explicit: every transform alone (``SINGLE``) and every nesting of two
of the main transforms (``NESTED``), times every place the computation calls user
code (``SITES``, only those the computation reaches), times the first and the last
call at that place.  Each case checks, after the fault: the very exception that was
raised reached the caller (same object, type and message); the interpreter stack is
empty; ``no_grad``'s context variable is reset; every dispatch still resolves from
the dispatch tables; and the same computation, fault disarmed, gives the reference result
computed before the fault.
"""

from __future__ import annotations

import collections

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
    no_grad,
    value_and_grad,
    vjp,
    vmap,
)
from autodiff.core.dispatch import DispatchPoint
from autodiff.debug import rule_checks as _validate
from autodiff.extend import Primitive, current_interpreters
from autodiff.interpreters import reverse as _reverse


class InjectedFault(Exception):
    """Raised by the fault injector (a class no library code catches on purpose)."""


class Injector:
    """Counts the calls at each site; raises at the ``k``-th call of the armed site."""

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()
        self.armed: tuple | None = None
        self.raised: BaseException | None = None
        self.exception = InjectedFault

    def tick(self, site: str) -> None:
        self.counts[site] += 1
        if self.armed == (site, self.counts[site]):
            self.armed = None  # one fault per run
            self.raised = self.exception(f"injected fault at {site} call {self.counts[site]}")
            raise self.raised

    def reset(self, armed: tuple | None = None, exception: type = InjectedFault) -> None:
        self.counts.clear()
        self.armed, self.raised, self.exception = armed, None, exception


FAULT = Injector()


def _impl(x):
    FAULT.tick("impl")
    return np.sin(x)


def _vjp(ct, ans, x):
    FAULT.tick("vjp")
    return ct * anp.cos(x)


def _jvp(t, ans, x):
    FAULT.tick("jvp")
    return t * anp.cos(x)


def _batch(args, dims):
    FAULT.tick("batch")
    return fsin.bind(args[0]), dims[0]


# sin, with every rule counted.  The rules are written with primitives, so they are
# themselves differentiated and batched under nested transforms.
fsin = Primitive("fsin", _impl, vjp=[_vjp], jvp=[_jvp], batch=_batch)


def f(x):
    """The user's function, (3,) -> (3,), elementwise: sin(x) x + sin(x^2) / 2."""
    FAULT.tick("user")
    return fsin.bind(x) * x + 0.5 * fsin.bind(x * x)


def df(x):  # by hand
    return np.cos(x) * x + np.sin(x) + x * np.cos(x * x)


def d2f(x):
    return -np.sin(x) * x + 2 * np.cos(x) + np.cos(x * x) - 2 * x * x * np.sin(x * x)


X = np.array([0.3, -0.8, 1.1])
V = np.array([1.0, -2.0, 0.5])  # a tangent / cotangent / contraction vector


def total(func):
    return lambda y: anp.sum(func(y))


# --- the transforms, each as (func: (3,) -> (3,)) -> (x -> (3,)), so they nest ---------


def t_grad(func):
    return lambda x: grad(total(func))(x)


def t_vjp(func):
    def run(x):
        _, vjp_fn = vjp(func, x)
        return vjp_fn(V)[0]

    return run


def t_jvp(func):
    return lambda x: jvp(func, (x,), (V,))[1]


def t_vmap(func):
    return lambda x: vmap(func)(anp.stack([x, 0.5 * x])).sum(0)


def t_jacrev(func):
    return lambda x: jacrev(func)(x) @ V


def t_jacfwd(func):
    return lambda x: jacfwd(func)(x).sum(0)


def t_linearize(func):
    def run(x):
        _, jvp_fn = linearize(func, x)
        return jvp_fn(V)

    return run


MAIN = {
    "grad": t_grad,
    "vjp": t_vjp,
    "jvp": t_jvp,
    "vmap": t_vmap,
    "jacrev": t_jacrev,
    "jacfwd": t_jacfwd,
    "linearize": t_linearize,
}


# --- every transform once, with its own calling convention -----------------------------


def _vjp_later(x):
    """vjp now, the vjp_fn call later (after other work): the fault hits the later call."""
    out, vjp_fn = vjp(f, x)
    other = grad(lambda y: y * y)(2.0)  # unrelated work in between
    return out, vjp_fn(V), other


def _linearize_later(x):
    out, jvp_fn = linearize(f, x)
    return out, jvp_fn(V), jvp_fn(2.0 * V)


@custom_vjp
def f_custom_vjp(x):
    return f(x)


# fwd runs f; bwd is f's own VJP, so both reach every site grad reaches
f_custom_vjp.defvjp(lambda x: (f(x), x), lambda x, ct: vjp(f, x)[1](ct))


@custom_jvp
def f_custom_jvp(x):
    return f(x)


@f_custom_jvp.defjvp
def _f_custom_jvp_rule(primals, tangents):
    return jvp(f, primals, tangents)


def _no_grad_block(x):
    def g(y):
        with no_grad():
            c = anp.sum(f(y))  # a constant for grad: contributes c * 1 to the value only
        return anp.sum(f(y)) * c

    return grad(g)(x)


SINGLE = {
    **{name: make(f) for name, make in MAIN.items()},
    "grad_and_value": lambda x: grad_and_value(total(f))(x),
    "value_and_grad": lambda x: value_and_grad(total(f))(x),
    "vjp_fn_later": _vjp_later,
    "jvp_fn_later": _linearize_later,
    "hessian": lambda x: hessian(total(f))(x),
    "checkpoint": lambda x: grad(total(checkpoint(f)))(x),
    "vmap_checkpoint": lambda x: vmap(checkpoint(f))(np.stack([x, 2 * x])),
    "custom_vjp": lambda x: grad(total(f_custom_vjp))(x),
    "custom_jvp_jvp": lambda x: jvp(f_custom_jvp, (x,), (V,)),
    "custom_jvp_grad": lambda x: grad(total(f_custom_jvp))(x),
    "no_grad": _no_grad_block,
    "explain": lambda x: explain(t_grad(f))(x).result,
    "explain_vmap": lambda x: explain(t_vmap(f))(x).result,
}

# explain(vmap(...)) also runs each batched primitive's implementation on example 0 to
# show its per-example shapes, after the real call; a fault there is explain's own
# (test_explain_hides_a_fault_in_its_own_example_run), not the computation's.
EXPLAINS_OWN_CALL = {("explain_vmap", "impl", 2), ("explain_vmap", "impl", 4)}

NESTED = {f"{o}({i})": MAIN[o](MAIN[i](f)) for o in MAIN for i in MAIN}

SITES = ("impl", "vjp", "jvp", "batch", "user")


# The references, and the number of calls at each site, from one clean run of each.
REFERENCE: dict = {}
COUNTS: dict = {}


def _cases(table):
    """(name, site, k) for the first and the last call at every site ``run`` reaches."""
    cases = []
    for name, run in table.items():
        FAULT.reset()
        REFERENCE[name] = run(X)
        COUNTS[name] = counts = dict(FAULT.counts)
        for site in SITES:
            n = counts.get(site, 0)
            for k in sorted({1, n}) if n else ():
                if (name, site, k) not in EXPLAINS_OWN_CALL:
                    cases.append(pytest.param(name, site, k, id=f"{name}-{site}-{k}of{n}"))
    return cases


SINGLE_CASES = _cases(SINGLE)
NESTED_CASES = _cases(NESTED)
TABLE = {**SINGLE, **NESTED}


def assert_same(actual, expected):
    """Equal, leaf by leaf, bit for bit: the same computation on the same inputs."""
    a_leaves, e_leaves = optree.tree_leaves(actual), optree.tree_leaves(expected)
    assert optree.tree_structure(actual) == optree.tree_structure(expected)
    for a, e in zip(a_leaves, e_leaves, strict=True):
        assert type(a) is type(e)
        np.testing.assert_array_equal(a, e, strict=True)


def _probe():
    """A small computation through every interpreter kind and the lift/process dispatch points."""
    per_example = vmap(grad(lambda y: anp.sum(anp.sin(y) * y)))(np.ones((2, 3)))
    hvp = jvp(grad(lambda y: anp.sum(y**3)), (np.ones(3),), (V,))[1]
    np.testing.assert_allclose(per_example, np.cos(1.0) + np.sin(1.0) + np.zeros((2, 3)))
    np.testing.assert_allclose(hvp, 6.0 * V)


def assert_clean():
    """No interpreter, no no_grad level, and dispatch still served by its tables."""
    assert current_interpreters() == ()
    assert _reverse.no_grad_below.get() == 0
    assert not _validate.checking.get()
    slow = []
    resolve = DispatchPoint.resolve
    with pytest.MonkeyPatch.context() as patch:  # bind asks plum only on a table miss
        patch.setattr(
            DispatchPoint, "resolve", lambda self, *t: slow.append(t) or resolve(self, *t)
        )
        _probe()
    assert slow == [], f"dispatch missed its tables after the fault: {slow}"


def arm(site, k, exception=InjectedFault):
    """Raise ``exception`` at the ``k``-th call at ``site`` from now on."""
    _probe()  # every dispatch the probe makes is now in the tables (see assert_clean)
    FAULT.reset((site, k), exception)


def _inject(run, site, k, exception=InjectedFault):
    arm(site, k, exception)
    with pytest.raises(exception) as info:
        run(X)
    assert FAULT.raised is not None, "the fault was never reached"
    assert info.value is FAULT.raised  # the very exception: type and message unchanged
    assert str(info.value) == f"injected fault at {site} call {k}"
    FAULT.reset()


# --- the matrix --------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "site", "k"), SINGLE_CASES + NESTED_CASES)
def test_fault_propagates_and_leaves_the_library_clean(name, site, k):
    run = TABLE[name]
    _inject(run, site, k)
    assert_clean()
    assert_same(run(X), REFERENCE[name])  # same function, fault disarmed
    assert dict(FAULT.counts) == COUNTS[name]  # and the same work


def test_the_matrix_spans_every_transform_site_and_nesting():
    names = {case.values[0] for case in SINGLE_CASES + NESTED_CASES}
    assert names == set(TABLE)
    reached = {site for case in SINGLE_CASES for site in [case.values[1]]}
    assert reached == set(SITES)
    assert len(NESTED) == len(MAIN) ** 2
    # every nesting reaches the user's function, the implementation and a derivative rule
    for name in NESTED:
        assert {"user", "impl"} <= COUNTS[name].keys()
        assert COUNTS[name].keys() & {"vjp", "jvp", "batch"}


def test_references_match_hand_derived_derivatives():
    x, d1, d2 = X, df(X), d2f(X)
    fx = np.sin(x) * x + 0.5 * np.sin(x * x)
    expected = {
        "grad": d1,
        "vjp": d1 * V,
        "jvp": d1 * V,
        "vmap": fx + np.sin(0.5 * x) * 0.5 * x + 0.5 * np.sin(0.25 * x * x),
        "jacrev": d1 * V,
        "jacfwd": d1,
        "linearize": d1 * V,
        "hessian": np.diag(d2),
        "checkpoint": d1,
        "custom_vjp": d1,
        "custom_jvp_grad": d1,
        "no_grad": d1 * fx.sum(),
        "explain": d1,
        "grad(grad)": d2,
        "jvp(grad)": d2 * V,
        "jacfwd(jacrev)": d2 * V,
        "vmap(jvp)": d1 * V + df(0.5 * x) * V,
    }
    for name, value in expected.items():
        np.testing.assert_allclose(REFERENCE[name], value, rtol=1e-12, err_msg=name)
    np.testing.assert_allclose(REFERENCE["grad_and_value"][0], d1, rtol=1e-12)
    np.testing.assert_allclose(REFERENCE["value_and_grad"][1], d1, rtol=1e-12)
    np.testing.assert_allclose(REFERENCE["custom_jvp_jvp"][1], d1 * V, rtol=1e-12)


def test_explain_hides_a_fault_in_its_own_example_run():
    # The real call of fsin succeeded; explain's extra run on example 0 (for the table's
    # per-example shapes) raised: the computation is unaffected, the shape unknown.
    arm("impl", 2)
    explanation = explain(t_vmap(f))(X)
    assert isinstance(FAULT.raised, InjectedFault)
    assert_same(explanation.result, REFERENCE["explain_vmap"])
    first = next(call for call in explanation.calls if call.prim == "fsin")
    assert [stage.out for stage in first.stages] == [None, ("f64[2,3]",)]
    FAULT.reset()
    assert_clean()


# --- built-in exception types -------------------------------------------------------------

BUILTIN_EXCEPTIONS = [
    ValueError,
    TypeError,
    RuntimeError,
    ZeroDivisionError,
    FloatingPointError,
    OverflowError,
    KeyError,
    IndexError,
    AttributeError,
    NotImplementedError,
    AssertionError,
    StopIteration,  # the transforms' context managers are generators: it must not vanish
    RecursionError,
    MemoryError,
    SystemExit,
    GeneratorExit,
]


@pytest.mark.parametrize("site", ["impl", "user"])
@pytest.mark.parametrize(
    "name", ["grad", "vjp_fn_later", "jvp", "vmap", "jacfwd", "hessian", "checkpoint",
             "custom_vjp", "custom_jvp_grad", "no_grad", "explain", "vmap(grad)"],
)  # fmt: skip
@pytest.mark.parametrize("exception", BUILTIN_EXCEPTIONS, ids=lambda e: e.__name__)
def test_builtin_exceptions_propagate_with_their_type_and_message(exception, name, site):
    run = TABLE[name]
    arm(site, 1, exception)
    with pytest.raises(exception) as info:
        run(X)
    raised, caught = FAULT.raised, info.value
    assert raised is not None
    # The same exception; or, where the library adds context, an instance of the same
    # type that names the original and chains it.
    assert caught is raised or (
        isinstance(caught, exception) and caught.__cause__ is raised and str(raised) in str(caught)
    ), repr(caught)
    FAULT.reset()
    assert_clean()
    assert_same(run(X), REFERENCE[name])


# --- a fault in a function kept for later ---------------------------------------------------


@pytest.mark.parametrize("k", [1, 2])
def test_vjp_fn_that_raised_can_be_called_again(k):
    _, vjp_fn = vjp(f, X)
    arm("vjp", k)
    with pytest.raises(InjectedFault):
        vjp_fn(V)
    FAULT.reset()
    assert_clean()
    np.testing.assert_allclose(vjp_fn(V)[0], df(X) * V, rtol=1e-12)  # the tape is intact
    np.testing.assert_allclose(vjp_fn(2 * V)[0], 2 * df(X) * V, rtol=1e-12)


@pytest.mark.parametrize("k", [1, 2])
def test_linearize_jvp_fn_that_raised_can_be_called_again(k):
    _, jvp_fn = linearize(f, X)
    arm("jvp", k)
    with pytest.raises(InjectedFault):
        jvp_fn(V)
    FAULT.reset()
    assert_clean()
    np.testing.assert_allclose(jvp_fn(V), df(X) * V, rtol=1e-12)


def test_vjp_fn_of_an_outer_transform_survives_a_fault_under_vmap():
    _, vjp_fn = vjp(f, X)
    arm("vjp", 2)
    with pytest.raises(InjectedFault):
        vmap(vjp_fn)(np.eye(3))
    FAULT.reset()
    assert_clean()
    np.testing.assert_allclose(vmap(vjp_fn)(np.eye(3))[0], np.diag(df(X)), rtol=1e-12)


# --- a fault caught inside an outer transform -------------------------------------------------


@pytest.mark.parametrize("outer", list(MAIN))
@pytest.mark.parametrize("inner", ["grad", "jvp", "vmap", "no_grad"])
def test_fault_caught_inside_an_outer_transform_leaves_the_outer_one_running(outer, inner):
    """The user catches a fault of an inner transform (or a no_grad block) and goes on:
    the outer transform is the only level left, and it still differentiates/batches."""
    stacks = []

    def g(y):
        before = current_interpreters()
        FAULT.reset(("impl", 2))
        try:
            if inner == "no_grad":
                with no_grad():
                    f(y)
            else:
                MAIN[inner](f)(y)
        except InjectedFault as e:  # the user's handler
            caught = (e, before, current_interpreters(), _reverse.no_grad_below.get())
            stacks.append(caught)
        FAULT.reset()
        return y * y * y  # recorded / batched by the outer transform as usual

    x = X
    cube = lambda y: y * y * y
    assert_same(MAIN[outer](g)(x), MAIN[outer](cube)(x))
    np.testing.assert_allclose(MAIN["grad"](cube)(x), 3 * x * x)
    (error, before, after, no_grad_level) = stacks[0]  # the fault was caught
    assert isinstance(error, InjectedFault) and str(error) == "injected fault at impl call 2"
    assert len(before) >= 1 and after == before and no_grad_level == 0


# --- KeyboardInterrupt in the middle of a backward pass -------------------------------------


def assert_fully_usable():
    assert_clean()
    x = X
    np.testing.assert_allclose(grad(total(f))(x), df(x), rtol=1e-12)
    np.testing.assert_allclose(hessian(total(f))(x), np.diag(d2f(x)), rtol=1e-12)
    np.testing.assert_allclose(vmap(t_grad(f))(np.stack([x, -x])), [df(x), df(-x)], rtol=1e-12)
    _, vjp_fn = vjp(f, x)
    np.testing.assert_allclose(vjp_fn(V)[0], df(x) * V, rtol=1e-12)
    np.testing.assert_allclose(jvp(t_grad(f), (x,), (V,))[1], d2f(x) * V, rtol=1e-12)


KEYBOARD_INTERRUPT_CASES = {  # each with a VJP rule call in the middle of a backward pass
    "grad": (t_grad(f), 2),
    "vjp_fn": (t_vjp(f), 2),
    "jacrev": (t_jacrev(f), 2),
    "hessian": (SINGLE["hessian"], 2),
    "checkpoint": (SINGLE["checkpoint"], 2),
    "vmap(grad)": (NESTED["vmap(grad)"], 2),
    "grad(grad)": (NESTED["grad(grad)"], 2),
    "jvp(grad)": (NESTED["jvp(grad)"], 1),
}


@pytest.mark.parametrize("name", list(KEYBOARD_INTERRUPT_CASES))
def test_keyboard_interrupt_in_a_vjp_rule_propagates_and_the_library_stays_usable(name):
    run, k = KEYBOARD_INTERRUPT_CASES[name]
    FAULT.reset()
    reference = run(X)
    assert FAULT.counts["vjp"] >= k
    _inject(run, "vjp", k, exception=KeyboardInterrupt)
    assert_fully_usable()
    assert_same(run(X), reference)


# --- re-running a notebook cell after an error ------------------------------------------------


# The cell's global, as first (wrongly) typed: a shape error deep inside the trace.
W_CELL = np.ones((2, 4))


def cell(x):
    h = anp.tanh(W_CELL @ x)  # (3,) -> (3,) once W_CELL is fixed
    return h * x


def d_cell(x, w):
    """The Jacobian of tanh(w @ x) * x, by hand: diag(h) + diag(x (1 - h^2)) w."""
    h = np.tanh(w @ x)
    return np.diag(h) + (x * (1 - h * h))[:, None] * w


NOTEBOOK = {
    "grad": (lambda x: grad(total(cell))(x), lambda J: J.sum(0)),
    "grad_and_value": (lambda x: grad_and_value(total(cell))(x)[0], lambda J: J.sum(0)),
    "value_and_grad": (lambda x: value_and_grad(total(cell))(x)[1], lambda J: J.sum(0)),
    "vjp": (t_vjp(cell), lambda J: V @ J),
    "jvp": (t_jvp(cell), lambda J: J @ V),
    "vmap": (lambda x: vmap(cell)(np.stack([x, x]))[1], None),
    "jacrev": (lambda x: jacrev(cell)(x), lambda J: J),
    "jacfwd": (lambda x: jacfwd(cell)(x), lambda J: J),
    "linearize": (t_linearize(cell), lambda J: J @ V),
    "checkpoint": (lambda x: jacrev(checkpoint(cell))(x), lambda J: J),
    "vmap(grad)": (lambda x: vmap(t_grad(cell))(np.stack([x, x]))[0], lambda J: J.sum(0)),
    "jvp(grad)": (lambda x: jvp(t_grad(cell), (x,), (V,))[0], lambda J: J.sum(0)),
    "explain": (lambda x: explain(jacrev(cell))(x).result, lambda J: J),
}


@pytest.mark.parametrize("name", list(NOTEBOOK))
def test_rerunning_a_cell_after_an_error_gives_the_right_result(name):
    global W_CELL
    run, from_jacobian = NOTEBOOK[name]
    W_CELL = np.ones((2, 4))  # first run: a shape error in matmul, deep inside the trace
    with pytest.raises(ValueError, match="matmul"):
        run(X)
    assert current_interpreters() == () and _reverse.no_grad_below.get() == 0
    w = np.array([[0.5, -1.0, 0.2], [0.3, 0.1, -0.7], [1.0, 0.4, 0.0]])
    W_CELL = w  # the cell fixed; run again
    try:
        out = run(X)
    finally:
        W_CELL = np.ones((2, 4))
    expected = np.tanh(w @ X) * X if from_jacobian is None else from_jacobian(d_cell(X, w))
    np.testing.assert_allclose(out, expected, rtol=1e-12)
