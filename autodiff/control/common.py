"""What every control-flow primitive shares: the base class, the eager method every
transform uses, functions of flat leaves (staged or not), and reading a predicate.

``cond``/``switch`` (``cond.py``), ``while_loop`` (``while_loop.py``) and ``scan``
(``scan.py``) are ``ControlFlowPrimitive``s whose parameters are the user's functions,
taking and returning flat lists of array leaves (``FlatFn``); their operands are the
leaves of the pytrees passed in.  Each module holds its primitive's entry for every
transform and ends with a registration block listing them; this one holds what they
share:

- **Eagerly every transform runs it at its own level** (``run_here``, the eager regime
  of every entry, and the whole entry of some: explain's, cond's jvp and vmap, cond's and
  scan's Taylor mode): the chosen branch, or the loop, runs on the
  transform's own tracers, so whatever the functions compute, and whatever they close
  over (traced values of any transform included), is recorded, pushed forward or
  batched as if written inline.  That is why reverse mode differentiates a
  ``while_loop`` through the iterations that ran, where JAX refuses.
- **A predicate is read where its values live**, under every tracer (``bottom``): each
  transform's values are concrete, as under torch.func.  Where a ``jit`` stages it
  there are none, and the primitive's own module says what each transform does.
- **Under ``jit``** each function is staged once (``subgraphs.py``) and the equation's
  parameters hold ``GraphFn``s, whose closed-over values are the equation's last
  operands (``n_consts``); ``closed`` hands them back before ``impl`` runs.
- **Type errors are caught where they can be seen**: the leaves and their checks are
  ``leaves.py``'s (``leaves_of``, ``check_like``, ``check_predicate``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import optree

from autodiff.compiler.stages import optimized
from autodiff.compiler.tiers import call_graph
from autodiff.core.arrays import is_float
from autodiff.core.graph import Graph
from autodiff.core.primitive import Primitive, lift, process
from autodiff.core.stack import current_interpreters
from autodiff.core.tracer import Tracer
from autodiff.interpreters.batching import BatchedTensor, BatchInterpreter
from autodiff.interpreters.explain import ExplainInterpreter
from autodiff.interpreters.forward import DualTensor, JvpInterpreter
from autodiff.interpreters.reverse import GradInterpreter
from autodiff.interpreters.staging import (
    StagedTensor,
    StagingInterpreter,
    eval_graph,
    innermost_staging,
)
from autodiff.interpreters.taylor import JetInterpreter, JetTensor
from autodiff.rules.elementwise import stop_gradient, where

__all__ = [
    "ControlFlowPrimitive",
    "FlatFn",
    "GraphFn",
    "bottom",
    "closed",
    "inline_function",
    "derivative_where",
    "run_here",
    "staged_if_jitting",
]


class ControlFlowPrimitive(Primitive):
    """A primitive whose parameters are functions: ``impl`` runs them in Python.

    The package's three (``cond_p``, ``while_loop_p``, ``scan_p``) register an entry for
    every transform in their modules' registration blocks; a subclass with none for an
    interpreter of the package runs at that interpreter's level (``run_here``, the
    defaults below; staging then unrolls it).  A transform of your own treats it like
    any other primitive (its ``process`` on the unwrapped values) unless it registers
    ``run_here`` for this class too.
    """

    __slots__ = ()
    # Graph passes keep, never merge or precompute it: its functions may draw random
    # numbers.  The compiling tier writes it as a loop or a branch (runs_functions).
    effectful = True
    runs_functions = True

    def __init__(self, name: str, impl: Callable, **kwargs: Any) -> None:
        def run(*args: Any, n_consts: int = 0, **params: Any) -> Any:
            if n_consts:  # staged: the functions' closed-over values are the last operands
                args, params = closed(args, n_consts, params)
            return impl(*args, **params)

        run.__name__ = name
        super().__init__(name, run, **kwargs)


def run_here(interp: Any, prim: Primitive, args: tuple, params: dict):
    """Run the branch or the loop on this transform's own tracers.  (No return
    annotation: plum would convert the result, slowly; see ``core/dispatch.py``.)"""
    return prim.impl(*map(_unlifted, args), **params)


def _unlifted(x: Any) -> Any:
    """A constant that ``bind`` lifted into this transform, as it was: rules expect
    such stand-ins (an unbatched BatchedTensor, a DualTensor without a tangent)
    only inside ``bind``, never as a value a function computes with."""
    if isinstance(x, BatchedTensor) and x.bdim is None:
        return x.value
    if isinstance(x, DualTensor) and x.tangent is None:
        return x.primal
    if isinstance(x, JetTensor) and all(c is None for c in x.series):
        return x.primal
    return x


# The defaults for a control-flow primitive with no entry of its own for an interpreter
# (the package's own register one for each): it runs at that interpreter's level (the
# staging included: one with no stager is unrolled).
for _interpreter in (GradInterpreter, JvpInterpreter, BatchInterpreter, ExplainInterpreter,
                     StagingInterpreter, JetInterpreter):  # fmt: skip
    process.register(_interpreter, ControlFlowPrimitive)(run_here)


def staged_if_jitting(operands: list) -> list:
    """``operands``, the first lifted into the innermost interpreter where a staging is
    live and no operand is a value of that interpreter or above it: the functions may
    close over staged values, so the primitive must reach the interpreters (the
    staging stages them; a vmap or jvp inside it stages the loop) rather than run the
    functions at once."""
    stack = current_interpreters()
    if not stack or not operands or innermost_staging() is None:
        return operands
    top = stack[-1]
    if any(isinstance(x, Tracer) and x._interp.level >= top.level for x in operands):
        return operands
    if type(top) is StagingInterpreter:
        return [top.staged(operands[0]), *operands[1:]]
    return [lift(top, operands[0]), *operands[1:]]


# --- functions of flat leaves, staged or not ----------------------------------------------------


class FlatFn:
    """A function on flat leaves returning a tuple of leaves; ``out_tree`` is the
    structure of its last output."""

    __slots__ = ("fn", "in_tree", "out_tree")

    def __init__(self, fn: Callable, in_tree: Any) -> None:
        self.fn, self.in_tree = fn, in_tree
        self.out_tree: Any = None

    def __call__(self, *leaves: Any) -> tuple:
        out, self.out_tree = optree.tree_flatten(
            self.fn(*optree.tree_unflatten(self.in_tree, leaves))
        )
        return tuple(out)


class GraphFn:
    """``graph`` as a function of flat leaves returning a tuple of leaves.

    ``out_tree`` is the structure of what the user's function returned, ``picks``
    which of the equation's closed-over values (``closed``) are the graph's last
    inputs, ``n_carry`` the number of carry leaves of a scan's body (None otherwise).
    """

    __slots__ = ("consts", "graph", "n_carry", "out_tree", "picks")

    def __init__(self, graph: Graph, out_tree: Any, picks: Sequence[int],
                 n_carry: int | None = None, consts: tuple = ()) -> None:  # fmt: skip
        self.graph, self.out_tree, self.picks = graph, out_tree, tuple(picks)
        self.n_carry, self.consts = n_carry, consts

    def bound(self, consts: Sequence[Any]) -> GraphFn:
        """This function with its closed-over values taken from ``consts``."""
        return GraphFn(self.graph, self.out_tree, self.picks, self.n_carry,
                       tuple(consts[i] for i in self.picks))  # fmt: skip

    def __call__(self, *leaves: Any) -> tuple:
        args = (*leaves, *self.consts)
        for a in args:
            if isinstance(a, Tracer):
                return tuple(eval_graph(self.graph, *args))
        # replayed, and compiled once hot: a loop whose body lowers only in part runs its
        # body's compiled regions between the NumPy calls (compiler/tiers.py)
        return call_graph(self.graph, args)

    def __repr__(self) -> str:
        return f"<{self.graph.name}: {len(self.graph.eqns)} eqns>"


def inline_function(ctx: Any, fn: GraphFn, inputs: Sequence[Any], consts: Sequence[Any]) -> list:
    """A lowering's ``ctx`` (``compiler/llvm_context.py``) writes ``fn``'s optimised graph
    inline, on the values ``inputs`` and the closed-over values it picks from ``consts``."""
    return ctx.inline(optimized(fn.graph), [*inputs, *(consts[i] for i in fn.picks)])


def _bind(value: Any, consts: Sequence[Any]) -> Any:
    if type(value) is GraphFn:
        return value.bound(consts)
    if type(value) is tuple and value and type(value[0]) is GraphFn:
        return tuple(v.bound(consts) for v in value)
    return value


def closed(args: tuple, n_consts: int, params: dict) -> tuple[tuple, dict]:
    """The primitive's own operands, and its parameters with each ``GraphFn`` given
    its closed-over values (the last ``n_consts`` operands)."""
    split = len(args) - n_consts
    consts = args[split:]
    return args[:split], {k: _bind(v, consts) for k, v in params.items() if k != "n_consts"}


def derivative_where(mask: Any, values: Sequence) -> tuple:
    """``values``, each one's derivative cut where ``mask`` is False: what a branch or a
    loop body runs on where it runs for examples that do not need it (a batched
    predicate).  Its rules may make a NaN or an inf for those examples (the ``sqrt`` of
    the negative numbers a branch guards against, a Newton step at a root already
    found); ``where`` then selects, and its VJP sends them a zero cotangent, but
    ``0 * nan`` is NaN.  Cut here, that cotangent goes nowhere: no branch or iteration
    an example does not take puts a NaN or an inf into its gradient."""
    return tuple(where(mask, x, stop_gradient(x)) if is_float(x) else x for x in values)


# --- reading a predicate ------------------------------------------------------------------------


def bottom(x: Any) -> Any:
    """The concrete array under all of ``x``'s tracers: the values of every example of
    every ``vmap`` on the stack (batch axes included); None if ``jit`` is staging it
    (under a transform inside the ``jit``), which leaves no values to read."""
    while isinstance(x, Tracer):
        if isinstance(x, StagedTensor):
            return None
        x = x._inner
    return x
