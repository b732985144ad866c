"""The dispatch points: ``process`` is found by the types of interpreter and primitive,
``lift`` by the types of interpreter and value, through tables bind owns; registering a
method refills them; only concrete classes are dispatched on; plum is used through its
public API only."""

import pathlib
import re
import typing

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, vmap
from autodiff.core.dispatch import DispatchPoint, dispatch
from autodiff.core.primitive import Primitive, lift, process
from autodiff.core.stack import Interpreter, new_interpreter, owned
from autodiff.core.tracer import Tracer
from autodiff.interpreters import batching as _batching
from autodiff.interpreters import explain as _explain
from autodiff.interpreters import forward as _forward
from autodiff.interpreters import reverse as _reverse
from autodiff.interpreters.batching import BatchInterpreter
from autodiff.interpreters.explain import ExplainInterpreter
from autodiff.interpreters.forward import JvpInterpreter
from autodiff.interpreters.reverse import GradInterpreter
from autodiff.transforms import custom as _custom
from autodiff.transforms.custom import CustomVJPPrimitive

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_each_method_is_found_by_the_kinds_of_interpreter_and_primitive():
    assert process.resolve(GradInterpreter, Primitive) is _reverse._record
    assert process.resolve(JvpInterpreter, Primitive) is _forward._push_tangents
    assert process.resolve(BatchInterpreter, Primitive) is _batching._batch
    assert process.resolve(ExplainInterpreter, Primitive) is _explain._record_call
    # reverse mode treats a custom_vjp primitive on its own; the others like any other
    assert process.resolve(GradInterpreter, CustomVJPPrimitive) is _custom._grad_of_custom_vjp
    assert process.resolve(BatchInterpreter, CustomVJPPrimitive) is _batching._batch
    assert process.resolve(JvpInterpreter, CustomVJPPrimitive) is _forward._push_tangents
    # lift: by interpreter and value; a constant and a lower-level tracer alike
    assert lift.resolve(BatchInterpreter, float) is _batching._lift_batched
    assert lift.resolve(BatchInterpreter, _reverse.GradTensor) is _batching._lift_batched
    assert lift.resolve(JvpInterpreter, np.ndarray) is _forward._lift_dual
    with pytest.raises(NotImplementedError, match="Interpreter registers no process method"):
        process(Interpreter(), anp.sin.primitive, (), {})


class Square(Primitive):
    """A kind of primitive of this test's own."""

    __slots__ = ()


square_p = Square("square_of_this_test", lambda x: x * x, vjp=[lambda ct, ans, x: 2.0 * ct * x])


def test_a_method_registered_after_a_call_is_used_by_the_next_one():
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(grad(lambda x: anp.sum(square_p.bind(x)))(x), 2 * x)
    assert (GradInterpreter, Square) in process.table  # filled by the call, with grad's method
    seen = []

    @process.register(GradInterpreter, Square)
    def _grad_of_square(interp, prim, args, params):
        seen.append(prim.name)
        return _reverse._record(interp, prim, args, params)

    assert (GradInterpreter, Square) not in process.table  # registering cleared it
    np.testing.assert_array_equal(grad(lambda x: anp.sum(square_p.bind(x)))(x), 2 * x)
    assert seen == ["square_of_this_test"]
    assert process.resolve(GradInterpreter, Square) is _grad_of_square
    assert process.resolve(BatchInterpreter, Square) is _batching._batch  # others unchanged


def test_only_concrete_classes_are_dispatched_on():
    for kind in (Square | Primitive, typing.Union[Square, Primitive], list[int]):  # noqa: UP007
        with pytest.raises(TypeError, match="dispatch only on concrete classes"):
            process.register(GradInterpreter, kind)
    with pytest.raises(TypeError, match="takes 2 types"):
        process.register(GradInterpreter)
    with pytest.raises(TypeError, match="registers methods of \\['lift', 'process'\\]"):

        @dispatch
        def transform(interp: GradInterpreter, x: object):
            return x


class Doubling(Interpreter):
    __slots__ = ()
    transform = "doubling"


class Doubled(Tracer):
    __slots__ = ("value",)

    def __init__(self, interp, value):
        self._interp, self.value = interp, value

    @property
    def _inner(self):
        return self.value


# The spelling of autodiff.extend before dispatch points: by name and annotations.
@dispatch
def lift(interp: Doubling, x: object):  # noqa: F811
    return Doubled(interp, x)


