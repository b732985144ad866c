"""What every control-flow primitive shares: the base class, the eager method every
transform uses, functions of flat leaves (staged or not), and the type checks.

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
- **Type errors are caught where they can be seen** (``check_like``): branches that
  ran disagreeing in structure, shape or dtype, a loop body that changes its carry, a
  predicate that is not a boolean scalar, each naming the offending leaf.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from autodiff.compiler.stages import optimized
from autodiff.compiler.tiers import call_graph
from autodiff.core.args import a_type, is_array
from autodiff.core.arrays import dtype_of, is_float, shape_of
from autodiff.core.graph import Graph
from autodiff.core.primitive import Primitive, lift, process
from autodiff.core.stack import current_interpreters
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformTypeError
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
    "CARRY_HINT",
    "ControlFlowPrimitive",
    "FlatFn",
    "GraphFn",
    "bottom",
    "check_like",
    "check_predicate",
    "closed",
    "inline_function",
    "derivative_where",
    "is_static_int",
    "leaves_of",
    "names_of",
    "output_types",
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


# --- leaves and their types ---------------------------------------------------------------------


def leaves_of(tree: Any, root: str, what: str) -> tuple[list, Any, list[str]]:
    """The leaves of ``tree``, its structure and each leaf's name (``init_val['h']``);
    every leaf must be an array or a Python number."""
    leaves, treedef = optree.tree_flatten(tree)
    names = names_of(treedef, root)
    for leaf, name in zip(leaves, names):
        if not (is_array(leaf) or isinstance(leaf, (bool, int, float, complex))):
            raise TransformTypeError(
                f"{what}: {name} is {a_type(leaf)}, not an array; the values passed to "
                f"control flow must be arrays or numbers (pytrees of them). Pass other "
                f"values to the functions through a closure."
            )
    return leaves, treedef, names


def names_of(tree: Any, root: str) -> list[str]:
    """Each leaf's name in the structure ``tree``: ``root['h'][0]``."""
    return [root + "".join(f"[{p!r}]" for p in path) for path in tree.paths()]


def _describe(x: Any) -> str:
    return f"shape {shape_of(x)} and dtype {dtype_of(x)}"


_KINDS = {"b": "b", "i": "i", "u": "i", "f": "f", "c": "c"}

_NUMBERS = (bool, int, float, complex)


def _same_type(ref: Any, got: Any) -> bool:
    """Same shape and dtype; a Python number (weakly typed, as in JAX) matches any
    dtype of its kind (``0.0`` a float32 value, ``0`` an int32 one)."""
    weak = type(ref) in _NUMBERS or type(got) in _NUMBERS
    if not weak:  # arrays and tracers: checked on every iteration, so first and quickly
        return ref.shape == got.shape and ref.dtype == got.dtype
    if type(ref) is type(got):
        return True
    if shape_of(ref) != shape_of(got):
        return False
    return _KINDS.get(dtype_of(ref).kind) == _KINDS.get(dtype_of(got).kind)


def check_like(
    got_leaves: Sequence, got_tree: Any, ref_leaves: Sequence, ref_tree: Any,
    names: Sequence[str], who: str, ref_what: str, hint: str,
) -> None:  # fmt: skip
    """Raise ``TransformTypeError`` unless ``who`` (what a function returned) matches
    ``ref_what`` in structure and in each leaf's shape and dtype, naming the leaf."""
    if got_tree != ref_tree:
        raise TransformTypeError(
            f"{who} is structured as {got_tree}, where {ref_what} is structured as "
            f"{ref_tree}; {hint}"
        )
    for got, ref, name in zip(got_leaves, ref_leaves, names):
        if not _same_type(ref, got):
            raise TransformTypeError(
                f"{who} has {_describe(got)} at {name}, where {ref_what} has "
                f"{_describe(ref)}; {hint}"
            )


def output_types(fn: Callable, leaves: Sequence) -> tuple[Any, list] | None:
    """The output structure of the branch ``fn`` on ``leaves`` and, per output leaf, a
    value with its ``shape`` and ``dtype``, without running it; None where that
    needs running it.

    Eagerly a branch runs or it does not, nothing more (so None); under ``jit`` every
    branch is staged and checked when the ``cond`` is (``cond_staged.stage_branches``).
    A hook for transforms that know the types of a function without running it.
    """
    return None


_SCALARS = {"bool": (bool, np.bool_), "int": (int, np.int64, np.int32)}


def check_predicate(pred: Any, what: str, kind: str) -> None:
    """``kind`` "bool": a boolean scalar (cond, while_loop); "int": an integer
    scalar (switch)."""
    if type(pred) in _SCALARS[kind]:  # checked once per iteration: fast
        return
    if not (is_array(pred) or isinstance(pred, (bool, int, float, complex))):
        raise TransformTypeError(f"{what} must be a scalar array, got {a_type(pred)}.")
    shape, dtype = shape_of(pred), dtype_of(pred)
    if shape != ():
        raise TransformTypeError(
            f"{what} must be a scalar (shape ()), got shape {shape}. Reduce it first "
            f"(x.all(), x.any(), x.sum() > 0); to choose elementwise use anp.where; "
            f"under vmap the examples' scalars may differ, which is allowed."
        )
    if kind == "bool" and dtype.kind != "b":
        raise TransformTypeError(
            f"{what} must be boolean, got dtype {dtype}; compare it (n != 0, x > 0) to "
            f"make a boolean, or use switch to choose by an integer."
        )
    if kind == "int" and dtype.kind not in "iu":
        raise TransformTypeError(
            f"{what} must be an integer, got dtype {dtype}; convert it with "
            f".astype(int) (a boolean chooses between two branches with cond)."
        )


def is_static_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


CARRY_HINT = "a loop's carry keeps its structure, shapes and dtypes (cast with .astype)."


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
