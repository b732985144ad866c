"""explain: the records of each primitive call (primitive, chain of interpreters, rules,
shapes at the top and the bottom), the printed table, the result, and the stack."""

import numpy as np
import pytest

from autodiff import grad, jvp, vmap
from autodiff.core.observe import Observer, current_observer
from autodiff.core.stack import current_interpreters
from autodiff.interpreters.explain import Explanation, explain

rng = np.random.default_rng(0)
W, XS, YS = rng.normal(size=(3, 2)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2))

BACKWARD = " (backward pass)"


def loss(w, x, y):
    return np.mean((np.tanh(x @ w) - y) ** 2)


def chains(ex):
    return [" -> ".join(f"{s.transform} L{s.depth}" for s in c.stages) for c in ex.calls]


def rules(ex):
    return [tuple(s.rule for s in c.stages[:-1]) for c in ex.calls]


def top_and_bottom(call):
    """(ins, out) at the top stage and at the bottom (NumPy) stage."""
    return (call.stages[0].ins, call.stages[0].out), (call.stages[-1].ins, call.stages[-1].out)


def test_grad_records_the_forward_calls_on_the_tape_and_the_rules_of_the_backward_pass():
    ex = explain(grad(lambda x: np.sum(np.sin(x) * x)))(np.array([0.5, 1.0]))
    assert [c.prim for c in ex.calls] == [
        "sin", "multiply", "sum",  # forward: grad (level 2 on the stack) records a tape node
        "ones_like",  # grad's seed, after its level ended: plain NumPy
        "broadcast_to",  # the VJP of sum (a 0-d cotangent: no axis to add back)
        "multiply", "multiply",  # the VJP of multiply, one per argument
        "cos", "multiply",  # the VJP of sin
        "add",  # x's two cotangents summed
    ]  # fmt: skip
    assert chains(ex)[:3] == ["grad L2 -> numpy L0"] * 3
    assert chains(ex)[3:] == ["numpy L0"] * 7
    assert rules(ex) == [("tape node",)] * 3 + [()] * 7
    assert [c.within for c in ex.calls] == [()] * 4 + [
        ("VJP of sum" + BACKWARD,),
        ("VJP of multiply" + BACKWARD,),
        ("VJP of multiply" + BACKWARD,),
        ("VJP of sin" + BACKWARD,),
        ("VJP of sin" + BACKWARD,),
        ("cotangent sum after sin" + BACKWARD,),
    ]
    assert top_and_bottom(ex.calls[2]) == ((("f64[2]",), ("f64[]",)), (("f64[2]",), ("f64[]",)))
    np.testing.assert_allclose(ex.result, np.sin([0.5, 1.0]) + np.cos([0.5, 1.0]) * [0.5, 1.0])


def test_vmap_records_the_batching_rule_and_the_calls_made_inside_it():
    # With v batched along axis 1, matmul's batching rule moves that axis to the front
    # (a transpose made inside the rule) and computes the per-example products as
    # V @ w.T, batch axis first; out_dims=1 makes vmap move it back (a transpose made by
    # vmap itself, not by a rule).
    w = np.ones((3, 4))
    ex = explain(vmap(lambda v: w @ v, in_dims=1, out_dims=1))(np.ones((4, 5)))
    assert [c.prim for c in ex.calls] == ["transpose", "matmul", "transpose"]
    assert chains(ex) == ["numpy L0", "vmap L2 -> numpy L0", "numpy L0"]
    assert rules(ex) == [(), ("batching rule",), ()]
    assert [c.within for c in ex.calls] == [("batching rule of matmul (vmap L2)",), (), ()]
    assert top_and_bottom(ex.calls[1]) == (
        (("f64[3,4]", "f64[4]"), ("f64[3]",)),  # logical, per example
        (("f64[5,4]", "f64[4,3]"), ("f64[5,3]",)),  # physical, batched: V @ w.T
    )
    assert top_and_bottom(ex.calls[2])[1] == (("f64[5,3]",), ("f64[3,5]",))
    np.testing.assert_array_equal(ex.result, np.full((3, 5), 4.0))


