"""The call of a staged graph as one primitive, and how each transform treats it.

A jitted function called with tracers of transforms outside it binds ``call_p`` on
its graph (``params["graph"]``).  With no tracer among the arguments the call is the
graph's compiled replay.  Otherwise its rules transform the graph, and each result is
staged once and cached on the graph, keyed by which inputs are differentiated or
batched, so ``grad(jit(f))`` replays compiled code too:

- ``jvp``: the graph of ``jvp(graph)`` (primals and the non-zero tangents in; outputs
  and their tangents out), called once for both;
- ``grad``/``vjp`` (``_grad_of_call``, like ``custom_vjp``'s method in ``_custom.py``):
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

Under any other interpreter (``explain``, a user's transform) the call is a primitive
like any other, whose JVP and VJP rules are the ones above.

The graph transforms (``jvp_graph``, ``vjp_graphs`` with ``split``, ``batch_graph``)
take and return graphs, so any primitive whose parameters hold graphs (the
control-flow primitives) can transform its sub-graphs with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from autodiff._batching import BatchedTensor, BatchInterpreter
from autodiff._core import Primitive, new_interpreter, owned, process
from autodiff._forward import DualTensor, JvpInterpreter
from autodiff._graph import Eqn, Graph, Literal, Var, aval_of
from autodiff._passes import dce, optimize
from autodiff._replay import compile_graph
from autodiff._reverse import GradInterpreter, GradTensor, _vjp, recording, unpack
from autodiff._staging import StagedTensor, StagingInterpreter, eval_graph, stage
from autodiff._tape import Dropped, Node
from autodiff.rules._helpers import array_like

__all__ = [
    "BatchGraph",
    "CallPrimitive",
    "JvpGraph",
    "VjpGraphs",
    "array_kind",
    "batch_graph",
    "call_p",
    "compiled",
    "final_graph",
    "jvp_graph",
    "library_of",
    "prepared",
    "runs_functions",
    "split",
    "vjp_graphs",
]


class CallPrimitive(Primitive):
    """``call_p``: run ``params["graph"]`` (see the module docstring)."""

    __slots__ = ()


# --- running a graph -----------------------------------------------------------------------------


def prepared(graph: Graph) -> Graph:
    """``graph`` as it is transformed: after the passes, with custom rules kept."""
    found = graph.cache.get("prepared")
    if found is None:
        found = graph.cache["prepared"] = optimize(graph)
    return found


def array_kind(values: Any) -> tuple[str, Any]:
    """``("numpy", None)``, ``("lazy", None)`` for Dask, or ``("other", example)``: the
    array library of the arguments, which decides how a graph is compiled."""
    for x in values:
        cls = type(x)
        if cls is np.ndarray or not hasattr(cls, "__array_function__"):
            continue
        if isinstance(x, (np.generic, np.ndarray)):
            continue
        if cls.__module__.startswith("dask"):
            return "lazy", None
        return "other", x
    return "numpy", None


def compiled(graph: Graph, kind: str = "numpy", like: Any = None) -> Any:
    """The compiled replay of ``graph`` for arrays of ``kind`` (passes, custom rules
    inlined, buffer reuse), compiled once per kind and cached on the graph."""
    key = ("compiled", kind, None if like is None else type(like))
    found = graph.cache.get(key)
    if found is None:
        with graph.lock:
            found = graph.cache.get(key)
            if found is None:
                final = final_graph(graph, kind)
                found = graph.cache[key] = compile_graph(final, kind, like)
    return found


def final_graph(graph: Graph, kind: str = "numpy") -> Graph:
    """``graph`` as its replay on arrays of ``kind`` runs it: after the passes, custom
    rules inlined; for libraries that refuse NumPy arrays (``"other"``: CuPy), with no
    new NumPy constants."""
    key = ("final", kind == "other")
    found = graph.cache.get(key)
    if found is None:
        found = graph.cache[key] = optimize(graph, inline_rules=True,
                                            numpy_constants=kind != "other")  # fmt: skip
    return found


def _call_impl(*args: Any, graph: Graph, name: str) -> tuple:
    return compiled(graph, *array_kind(args))(*args)


call_p = CallPrimitive("jit_call", _call_impl, multiple_results=True)


def _derived(graph: Graph, key: tuple, make: Any) -> Any:
    """``make()``, cached on ``graph`` under ``key`` (staged once per key)."""
    found = graph.cache.get(key)
    if found is None:
        with graph.lock:
            found = graph.cache.get(key)
            if found is None:
                found = graph.cache[key] = make()
    return found


def library_of(values: Any) -> Any:
    """An array of the values' library, looking through tracers (None: NumPy)."""
    for v in values:
        like = array_like(v)
        if like is not None:
            return like
    return None


