"""The compiler's stages as values (``autodiff.stages``): ``jit(f).trace(*args)``, ``.lower()``,
``.compile()``, after JAX's ``jax.stages``.

* ``Traced`` is the graph the calls stage (one staging per signature, shared with them),
  with its signature; ``lower()`` refuses a function that closed over an outer transform's
  tracers;
* ``Lowered`` puts each equation in a kernel or among the NumPy calls, as the compiling
  tier does (the compiled function's graph has one equation per kernel, in those places);
  ``cost_analysis`` counts calls and bytes, checked by hand; where nothing can compile it
  says why and lowers nothing;
* ``Compiled`` keeps jit's contract (values, dtypes, fresh results, untouched arguments)
  on pytrees, keywords and static arguments, refuses another signature and traced
  arguments, and reports its compile time.

The stages leave nothing semantic in a cache: a graph's derived results are typed fields
(``Derived``), the tracers it closed over travel in ``Traced.captured``.
"""

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp
from autodiff import grad, jit, make_graph
from autodiff.compiler.derived import Derived, derived_of
from autodiff.compiler.stages import default_backend
from autodiff.errors import TransformTypeError
from autodiff.stages import Compiled, Lowered, Traced
from tests.backends import StrictArray, strict, unwrap
from tests.jit_contract import assert_exact, check_calls

BACKEND = default_backend()
needs_backend = pytest.mark.skipif(not BACKEND.available(), reason=BACKEND.why_not())


def f(x):
    return anp.cumsum(anp.sin(x) * 2.0) * x


X = np.linspace(0.0, 1.0, 5)


def test_traced_is_the_graph_the_calls_stage():
    jitted = jit(f)
    traced = jitted.trace(X)
    assert isinstance(traced, Traced)
    assert str(traced.graph) == str(make_graph(f)(X)) == traced.as_text()
    assert traced.signature == "(f64[5])" and traced.captured == ()
    jitted(X)
    jitted.trace(X)
    assert jitted.cache_info().traces == 1  # one staging: the calls' and trace's
    jitted.trace(X[:3])
    assert jitted.cache_info().traces == 2
    assert str(jitted.lower(X).graph) == str(traced.lower().graph)  # jit(f).lower(x), as JAX's


@needs_backend
def test_lowered_places_each_equation_where_the_compiled_function_runs_it():
    lowered = jit(f).trace(X).lower()
    assert isinstance(lowered, Lowered) and lowered.backend.name == "llvm"
    (region,) = lowered.regions
    assert region.primitives == ["sin", "multiply"]
    assert "define ptr @entry(" in region.text and '"adx.npy.numpy.sin.f8f8.fn"' in region.text
    assert [e.prim.name for e in lowered.numpy_calls] == ["cumsum", "multiply"]
    text = lowered.as_text()
    assert (
        text.splitlines()[0]
        == "# llvm compiles 2 of 4 equations into 1 kernel; 2 NumPy calls per run"
    )
    assert "sin a             # kernel 0" in text and "cumsum[axis=0] c  # NumPy" in text
    compiled = lowered.compile()
    assert [e.prim.name for e in compiled.graph.eqns] == ["kernel", "cumsum", "multiply"]
    assert compiled.kernels[0].region is region.region
    # the same placement as the compiling tier's
    hot = jit(f, compile=True)
    hot(X)
    tier = hot._entries[next(iter(hot._entries))].compiled
    assert [e.prim.name for e in tier.graph.eqns] == ["kernel", "cumsum", "multiply"]


def _partly(x):
    def body(c):
        i, v = c
        v = anp.cumsum(anp.sin(v) * 2.0 + v) * 0.5  # cumsum does not lower
        return i + 1, v * 0.9 + 0.1

    return autodiff.while_loop(lambda c: c[0] < 5, body, (0, x))[1]


def _eager_partly(x):
    i, v = 0, x
    while i < 5:
        v = np.cumsum(np.sin(v) * 2.0 + v) * 0.5
        i, v = i + 1, v * 0.9 + 0.1
    return v


@needs_backend
def test_a_loop_whose_body_lowers_in_part_shows_and_runs_its_compiled_regions():
    lowered = jit(_partly).lower(X)
    assert [e.prim.name for e in lowered.numpy_calls] == ["while_loop"]
    text = lowered.as_text()
    assert "# while_loop -> (i64[] f64[5]) runs as NumPy calls; its body_fun, on each call:" in text
    assert "# llvm compiles 7 of 8 equations into 2 kernels; 1 NumPy call per run" in text
    assert "cumsum[axis=0] e  # NumPy" in text and "sin b             # kernel 0" in text
    jitted = jit(_partly, compile=True)
    assert_exact(jitted(X), _eager_partly(X))
    (eqn,) = jitted.lower(X).graph.eqns
    body = eqn.params["body_fun"].graph
    kernels = derived_of(body).compiled[("llvm", False)].kernels
    assert [[e.prim.name for e in k.region.eqns] for k in kernels] == [
        ["sin", "multiply", "add"], ["multiply", "add", "multiply", "add"]]  # fmt: skip


