"""explain: run a function, recording each primitive call that reaches NumPy through it.

``explain`` is an interpreter, outermost, so every call that depends on its
inputs ends in its ``process``.  It is also the observer of ``core/observe.py``'s hook:
``bind`` hands it every ``process`` call of the transforms started inside it
(a *stage*: interpreter, primitive, arguments), forward mode tells it when its
JVP rule runs, and the backward pass what each of its calls belongs to.  When a
call reaches NumPy, the stages still open are the chain of interpreters that
handled it (see ``docs/extending.md``, "How it works").
"""

from __future__ import annotations

import contextlib
import functools
from collections import namedtuple
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np
import optree

from autodiff.core.args import check_callable
from autodiff.core.observe import BackwardMark, Observer, observing
from autodiff.core.primitive import Primitive, lift, process
from autodiff.core.stack import Interpreter, current_interpreters, new_interpreter, owned
from autodiff.core.tracer import Tracer
from autodiff.interpreters.batching import BatchedTensor

__all__ = ["Call", "ExplainInterpreter", "ExplainTensor", "Explanation", "Stage", "explain"]


class ExplainInterpreter(Interpreter):
    __slots__ = ("calls", "recorder")
    transform = "explain"
    calls: list[Call]
    recorder: _Recorder


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
_RULES = {"grad": "tape node", "jvp": "primal", "explain": "record", "vmap": "batching rule"}
_TRACED = (np.ndarray, np.generic, float, complex)


class _Recorder(Observer):
    """explain's observer: what runs now, outermost first.  A stage is
    ``[interpreter, primitive, args, params, rule]``, ``rule`` being the rule the
    transform runs itself at the moment (``"JVP rule"``) or None; a ``BackwardMark`` is a
    backward pass."""

    def __init__(self) -> None:
        self.open: list[Any] = []

    def process(self, method, interp, prim, args, params):
        self.open.append([interp, prim, args, params, None])
        try:
            return method(interp, prim, args, params)
        finally:
            self.open.pop()

    @contextlib.contextmanager
    def rule(self, interp: Interpreter, what: str) -> Iterator[None]:
        stage = self.open[-1]  # interp's process call, which runs the rule
        assert stage[0] is interp, "a rule is announced by the process call running it"
        stage[4] = what
        try:
            yield
        finally:
            stage[4] = None

    @contextlib.contextmanager
    def backward(self) -> Iterator[BackwardMark]:
        mark = BackwardMark()
        self.open.append(mark)
        try:
            yield mark
        finally:
            self.open.pop()


def _spec(x: Any) -> str:
    dtype = np.dtype(x.dtype if hasattr(x, "dtype") else np.result_type(x))
    kind = "bool" if dtype.kind == "b" else f"{dtype.kind}{dtype.itemsize * 8}"
    return f"{kind}[{','.join(map(str, x.shape if hasattr(x, 'shape') else np.shape(x)))}]"


def _example(x: Any) -> Any:  # x's value at its own level, for example 0 of its batches
    value = _example(x._inner) if isinstance(x, Tracer) else x
    batched = isinstance(x, BatchedTensor) and x.bdim is not None
    return np.take(value, 0, x.bdim) if batched else value


@lift.register(ExplainInterpreter, object)
def _lift_explained(interp: ExplainInterpreter, x: Any):
    return ExplainTensor(interp, x)


def _chain(interp: ExplainInterpreter, prim: Primitive) -> tuple[list, list[str]]:
    """The stages that handled this call of ``prim`` (innermost first) and the rules
    it was made inside (outermost first), from what the recorder has open.

    Walking outward, each stage relates to the call below it: a rule the stage
    announced (jvp's JVP rule) contains it; the same primitive is the same call,
    one level up (grad, jvp's primal, a batching rule's own call); another one was
    made inside the stage's rule (a transpose in matmul's batching rule)."""
    stack = current_interpreters()
    above: list[tuple] = []
    within: list[str] = []
    current: str | None = prim.name
    for entry in reversed(interp.recorder.open):
        if isinstance(entry, BackwardMark):  # the backward pass
            if entry.what is not None:
                within.insert(0, f"{entry.what} (backward pass)")
                current = None
            continue
        owner, p, p_args, p_params, rule = entry
        kind, name = owner.transform, getattr(owner, "name", owner.transform)
        depth = stack.index(owner) + 1 if owner in stack else 0
        if rule is not None:
            within.insert(0, f"{rule} of {p.name} ({name} L{depth})")
        elif current == p.name:
            if not within:
                above.append((name, depth, _RULES.get(kind, "process"), p, p_args, p_params))
        else:
            within.insert(0, f"{_RULES.get(kind, 'process')} of {p.name} ({name} L{depth})")
        current = p.name
    return above, within


@process.register(ExplainInterpreter, Primitive)
def _record_call(interp: ExplainInterpreter, prim: Primitive, args: tuple, params: dict):
    above, within = _chain(interp, prim)
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
        interp.calls, interp.recorder = [], _Recorder()
        wrap = lambda x: ExplainTensor(interp, np.asarray(x)) if isinstance(x, _TRACED) else x
        # explain's own interpreter is pushed first, so it is not observed itself
        with new_interpreter(interp), observing(interp.recorder):
            out = func(*optree.tree_map(wrap, args), **kwargs)
            out = optree.tree_map(lambda x: x if owned(interp, x) is None else x.value, out)
        name = getattr(func, "__name__", "func")
        seen = {s.depth: s.transform for c in interp.calls for s in c.stages}
        for depth in sorted(seen.keys() - {0}, reverse=True):  # the title: transforms inside
            name = f"{seen[depth]}({name})"
        leaves = optree.tree_leaves(args)
        shown = ", ".join(_spec(x) if isinstance(x, _TRACED) else repr(x) for x in leaves)
        return Explanation(out, interp.calls, f"explain({name})({shown})")

    return explained
