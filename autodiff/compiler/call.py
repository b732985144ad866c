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

Control flow takes its staged routes there (``control/``): a ``scan`` is transformed
with the graph, a ``cond`` becomes a cond of the branches' transforms, a
``while_loop`` a loop of the transformed functions (vmap, jvp).  Where a transform
cannot be staged (``ConcretizationError``: reverse mode through a ``while_loop`` whose
carry it differentiates, whose trip count exists only when it runs), the graph is
evaluated at the transform's own level instead, as eagerly (``_derived``: the
decision is kept with the graph's derived forms).

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
from autodiff.core.arrays import is_float, library_of
from autodiff.core.caches import LRUCache
from autodiff.core.errstate import combined
from autodiff.core.graph import Eqn, Graph, Literal, Var, aval_of
from autodiff.core.primitive import Primitive, process
from autodiff.errors import ConcretizationError
from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
from autodiff.interpreters.explain import ExplainInterpreter
from autodiff.interpreters.forward import DualTensor, JvpInterpreter, jvp
from autodiff.interpreters.reverse import GradInterpreter, GradTensor, _vjp, recording, unpack
from autodiff.interpreters.staging import StagedTensor, StagingInterpreter, eval_graph
from autodiff.interpreters.tape import Dropped, Node
from autodiff.interpreters.taylor import JetInterpreter

__all__ = ["AT_LEVEL", "CallPrimitive", "call_p"]


class CallPrimitive(Primitive):
    """``call_p``: run ``params["graph"]`` (see the module docstring)."""

    __slots__ = ()


def _call_impl(*args: Any, graph: Graph, name: str) -> tuple:
    return call_graph(graph, args)


call_p = CallPrimitive("jit_call", _call_impl, multiple_results=True)


# Graphs derived from one graph (per differentiated inputs, batch axes and sizes...):
# the most recently used are kept.
DERIVED_MAXSIZE = 64


# What a transform of a graph is where it cannot be staged: the graph is evaluated at the
# transform's level.
AT_LEVEL = "at level"


def _derived(graph: Graph, key: tuple, make: Any) -> Any:
    """``make()``, cached on ``graph`` under ``key`` (staged once per key while kept);
    ``AT_LEVEL`` where staging it raised ``ConcretizationError`` (the transform needs
    values: it runs at its level, as eagerly)."""
    store = derived_of(graph)
    cache = store.transformed
    if cache is None:
        with graph.lock:
            if store.transformed is None:
                store.transformed = LRUCache(DERIVED_MAXSIZE)
            cache = store.transformed

    def staged() -> Any:
        try:
            return _inheriting(graph, make())
        except ConcretizationError:
            return AT_LEVEL

    return cache.get_or_make(key, staged)


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


# --- forward mode --------------------------------------------------------------------------------


@process.register(JvpInterpreter, CallPrimitive)
def _jvp_of_call(interp: JvpInterpreter, prim: CallPrimitive, args: tuple, params: dict):
    primals = [a.primal for a in args]
    tangents = [a.tangent for a in args]
    has = tuple(t is not None for t in tangents)
    if not any(has):
        return prim.bind(*primals, **params)
    pairs = _call_jvp(primals, tangents, params["graph"], params["name"])
    if pairs is AT_LEVEL:
        return tuple(eval_graph(params["graph"], *args))
    return tuple(o if t is None else DualTensor(interp, o, t) for o, t in pairs)


def _call_jvp(primals: Sequence, tangents: Sequence, graph: Graph, name: str) -> Any:
    """(output, its tangent or None) pairs: the call of ``jvp(graph)``, staged once per
    which inputs have tangents; ``AT_LEVEL`` where it cannot be staged."""
    has = tuple(t is not None for t in tangents)
    moving = [t for t in tangents if t is not None]
    like = library_of(primals)
    key = ("jvp", has, _avals(moving), type(like))
    jg = _derived(graph, key, lambda: jvp_graph(graph, has, key[2], like))
    if jg is AT_LEVEL:
        return AT_LEVEL
    out = call_p.bind(*primals, *moving, graph=jg.graph, name=f"jvp({name})")
    n = len(jg.out_has_tangent)
    tangents_out = iter(out[n:])
    return [(o, next(tangents_out) if t else None) for o, t in zip(out[:n], jg.out_has_tangent)]


def _call_jvp_rule(tangents, ans, *primals, graph, name, **recorded):
    """The JVP rule (for ``linearize``, which replays JVP rules over the tape)."""
    pairs = _call_jvp(primals, tangents, graph, name)
    if pairs is AT_LEVEL:  # the graph's own JVP, at the level of whoever called the rule
        _, out_tangents = jvp(lambda *xs: tuple(eval_graph(graph, *xs)), tuple(primals),
                              tuple(np.zeros_like(p) if t is None else t
                                    for p, t in zip(primals, tangents)))  # fmt: skip
        return tuple(out_tangents)
    return tuple(np.zeros_like(o) if t is None else t for o, t in pairs)


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
    argnums = tuple(i for i, _, _ in parents)
    like = library_of(values)
    vg = _derived(graph, ("vjp", argnums, type(like)), lambda: vjp_graphs(graph, argnums, like))
    if vg is AT_LEVEL:  # a while_loop differentiated through its iterations: as eagerly
        return tuple(eval_graph(graph, *args))
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
        if vg is AT_LEVEL:  # the graph's own VJP, at the level of whoever called the rule
            return _vjp_at_level(graph, cts, primals, argnums)
        residuals = call_p.bind(*primals, graph=vg.forward, name="forward")[vg.n_out :]
    else:
        residuals = params["residuals"]
    float_cts = [cts[j] for j in vg.float_outputs]
    return list(call_p.bind(*residuals, *float_cts, graph=vg.backward,
                            name=f"backward({params['name']})"))  # fmt: skip


def _vjp_at_level(graph: Graph, cts: Sequence, primals: Sequence, argnums: tuple) -> list:
    floats = [j for j, v in enumerate(graph.outvars) if is_float(v.aval)]

    def differentiated(*chosen: Any) -> tuple:
        full = list(primals)
        for i, c in zip(argnums, chosen):
            full[i] = c
        outs = eval_graph(graph, *full)
        return tuple(outs[j] for j in floats)

    _, pullback, _ = _vjp(differentiated, tuple(primals[i] for i in argnums), False,
                          "grad of jit")  # fmt: skip
    return list(pullback(tuple(cts[j] for j in floats)))


call_p.def_vjp(_call_vjp_rule, packed=True)


# --- batching --------------------------------------------------------------------------------


@process.register(BatchInterpreter, CallPrimitive)
def _batch_of_call(interp: BatchInterpreter, prim: CallPrimitive, args: tuple, params: dict):
    values = [a.value for a in args]
    dims = tuple(a.bdim for a in args)
    graph = params["graph"]
    like = library_of(values)
    key = ("batch", dims, _avals(values), interp.size, interp.randomness, type(like))
    bg = _derived(graph, key, lambda: batch_graph(graph, dims, key[2], interp.size,
                                                   interp.randomness, like))  # fmt: skip
    if bg is AT_LEVEL:
        return tuple(eval_graph(graph, *(a.value if a.bdim is None else a for a in args)))
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
