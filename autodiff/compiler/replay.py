"""Replay: a graph as generated Python code, a straight-line program of NumPy calls.

``compile_graph(graph)`` writes one function whose body has one line per equation,
calling the primitive's implementation (bound as a global of the function, its
parameters baked in; a ufunc is called directly), compiles it once and returns it::

    def replay(v0):
        v1 = sin(v0)
        v1 = multiply(v1, 1.01, out=v1)
        ...
        return (v7,)

so running a graph costs what the NumPy calls cost, not an interpreter walk.

Buffer reuse.  The graph's liveness is known, so an elementwise ufunc writes its
result into a buffer that is dead and has the result's shape and dtype (``out=``):
the buffer of one of its own inputs that dies there, or one that died since the
last allocation (holding it no longer than that never raises the peak).  Only
buffers the replay allocated itself are reused (ufunc results; never a graph input,
constant or output), and only when no live value may be a view of them: the result
of any other primitive may be a view of its inputs (reshape, transpose, indexing,
broadcast_to, ...), and keeps their buffers alive.  Dead values of 64 KiB and more
are deleted where they die, as NumPy code frees its temporaries.

Layouts.  A ufunc writing into ``out=`` gives its result that buffer's layout, where
NumPy's own call allocates one in its operands' memory order (order "K": a transposed
operand gives a Fortran-ordered result); a later reduction sums in memory order, so
the bits would differ.  A buffer is therefore reused only where both layouts are C:
every array operand is C-ordered whenever the graph's array inputs are (``c_ordered``:
inputs, C-ordered constants, ufuncs, reductions and ``matmul`` of such values, and
anything of at most one dimension), and the replay checks its inputs' order first,
running a replay without reuse when one is not C-ordered.

``kind`` is the array library of the arguments: ``"numpy"``; ``"lazy"`` for Dask
(no ``out=``: its arrays are not written into); ``"other"`` for another library
that takes ``out=`` (CuPy), whose constants are converted once with
``np.asarray(c, like=...)``.  NumPy's protocols route every call to the arguments'
library.
"""

from __future__ import annotations

import itertools
import linecache
import math
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.core.errstate import applied
from autodiff.core.graph import Graph, Literal, Var
from autodiff.core.lowering import Reduction
from autodiff.interpreters.staging import eval_graph

__all__ = [
    "FREE_AT",
    "array_kind",
    "compile_graph",
    "fresh_results",
    "generate",
    "interpret",
    "plan",
]

FREE_AT = 1 << 16  # bytes: dead values at least this large are deleted where they die

# The replays' file names (for tracebacks and linecache), reused once their replay is
# gone: CPython keeps every file name it compiled code for, so fresh names would grow.
_files = itertools.count()
_free_files: list[int] = []


def _writes_out(prim: Any) -> bool:
    """An elementwise ufunc with one output: it can write into ``out=``."""
    impl = prim.impl
    return isinstance(impl, np.ufunc) and impl.signature is None and impl.nout == 1


def _fresh(prim: Any) -> bool:
    """A result the replay allocates itself (ufuncs always return a new array, and so
    do the compiled kernels of ``kernel_call.py``)."""
    if getattr(prim, "fresh_results", False):
        return True
    return isinstance(prim.impl, np.ufunc) and prim.impl.nout == 1 and not prim.multiple_results


def _c_always(prim: Any) -> bool:
    """A result C-ordered whatever its operands: ``matmul``'s, a compiled kernel's (but
    those it lays out as NumPy would in another order of their axes: ``Region.orders``)."""
    return prim.impl is np.matmul or getattr(prim, "fresh_results", False)


def _keeps_c_order(prim: Any) -> bool:
    """A result that is C-ordered whenever its array operands are: a ufunc's (NumPy's
    order "K"), a reduction's."""
    impl = prim.impl
    return (isinstance(impl, np.ufunc) and impl.nout == 1) or isinstance(prim.lowering, Reduction)


def _c_like(value: Any) -> bool:
    """C-ordered as an operand: its axes, but for broadcast ones (stride 0), in C order."""
    strides = [st for st, n in zip(getattr(value, "strides", ()), value.shape) if st and n > 1]
    return all(st > 0 for st in strides) and all(a >= b for a, b in itertools.pairwise(strides))


class Plan:
    """Per equation: the name its result gets, the buffer it writes into (or None),
    the names to delete before and after it."""

    def __init__(self, n: int) -> None:
        self.names: dict[Var, str] = {}
        self.out: list[str | None] = [None] * n
        self.c_inputs: list[Var] = []  # the inputs that must be C-ordered for ``out``
        self.free_before: list[list[str]] = [[] for _ in range(n)]
        self.free_after: list[list[str]] = [[] for _ in range(n)]