def test_vmap_of_grad_peels_grad_then_vmap_then_numpy():
    ex = explain(vmap(grad(loss), in_dims=(None, 0, 0)))(W, XS, YS)
    assert [(c.prim, c.within[0].removesuffix(BACKWARD) if c.within else "") for c in ex.calls] == [
        ("matmul", ""), ("tanh", ""), ("subtract", ""), ("power", ""),
        ("sum", ""), ("divide", ""),  # mean = sum / n
        ("ones_like", ""),  # grad's seed
        ("divide", "VJP of divide"),
        ("expand_dims", "VJP of sum"), ("broadcast_to", "VJP of sum"),  # (its batching rule's)
        ("multiply", "VJP of power"), ("multiply", "VJP of power"),  # g * (2.0 * r) for r**2
        ("multiply", "VJP of tanh"), ("subtract", "VJP of tanh"), ("multiply", "VJP of tanh"),
        ("expand_dims", "VJP of matmul"), ("transpose", "VJP of matmul"),
        ("expand_dims", "VJP of matmul"), ("matmul", "VJP of matmul"),
    ]  # fmt: skip
    # Forward calls peel grad (a tape node) then vmap (the batching rule); the seed and
    # the backward pass run after grad's level ended, so only vmap handles them.
    # (but for the expand_dims that broadcast_to's batching rule calls on plain values)
    assert chains(ex) == (["grad L3 -> vmap L2 -> numpy L0"] * 6 + ["vmap L2 -> numpy L0"] * 2
                          + ["numpy L0"] + ["vmap L2 -> numpy L0"] * 10)  # fmt: skip
    assert rules(ex) == ([("tape node", "batching rule")] * 6 + [("batching rule",)] * 2 + [()]
                         + [("batching rule",)] * 10)  # fmt: skip
    assert top_and_bottom(ex.calls[0]) == (
        (("f64[3]", "f64[3,2]"), ("f64[2]",)),
        (("f64[4,3]", "f64[3,2]"), ("f64[4,2]",)),
    )
    assert top_and_bottom(ex.calls[4]) == ((("f64[2]",), ("f64[]",)), (("f64[4,2]",), ("f64[4]",)))
    assert top_and_bottom(ex.calls[-1]) == (
        (("f64[3,1]", "f64[1,2]"), ("f64[3,2]",)),
        (("f64[4,3,1]", "f64[4,1,2]"), ("f64[4,3,2]",)),
    )
    np.testing.assert_allclose(ex.result, vmap(grad(loss), in_dims=(None, 0, 0))(W, XS, YS))


def test_the_printed_table():
    text = str(explain(vmap(grad(loss), in_dims=(None, 0, 0)))(W, XS, YS))
    lines = text.splitlines()
    assert (
        lines[0] == "explain(vmap(grad(loss)))(f64[3,2], f64[4,3], f64[4,2]): 19 primitive call(s)"
    )
    assert lines[1].split() == ["#", "primitive", "handled", "by", "rule", "shapes"]
    assert " ".join(lines[2].split()) == (
        "1 matmul grad L3 -> vmap L2 -> numpy tape node, batching rule "
        "f64[3], f64[3,2] -> f64[2] | batched f64[4,3], f64[3,2] -> f64[4,2]"
    )
    assert "    in VJP of matmul (backward pass):" in lines
    last = lines[-1].split()
    assert last[:5] == ["19", "matmul", "vmap", "L2", "->"]
    assert lines[-1].endswith(
        "f64[3,1], f64[1,2] -> f64[3,2] | batched f64[4,3,1], f64[4,1,2] -> f64[4,3,2]"
    )
    # Columns are aligned: in every call row the chain starts under "handled by".
    offset = lines[1].index("handled by")
    rows = [line for line in lines[2:] if not line.startswith("    in ")]
    assert len(rows) == 19
    assert all(row[offset - 1] == " " and row[offset] in "gvn" for row in rows)
    assert repr(explain(np.sin)(0.5)) == "<Explanation of explain(sin)(f64[]): 1 primitive call(s)>"


