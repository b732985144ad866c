"""Control flow as primitives: ``cond``, ``switch``, ``while_loop`` (``scan`` and
``fori_loop`` are in ``_scan.py``).

Each is a ``ControlFlowPrimitive`` whose parameters are the user's functions, taking
and returning flat lists of array leaves; its operands are the leaves of the
pytrees passed in.  Every transform of the package runs it *at its own level*: the
chosen branch, or the loop, runs on the transform's own tracers (``_run_here``), so
whatever the functions compute, and whatever they close over (traced values of
any transform included), is recorded, pushed forward or batched as if written
inline.  That is why reverse mode differentiates a ``while_loop`` through the
iterations that ran, where JAX refuses.

Where the predicate's examples disagree (it is batched by a ``vmap``, here or
further down the stack), the branches some example takes run and ``where``
selects per example; a loop runs until every example is done, finished examples
frozen.  The predicate's values are read where they live, under every tracer
(``_bottom``): each transform's values are concrete, as under torch.func.

Type errors are caught where they can be seen without running a branch that is
not taken (``check_like``): branches that ran disagreeing in structure, shape or
dtype, a loop body that changes its carry, a predicate that is not a boolean
scalar, each naming the offending leaf.  Eagerly a branch that is not taken does
not run, so it is not checked; under ``jit`` every branch is staged and checked
(``_staged_control.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import optree

from autodiff._args import a_type, check_callable, is_array
from autodiff._batching import BatchedTensor, BatchInterpreter
from autodiff._core import Primitive, current_interpreters, lift, process
from autodiff._explain import ExplainInterpreter
from autodiff._forward import DualTensor, JvpInterpreter
from autodiff._reverse import GradInterpreter
from autodiff._staging import StagedTensor, StagingInterpreter, innermost_staging
from autodiff._subgraphs import closed
from autodiff._tracer import Tracer
from autodiff.errors import ConcretizationError, TransformTypeError
from autodiff.rules._helpers import dtype_of, shape_of
from autodiff.rules.elementwise import clip, equal, where

__all__ = [
    "CondPrimitive",
    "ControlFlowPrimitive",
    "WhileLoopPrimitive",
    "check_like",
    "cond",
    "cond_p",
    "leaves_of",
    "names_of",
    "output_types",
    "staged_if_jitting",
    "switch",
    "while_loop",
    "while_loop_p",
]


class ControlFlowPrimitive(Primitive):
    """A primitive whose parameters are functions: ``impl`` runs them in Python.

    Every transform of the package runs it at its own level (``_run_here``); staging
    records it with its functions staged (``_staged_control.py``).  A transform of
    your own treats it like any other primitive (its ``process`` on the unwrapped
    values) unless it registers ``_run_here`` for this class too.
    """

    __slots__ = ()
    # Graph passes keep, never merge or precompute it: its functions may draw random
    # numbers.  A staged program holding one is evaluated at the level of a transform
    # outside the jit (_call.py), where its predicates have values.
    effectful = True
    runs_functions = True

    def __init__(self, name: str, impl: Callable, **kwargs: Any) -> None:
        def run(*args: Any, n_consts: int = 0, **params: Any) -> Any:
            if n_consts:  # staged: the functions' closed-over values are the last operands
                args, params = closed(args, n_consts, params)
            return impl(*args, **params)

        run.__name__ = name
        super().__init__(name, run, **kwargs)


def _run_here(interp: Any, prim: Primitive, args: tuple, params: dict):
    """Run the branch or the loop on this transform's own tracers.  (No return
    annotation: plum would convert the result, slowly; see ``_dispatch.py``.)"""
    return prim.impl(*map(_unlifted, args), **params)


def _unlifted(x: Any) -> Any:
    """A constant that ``bind`` lifted into this transform, as it was: rules expect
    such stand-ins (an unbatched BatchedTensor, a DualTensor without a tangent)
    only inside ``bind``, never as a value a function computes with."""
    if isinstance(x, BatchedTensor) and x.bdim is None:
        return x.value
    if isinstance(x, DualTensor) and x.tangent is None:
        return x.primal
    return x


for _interpreter in (GradInterpreter, JvpInterpreter, BatchInterpreter, ExplainInterpreter):
    process.register(_interpreter, ControlFlowPrimitive)(_run_here)


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


# --- leaves and their types ------------------------------------------------------------


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
    branch is staged and checked when the ``cond`` is (``_staged_control.py``).  A
    hook for transforms that know the types of a function without running it.
    """
    return None


_SCALARS = {"bool": (bool, np.bool_), "int": (int, np.int64, np.int32)}


def _check_predicate(pred: Any, what: str, kind: str) -> None:
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


# --- reading a predicate ---------------------------------------------------------------


def _bottom(x: Any) -> Any:
    """The concrete array under all of ``x``'s tracers: the values of every example of
    every ``vmap`` on the stack (batch axes included); None if ``jit`` is staging it
    (under a transform inside the ``jit``), which leaves no values to read."""
    while isinstance(x, Tracer):
        if isinstance(x, StagedTensor):
            return None
        x = x._inner
    return x