def plan(graph: Graph, reuse: bool = True) -> Plan:
    """Names, buffer reuse and deletions for ``graph`` (see the module docstring)."""
    eqns = graph.eqns
    result = Plan(len(eqns))
    names = result.names
    counter = itertools.count()
    for v in graph.invars:
        names[v] = f"v{next(counter)}"
    end = len(eqns)
    last: dict[Var, int] = {}
    for i, eqn in enumerate(eqns):
        for v in eqn.invars:
            if type(v) is Var:
                last[v] = i
    outputs = {v for v in graph.outvars if type(v) is Var}
    inputs = set(graph.invars)
    for v in outputs:
        last[v] = end
    constants = set(graph.constvars)
    c_ordered = {v for v in graph.invars if getattr(v.aval, "ndim", 0) >= 2}  # (checked)
    c_ordered |= {v for v, c in zip(graph.constvars, graph.consts)
                  if getattr(c, "ndim", 0) < 2 or _c_like(c)}  # fmt: skip

    def c_order(v: Any) -> bool:  # C-ordered whenever the inputs are (module docstring)
        return type(v) is not Var or v in c_ordered or getattr(v.aval, "ndim", 0) < 2

    owner: dict[Var, str] = {}  # var -> the buffer (slot name) it is
    aliases: dict[Var, frozenset] = {}  # var -> slots it may be a view of
    refs: dict[str, int] = {}  # slot -> live vars that are or may view it
    slot_aval: dict[str, Any] = {}
    c_slots: set[str] = set()  # buffers allocated C-ordered: the only ones reused
    pool: dict[tuple, list[str]] = {}  # dead slots by (shape, dtype), since the last allocation

    def holds(v: Var) -> frozenset:
        if v in owner:
            return frozenset([owner[v]])
        return aliases.get(v, frozenset())

    def big(aval: Any) -> bool:
        return getattr(aval, "nbytes", 0) >= FREE_AT

    for i, eqn in enumerate(eqns):
        out = eqn.outvars[0] if len(eqn.outvars) == 1 else None
        key = None
        operands_c = all(c_order(v) for v in eqn.invars)
        if _c_always(eqn.prim) or (operands_c and _keeps_c_order(eqn.prim)):
            transposed = getattr(getattr(eqn.prim, "region", None), "orders", {})
            c_ordered.update(v for v in eqn.outvars if v not in transposed)
        if (reuse and out is not None and _writes_out(eqn.prim) and out.aval.ndim > 0
                and operands_c):  # fmt: skip
            key = (out.aval.shape, out.aval.dtype)
        target = None
        if key is not None:
            for v in eqn.invars:  # an input that dies here: in place
                if (type(v) is Var and v in owner and last.get(v) == i and v not in outputs
                        and refs[owner[v]] == 1 and _key(slot_aval[owner[v]]) == key
                        and owner[v] in c_slots):  # fmt: skip
                    target = owner[v]
                    break
            if target is None and pool.get(key):
                target = pool[key].pop()
            if target is not None:
                result.c_inputs = [v for v in graph.invars if v in c_ordered]
        allocates = target is None
        if allocates:  # holding dead buffers across an allocation could raise the peak
            for slots in pool.values():
                result.free_before[i] += [s for s in slots if big(slot_aval[s])]
            pool.clear()
        # name the results and record what they are or may view
        for v in eqn.outvars:
            if target is not None:
                names[v] = target
                owner[v] = target
                result.out[i] = target
            elif _fresh(eqn.prim) and v.aval.ndim > 0:
                slot = names[v] = f"v{next(counter)}"
                owner[v] = slot
                slot_aval[slot] = v.aval
                if c_order(v):
                    c_slots.add(slot)
                refs[slot] = 0
            else:
                names[v] = f"v{next(counter)}"
                aliases[v] = frozenset().union(
                    *(holds(x) for x in eqn.invars if type(x) is Var and x not in constants)
                )
            for slot in holds(v):
                refs[slot] += 1
        # the values that die here: their names go (Python frees what no view still
        # holds); a buffer nothing may view any more waits in the pool for reuse
        dying = {v for v in eqn.invars if type(v) is Var and last.get(v) == i}
        dying |= {v for v in eqn.outvars if v not in last}  # results nothing reads
        for v in dying:
            if v in outputs or v in constants or v in inputs:
                continue
            for held in holds(v):
                refs[held] -= 1
            own = owner.get(v)
            if own is not None and own == target:
                continue  # the result took over this buffer and its name
            free = _key(slot_aval[own]) if own is not None and refs[own] == 0 and reuse else None
            if own is not None and free is not None and own in c_slots:
                pool.setdefault(free, []).append(own)
            elif big(v.aval):
                result.free_after[i].append(names[v])
        if target is not None:
            refs[target] = sum(1 for v in eqn.outvars if owner.get(v) == target)
    return result


