"""The call of a staged graph as one primitive, and how each transform treats it.

A jitted function called with tracers of transforms outside it binds ``call_p`` on
its graph (``params["graph"]``).  With no tracer among the arguments the call is the
graph's compiled replay.  Otherwise its rules transform the graph, and each result is
staged once and cached on the graph, keyed by which inputs are differentiated or
batched, so ``grad(jit(f))`` replays compiled code too:

- ``jvp``: the graph of ``jvp(graph)`` (primals and the non-zero tangents in; outputs
  and their tangents out), called once for both;
- ``grad``/``vjp`` (``_grad_of_call``, like ``custom_vjp``'s method in ``transforms/custom.py``):
  the graph of ``vjp(graph)`` applied to cotangent inputs, split by dependency into a
  forward graph (equations that do not depend on the cotangents: outputs and
  residuals) and a backward graph (residuals and cotangents in, input cotangents
  out).  The forward graph runs now, the backward graph (another call) in the
  backward pass; so higher orders transform calls again;
- ``vmap``: the graph of ``vmap(graph)`` with the interpreter's ``randomness`` on
  the batched inputs' shapes; results keep the batch axes the rules gave them;
- staging (``jit`` inside ``jit``, ``make_graph(jit(f))``): the callee's equations are
  inlined into the caller's graph, so the passes see (and simplify across) the whole
  program and the replay stays one flat function.

A graph holding control flow decided by values (a ``cond``'s branch, a
``while_loop``'s trip count, also inside a ``scan``'s body: ``runs_at_level``) is
evaluated at the transform's own level instead, where those values exist, so its loops
and branches are transformed as they are eagerly; a ``scan`` alone is transformed with
the graph (its staged regime, ``control/scan.py``).

Taylor mode and ``explain`` evaluate the graph at their own level (so explain lists the
primitives a jitted function runs, as it does for the function itself).  Under any
other interpreter (a user's transform) the call is a primitive like any other, whose
JVP and VJP rules are the ones above.

The graph transforms themselves (``jvp_graph``, ``vjp_graphs`` with ``split``,
``batch_graph``) are in ``graph_transforms.py``: the control-flow primitives use
them too.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from autodiff.compiler.derived import derived_of
from autodiff.compiler.graph_transforms import batch_graph, jvp_graph, vjp_graphs
from autodiff.compiler.tiers import call_graph
from autodiff.core.arrays import library_of
from autodiff.core.caches import LRUCache
from autodiff.core.errstate import combined
from autodiff.core.graph import Eqn, Graph, Literal, Var, aval_of
from autodiff.core.primitive import Primitive, process
from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
from autodiff.interpreters.explain import ExplainInterpreter
from autodiff.interpreters.forward import DualTensor, JvpInterpreter
from autodiff.interpreters.reverse import GradInterpreter, GradTensor, recording, unpack
from autodiff.interpreters.staging import StagedTensor, StagingInterpreter, eval_graph
from autodiff.interpreters.tape import Dropped, Node
from autodiff.interpreters.taylor import JetInterpreter

__all__ = ["CallPrimitive", "call_p", "decided_by_values", "runs_at_level"]


class CallPrimitive(Primitive):
    """``call_p``: run ``params["graph"]`` (see the module docstring)."""

    __slots__ = ()


def _call_impl(*args: Any, graph: Graph, name: str) -> tuple:
    return call_graph(graph, args)


call_p = CallPrimitive("jit_call", _call_impl, multiple_results=True)


# Graphs derived from one graph (per differentiated inputs, batch axes and sizes...):
# the most recently used are kept.
DERIVED_MAXSIZE = 64


def _derived(graph: Graph, key: tuple, make: Any) -> Any:
    """``make()``, cached on ``graph`` under ``key`` (staged once per key while kept)."""
    store = derived_of(graph)
    cache = store.transformed
    if cache is None:
        with graph.lock:
            if store.transformed is None:
                store.transformed = LRUCache(DERIVED_MAXSIZE)
            cache = store.transformed
    return cache.get_or_make(key, lambda: _inheriting(graph, make()))


def _inheriting(graph: Graph, made: Any) -> Any:
    """``made``'s graphs take ``graph``'s ``compile=`` setting (``tiers.call_graph``)."""
    mode = derived_of(graph).mode
    for name in ("graph", "forward", "backward"):
        found = getattr(made, name, None)
        if isinstance(found, Graph):
            derived_of(found).mode = mode
    return made


def _avals(values: Any) -> tuple:
    return tuple(aval_of(v) for v in values)


def runs_at_level(graph: Graph) -> bool:
    """Whether ``graph`` holds control flow whose branches or trip counts are decided
    by values (``cond``, ``while_loop``, also inside a ``scan``'s body), known only when
    it runs: a transform of a jitted function then evaluates its graph at the
    transform's own level instead of staging the transformed graph, so those loops and
    branches are differentiated and batched as they are eagerly.  A ``scan``'s trip
    count is static: the transformed graph holds the transformed scan (its staged
    regime, ``control/scan.py``)."""
    store = derived_of(graph)
    found = store.runs_at_level
    if found is None:
        found = store.runs_at_level = any(map(decided_by_values, graph.eqns))
    return found


def decided_by_values(eqn: Eqn) -> bool:
    """Whether what ``eqn`` runs is decided by values: its primitive says, from the
    equation's parameters (``ControlFlowPrimitive.decided_by_values``)."""
    decided = getattr(eqn.prim, "decided_by_values", None)
    return decided is not None and decided(eqn.params)


# --- forward mode --------------------------------------------------------------------------------


@process.register(JvpInterpreter, CallPrimitive)
def _jvp_of_call(interp: JvpInterpreter, prim: CallPrimitive, args: tuple, params: dict):
    primals = [a.primal for a in args]
    tangents = [a.tangent for a in args]
    has = tuple(t is not None for t in tangents)
    if not any(has):
        return prim.bind(*primals, **params)
    if runs_at_level(params["graph"]):
        return tuple(eval_graph(params["graph"], *args))
    pairs = _call_jvp(primals, tangents, params["graph"], params["name"])
    return tuple(o if t is None else DualTensor(interp, o, t) for o, t in pairs)


def _call_jvp(primals: Sequence, tangents: Sequence, graph: Graph, name: str) -> list:
    """(output, its tangent or None) pairs: the call of ``jvp(graph)``, staged once per
    which inputs have tangents."""
    has = tuple(t is not None for t in tangents)
    moving = [t for t in tangents if t is not None]
    like = library_of(primals)
    key = ("jvp", has, _avals(moving), type(like))
    jg = _derived(graph, key, lambda: jvp_graph(graph, has, key[2], like))
    out = call_p.bind(*primals, *moving, graph=jg.graph, name=f"jvp({name})")
    n = len(jg.out_has_tangent)
    tangents_out = iter(out[n:])
    return [(o, next(tangents_out) if t else None) for o, t in zip(out[:n], jg.out_has_tangent)]


def _call_jvp_rule(tangents, ans, *primals, graph, name, **recorded):
    """The JVP rule (for ``linearize``, which replays JVP rules over the tape)."""
    return tuple(np.zeros_like(o) if t is None else t
                 for o, t in _call_jvp(primals, tangents, graph, name))  # fmt: skip


call_p.def_jvp(lambda tangents, ans, primals, params: _call_jvp_rule(tangents, ans, *primals,
                                                                       **params),
               packed=True)  # fmt: skip


# --- reverse mode --------------------------------------------------------------------------------


@process.register(GradInterpreter, CallPrimitive)
def _grad_of_call(interp: GradInterpreter, prim: CallPrimitive, args: tuple, params: dict):
    """Run the forward graph now and keep its residuals on the tape for the backward graph."""
    values, parents, _ = unpack(interp, args)
    if not parents or not recording(interp):
        return prim.bind(*values, **params)
    graph = params["graph"]
    if runs_at_level(graph):
        return tuple(eval_graph(graph, *args))
    argnums = tuple(i for i, _, _ in parents)
    like = library_of(values)
    vg = _derived(graph, ("vjp", argnums, type(like)), lambda: vjp_graphs(graph, argnums, like))
    out = prim.bind(*values, graph=vg.forward, name=f"forward({params['name']})")
    outs, residuals = out[: vg.n_out], out[vg.n_out :]
    # The backward graph reads residuals only; the tape keeps the primals' shapes.
    primals = (
        values
        if interp.keep_all_residuals
        else [Dropped(prim, i, v) if hasattr(v, "dtype") else v for i, v in enumerate(values)]
    )
    node = Node(prim, {**params, "vjp": vg, "residuals": residuals}, primals, outs, parents)
    floats = set(vg.float_outputs)  # the others (integers, booleans) carry no derivative
    return tuple(GradTensor(interp, o, node, i) if i in floats else o for i, o in enumerate(outs))


def _call_vjp_rule(cts, ans, primals, params, argnums):
    graph = params["graph"]
    vg = params.get("vjp")
    if vg is None or "residuals" not in params:  # not recorded by _grad_of_call
        like, argnums = library_of(primals), tuple(argnums)
        vg = _derived(graph, ("vjp", argnums, type(like)),
                      lambda: vjp_graphs(graph, argnums, like))  # fmt: skip
        residuals = call_p.bind(*primals, graph=vg.forward, name="forward")[vg.n_out :]
    else:
        residuals = params["residuals"]
    float_cts = [cts[j] for j in vg.float_outputs]
    return list(call_p.bind(*residuals, *float_cts, graph=vg.backward,
                            name=f"backward({params['name']})"))  # fmt: skip


call_p.def_vjp(_call_vjp_rule, packed=True)


# --- batching --------------------------------------------------------------------------------


@process.register(BatchInterpreter, CallPrimitive)
def _batch_of_call(interp: BatchInterpreter, prim: CallPrimitive, args: tuple, params: dict):
    values = [a.value for a in args]
    dims = tuple(a.bdim for a in args)
    graph = params["graph"]
    if runs_at_level(graph):
        return tuple(eval_graph(graph, *(a.value if a.bdim is None else a for a in args)))
    like = library_of(values)
    key = ("batch", dims, _avals(values), interp.size, interp.randomness, type(like))
    bg = _derived(graph, key, lambda: batch_graph(graph, dims, key[2], interp.size,
                                                   interp.randomness, like))  # fmt: skip
    out = prim.bind(*values, graph=bg.graph, name=f"vmap({params['name']})")
    return tuple(o if d is None else BatchedTensor(interp, o, d) for o, d in zip(out, bg.out_dims))


# --- Taylor mode: the graph's primitives ----------------------------------------------------------


@process.register(JetInterpreter, CallPrimitive)
def _jet_of_call(interp: JetInterpreter, prim: CallPrimitive, args: tuple, params: dict):
    """Taylor mode (``jet``, the differential operators) runs the graph's equations at its
    own level, each pushing the series with its Taylor rule."""
    return tuple(eval_graph(params["graph"], *args))


# --- explain: the graph's primitives ------------------------------------------------------------


@process.register(ExplainInterpreter, CallPrimitive)
def _explain_call(interp: ExplainInterpreter, prim: CallPrimitive, args: tuple, params: dict):
    """explain lists the primitives a jitted function runs, as it does eagerly: the
    graph evaluated at explain's level, one call per equation."""
    return tuple(eval_graph(params["graph"], *args))


# --- staging: inline -----------------------------------------------------------------------------


@process.register(StagingInterpreter, CallPrimitive)
def _inline_call(interp: StagingInterpreter, prim: CallPrimitive, args: tuple, params: dict):
    """The callee's equations become the caller's (fresh variables, its constants the
    caller's constants)."""
    graph = params["graph"]
    env: dict[Var, Any] = {v: interp.read(a) for v, a in zip(graph.invars, args)}
    for var, const in zip(graph.constvars, graph.consts):
        env[var] = interp.read(const)

    def sub(v: Any) -> Any:
        return v if type(v) is Literal else env[v]

    for eqn in graph.eqns:
        outs = [Var(v.aval) for v in eqn.outvars]
        env.update(zip(eqn.outvars, outs))
        interp.eqns.append(Eqn(eqn.prim, [sub(v) for v in eqn.invars], outs, eqn.params,
                               combined(interp.errstate(), eqn.errstate)))  # fmt: skip
    constants = dict(zip(interp.constvars, interp.consts))
    results = []
    for v in map(sub, graph.outvars):
        if type(v) is Literal:
            results.append(v.value)
        elif v in constants:
            results.append(constants[v])
        else:
            results.append(StagedTensor(interp, v))
    return tuple(results)
