"""Transforms of a staged graph into another staged graph: its JVP, its VJP as a
forward and a backward graph, its batched form.

Each stages the transform (``jvp``, ``vjp``, ``vmap``) of the graph's evaluation
(``eval_graph`` binds each equation's primitive, so the interpreter transforms it)
and returns the new graph with what the caller needs to call it.  The call primitive
(``call.py``) uses them for ``grad(jit(f))``, ``vmap(jit(f))``, ``jvp(jit(f))``; the
control-flow primitives (``control/``) for their staged functions.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from autodiff.compiler.derived import derived_of
from autodiff.compiler.passes import dce, optimize
from autodiff.core.arrays import is_float
from autodiff.core.graph import Graph, Var
from autodiff.core.stack import new_interpreter, owned
from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
from autodiff.interpreters.forward import DualTensor, JvpInterpreter
from autodiff.interpreters.reverse import _vjp
from autodiff.interpreters.staging import eval_graph, stage

__all__ = [
    "BatchGraph",
    "JvpGraph",
    "VjpGraphs",
    "batch_graph",
    "jvp_graph",
    "prepared",
    "split",
    "vjp_graphs",
]


def prepared(graph: Graph) -> Graph:
    """``graph`` as it is transformed: after the passes, with custom rules kept."""
    store = derived_of(graph)
    found = store.prepared
    if found is None:
        found = store.prepared = optimize(graph)
    return found


# --- forward mode --------------------------------------------------------------------------------


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


# --- reverse mode --------------------------------------------------------------------------------


class VjpGraphs(NamedTuple):
    forward: Graph  # primals -> (outputs, residuals)
    backward: Graph  # (residuals, cotangents of the floating outputs) -> input cotangents
    n_out: int
    float_outputs: tuple  # positions of the outputs that take a cotangent


def vjp_graphs(graph: Graph, argnums: tuple, like: Any) -> VjpGraphs:
    body = prepared(graph)
    n = len(body.invars)
    float_outputs = tuple(j for j, v in enumerate(body.outvars) if is_float(v.aval))
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


# --- batching --------------------------------------------------------------------------------


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