def _avals(values: Any) -> tuple:
    return tuple(aval_of(v) for v in values)


def _is_float(aval: Any) -> bool:
    return getattr(aval, "dtype", np.dtype(object)).kind in "fc"


# --- forward mode ---------------------------------------------------------------------------------


class JvpGraph(NamedTuple):
    graph: Graph  # (primals, non-zero tangents) -> (outputs, tangents of out_has_tangent)
    out_has_tangent: tuple


def jvp_graph(graph: Graph, has_tangent: tuple, tangent_avals: tuple, like: Any) -> JvpGraph:
    body = prepared(graph)
    n = len(body.invars)
    marks: list = []

    def flat(*xs):
        primals, tangents = xs[:n], iter(xs[n:])
        interp = JvpInterpreter()
        with new_interpreter(interp):
            ins = [DualTensor(interp, p, next(tangents)) if t else p
                   for p, t in zip(primals, has_tangent)]  # fmt: skip
            outs = eval_graph(body, *ins)
            pairs = []
            for o in outs:
                mine = owned(interp, o)
                pairs.append((o, None) if mine is None else (mine.primal, mine.tangent))
        marks[:] = [t is not None for _, t in pairs]
        return [p for p, _ in pairs] + [t for _, t in pairs if t is not None]

    avals = [*body.in_avals, *tangent_avals]
    staged = stage(flat, avals, transform="jvp of jit", name=f"jvp({graph.name})", like=like)
    return JvpGraph(staged.graph, tuple(marks))


def runs_functions(graph: Graph) -> bool:
    """Whether ``graph`` holds control flow, whose predicates and trip counts are known
    only from values: a transform of a jitted function then evaluates its graph at
    the transform's own level instead of staging the transformed graph, so loops and
    branches are differentiated and batched as they are eagerly."""
    found = graph.cache.get("runs_functions")
    if found is None:
        found = graph.cache["runs_functions"] = any(
            getattr(eqn.prim, "runs_functions", False) for eqn in graph.eqns
        )
    return found


@process.register(JvpInterpreter, CallPrimitive)
def _jvp_of_call(interp: JvpInterpreter, prim: CallPrimitive, args: tuple, params: dict):
    primals = [a.primal for a in args]
    tangents = [a.tangent for a in args]
    has = tuple(t is not None for t in tangents)
    if not any(has):
        return prim.bind(*primals, **params)
    if runs_functions(params["graph"]):
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


call_p.jvp = lambda tangents, ans, primals, params: _call_jvp_rule(tangents, ans, *primals,
                                                                    **params)  # fmt: skip


# --- reverse mode ---------------------------------------------------------------------------------


class VjpGraphs(NamedTuple):
    forward: Graph  # primals -> (outputs, residuals)
    backward: Graph  # (residuals, cotangents of the floating outputs) -> input cotangents
    n_out: int
    float_outputs: tuple  # positions of the outputs that take a cotangent


def vjp_graphs(graph: Graph, argnums: tuple, like: Any) -> VjpGraphs:
    body = prepared(graph)
    n = len(body.invars)
    float_outputs = tuple(j for j, v in enumerate(body.outvars) if _is_float(v.aval))
    others = tuple(j for j in range(len(body.outvars)) if j not in float_outputs)

    def joint(*xs):
        primals, cts = list(xs[:n]), xs[n:]

        def differentiated(*chosen):
            full = list(primals)
            for i, c in zip(argnums, chosen):
                full[i] = c
            outs = eval_graph(body, *full)
            return tuple(outs[j] for j in float_outputs), tuple(outs[j] for j in others)

        chosen = tuple(primals[i] for i in argnums)
        outs, vjp_fn, aux = _vjp(differentiated, chosen, True, "grad of jit")
        in_cts = vjp_fn(tuple(cts))
        merged: list = [None] * len(body.outvars)
        for j, o in zip(float_outputs, outs):
            merged[j] = o
        for j, o in zip(others, aux):
            merged[j] = o
        return [*merged, *in_cts]

    avals = [*body.in_avals, *(body.outvars[j].aval for j in float_outputs)]
    staged = stage(joint, avals, transform="grad of jit", name=f"vjp({graph.name})", like=like)
    whole = optimize(staged.graph)
    forward, backward = split(whole, n, len(body.outvars))
    return VjpGraphs(forward, backward, len(body.outvars), float_outputs)


