"""Misuse gets an exception that names what was wrong and what to do, and the
exception classes subclass the matching built-ins."""

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import autodiff.errors
import autodiff.numpy as anp
from autodiff import grad, jvp, value_and_grad, vjp, vmap
from autodiff.core.primitive import Primitive
from autodiff.errors import (
    AutodiffError,
    AutodiffWarning,
    ConcretizationError,
    MissingRuleError,
    TransformTypeError,
    TransformValueError,
    UnsupportedFunctionError,
)

x3 = np.array([1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    ("cls", "builtin"),
    [
        (TransformTypeError, TypeError),
        (TransformValueError, ValueError),
        (ConcretizationError, TypeError),
        (MissingRuleError, NotImplementedError),
        (UnsupportedFunctionError, TypeError),
        (autodiff.errors.LeakedTracerError, RuntimeError),
        (autodiff.errors.RuleError, ValueError),
    ],
)
def test_error_classes_subclass_base_and_builtin(cls, builtin):
    assert issubclass(cls, AutodiffError) and issubclass(cls, builtin)


# --- grad's output --------------------------------------------------------------------


def test_non_scalar_output_of_shape_one_gets_index_or_sum_hint():
    with pytest.raises(TransformValueError, match=r"shape \(1,\).*out\[0\].*out\.sum\(\)"):
        grad(lambda x: x * 2.0)(np.ones(1))


def test_non_scalar_output_names_its_shape():
    with pytest.raises(TransformValueError, match=r"scalar.*shape \(3,\)"):
        grad(lambda x: x * 2.0)(x3)


def test_tuple_output_without_has_aux_hints_has_aux():
    with pytest.raises(TransformTypeError, match="has_aux=True"):
        grad(lambda x: (x.sum(), x))(x3)


def test_integer_output_of_grad_raises():
    with pytest.raises(TransformTypeError, match="dtype int64"):
        grad(lambda x: anp.argmax(x))(x3)


def test_complex_output_of_grad_raises():
    with pytest.raises(TransformTypeError, match="complex"):
        grad(lambda x: x.sum() * (1 + 1j))(x3)


@pytest.mark.parametrize(
    "call",
    [
        lambda f: grad(f, has_aux=True)(1.0),
        lambda f: vjp(f, 1.0, has_aux=True),
        lambda f: jvp(f, (1.0,), (1.0,), has_aux=True),
    ],
    ids=["grad", "vjp", "jvp"],
)
@pytest.mark.parametrize(
    "returned", [lambda x: x * 2.0, lambda x: (x, x, x)], ids=["bare", "triple"]
)
def test_has_aux_output_must_be_a_pair(call, returned):
    with pytest.raises(TransformTypeError, match=r"has_aux=True.*pair \(output, aux\)"):
        call(returned)


# --- argnums --------------------------------------------------------------------------


@pytest.mark.parametrize("argnums", [1.0, "0", True, None, (0, "1"), [0.5]])
def test_argnums_of_wrong_kind_rejected_at_creation(argnums):
    with pytest.raises(TransformTypeError, match="argnums must be an int or a tuple of ints"):
        grad(lambda x, y: x * y, argnums=argnums)


def test_empty_argnums_rejected():
    with pytest.raises(TransformValueError, match="at least one"):
        grad(lambda x: x, argnums=())


@pytest.mark.parametrize(
    ("argnums", "msg"),
    [(2, "out of range"), (-3, "out of range"), ((0, 0), "repeat"), ((1, -1), "repeat")],
)
def test_argnums_out_of_range_or_duplicated(argnums, msg):
    with pytest.raises(TransformValueError, match=msg):
        value_and_grad(lambda x, y: x * y, argnums=argnums)(1.0, 2.0)


# --- inputs ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "msg"),
    [
        (3, "int 3.*floating-point.*3.0"),
        (True, "bool"),
        (np.arange(3), "dtype int64.*astype"),
        (np.array([True]), "dtype bool"),
        ("abc", "str, not an array"),
        (object(), "object, not an array"),
    ],
)
@pytest.mark.parametrize("transform", ["grad", "vjp", "jvp"])
def test_non_float_inputs_raise(value, msg, transform):
    f = lambda x: x
    call = {
        "grad": lambda: grad(lambda x: anp.sum(x))(value),
        "vjp": lambda: vjp(f, value),
        "jvp": lambda: jvp(f, (value,), (value,)),
    }[transform]
    with pytest.raises(TransformTypeError, match=msg):
        call()