def _key(aval: Any) -> tuple | None:
    shape = getattr(aval, "shape", None)
    return None if shape is None or not shape else (aval.shape, aval.dtype)


# --- code generation ------------------------------------------------------------------------------


def _simple(value: Any) -> str | None:
    """Python source for a parameter value that has an exact literal form."""
    if value is None or isinstance(value, (bool, str)):
        return repr(value)
    if type(value) is int:
        return repr(value)
    if type(value) is float and math.isfinite(value):
        return repr(value)
    if type(value) is tuple:
        parts = [_simple(v) for v in value]
        if all(p is not None for p in parts):
            return f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"  # type: ignore[arg-type]
    return None


class _Writer:
    def __init__(self) -> None:
        self.globals: dict[str, Any] = {}
        self.by_id: dict[int, str] = {}

    def ref(self, obj: Any, hint: str) -> str:
        name = self.by_id.get(id(obj))
        if name is None:
            base = "".join(c if c.isalnum() else "_" for c in hint) or "g"
            name = f"{base}_{len(self.globals)}"
            self.by_id[id(obj)] = name
            self.globals[name] = obj
        return name


def _converted(value: np.ndarray, like: Any) -> Any:
    """A NumPy constant as an array of ``like``'s library, where that library converts
    it (CuPy does); else the NumPy array (an index array, which libraries accept)."""
    try:
        return np.asarray(value, like=like)
    except Exception:
        return value


def compile_graph(graph: Graph, kind: str = "numpy", like: Any = None,
                  fresh: bool = False, reuse: bool = True) -> Callable:  # fmt: skip
    """``graph`` as a compiled Python function of its inputs returning a tuple of
    its outputs; its source is the function's ``source`` attribute.  ``fresh``: every
    result is an array of its own (``fresh_results``), as a jitted function's are;
    ``reuse``: whether buffers are reused (``plan``)."""
    source, namespace = generate(graph, kind, like, fresh, reuse)
    number = _free_files.pop() if _free_files else next(_files)
    filename = f"<autodiff replay #{number}>"
    code = compile(source, filename, "exec")
    # tracebacks show the generated line; the entry goes when the function does
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    if "_plain" in namespace:  # (a replay reusing buffers, for inputs not C-ordered)
        namespace["_plain"] = compile_graph(graph, kind, like, fresh, reuse=False)
    exec(code, namespace)
    replay = namespace["replay"]
    replay.source = source
    weakref.finalize(replay, _release_file, filename, number)
    return replay


def _release_file(filename: str, number: int) -> None:
    linecache.cache.pop(filename, None)
    _free_files.append(number)


# --- results that share no memory ---------------------------------------------------------------


def _copy(x: Any) -> Any:
    return x.copy() if hasattr(x, "copy") else x  # Python scalars are immutable


def _owned(x: Any, others: tuple) -> Any:
    """``x``, or a copy of it where it may share memory with one of ``others`` (inputs,
    constants, other results): where it is a view, or one of them itself.  An array
    that owns its memory and is none of them shares it with nothing."""
    if getattr(x, "base", None) is not None or any(x is o for o in others):
        return _copy(x)
    return x


def fresh_results(outs: Any, graph: Graph, args: Any) -> tuple:
    """``outs`` (results of running ``graph`` on ``args``), each an array that shares
    memory with no argument, constant of the graph or other result: the contract of a
    jitted function's results.  Without the code ``generate`` writes for this, it checks
    every result at run time."""
    others = [*args, *graph.consts]
    fresh = []
    for o in outs:
        o = _owned(o, tuple(others))
        others.append(o)
        fresh.append(o)
    return tuple(fresh)


def _sharing(graph: Graph) -> dict:
    """Per variable, the values whose memory it may share: the inputs and constants it
    may be or view, and itself.  A ufunc's result is a new array (when the replay writes
    it into a dead buffer, that buffer no live value views: ``plan``)."""
    roots: dict[Var, frozenset] = {v: frozenset([v]) for v in (*graph.invars, *graph.constvars)}
    for eqn in graph.eqns:
        if _fresh(eqn.prim):
            shared: frozenset = frozenset()
        else:
            shared = frozenset().union(*(roots[x] for x in eqn.invars if type(x) is Var))
        for v in eqn.outvars:
            roots[v] = shared | {v}
    return roots