def test_the_whole_table_of_a_small_vmap():
    w = np.ones((3, 4))
    assert str(explain(vmap(lambda v: w @ v, in_dims=1, out_dims=1))(np.ones((4, 5)))) == (
        "\n".join(
            [
                "explain(vmap(<lambda>))(f64[4,5]): 3 primitive call(s)",
                " #  primitive    handled by        rule           shapes",
                "    in batching rule of matmul (vmap L2):",
                " 1    transpose  numpy             -              f64[4,5] -> f64[5,4]",
                " 2  matmul       vmap L2 -> numpy  batching rule  "
                "f64[3,4], f64[4] -> f64[3] | batched f64[5,4], f64[4,3] -> f64[5,3]",
                " 3  transpose    numpy             -              f64[5,3] -> f64[3,5]",
            ]
        )
    )


def test_grad_of_grad_and_jvp_compose():
    ex = explain(grad(grad(np.sin)))(0.5)
    assert [c.prim for c in ex.calls][:4] == ["sin", "ones_like", "cos", "multiply"]
    assert chains(ex)[0] == "grad L3 -> grad L2 -> numpy L0"
    # The inner grad's backward pass runs while the outer grad records it.
    assert ex.calls[2].within == ("VJP of sin" + BACKWARD,)
    assert chains(ex)[2] == "grad L2 -> numpy L0"
    assert float(ex.result) == pytest.approx(-np.sin(0.5))

    ex = explain(lambda x: jvp(np.sin, (x,), (np.ones(3),)))(np.zeros(3))
    assert [(c.prim, c.within) for c in ex.calls] == [
        ("sin", ()),
        ("cos", ("JVP rule of sin (jvp L2)",)),
        ("multiply", ("JVP rule of sin (jvp L2)",)),
    ]
    assert rules(ex) == [("primal",), (), ()]
    np.testing.assert_array_equal(ex.result[1], np.ones(3))


def test_result_is_funcs_output_and_pytrees_pass_through():
    def f(x, scale=2.0):
        return {"a": np.sin(x) * scale, "b": (x.sum(), "label")}

    x = np.linspace(0.0, 1.0, 5)
    ex = explain(f)(x, scale=3.0)
    assert isinstance(ex, Explanation)
    expected = f(x, scale=3.0)
    np.testing.assert_array_equal(ex.result["a"], expected["a"])
    assert type(ex.result["a"]) is np.ndarray and ex.result["b"][1] == "label"
    assert float(ex.result["b"][0]) == float(expected["b"][0])
    assert [c.prim for c in ex.calls] == ["sin", "multiply", "sum"]
    np.testing.assert_array_equal(explain(np.sin)(x).result, np.sin(x))


def test_the_stack_is_empty_afterwards_also_when_func_raises():
    def bad(x):
        np.sin(x)
        raise ZeroDivisionError("inside")

    with pytest.raises(ZeroDivisionError, match="inside"):
        explain(vmap(bad))(np.ones((2, 3)))
    assert current_interpreters() == () and current_observer() is None
    explain(np.cos)(1.0)
    assert current_interpreters() == () and current_observer() is None


def test_a_jvp_rule_that_calls_its_own_primitive_is_shown_as_the_rule():
    # jvp's primal is the call itself; the multiplies of multiply's JVP rule are the
    # rule's own calls (forward mode tells explain where its rule runs), not the call
    ex = explain(lambda x: jvp(lambda y: y * y, (x,), (np.ones(3),)))(np.full(3, 2.0))
    rule = ("JVP rule of multiply (jvp L2)",)
    assert [(c.prim, c.within) for c in ex.calls] == [
        ("multiply", ()), ("multiply", rule), ("multiply", rule), ("add", rule),
    ]  # fmt: skip
    assert chains(ex) == ["jvp L2 -> numpy L0"] + ["numpy L0"] * 3
    assert rules(ex) == [("primal",), (), (), ()]
    np.testing.assert_array_equal(ex.result[1], np.full(3, 4.0))


def test_the_hook_is_on_only_for_the_transforms_started_inside_explain():
    seen = {}

    def f(x):
        stack = current_interpreters()
        seen["inner"], seen["outermost"] = stack[-1].observer, stack[0].observer
        return np.sin(x)

    explain(grad(f))(0.5)
    assert isinstance(seen["inner"], Observer)  # grad's calls are handed to explain
    assert seen["outermost"] is None  # explain's own interpreter is not observed
    assert current_observer() is None
    grad(f)(0.5)
    assert seen["inner"] is None  # without explain: one attribute test per call