def test_error_names_the_argument_position_and_path():
    with pytest.raises(TransformTypeError, match=r"argument 1\['n'\]"):
        grad(lambda x, p: x * p["w"], argnums=1)(1.0, {"w": 2.0, "n": 3})


@pytest.mark.parametrize(
    "transform", [grad, vmap, lambda f: vjp(f, 1.0), lambda f: jvp(f, (1.0,), (1.0,))]
)
def test_non_callable_func(transform):
    with pytest.raises(TransformTypeError, match="must be callable"):
        transform(42)


@pytest.mark.parametrize("flag", [1, "yes", None])
def test_has_aux_must_be_bool(flag):
    with pytest.raises(TransformTypeError, match="has_aux must be True or False"):
        grad(lambda x: x, has_aux=flag)


# --- vjp_fn cotangents ----------------------------------------------------------------


def test_cotangent_structure_mismatch():
    _, vjp_fn = vjp(lambda x: (x, x), x3)
    with pytest.raises(TransformValueError, match="cotangent structure"):
        vjp_fn(np.ones(3))
    with pytest.raises(TransformValueError, match="cotangent structure"):
        vjp_fn([np.ones(3), np.ones(3)])  # a list where the output is a tuple


def test_cotangent_shape_mismatch_names_both_shapes():
    _, vjp_fn = vjp(lambda x: x * 2.0, x3)
    with pytest.raises(TransformValueError, match=r"shape \(2,\).*shape \(3,\)"):
        vjp_fn(np.ones(2))


def test_vjp_fn_takes_exactly_one_argument():
    _, vjp_fn = vjp(lambda x, y: (x, y), 1.0, 2.0)
    with pytest.raises(TransformTypeError, match="exactly one argument"):
        vjp_fn(1.0, 1.0)


# --- jvp tangents ---------------------------------------------------------------------


def test_tangent_structure_and_shape_mismatch():
    with pytest.raises(TransformValueError, match="same structure"):
        jvp(lambda x, y: x * y, (1.0, 2.0), (1.0,))
    with pytest.raises(TransformValueError, match=r"shape \(2,\).*shape \(3,\)"):
        jvp(anp.sin, (x3,), (np.ones(2),))
    with pytest.raises(TransformTypeError, match="tuple"):
        jvp(anp.sin, x3, x3)


# --- vmap -----------------------------------------------------------------------------


def test_in_dims_structure_mismatch():
    with pytest.raises(TransformValueError, match=r"2 entries.*3 positional"):
        vmap(lambda a, b, c: a, in_dims=(0, 0))(x3, x3, x3)
    with pytest.raises(TransformValueError, match=r"in_dims\[0\].*does not match"):
        vmap(lambda p: p["a"], in_dims=({"b": 0},))({"a": x3})


def test_in_dims_out_of_range_names_argument_and_shape():
    with pytest.raises(TransformValueError, match=r"argument 1.*is 2.*shape \(3,\)"):
        vmap(lambda a, b: a * b, in_dims=(0, 2))(x3, x3)


def test_inconsistent_batch_sizes_name_each_argument():
    with pytest.raises(TransformValueError, match=r"argument 0 has size 3, argument 1 has size 2"):
        vmap(lambda a, b: a * b)(x3, np.ones(2))


def test_vmap_with_no_batched_input():
    with pytest.raises(TransformValueError, match="no input is batched"):
        vmap(lambda a: a, in_dims=None)(x3)
    with pytest.raises(TransformValueError, match="no input is batched"):
        vmap(lambda: 1.0)()


@pytest.mark.parametrize("spec", ["0", 1.5, (0, "x")])
def test_in_dims_of_wrong_kind(spec):
    with pytest.raises(TransformTypeError, match="int or None"):
        vmap(lambda a: a, in_dims=spec)


def test_out_dims_none_on_batched_output():
    with pytest.raises(TransformValueError, match="out_dims is None for output 0"):
        vmap(lambda a: a * 2.0, out_dims=None)(x3)


def test_batching_a_non_array():
    with pytest.raises(TransformValueError, match="is a str"):
        vmap(lambda a, s: a, in_dims=(0, 0))(x3, "abc")


def test_bad_chunk_size():
    with pytest.raises(TransformValueError, match="chunk_size"):
        vmap(lambda a: a, chunk_size=0)


# --- concrete values of traced values -------------------------------------------------


@pytest.mark.parametrize(
    "use",
    [
        bool,
        float,
        int,
        lambda t: t.item(),
        lambda t: np.asarray(t),
        lambda t: t.tolist(),
        lambda t: [1.0, 2.0][t.astype(np.int64)],
    ],
    ids=["bool", "float", "int", "item", "asarray", "tolist", "index"],
)
def test_concrete_value_of_batched_value_raises_with_where_hint(use):
    with pytest.raises(ConcretizationError, match=r"batched by vmap.*anp\.where"):
        vmap(use)(np.ones(2))