def _taken(index: Any, n: int) -> list[int]:
    """The branches some example takes (``index`` clamped to [0, n - 1]), sorted; for
    a batch of no examples the first branch (which gives the outputs' types); every
    branch where the index is staged (then ``where`` selects, as JAX's ``cond`` does
    under ``vmap``)."""
    if not isinstance(index, Tracer):
        return [min(max(int(index), 0), n - 1)]
    values = _bottom(index)
    if values is None:
        return list(range(n))
    if np.ndim(values) == 0:
        return [min(max(int(values), 0), n - 1)]
    return sorted({min(max(int(v), 0), n - 1) for v in np.unique(values)}) or [0]


def _decided(pred: Any) -> bool | None:
    """``bool(pred)`` when every example agrees (or nothing is batched), None when the
    examples of a batch differ; False for a batch of no examples."""
    if not isinstance(pred, Tracer):
        return bool(pred)
    values = _bottom(pred)
    if values is None:
        raise ConcretizationError(
            "while_loop: its condition is staged by jit, under reverse mode running inside "
            "the jit (jit(grad(f))), which would have to record a number of iterations not "
            "known while staging. Put grad outside the jit instead (grad(jit(f)): the loop "
            "is staged once, grad runs it), or loop a fixed number of times with "
            "fori_loop(0, n, ...) or scan; vmap and jvp inside a jit stage the loop."
        )
    if not bool(np.any(values)):
        return False
    return True if bool(np.all(values)) else None


# --- cond and switch -------------------------------------------------------------------


def _cond_impl(index: Any, *operands: Any, branches: tuple, names: tuple, who: str) -> tuple:
    taken = _taken(index, len(branches))
    outs = {b: branches[b](*operands) for b in taken}
    first = taken[0]
    ref_tree = branches[first].out_tree
    ref_names = names_of(ref_tree, "output")
    hint = "every branch must return the same structure, shapes and dtypes."
    for b, branch in enumerate(branches):
        # a branch that did not run: its types, where they can be known without running it
        got = (branch.out_tree, outs[b]) if b in outs else output_types(branch, operands)
        if got is not None and b != first:
            check_like(got[1], got[0], outs[first], ref_tree, ref_names,
                       f"{who}: the output of {names[b]}", f"the output of {names[first]}",
                       hint)  # fmt: skip
    if len(taken) == 1:
        return outs[first]
    if dtype_of(index).kind == "b":  # cond: one select
        return tuple(where(index, t, f) for t, f in zip(outs[1], outs[0]))
    index = clip(index, 0, len(branches) - 1)
    chosen = list(outs[taken[-1]])
    for b in reversed(taken[:-1]):
        chosen = [where(equal(index, b), o, c) for o, c in zip(outs[b], chosen)]
    return tuple(chosen)


class CondPrimitive(ControlFlowPrimitive):
    """``cond`` and ``switch``: reverse mode inside a ``jit`` has a method of its own
    (``_staged_grad.py``)."""

    __slots__ = ()


cond_p = CondPrimitive("cond", _cond_impl, multiple_results=True)


class _Branch:
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


def _branch_call(what: str, index: Any, fns: Sequence[Callable], names: tuple, operands):
    leaves, tree, _ = leaves_of(tuple(operands), "operands", what)
    branches = tuple(_Branch(fn, tree) for fn in fns)
    index, *leaves = staged_if_jitting([index, *leaves])
    outs = cond_p.bind(index, *leaves, branches=branches, names=names, who=what)
    ran = next(b for b in branches if b.out_tree is not None)
    return optree.tree_unflatten(ran.out_tree, list(outs))


def cond(pred: Any, true_fun: Callable, false_fun: Callable, *operands: Any) -> Any:
    """``true_fun(*operands)`` if ``pred`` else ``false_fun(*operands)`` (JAX's ``lax.cond``).

    ``pred`` is a boolean scalar; operands and results are pytrees of arrays, and
    both branches must return the same structure, shapes and dtypes.  Eagerly and
    under ``grad``/``jvp`` only the chosen branch runs (and is differentiated);
    under ``vmap`` with a batched ``pred``, each branch some example takes runs and
    the results are selected per example.

    >>> import numpy as np, autodiff
    >>> f = lambda x: autodiff.cond(x > 0, lambda x: x**2, lambda x: -x, x)
    >>> float(autodiff.grad(f)(3.0)), float(autodiff.grad(f)(-3.0))
    (6.0, -1.0)
    >>> autodiff.vmap(f)(np.array([-2.0, 3.0]))
    array([2., 9.])
    """
    check_callable(true_fun, "cond (true_fun)")
    check_callable(false_fun, "cond (false_fun)")
    _check_predicate(pred, "cond: pred", "bool")
    return _branch_call("cond", pred, (false_fun, true_fun), ("false_fun", "true_fun"), operands)