def split(graph: Graph, n_primals: int, n_out: int) -> tuple[Graph, Graph]:
    """``graph`` (primals, cotangents -> outputs, input cotangents) as a forward graph
    (primals -> outputs, residuals) and a backward graph (residuals, cotangents ->
    input cotangents): the equations that depend on a cotangent go backward, the
    values they read from the others are the residuals."""
    cts = graph.invars[n_primals:]
    late = set(cts)
    forward, backward = [], []
    for eqn in graph.eqns:
        if any(type(v) is Var and v in late for v in eqn.invars):
            backward.append(eqn)
            late.update(eqn.outvars)
        else:
            forward.append(eqn)
    constants = set(graph.constvars)
    residuals: list[Var] = []
    seen: set[Var] = set()
    wanted = [v for eqn in backward for v in eqn.invars] + graph.outvars[n_out:]
    for v in wanted:
        if type(v) is Var and v not in late and v not in constants and v not in seen:
            seen.add(v)
            residuals.append(v)
    constvars, consts = graph.constvars, graph.consts  # each keeps those it reads (dce)
    fwd = Graph(graph.invars[:n_primals], graph.outvars[:n_out] + residuals, forward,
                constvars, consts, name=f"{graph.name}.forward")  # fmt: skip
    bwd = Graph(residuals + list(cts), graph.outvars[n_out:], backward,
                constvars, consts, name=f"{graph.name}.backward")  # fmt: skip
    return dce(fwd), dce(bwd)


@process.register(GradInterpreter, CallPrimitive)
def _grad_of_call(interp: GradInterpreter, prim: CallPrimitive, args: tuple, params: dict):
    """Run the forward graph now and keep its residuals on the tape for the backward graph."""
    values, parents, _ = unpack(interp, args)
    if not parents or not recording(interp):
        return prim.bind(*values, **params)
    graph = params["graph"]
    if runs_functions(graph):
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


call_p.vjp = _call_vjp_rule


# --- batching -------------------------------------------------------------------------------------


class BatchGraph(NamedTuple):
    graph: Graph
    out_dims: tuple


def batch_graph(graph: Graph, dims: tuple, avals: tuple, size: int, randomness: str, like: Any):
    body = prepared(graph)
    marks: list = []

    def flat(*xs):
        interp = BatchInterpreter(size, randomness)
        with new_interpreter(interp):
            ins = [x if d is None else BatchedTensor(interp, x, d) for x, d in zip(xs, dims)]
            outs = eval_graph(body, *ins)
            pairs = []
            for o in outs:
                mine = owned(interp, o)
                pairs.append((o, None) if mine is None else (mine.value, mine.bdim))
        marks[:] = [d for _, d in pairs]
        return [v for v, _ in pairs]

    staged = stage(flat, avals, transform="vmap of jit", name=f"vmap({graph.name})", like=like)
    return BatchGraph(staged.graph, tuple(marks))


@process.register(BatchInterpreter, CallPrimitive)
def _batch_of_call(interp: BatchInterpreter, prim: CallPrimitive, args: tuple, params: dict):
    values = [a.value for a in args]
    dims = tuple(a.bdim for a in args)
    graph = params["graph"]
    if runs_functions(graph):
        return tuple(eval_graph(graph, *(a.value if a.bdim is None else a for a in args)))
    like = library_of(values)
    key = ("batch", dims, _avals(values), interp.size, interp.randomness, type(like))
    bg = _derived(graph, key, lambda: batch_graph(graph, dims, key[2], interp.size,
                                                   interp.randomness, like))  # fmt: skip
    out = prim.bind(*values, graph=bg.graph, name=f"vmap({params['name']})")
    return tuple(o if d is None else BatchedTensor(interp, o, d) for o, d in zip(out, bg.out_dims))


# vmap treats a call by _batch_of_call; a batching rule (one batch axis per result,
# none for the unbatched ones) is not needed by any transform.


# --- staging: inline ------------------------------------------------------------------------------


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
        interp.eqns.append(Eqn(eqn.prim, [sub(v) for v in eqn.invars], outs, eqn.params))
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