def _guarded_results(graph: Graph, atom: Callable) -> list[str]:
    """The expressions a fresh replay returns: each result as it is where it can share
    memory with nothing else, else through ``_owned``, checked against the inputs,
    constants and earlier results it may be (a copy where it is one, or a view)."""
    roots = _sharing(graph)
    fixed = frozenset((*graph.invars, *graph.constvars))
    outvars = graph.outvars
    texts: list[str] = []
    for i, v in enumerate(outvars):
        text = atom(v)
        if type(v) is Var:
            others = [o for j, o in enumerate(outvars) if j != i and type(o) is Var]
            shared = roots[v] & (fixed | frozenset().union(*(roots[o] for o in others)))
            if shared:
                earlier = [o for o in outvars[:i] if type(o) is Var and roots[o] & roots[v]]
                inputs = [x for x in (*graph.invars, *graph.constvars) if x in shared]
                candidates = [atom(x) for x in (*inputs, *earlier)]
                text = f"_owned({text}, ({''.join(c + ', ' for c in candidates)}))"
        texts.append(text)
    return texts


def generate(graph: Graph, kind: str = "numpy", like: Any = None,
             fresh: bool = False, reuse: bool = True) -> tuple[str, dict]:  # fmt: skip
    """The source of ``graph``'s replay function and the globals it needs."""
    p = plan(graph, reuse=reuse and kind != "lazy")
    w = _Writer()
    consts: dict[Var, str] = {}
    for var, value in zip(graph.constvars, graph.consts):
        if kind == "other" and isinstance(value, np.ndarray):
            value = _converted(value, like)
        consts[var] = w.ref(value, "c")

    def atom(v: Any) -> str:
        if type(v) is Literal:
            text = _simple(v.value)
            return (
                text if text is not None and not isinstance(v.value, str) else w.ref(v.value, "lit")
            )
        if v in consts:
            return consts[v]
        return p.names[v]

    params = ", ".join(p.names[v] for v in graph.invars)
    lines = [f"def replay({params}):"]
    if p.c_inputs and kind != "lazy":  # buffers reused: only on C-ordered inputs (plan)
        w.globals["_plain"] = None  # compile_graph's replay without reuse
        test = " and ".join(f"{p.names[v]}.flags.c_contiguous" for v in p.c_inputs)
        lines.append(f"    if not ({test}):")
        lines.append(f"        return _plain({params})")
    for i, eqn in enumerate(graph.eqns):
        if p.free_before[i]:
            lines.append(f"    del {', '.join(p.free_before[i])}")
        impl = eqn.prim.impl
        fn = w.ref(impl, getattr(impl, "__name__", eqn.prim.name))
        args = [atom(v) for v in eqn.invars]
        for k, value in eqn.params.items():
            text = _simple(value)
            args.append(f"{k}={text if text is not None else w.ref(value, k)}")
        if p.out[i] is not None:
            args.append(f"out={p.out[i]}")
        if eqn.prim.multiple_results:
            outs = ", ".join(p.names[v] for v in eqn.outvars)
            outs += "," if len(eqn.outvars) == 1 else ""
        else:
            outs = p.names[eqn.outvars[0]]
        call = f"{fn}({', '.join(args)})"
        line = f"{outs} = {call}" if outs else call  # (no result: an effect)
        if eqn.errstate:  # the function's own floating-point setting (core/errstate.py)
            state = w.ref(applied, "_errstate")
            lines.append(f"    with {state}({w.ref(eqn.errstate, 'state')}):")
            lines.append(f"        {line}")
        else:
            lines.append(f"    {line}")
        if p.free_after[i]:
            lines.append(f"    del {', '.join(p.free_after[i])}")
    if fresh and kind != "lazy":  # (Dask arrays are never written into)
        w.globals["_owned"] = _owned
        results = _guarded_results(graph, atom)
    else:
        results = []
        for v in graph.outvars:
            text = atom(v)
            if (
                type(v) is Var
                and v in consts
                and hasattr(graph.consts[graph.constvars.index(v)], "copy")
            ):
                text += ".copy()"  # a constant returned: the caller may write into it
            results.append(text)
    lines.append(f"    return ({', '.join(results)}{',' if len(results) == 1 else ''})")
    return "\n".join(lines) + "\n", w.globals


# --- the first call: no code ----------------------------------------------------------------------


def interpret(graph: Graph, *args: Any) -> tuple:
    """Run ``graph`` as staged, calling each equation's implementation in turn: what
    a jitted function's first call does (``compiler/jit.py``), with fresh results.
    Generating and compiling the replay costs more than one run of the graph, and pays
    off from the second call on; a function called once never pays it."""
    return fresh_results(eval_graph(graph, *args, bind=False), graph, args)


# --- the arrays' library ------------------------------------------------------------------------


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
