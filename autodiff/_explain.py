"""explain: run a function, recording each primitive call that reaches NumPy through it."""

from __future__ import annotations

import functools
import sys
from collections import namedtuple
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import optree

from autodiff import _core, _tape
from autodiff._args import check_callable
from autodiff._batching import BatchedTensor
from autodiff._core import Interpreter, Primitive, current_interpreters, dispatch, new_interpreter
from autodiff._tracer import Tracer, check_live

__all__ = ["Call", "ExplainInterpreter", "ExplainTensor", "Explanation", "Stage", "explain"]


class ExplainInterpreter(Interpreter):
    __slots__ = ("calls", "frame")
    transform = "explain"
    calls: list[Call]
    frame: Any  # the explain call's frame: where the walk stops


class ExplainTensor(Tracer):
    __slots__ = ("value",)

    def __init__(self, interp, value) -> None:
        self._interp, self.value = interp, value

    @property
    def _inner(self):
        return self.value


# Stage: one interpreter's part in a call; depth: its place on the stack (1: outermost,
# 0: NumPy); ins, out: "f64[3,2]" per argument and per result (out None if unknown).
# Call: its stages top down (NumPy last); within: the rules it was made in, outermost first.
Stage = namedtuple("Stage", "transform depth rule ins out")
Call = namedtuple("Call", "prim stages within")
ExplainInterpreter.tracer_class = ExplainTensor
_RULES = {"grad": "tape node", "jvp": "primal", "explain": "record", "vmap": "batching rule"}
_TRACED = (np.ndarray, np.generic, float, complex)
_codes: tuple[int, frozenset] = (-1, frozenset())
_process: Any = _core.process  # plum's Function: .methods


def _spec(x: Any) -> str:
    dtype = np.dtype(x.dtype if hasattr(x, "dtype") else np.result_type(x))
    kind = "bool" if dtype.kind == "b" else f"{dtype.kind}{dtype.itemsize * 8}"
    return f"{kind}[{','.join(map(str, x.shape if hasattr(x, 'shape') else np.shape(x)))}]"


def _example(x: Any) -> Any:  # x's value at its own level, for example 0 of its batches
    value = _example(x._inner) if isinstance(x, Tracer) else x
    batched = isinstance(x, BatchedTensor) and x.bdim is not None
    return np.take(value, 0, x.bdim) if batched else value


@dispatch
def lift(interp: ExplainInterpreter, x: object):
    return ExplainTensor(interp, x)


@dispatch
def process(interp: ExplainInterpreter, prim: Primitive, args: tuple, params: dict):
    # The chain, at no cost to runs without explain: the interpreters above are still in
    # their ``process`` (each bound the primitive on unwrapped values, which led here).
    # Walk the frames outward to the explain call, pick those running a registered
    # ``process`` (``_core.process.methods``, re-read when their number changes), read
    # their ``interp``, ``prim``, ``args``, ``params`` (its first four locals).  What that
    # process called tells how our call relates to it: ``bind`` (grad, jvp): the same
    # call, one level up; vmap's batching rule: the same call if the same primitive, else
    # one made inside the rule (moveaxis's transpose); jvp's JVP rule: inside it.  A
    # ``_tape.backward`` frame (local ``node``): made in ``node.prim``'s VJP.
    global _codes
    if len(methods := _process.methods) != _codes[0]:
        _codes = (len(methods), frozenset(m.implementation.__code__ for m in methods))
    stack, above = current_interpreters(), []
    within: list[str] = []
    current: str | None = prim.name
    summing = False
    child, frame = sys._getframe(), sys._getframe(1)
    while frame is not None and frame is not interp.frame:
        if frame.f_code in _codes[1]:
            owner, p, p_args, p_params = map(
                frame.f_locals.__getitem__, frame.f_code.co_varnames[:4]
            )
            kind, name = owner.transform, getattr(owner, "name", owner.transform)
            depth = stack.index(owner) + 1 if owner in stack else 0
            via_bind = child.f_code is Primitive.bind.__code__
            rule = "JVP rule" if kind == "jvp" and not via_bind else _RULES.get(kind, "process")
            if via_bind or (current == p.name and kind != "jvp"):
                if not within:
                    above.append((name, depth, rule, p, p_args, p_params))
            else:
                within.insert(0, f"{rule} of {p.name} ({name} L{depth})")
            current = p.name
        elif frame.f_code is _tape.add_cotangents.__code__:
            summing = True
        elif frame.f_code is _tape.backward.__code__:
            what = "cotangent sum after" if summing else "VJP of"
            summing = False
            within.insert(0, f"{what} {frame.f_locals['node'].prim.name} (backward pass)")
            current = None
        child, frame = frame, frame.f_back  # type: ignore[assignment]
    values = tuple(arg.value for arg in args)
    ans = prim.bind(*values, **params)
    out: tuple | None = tuple(map(_spec, ans if prim.multiple_results else (ans,)))
    stages = [Stage("numpy", 0, "impl", tuple(map(_spec, values)), out)]
    for name, depth, rule, p, p_args, p_params in above:  # bottom up
        if (ins := tuple(map(_spec, p_args))) != stages[0].ins:  # batched: run example 0
            try:
                with np.errstate(all="ignore"):
                    res = p.impl(*map(_example, p_args), **p_params)
                out = tuple(map(_spec, res if p.multiple_results else (res,)))
            except Exception:
                out = None
        stages.insert(0, Stage(name, depth, rule, ins, out))
    interp.calls.append(Call(prim.name, tuple(stages), tuple(within)))
    wrap = functools.partial(ExplainTensor, interp)
    return tuple(map(wrap, ans)) if prim.multiple_results else wrap(ans)