@dispatch
def process(interp: Doubling, prim: Primitive, args: tuple, params: dict):  # noqa: F811
    out = prim.bind(*[2 * a.value for a in args], **params)  # every input counted twice
    return Doubled(interp, out)


def test_the_older_spelling_registers_by_name_and_annotations():
    from autodiff.core import primitive as _core

    assert lift is _core.lift and process is _core.process  # @dispatch returns the point
    assert process.resolve(Doubling, Primitive).__name__ == "process"

    def doubled(f, x):
        interp = Doubling()
        with new_interpreter(interp):
            out = f(Doubled(interp, x))
            return out.value if owned(interp, out) is not None else out

    # each primitive doubles its inputs: d + 1.0 is 2x + 2, then sin(2 (2x + 2)); under
    # vmap and grad its derivative is 4 cos(4x + 4)
    xs = np.array([0.1, 0.2])
    got = vmap(grad(lambda x: doubled(lambda d: anp.sin(d + 1.0), x)))(xs)
    np.testing.assert_allclose(got, 4 * np.cos(4 * xs + 4), rtol=1e-12)


def test_a_method_with_a_return_annotation_goes_through_plums_conversion():
    point = DispatchPoint("annotated", lambda a: ("default", a), (object,))

    @point.register(int)
    def _for_ints(a) -> tuple:
        return ("int", a)

    assert point(3) == ("int", 3) and point("s") == ("default", "s")
    assert point.resolve(int) is not _for_ints  # plum's invoke, which converts the result
    assert point.resolve(str).__name__ == "<lambda>"


def test_plum_is_used_through_its_public_api_only():
    private = re.compile(r"\._(cache|pending|resolver|resolved|resolve_pending\w*)\b")
    offenders = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in (ROOT / "autodiff").rglob("*.py")
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if private.search(line)
    ]
    assert offenders == []
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert (
        re.search(r'"plum-dispatch>=[\d.]+"', pyproject) and "plum-dispatch>=2.5,<" not in pyproject
    )


def _subclasses(cls: type) -> list[type]:
    out = [cls]
    for sub in cls.__subclasses__():
        out += _subclasses(sub)
    return out


def test_the_tables_are_filled_as_plum_would_fill_them():
    """bind's misses are resolved without plum where the choice is plain (one most
    specific method, no return annotation): every pair of the package's interpreter
    and primitive (or value) classes gets plum's own answer."""
    import importlib

    import autodiff
    import autodiff.scipy.special  # (more primitive classes)

    for module, _ in autodiff._LAZY.values():  # and those of the modules that wait for first use
        importlib.import_module(module)

    values = [float, int, np.ndarray, np.float64, Tracer, *_subclasses(Tracer)]
    for shared, seconds in ((process, _subclasses(Primitive)), (lift, values)):
        # the package's registrations (the tests' @dispatch ones, by annotations, are plum's)
        default, *methods = shared._registered
        point = DispatchPoint(shared.name, default[0], default[1][: shared.on], shared.rest)
        for method, types, precedence in methods:
            if types is not None:
                point._add(method, types, precedence)
        for first in _subclasses(Interpreter):
            for second in seconds:
                ours = point._most_specific((first, second))
                plums = point._resolve_with_plum((first, second))
                assert ours in (None, plums), (point.name, first, second)
                assert ours is not None, f"{point.name}{(first, second)} needs plum"


def test_an_ambiguous_or_missing_method_is_left_to_plum():
    import plum

    point = DispatchPoint("pair", lambda a, b: "default", (int, int))
    point.register(bool, int)(lambda a, b: "bool first")
    point.register(int, bool)(lambda a, b: "bool second")
    assert point(True, 2) == "bool first" and point(2, True) == "bool second"
    with pytest.raises(plum.AmbiguousLookupError):
        point(True, False)  # two methods as specific, neither of higher precedence
    with pytest.raises(plum.NotFoundLookupError):
        point(2.0, 1)
    # as specific, but of higher precedence: chosen without plum's help
    ranked = DispatchPoint("ranked", lambda a, b: "default", (int, int))
    ranked._add(lambda a, b: "bool first", (bool, int), precedence=0)
    ranked._add(lambda a, b: "bool second", (int, bool), precedence=1)
    assert ranked(True, False) == "bool second" and ranked._function is None  # (no plum)
