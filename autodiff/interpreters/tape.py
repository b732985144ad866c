"""The reverse-mode tape: nodes, the residuals they keep, and the backward pass.

A ``Node`` is one recorded primitive application.  Nodes reference their
parents (the nodes that made their inputs) and nothing else, so a part of the
computation that no output depends on is freed as soon as its values are.
Each node has a sequence number from a global counter; parents are always
recorded before their children, so walking nodes in decreasing sequence order
is a topological order, and ``backward`` keeps the pending nodes in a heap.

Residuals: a node keeps only the primals and output its VJP rule reads, as
declared by the primitive's ``vjp_reads`` (``add`` keeps nothing, ``tanh``
its output, ``x @ w`` the other operand).  The rest are replaced by a
``Dropped`` stand-in that knows its shape and dtype (which rules may read) and
raises if used as an array, so a wrong declaration fails loudly.  Small values
are kept regardless: dropping them saves no memory and costs time.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
from typing import Any

import numpy as np

from autodiff.core.arrays import is_complex
from autodiff.core.loading import load
from autodiff.core.observe import current_observer
from autodiff.debug import checking_nans
from autodiff.debug import rules_switch as checking
from autodiff.errors import RuleError

__all__ = ["Dropped", "Node", "backward", "keep_residuals", "reachable"]

# Arrays of at most this many elements are kept even when the VJP does not read
# them.  Tests set it to -1 (drop every unread residual) to check declarations.
KEEP_SMALL_RESIDUALS = 256

# Only ever incremented: a later node always has a larger number.
_sequence = itertools.count()


class Node:
    """One recorded primitive application (or, with ``prim=None``, an input).

    ``parents`` holds ``(argument position, parent node, parent's output index
    or None)`` for each input that needs a cotangent.
    """

    __slots__ = ("ans", "params", "parents", "prim", "primals", "seq", "site")
    site: tuple[str, str]  # only under debug_nans: where the primitive was called, and by whom

    def __init__(self, prim, params, primals, ans, parents) -> None:
        self.seq = next(_sequence)
        self.prim = prim
        self.params = params
        self.primals = primals
        self.ans = ans
        self.parents = parents


class Dropped:
    """Stands in for a residual that a primitive's VJP rule does not read.

    It has the value's ``shape``, ``ndim``, ``size`` and ``dtype``; anything
    else raises, naming the primitive, since the declaration was then wrong.
    """

    __slots__ = ("dtype", "position", "prim", "shape")

    def __init__(self, prim: Any, position: int | str, value: Any) -> None:
        self.prim = prim
        self.position = position
        shape = getattr(value, "shape", None)
        self.shape = tuple(shape) if shape is not None else np.shape(value)
        dtype = getattr(value, "dtype", None)
        self.dtype = dtype if dtype is not None else np.result_type(value)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def _misuse(self, *_args: Any, **_kwargs: Any) -> Any:
        what = "its output" if self.position == "ans" else f"its argument {self.position}"
        raise RuleError(
            f"the VJP rule of primitive '{self.prim.name}' read {what}, but the "
            f"primitive's vjp_reads={self.prim.vjp_reads!r} says it does not, so the tape "
            f"did not keep it. Add it to vjp_reads (or drop vjp_reads to keep everything)."
        )

    __array__ = __array_ufunc__ = __array_function__ = __float__ = __index__ = _misuse

    def __repr__(self) -> str:
        return f"<dropped residual shape={self.shape} dtype={self.dtype}>"


# Any use as a value (arithmetic, indexing, iteration, truth) reports the declaration.
# fmt: off
_VALUE_USES = (
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "radd", "rsub",
    "rmul", "rtruediv", "rfloordiv", "rmod", "rpow", "rmatmul", "neg", "pos", "abs",
    "invert", "lt", "le", "gt", "ge", "getitem", "iter", "len", "bool", "int", "complex",
)
# fmt: on
for _name in _VALUE_USES:
    setattr(Dropped, f"__{_name}__", Dropped._misuse)


def keep_residuals(
    prim: Any, primals: list, ans: Any, argnums: list, limit: int | None = None
) -> tuple[Any, Any]:
    """``(primals, ans)`` with what ``prim``'s VJP for ``argnums`` does not read
    replaced by ``Dropped`` stand-ins (see the module docstring); arrays of at
    most ``limit`` elements are kept (default ``KEEP_SMALL_RESIDUALS``)."""
    # On the hot path of every recorded primitive: plain loops, no generators.
    reads = prim.vjp_reads
    if reads is None:
        return primals, ans
    if limit is None:
        limit = KEEP_SMALL_RESIDUALS
    if getattr(ans, "size", 0) <= limit:
        for p in primals:
            if getattr(p, "size", 0) > limit:
                break
        else:
            return primals, ans
    needed = (
        reads[argnums[0]] if len(argnums) == 1 else frozenset().union(*[reads[i] for i in argnums])
    )
    primals = [
        p if i in needed or getattr(p, "size", 0) <= limit else Dropped(prim, i, p)
        for i, p in enumerate(primals)
    ]
    if "ans" not in needed and getattr(ans, "size", 0) > limit:
        ans = Dropped(prim, "ans", ans)
    return primals, ans


def reachable(roots: list[Node]) -> list[Node]:
    """The nodes ``roots`` depend on (themselves included), parents first."""
    seen = {id(root): root for root in roots}
    todo = list(roots)
    while todo:
        for _, parent, _ in todo.pop().parents:
            if id(parent) not in seen:
                seen[id(parent)] = parent
                todo.append(parent)
    return sorted(seen.values(), key=lambda node: node.seq)


_UNOBSERVED = contextlib.nullcontext()  # (one, reused: it holds nothing)


def backward(
    seeds: list[tuple[Node, int | None, Any]], consume: bool = False, stop: int = -1
) -> dict:
    """Propagate cotangents from ``seeds``; returns the cotangent of every input node.

    Cotangents are dropped as soon as their node has run.  With ``consume``
    (the tape is used once, as in ``grad``) each node also lets go of its
    residuals and parents once it has run, so memory shrinks as the pass goes.
    Nodes numbered below ``stop`` count as inputs: the pass ends there, which
    is how ``scan(..., checkpoint=True)`` runs the backward pass of one step
    whose function closed over values recorded before it (``control/scan.py``).
    """
    cts: dict[Node, Any] = {}
    heap: list[tuple[int, Node]] = []
    push, pop = heapq.heappush, heapq.heappop

    def accumulate(node: Node, index: int | None, ct: Any) -> None:
        old = cts.get(node)
        if old is None:
            push(heap, (-node.seq, node))
        if index is None:
            cts[node] = ct if old is None else old + ct
        else:
            slots = old if old is not None else [None] * len(node.ans)
            slots[index] = ct if slots[index] is None else slots[index] + ct
            cts[node] = slots

    for node, index, ct in seeds:
        accumulate(node, index, ct)
    inputs = {}
    check = checking.get()
    nans = checking_nans()
    observer = current_observer()
    # explain's hook: ``mark.what`` tells it what the calls made now belong to
    observed = _UNOBSERVED if observer is None else observer.backward()
    with observed as mark:
        while heap:  # the hot loop: the common cases are inlined
            node = pop(heap)[1]
            ct = cts.pop(node)
            prim = node.prim
            if prim is None or node.seq < stop:
                inputs[node] = ct
                continue
            primals = node.primals
            parents = node.parents
            if prim.multiple_results:
                ct = tuple([np.zeros_like(a) if c is None else c for c, a in zip(ct, node.ans)])
            rule = prim.vjp or prim.vjp_rule()
            rules = getattr(rule, "rules", None)
            if nans or mark is not None:  # the slow path: debug_nans, explain
                if mark is not None:
                    mark.what = f"VJP of {prim.name}"
                arg_cts = _checked_vjp(node, rule, ct, check, nans)
                if mark is not None:
                    mark.what = f"cotangent sum after {prim.name}"
            elif rules is not None and not check:  # per-argument rules, without the wrapper
                ans, params = node.ans, node.params
                arg_cts = [
                    None if (r := rules[a]) is None else r(ct, ans, *primals, **params)
                    for a, _, _ in parents
                ]
            else:
                argnums = [argnum for argnum, _, _ in parents]
                arg_cts = rule(ct, node.ans, primals, node.params, argnums)
                if check:
                    load("autodiff.debug.rule_checks").validate_vjp(prim, arg_cts, primals, argnums)
            if consume:
                node.primals = node.ans = node.parents = None  # type: ignore[assignment]
            for (argnum, parent, index), arg_ct in zip(parents, arg_cts):
                if arg_ct is None:
                    continue
                dtype = getattr(arg_ct, "dtype", None)
                if dtype is not None and dtype.kind == "c" and not is_complex(primals[argnum]):
                    arg_ct = np.real(arg_ct)  # the cotangent of a real value is real
                if index is None:
                    old = cts.get(parent)
                    if old is None:
                        cts[parent] = arg_ct
                        push(heap, (-parent.seq, parent))
                    else:
                        cts[parent] = old + arg_ct
                else:
                    accumulate(parent, index, arg_ct)
    return inputs


def _checked_vjp(node: Node, rule: Any, ct: Any, check: bool, nans: bool) -> list:
    """The node's VJP rule, with the checks of debug_rules and debug_nans (their modules
    loaded by then: by ``debug_rules()`` and ``debug_nans()``)."""
    prim, primals = node.prim, node.primals
    argnums = [argnum for argnum, _, _ in node.parents]
    if nans:  # errors raised inside the rule name it
        debug_nans = load("autodiff.debug.nans")
        with debug_nans.in_vjp_of(prim.name, debug_nans.node_site(node)[0]):
            arg_cts = rule(ct, node.ans, primals, node.params, argnums)
    else:
        arg_cts = rule(ct, node.ans, primals, node.params, argnums)
    if check:
        load("autodiff.debug.rule_checks").validate_vjp(prim, arg_cts, primals, argnums)
    if nans:
        for argnum, arg_ct in zip(argnums, arg_cts):
            if arg_ct is not None:
                debug_nans.check_cotangent(node, argnum, ct, arg_ct, primals)
    return arg_cts