class Explanation(NamedTuple):
    """``explain(func)(...)``: func's ``result``, its ``calls`` in the order NumPy ran them."""

    result: Any
    calls: list[Call]
    title: str

    def __repr__(self) -> str:
        return f"<Explanation of {self.title}: {len(self.calls)} primitive call(s)>"

    def __str__(self) -> str:
        rows: list[tuple] = [("#", "primitive", "handled by", "rule", "shapes")]
        last: tuple = ()
        for i, (prim, stages, within) in enumerate(self.calls, 1):
            if within and within != last:  # a row of one cell: the rules of the calls below
                rows.append((f"in {' > '.join(within)}:",))
            io = [f"{', '.join(s.ins)} -> {', '.join(s.out or '?')}" for s in stages[::-1]]
            chain = " -> ".join(f"{s.transform} L{s.depth}" if s.depth else "numpy" for s in stages)
            rules = ", ".join(s.rule for s in stages[:-1]) or "-"
            shapes = io[-1] if io[-1] == io[0] else f"{io[-1]} | batched {io[0]}"
            rows.append((str(i), "  " * bool(within) + prim, chain, rules, shapes))
            last = within
        w = [max(len(r[k]) for r in rows if len(r) > 1) for k in range(4)]
        lines = [f"{self.title}: {len(self.calls)} primitive call(s)"]
        for r in rows:
            cells = [r[0].rjust(w[0]), *(c.ljust(n) for c, n in zip(r[1:4], w[1:])), *r[4:]]
            lines.append(" " + "  ".join(cells) if len(r) > 1 else f"    {r[0]}")
        return "\n".join(lines)


def explain(func: Callable) -> Callable:
    """Run ``func``, recording each primitive call that reaches NumPy through it.

    ``explain(func)(*args, **kwargs)`` returns an :class:`Explanation`: ``.result`` (func's
    output) and ``.calls``; print it for a table.  Array and float leaves of ``args`` are
    traced.  Explain transforms from outside: ``explain(vmap(grad(loss)))(w, xs, ys)``.

    >>> import numpy as np
    >>> from autodiff import grad
    >>> from autodiff import explain
    >>> print(explain(grad(np.sin))(0.0))
    explain(grad(sin))(f64[]): 4 primitive call(s)
     #  primitive   handled by        rule       shapes
     1  sin         grad L2 -> numpy  tape node  f64[] -> f64[]
     2  ones_like   numpy             -          f64[] -> f64[]
        in VJP of sin (backward pass):
     3    cos       numpy             -          f64[] -> f64[]
     4    multiply  numpy             -          f64[], f64[] -> f64[]
    """
    check_callable(func, "explain")

    @functools.wraps(func)
    def explained(*args: Any, **kwargs: Any) -> Explanation:
        interp = ExplainInterpreter()
        interp.calls, interp.frame = [], sys._getframe()
        wrap = lambda x: ExplainTensor(interp, np.asarray(x)) if isinstance(x, _TRACED) else x
        mine = lambda x: isinstance(check_live(x), ExplainTensor) and x._interp is interp
        try:
            with new_interpreter(interp):
                out = func(*optree.tree_map(wrap, args), **kwargs)
                out = optree.tree_map(lambda x: x.value if mine(x) else x, out)
        finally:
            interp.frame = None  # no frame <-> interpreter cycle
        name = getattr(func, "__name__", "func")
        seen = {s.depth: s.transform for c in interp.calls for s in c.stages}
        for depth in sorted(seen.keys() - {0}, reverse=True):  # the title: transforms inside
            name = f"{seen[depth]}({name})"
        leaves = optree.tree_leaves(args)
        shown = ", ".join(_spec(x) if isinstance(x, _TRACED) else repr(x) for x in leaves)
        return Explanation(out, interp.calls, f"explain({name})({shown})")

    return explained