@needs_backend
def test_cost_analysis_counts_calls_and_bytes():
    costs = jit(f).trace(X).lower().cost_analysis()
    # NumPy calls read their array operands and write their results, 40 bytes each:
    # sin 40+40, multiply by 2.0 40+40, cumsum 40+40, multiply by x 80+40
    assert costs["bytes_accessed_as_numpy"] == 360
    # the kernel reads x and writes sin(x) * 2 once: 40+40, then cumsum and multiply
    assert costs["bytes_accessed"] == 280
    assert (costs["equations"], costs["compiled_equations"], costs["kernels"],
            costs["numpy_calls"]) == (4, 2, 1, 2)  # fmt: skip
    compiled = jit(f).trace(X).lower().compile()
    assert compiled.cost_analysis() == costs


@needs_backend
def test_compiled_keeps_the_contract_on_pytrees_keywords_and_static_arguments():
    def g(tree, n, *, scale):
        x, (y,) = tree["x"], tree["rest"]
        return {"a": anp.tanh(x * scale) * y + n, "b": (x, anp.exp(y) - 1.0)}

    tree = {"x": np.linspace(-1, 1, 6), "rest": (np.full(6, 0.5),)}
    jitted = jit(g, static_argnums=1)
    compiled = jitted.trace(tree, 3, scale=2.0).lower().compile()
    assert isinstance(compiled, Compiled) and compiled.kernels
    assert compiled.compile_time > 0
    check_calls(lambda *a: compiled(*a, scale=2.0), lambda *a: g(*a, scale=2.0), (tree, 3))
    assert "def replay(" in compiled.as_text() and "define ptr @entry(" in compiled.as_text()
    with pytest.raises(TransformTypeError, match=r"compiled for arguments \(f64\[6\], f64\[6\], "):
        compiled({"x": np.ones(7), "rest": (np.ones(7),)}, 3, scale=2.0)
    with pytest.raises(TransformTypeError, match="compiled for arguments"):
        compiled(tree, 4, scale=2.0)  # another static value: another program
    with pytest.raises(TransformTypeError, match="not on the traced values"):
        grad(lambda x: compiled({"x": x, "rest": (tree["rest"][0],)}, 3, scale=2.0)["a"].sum())(
            tree["x"]
        )


def test_where_nothing_compiles_lowered_says_why_and_compiled_is_the_replay(monkeypatch):
    monkeypatch.setattr(BACKEND, "available", lambda: False)
    monkeypatch.setattr(BACKEND, "why_not", lambda: "llvmlite is not installed (simulated)")
    lowered = jit(f).trace(X).lower()
    assert lowered.regions == () and lowered.backend is None
    assert "llvmlite is not installed (simulated)" in lowered.note
    assert lowered.as_text().startswith("# nothing compiles: llvmlite is not installed")
    assert len(lowered.numpy_calls) == 4
    compiled = lowered.compile()
    assert compiled.kernels == ()
    check_calls(compiled, f, (X,))


def test_arrays_of_another_library_lower_to_their_own_calls():
    args = strict((X,))
    lowered = jit(f).trace(*args).lower()
    assert lowered.regions == () and "other libraries" in lowered.note
    got = lowered.compile()(*args)
    assert type(got) is StrictArray
    assert_exact(unwrap(got), f(X))


def test_a_function_closing_over_an_outer_tracer_does_not_lower():
    def outer(y):
        traced = jit(lambda x: x * y).trace(X)
        assert len(traced.captured) == 1  # y, an input the caller passes
        with pytest.raises(TransformTypeError, match="closes over 1 traced value"):
            traced.lower()
        return anp.sum(y)

    grad(outer)(2.0)


def test_what_a_graph_derives_is_typed_and_holds_no_captured_value():
    jitted = jit(f)
    for _ in range(3):
        jitted(X)
    graph = jitted.trace(X).graph
    assert not hasattr(graph, "cache")
    derived = graph.derived
    assert isinstance(derived, Derived)
    assert derived.optimized[True] is jitted.graph(X)  # optimised once, shared
    assert set(derived.replays) == {("numpy", None, True)}
    captured = []

    def outer(y):
        traced = jit(lambda x: x * y).trace(X)
        captured.append(traced)
        return anp.sum(y)

    grad(outer)(2.0)
    (traced,) = captured
    found = traced.graph.derived
    assert found is None or not any(found.replays.values())  # nothing cached for its call


def test_the_stages_are_public():
    assert autodiff.stages.Traced is Traced
    assert set(autodiff.stages.__all__) == {"Compiled", "Lowered", "LoweredRegion", "Traced"}