def switch(index: Any, branches: Sequence[Callable], *operands: Any) -> Any:
    """``branches[index](*operands)``, ``index`` clamped to ``[0, len(branches) - 1]``
    (JAX's ``lax.switch``).

    ``index`` is an integer scalar; every branch must return the same structure,
    shapes and dtypes.  Transforms treat it as :func:`cond`.

    >>> import numpy as np, autodiff
    >>> fs = [lambda x: x, lambda x: 2 * x, lambda x: 3 * x]
    >>> [float(autodiff.switch(i, fs, 1.0)) for i in (-1, 1, 7)]
    [1.0, 2.0, 3.0]
    >>> autodiff.vmap(lambda i, x: autodiff.switch(i, fs, x))(np.array([0, 2]), np.ones(2))
    array([1., 3.])
    """
    if not isinstance(branches, (list, tuple)) or not branches:
        raise TransformTypeError(
            f"switch(index, branches, *operands): branches must be a non-empty list or "
            f"tuple of functions, got {a_type(branches)}."
        )
    for i, fn in enumerate(branches):
        check_callable(fn, f"switch (branches[{i}])")
    _check_predicate(index, "switch: index", "int")
    names = tuple(f"branches[{i}]" for i in range(len(branches)))
    return _branch_call("switch", index, tuple(branches), names, operands)


# --- while_loop and fori_loop ----------------------------------------------------------


_CARRY_HINT = "a loop's carry keeps its structure, shapes and dtypes (cast with .astype)."


def _while_impl(*carry: Any, cond_fun: _Branch, body_fun: _Branch, tree: Any,
                names: list | None, who: str) -> tuple:  # fmt: skip
    while True:
        pred = cond_fun(*carry)
        if not cond_fun.out_tree.is_leaf():
            raise TransformTypeError(
                f"{who}: cond_fun must return a boolean scalar, got a value structured "
                f"as {cond_fun.out_tree}."
            )
        pred = pred[0]
        _check_predicate(pred, f"{who}: the value cond_fun returns", "bool")
        running = _decided(pred)
        if running is False:
            return tuple(carry)
        new = body_fun(*carry)
        if names is not None:
            check_like(new, body_fun.out_tree, carry, tree, names,
                       f"{who}: the value body_fun returned", "the value it was given",
                       _CARRY_HINT)  # fmt: skip
        if running is None:  # some examples are done: they keep their carry
            new = tuple(n if n is c else where(pred, n, c) for n, c in zip(new, carry))
        carry = new


class WhileLoopPrimitive(ControlFlowPrimitive):
    """``while_loop``: under ``jit``, ``vmap`` and ``jvp`` inside the staging have methods
    of their own (``_staged_control.py``)."""

    __slots__ = ()


while_loop_p = WhileLoopPrimitive("while_loop", _while_impl, multiple_results=True)


def _while(who: str, cond_fun: Callable, body_fun: Callable, init_val: Any,
           check_carry: bool = True) -> Any:  # fmt: skip
    """``while_loop``; ``check_carry=False``: the caller's body checks the carry itself."""
    leaves, tree, names = leaves_of(init_val, "init_val", who)
    called = optree.tree_structure((init_val,))  # the functions take the carry as one argument
    outs = while_loop_p.bind(*staged_if_jitting(leaves), cond_fun=_Branch(cond_fun, called),
                             body_fun=_Branch(body_fun, called), tree=tree,
                             names=names if check_carry else None, who=who)  # fmt: skip
    return optree.tree_unflatten(tree, list(outs))


def while_loop(cond_fun: Callable, body_fun: Callable, init_val: Any) -> Any:
    """``val = init_val; while cond_fun(val): val = body_fun(val)`` (JAX's ``lax.while_loop``).

    ``cond_fun`` returns a boolean scalar; ``body_fun`` returns a value with the
    structure, shapes and dtypes of ``init_val`` (a pytree of arrays).  Reverse mode
    differentiates through the iterations that ran (JAX's reverse mode refuses a
    while loop; this one runs eagerly and records them).  Under ``vmap`` with a
    condition that differs per example, the loop runs until every example is done,
    and finished examples keep their value.

    >>> import numpy as np, autodiff
    >>> def newton_sqrt(a):  # x <- (x + a / x) / 2 until x * x is close to a
    ...     return autodiff.while_loop(lambda x: abs(x * x - a) > 1e-12,
    ...                                lambda x: (x + a / x) / 2, a)
    >>> autodiff.vmap(newton_sqrt)(np.array([4.0, 9.0, 1e6]))
    array([   2.,    3., 1000.])
    >>> round(float(autodiff.grad(newton_sqrt)(4.0)), 9)  # d sqrt(a) / da = 1 / (2 sqrt(a))
    0.25
    """
    check_callable(cond_fun, "while_loop (cond_fun)")
    check_callable(body_fun, "while_loop (body_fun)")
    return _while("while_loop", cond_fun, body_fun, init_val)