def test_only_bool_of_grad_and_dual_tracers_works():
    # Control flow keeps meaning under grad and jvp; float() and the like would drop the
    # derivative (tests/test_conversions.py tries every conversion).
    seen = []

    def f(x):
        seen.append(bool(x > 0))
        for convert in (float, int, lambda t: t.item()):
            with pytest.raises(ConcretizationError, match="stop_gradient"):
                convert(x)
        return x * 2.0

    grad(f)(3.0)
    jvp(f, (3.0,), (1.0,))
    assert seen == [True] * 2


def test_asarray_of_grad_tracer_raises_instead_of_dropping_the_derivative():
    with pytest.raises(ConcretizationError, match=r"drop the derivative.*stop_gradient"):
        grad(lambda x: np.asarray(x).sum())(x3)
    with pytest.raises(ConcretizationError, match=r"a @ x"):
        grad(lambda x: np.ones(3).dot(x))(x3)


def test_writing_a_tracer_into_a_numpy_array_raises():
    def f(x):
        out = np.zeros(3)
        out[0] = x
        return out.sum()

    # NumPy raises its own ValueError in our error's place; ours is surfaced in f.
    with pytest.raises(ConcretizationError, match=r"out = anp\.at\(out\)\[0\]\.set\(x\)"):
        grad(f)(1.0)


def test_a_constant_converted_on_purpose_and_stored_in_a_list_works():
    def f(x):
        cache = [0.0]
        cache[0] = float(autodiff.stop_gradient(x))  # a call, then a store of a plain float
        return x * cache[0]

    assert grad(f)(3.0) == 3.0


# --- missing rules and unsupported functions ------------------------------------------


@pytest.mark.parametrize(
    ("transform", "rule", "other", "name"),
    [
        (lambda f: grad(f)(1.0), "VJP", "JVP", "grad"),
        (lambda f: jvp(f, (1.0,), (1.0,)), "JVP", "VJP", "jvp"),
    ],
)
def test_missing_derivative_rules_name_primitive_rule_transform_and_fix(
    transform, rule, other, name
):
    mystery_p = Primitive("mystery", np.sin)  # neither a VJP nor a JVP rule
    pattern = (
        rf"'mystery' has no {rule} rule \(nor a {other} rule to transpose into one\), "
        rf"which {name} \(level \d+\) needs\. Add one with mystery_p\.def_{rule.lower()}"
    )
    with pytest.raises(MissingRuleError, match=pattern):
        transform(lambda x: mystery_p.bind(x))


def test_missing_batching_rule_loops_and_warns_once_naming_the_fix():
    lonely_p = Primitive("lonely", np.sin, differentiable=False)
    with pytest.warns(
        AutodiffWarning, match=r"'lonely' has no batching rule.*primitive's def_batch\(rule\)"
    ):
        out = vmap(lambda x: lonely_p.bind(x))(x3)
    np.testing.assert_array_equal(out, np.sin(x3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second use does not warn again
        vmap(lambda x: lonely_p.bind(x))(x3)


def test_numpy_function_without_rule_raises_naming_it():
    with pytest.raises(UnsupportedFunctionError, match=r"numpy\.packbits has no autodiff rule"):
        grad(lambda x: np.packbits(x).sum())(x3)
    with pytest.raises(UnsupportedFunctionError, match=r"numpy\.subtract\.accumulate"):
        grad(lambda x: np.subtract.accumulate(x).sum())(x3)


def test_ufunc_out_argument_raises():
    with pytest.raises(UnsupportedFunctionError, match="out="):
        grad(lambda x: np.sin(x, out=np.empty(3)).sum())(x3)


# --- docs/errors.md -------------------------------------------------------------------


def test_every_error_class_has_a_section_and_a_raised_example_in_docs_errors_md():
    text = (Path(__file__).parents[1] / "docs" / "errors.md").read_text()
    sections = set(re.findall(r"^## (\w+)", text, re.MULTILINE))
    assert set(autodiff.errors.__all__) <= sections, set(autodiff.errors.__all__) - sections
    # the doctests themselves run with the suite (pyproject.toml: --doctest-glob)
    shown = set(re.findall(r"^autodiff\.errors\.(\w+): ", text, re.MULTILINE))
    raised = set(autodiff.errors.__all__) - {"AutodiffError", "AutodiffWarning", "NonFiniteError"}
    assert raised <= shown, raised - shown
