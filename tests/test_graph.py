"""make_graph and the Graph: what it records, how it prints and draws; abstract values
and shape rules, also of user primitives."""

import shutil

import numpy as np
import pytest

import autodiff.numpy as anp
from autodiff import grad, jit, make_graph, vmap
from autodiff.core.graph import OpaqueAval, ShapedArray, aval_of
from autodiff.errors import MissingRuleError
from autodiff.extend import Primitive
from autodiff.testing import check_primitive

X = np.linspace(0.1, 0.9, 6).reshape(2, 3)


def f(x):
    return anp.sum(anp.sin(x) * 2.0)


def test_the_graph_of_a_function_prints_like_a_jaxpr():
    text = str(make_graph(f)(X))
    assert text == (
        "{ lambda a:f64[2,3] . let\n"
        "    b:f64[2,3] = sin a\n"
        "    c:f64[2,3] = multiply b 2.0\n"
        "    d:f64[] = sum[axis=(0,1) keepdims=False] c\n"
        "  in (d,) }"
    )


def test_the_graph_of_grad_shows_the_vjp_rules_that_ran():
    g = make_graph(grad(f))(X)
    names = [eqn.prim.name for eqn in g.eqns]
    # the forward pass, the seed, sum's VJP (a broadcast), multiply's and sin's VJPs
    assert names == ["sin", "multiply", "sum", "ones_like", "broadcast_to", "multiply", "cos",
                     "multiply"]  # fmt: skip


def test_the_graph_of_vmap_of_grad_is_batched():
    g = make_graph(vmap(grad(f)))(np.stack([X, X]))
    assert g.in_avals == [ShapedArray((2, 2, 3), np.float64)]
    assert g.out_avals == [ShapedArray((2, 2, 3), np.float64)]
    assert "sum[axis=(1,2) keepdims=False]" in str(g)


def test_constants_literals_static_arguments_and_structure():
    c = np.arange(3.0)
    g = make_graph(lambda x, n: {"y": x * c + n * 1.5}, static_argnums=1)(np.ones(3), 2)
    assert len(g.constvars) == 1 and np.array_equal(g.consts[0], c)  # captured by value
    assert not np.shares_memory(g.consts[0], c) and not g.consts[0].flags.writeable
    assert "multiply a b" in str(g) or "multiply b a" in str(g)
    assert "3.0" in str(g)  # n * 1.5 was computed in Python: a literal
    assert str(g.out_tree) == "PyTreeSpec({'y': *})"


def test_generators_are_opaque_inputs():
    g = make_graph(lambda x, rng: x + anp.random.normal(rng, (3,)))(
        np.ones(3), np.random.default_rng(0)
    )
    assert g.in_avals[1] == OpaqueAval(np.random.Generator)
    assert "b:Generator" in str(g)


def test_abstract_values():
    assert aval_of(1.0) == ShapedArray((), np.float64, weak_type=True)
    assert aval_of(True) == ShapedArray((), np.bool_)
    assert aval_of(np.float32(1.0)) == ShapedArray((), np.float32)
    assert aval_of(np.zeros((2, 1), np.int8)).str_short() == "i8[2,1]"
    assert ShapedArray((2,), np.complex128).str_short() == "c128[2]"


def test_to_dot_is_graphviz_text():
    dot = make_graph(f)(X).to_dot()
    assert dot.startswith("digraph") and dot.rstrip().endswith("}")
    assert dot.count("shape=box") == 3 and "input0 -> eqn0" in dot and "eqn2 -> out0" in dot
    assert 'label="f64[2,3]"' in dot


def test_draw_with_networkx_when_dot_is_missing(monkeypatch):
    pytest.importorskip("networkx")
    pytest.importorskip("matplotlib")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    g = make_graph(grad(f))(X)
    drawing = g.draw()
    assert drawing.format == "png" and drawing.data.startswith(b"\x89PNG")
    assert g._repr_svg_() is None and g._repr_png_().startswith(b"\x89PNG")


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_draw_with_graphviz():
    g = make_graph(f)(X)
    assert g.draw().format == "svg" and "<svg" in g._repr_svg_()


def test_stats_say_what_each_pass_removed():
    g = jit(grad(f)).graph(X)
    assert [eqn.prim.name for eqn in g.eqns] == ["cos", "multiply"]  # 2 * cos(x)
    text = g.stats()
    assert text.splitlines()[0] == "f: 2 equations"
    assert "ones_like of a scalar: 1" in text  # grad's seed
    assert "fold       -2    (broadcast_to: 1, multiply: 1)" in text
    assert "dce        -3" in text  # sum (the loss itself), sin and multiply


# --- user primitives ------------------------------------------------------------------------------


def test_a_user_primitive_works_under_jit_without_a_shape_rule():
    calls = []

    def impl(x):
        calls.append(1)
        return np.cumsum(x[::-1])[::-1].copy()

    rev_cumsum_p = Primitive("rev_cumsum", impl, vjp=[lambda ct, ans, x: anp.cumsum(ct)])
    g = jit(lambda x: anp.sum(rev_cumsum_p.bind(x) ** 2))
    x = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(g(x), np.sum(impl(x) ** 2))
    np.testing.assert_allclose(grad(g)(x), grad(lambda x: anp.sum(rev_cumsum_p.bind(x) ** 2))(x))
    before = len(calls)
    jit(lambda x: rev_cumsum_p.bind(x) * 2.0)(x)  # the same signature: no new evaluation
    assert len(calls) == before + 1  # (the one call at replay)


def test_a_user_primitive_with_a_shape_rule_never_runs_at_staging():
    def impl(x):
        return np.concatenate([x, x])

    twice_p = Primitive(
        "twice", impl, shape=lambda x: ShapedArray((2 * x.shape[0],), x.dtype),
        batch=lambda args, dims: (np.concatenate([args[0], args[0]], axis=1 - dims[0]), dims[0]),
    )  # fmt: skip
    g = make_graph(lambda x: twice_p.bind(x))(np.ones(3))
    assert g.out_avals == [ShapedArray((6,), np.float64)]
    np.testing.assert_array_equal(jit(twice_p.bind)(np.ones(3)), np.ones(6))


def test_a_primitive_whose_implementation_fails_on_zeros_asks_for_a_shape_rule():
    def impl(x):
        if not np.all(x):
            raise ZeroDivisionError("no zeros, please")
        return 1 / x

    recip_p = Primitive("my_recip", impl)
    with pytest.raises(MissingRuleError, match=r"my_recip_p\.def_shape") as info:
        jit(recip_p.bind)(np.ones(2))
    assert "no zeros, please" in str(info.value)
    recip_p.def_shape(lambda x: ShapedArray(x.shape, x.dtype))
    np.testing.assert_array_equal(jit(recip_p.bind)(np.full(2, 4.0)), np.full(2, 0.25))


def test_check_primitive_checks_the_shape_rule():
    wrong_p = Primitive(
        "wrong", np.sin, jvp=[lambda t, ans, x: t * np.cos(x)],
        shape=lambda x: ShapedArray(x.shape[:-1], x.dtype),
    )  # fmt: skip
    with pytest.raises(AssertionError, match=r"the shape rule gives float64 \(2,\) for the output"):
        check_primitive(wrong_p, (X,))
    right_p = Primitive(
        "right", np.sin, jvp=[lambda t, ans, x: t * np.cos(x)],
        shape=lambda x: ShapedArray(x.shape, x.dtype),
    )  # fmt: skip
    check_primitive(right_p, (X,))
