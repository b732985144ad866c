"""The compiling tier's code writer: regions of a staged graph as source numba compiles.

``regions(graph)`` finds the equations that lower (each primitive's ``lowering`` rule,
``core/lowering.py``) and groups them into regions, each to become one compiled
function (a *kernel*); ``kernel_source(region)`` writes a region as Python source::

    def kernel(a0, a1):
        v2 = np.empty((8,), np.float64)
        for i0 in range(8):
            t0 = np.sin(a0[i0])
            t1 = np.multiply(t0, np.float64(1.01))
            v2[i0] = np.tanh(t1)
        while True:
            ...
        return (v2, ...)

How it is written:

- **Fusion.** Elementwise equations of one shape (``Elementwise`` lowerings) become one
  loop nest over the elements: each computes a scalar from scalars, and only the
  values read after the loop are stored in arrays.  An operand of another shape is
  read with NumPy's broadcasting (index 0 along its unit axes); 0-d values are scalars
  throughout.  A loop takes in every elementwise equation of its shape whose operands
  exist when it starts (``_schedule``), so one loop may gather equations that a graph
  interleaves with others.
- **Whole arrays.** ``Emitter`` lowerings write statements on whole arrays (products,
  reductions, shapes, indexing) and control flow: a ``while_loop`` or ``scan`` writes
  its loop and its functions' graphs inline (``Context.inline``), so a loop whose
  contents all lower runs as machine code, iterations included.
- **Exactness.** Nothing is reassociated or contracted (numba compiles without
  fast-math); each operand is cast to the dtype NumPy's loop would use and each
  result to the equation's dtype, so float32 stays float32 and Python scalars promote
  weakly, as in NumPy.
- **Fresh results.** Every array a kernel returns is new: a result that may be a view
  of an input (or of another result) is copied on the way out.

Which regions are worth a kernel: those whose arrays have at most ``MAX_ELEMENTS``
elements (above that NumPy's own SIMD loops are as fast or faster: numba calls the
scalar C library for ``exp`` or ``tanh``, five times slower per element than NumPy's;
a loop's stacked operands do not count, its steps' values do), holding a loop, at
least ``MIN_EQUATIONS`` elementwise equations on arrays or ``MIN_SCALAR_EQUATIONS`` on
0-d values.  Nothing here imports numba: the source is
plain Python, which ``numba_tier.py`` compiles; another writer (CuPy's elementwise
kernels) could read the same lowerings.
"""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from autodiff.core.graph import Eqn, Graph, Literal, ShapedArray, Var
from autodiff.core.lowering import Elementwise, Emitter, NotLowered

__all__ = [
    "MAX_ELEMENTS",
    "MIN_EQUATIONS",
    "MIN_SCALAR_EQUATIONS",
    "Context",
    "Region",
    "Writer",
    "kernel_source",
    "lowerable",
    "regions",
]

MAX_ELEMENTS = 1 << 12  # top-level arrays above this stay NumPy calls
MIN_EQUATIONS = 2  # elementwise equations on arrays a region without a loop needs
MIN_SCALAR_EQUATIONS = 8  # or elementwise equations on 0-d values

# dtype kinds a lowering may declare: "d" float64 only, "f" float32 and float64
_KIND_OF = {"f8": "d", "f4": "f", "b1": "b"}


def _kind(dtype: np.dtype) -> str | None:
    """The lowering kind of ``dtype`` ("d", "f", "b", "i", "u"), None if none lowers."""
    kind = _KIND_OF.get(dtype.str[1:])
    if kind is not None:
        return kind
    if dtype.kind in "iu" and dtype.itemsize in (1, 2, 4, 8):
        return dtype.kind
    return None


def _accepts(kinds: str, dtype: np.dtype) -> bool:
    kind = _kind(dtype)
    return kind is not None and (kind in kinds or (kind == "d" and "f" in kinds))


def _dtype_text(dtype: Any) -> str:
    dtype = np.dtype(dtype)
    return "np.bool_" if dtype.kind == "b" else f"np.{dtype.name}"


def literal_text(value: Any) -> str:
    """Python source for a scalar literal (non-finite floats included)."""
    if isinstance(value, (bool, np.bool_)):
        return repr(bool(value))
    if isinstance(value, (int, np.integer)):
        return repr(int(value))
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if math.isnan(value):
            return "np.nan"
        if math.isinf(value):
            return "np.inf" if value > 0 else "-np.inf"
        return repr(value)
    raise NotLowered(f"a literal {value!r:.40} has no source form here")


# --- writing source --------------------------------------------------------------------------


class Writer:
    """One kernel's source: its lines, fresh names, and what it refers to (the scalar
    functions of ``Elementwise`` lowerings, numba-compiled by the tier; the constant
    arrays of graphs, passed as extra arguments)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 1
        self._count = itertools.count()
        self.functions: dict[int, tuple[str, Callable]] = {}
        self.consts: dict[int, tuple[str, Any]] = {}
        # per array name, the names of the arrays it may share memory with (itself for
        # one the kernel allocated, its operands' for a view): results are copied where
        # they may share memory with an input or with each other
        self.roots: dict[str, frozenset] = {}

    def temp(self, prefix: str = "t") -> str:
        return f"{prefix}{next(self._count)}"

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    @contextlib.contextmanager
    def indented(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1

    def function(self, fn: Callable) -> str:
        """The name the source calls ``fn`` by (a global the tier compiles)."""
        found = self.functions.get(id(fn))
        if found is None:
            name = f"f{len(self.functions)}_{getattr(fn, '__name__', 'fn').strip('<>')}"
            found = self.functions[id(fn)] = ("".join(c if c.isalnum() else "_" for c in name), fn)
        return found[0]

    def const(self, value: Any) -> str:
        """The name of a constant of a graph (an argument of the kernel)."""
        if np.ndim(value) == 0 and not isinstance(value, np.ndarray):
            return literal_text(value)
        found = self.consts.get(id(value))
        if found is None:
            found = self.consts[id(value)] = (f"k{len(self.consts)}", value)
            self.roots[found[0]] = frozenset([found[0]])
        return found[0]

    def shares(self, names: Sequence[str]) -> frozenset:
        return frozenset().union(*(self.roots.get(n, frozenset()) for n in names))


class Context:
    """What an ``Emitter`` lowering writes with: the equation's abstract values
    (``in_avals``, ``out_avals``), statements (``line``, ``temp``, ``indented``),
    source for dtypes, literals and static indices, and sub-graphs inline."""

    def __init__(self, writer: Writer, eqn: Eqn) -> None:
        self.writer = writer
        self.eqn = eqn
        self.in_avals = [v.aval for v in eqn.invars]
        self.out_avals = [v.aval for v in eqn.outvars]
        # set by a lowering whose results may be views of its operands: True for all of
        # them, or the positions of those that may be
        self.view: bool | set = False

    def line(self, text: str) -> None:
        self.writer.line(text)

    def temp(self, prefix: str = "t") -> str:
        return self.writer.temp(prefix)

    def indented(self) -> contextlib.AbstractContextManager:
        return self.writer.indented()

    def dtype(self, dtype: Any) -> str:
        """``np.float64``: a dtype as source."""
        return _dtype_text(dtype)

    def literal(self, value: Any) -> str:
        return literal_text(value)

    def call(self, fn: Callable, *args: str) -> str:
        """A call of the Python function ``fn`` (numba compiles it with the kernel)."""
        return f"{self.writer.function(fn)}({', '.join(args)})"

    def index(self, index: tuple) -> str:
        """A static index (ints, slices, None, Ellipsis) as source, e.g. ``:, 1``;
        ``NotLowered`` for an index holding arrays."""
        parts = []
        for c in index:
            if c is None:
                parts.append("None")
            elif c is Ellipsis:
                parts.append("...")
            elif isinstance(c, slice):
                bounds = [c.start, c.stop, c.step]
                if not all(b is None or isinstance(b, (int, np.integer)) for b in bounds):
                    raise NotLowered("a slice with non-integer bounds")
                text = ":".join("" if b is None else str(int(b)) for b in bounds[:2])
                parts.append(text + ("" if c.step is None else f":{int(c.step)}"))
            elif isinstance(c, (int, np.integer)) and not isinstance(c, bool):
                parts.append(str(int(c)))
            else:
                raise NotLowered("an index holding arrays")
        return ", ".join(parts) if parts else "()"

    def inline(self, graph: Graph, inputs: Sequence[str]) -> list[str]:
        """Write ``graph`` here on the values named ``inputs``; the names of its results."""
        return emit_graph(self.writer, graph, list(inputs))


# --- lowerability ----------------------------------------------------------------------------


def _avals_lower(eqn: Eqn, kinds: str | None) -> bool:
    """Every operand and result is an array of a dtype compiled code handles, of at
    most ``MAX_ELEMENTS`` elements (but a loop's own operands: its steps' sizes count);
    the operands (but Python numbers, converted to the dtype the operation computes in)
    of one of ``kinds``."""
    loop = getattr(eqn.prim, "runs_functions", False)
    for v in (*eqn.invars, *eqn.outvars):
        aval = v.aval
        if not isinstance(aval, ShapedArray) or _kind(aval.dtype) is None:
            return False
        if aval.size > MAX_ELEMENTS and not loop:
            return False
    if kinds is not None:
        for v in eqn.invars:
            if not v.aval.weak_type and not _accepts(kinds, v.aval.dtype):
                return False
    return True


def _elementwise(eqn: Eqn) -> Elementwise | None:
    lowering = eqn.prim.lowering
    if not isinstance(lowering, Elementwise) or len(eqn.outvars) != 1:
        return None
    if not _avals_lower(eqn, lowering.kinds):
        return None
    if lowering.when is not None and not lowering.when(
        [v.aval for v in eqn.invars], eqn.outvars[0].aval
    ):
        return None
    return lowering


def lowerable(eqn: Eqn) -> bool:
    """Whether ``eqn`` (and, for control flow, everything in its functions) lowers:
    written once into a scratch ``Writer``."""
    lowering = eqn.prim.lowering
    if lowering is None:
        return False
    if isinstance(lowering, Elementwise):
        return _elementwise(eqn) is not None
    if not _avals_lower(eqn, None):
        return False
    try:
        _emit_eqn(Writer(), eqn, [f"x{i}" for i in range(len(eqn.invars))])
    except NotLowered:
        return False
    return True


# --- one graph, as statements ----------------------------------------------------------------


class _Loop:
    """Elementwise equations of one shape, computed in one loop nest."""

    __slots__ = ("eqns", "outs", "shape", "start")

    def __init__(self, shape: tuple, start: int) -> None:
        self.shape, self.start = shape, start
        self.eqns: list[Eqn] = []
        self.outs: set = set()


def _schedule(eqns: Sequence[Eqn]) -> list:
    """``eqns`` in order, elementwise ones of each shape gathered into loops: an
    equation joins the open loop of its shape when every operand it reads existed when
    the loop started or is computed in it (the loop is written where it starts)."""
    made: dict[Var, int] = {}
    loops: dict[tuple, _Loop] = {}
    items: list = []
    for i, eqn in enumerate(eqns):
        lowering = _elementwise(eqn)
        shape = eqn.outvars[0].aval.shape if lowering is not None else ()
        if lowering is None or not shape:
            items.append(eqn)
        else:
            loop = loops.get(shape)
            ready = loop is not None and all(
                type(v) is not Var or v in loop.outs or made.get(v, -1) < loop.start
                for v in eqn.invars
            )
            if not ready:
                loop = loops[shape] = _Loop(shape, i)
                items.append(loop)
            assert loop is not None
            loop.eqns.append(eqn)
            loop.outs.add(eqn.outvars[0])
        for v in eqn.outvars:
            made[v] = i
    return items


def emit_graph(w: Writer, graph: Graph, inputs: list[str]) -> list[str]:
    """Write ``graph`` on the values named ``inputs``; the expressions of its results.
    ``NotLowered`` if an equation does not lower."""
    env: dict[Var, str] = dict(zip(graph.invars, inputs, strict=True))
    for var, value in zip(graph.constvars, graph.consts):
        env[var] = w.const(value)
    items = _schedule(graph.eqns)
    # the values read outside the loop computing them: stored in arrays
    read_after: set = {v for v in graph.outvars if type(v) is Var}
    for item in items:
        eqns = item.eqns if isinstance(item, _Loop) else [item]
        for eqn in eqns:
            for v in eqn.invars:
                if type(v) is Var and not (isinstance(item, _Loop) and v in item.outs):
                    read_after.add(v)
    for item in items:
        if isinstance(item, _Loop):
            _emit_loop(w, item, env, read_after)
        else:
            args = [_atom(env, v) for v in item.invars]
            outs = _emit_eqn(w, item, args)
            env.update(zip(item.outvars, outs, strict=True))
    return [_atom(env, v) for v in graph.outvars]


def _atom(env: dict, v: Any) -> str:
    if type(v) is Literal:
        return literal_text(v.value)
    return env[v]


def _emit_eqn(w: Writer, eqn: Eqn, args: list[str]) -> list[str]:
    """One equation that is not in a loop: a scalar expression, or an emitter's source."""
    lowering = eqn.prim.lowering
    if lowering is None:
        raise NotLowered(f"{eqn.prim.name} has no lowering")
    if isinstance(lowering, Elementwise):
        if _elementwise(eqn) is None:
            raise NotLowered(f"{eqn.prim.name} does not lower for these dtypes")
        name = w.temp()
        w.line(f"{name} = {_scalar_call(w, eqn, args)}")
        return [name]
    if not isinstance(lowering, Emitter) or not _avals_lower(eqn, None):
        raise NotLowered(f"{eqn.prim.name} does not lower here")
    ctx = Context(w, eqn)
    out = lowering.fn(ctx, *args, **eqn.params)
    outs = list(out) if eqn.prim.multiple_results else [out]
    shared = w.shares([a for a in args if a.isidentifier()])
    names = []
    for k, (expr, var) in enumerate(zip(outs, eqn.outvars, strict=True)):
        view = ctx.view is True or (isinstance(ctx.view, set) and k in ctx.view)
        if _is_literal(expr) or (expr.isidentifier() and expr in w.roots):
            names.append(expr)  # a literal, or a value it passes through
            continue
        name = expr if expr.isidentifier() else w.temp("v")
        if name != expr:
            w.line(f"{name} = {expr}")
        if var.aval.ndim:
            w.roots[name] = shared | {name} if view else frozenset([name])
        names.append(name)
    return names


def _is_literal(text: str) -> bool:
    try:
        float(text.replace("np.", ""))
    except ValueError:
        return text in ("True", "False")
    return True


def _weak_key(aval: Any, literal: Any = None) -> Any:
    """What NumPy's type resolution sees of an operand: a Python type for a weak one."""
    if getattr(aval, "weak_type", False):
        return {"f": float, "c": complex, "b": bool}.get(aval.dtype.kind, int)
    return aval.dtype


def _cast(expr: str, dtype: np.dtype, to: np.dtype, weak: bool = False) -> str:
    if dtype == to and not weak:
        return expr
    return f"{_dtype_text(to)}({expr})"


def _scalar_call(w: Writer, eqn: Eqn, args: list[str]) -> str:
    """The scalar expression of an elementwise equation on the scalars ``args``."""
    lowering = eqn.prim.lowering
    assert isinstance(lowering, Elementwise)
    avals = [v.aval for v in eqn.invars]
    out = eqn.outvars[0].aval.dtype
    fn = lowering.fn
    if isinstance(fn, np.ufunc):
        keys = tuple(_weak_key(a) for a in avals)
        try:
            dtypes = fn.resolve_dtypes((*keys, *(None,) * fn.nout))
        except (TypeError, ValueError) as e:
            raise NotLowered(str(e)) from None
        if getattr(np, fn.__name__, None) is not fn:
            raise NotLowered(f"{fn.__name__} is not one of NumPy's ufuncs")
        cast = [_cast(a, av.dtype, dt, av.weak_type) for a, av, dt in zip(args, avals, dtypes)]
        expr = f"np.{fn.__name__}({', '.join(cast)})"
        return _cast(expr, dtypes[fn.nin], out)
    numeric = [_weak_key(a) for a in avals if a.dtype.kind != "b"]
    common = np.result_type(*numeric) if numeric else None
    cast = [a if av.dtype.kind == "b" or common is None else _cast(a, av.dtype, common, True)
            for a, av in zip(args, avals)]  # fmt: skip
    if lowering.params:
        for k, value in eqn.params.items():
            if value is not None and not isinstance(value, (bool, int, float)):
                raise NotLowered(f"{eqn.prim.name}: parameter {k}={value!r:.30}")
            cast.append(f"{k}={'None' if value is None else literal_text(value)}")
    return f"{_dtype_text(out)}({w.function(fn)}({', '.join(cast)}))"


def _emit_loop(w: Writer, loop: _Loop, env: dict, read_after: set) -> None:
    shape = loop.shape
    stored = [e.outvars[0] for e in loop.eqns if e.outvars[0] in read_after]
    for v in stored:
        env[v] = name = w.temp("v")
        w.line(f"{name} = np.empty({shape!r}, {_dtype_text(v.aval.dtype)})")
        w.roots[name] = frozenset([name])
    index = [w.temp("i") for _ in shape]
    for i, n in zip(index, shape):
        w.line(f"for {i} in range({n}):")
        w.depth += 1
    inner: dict[Var, str] = {}
    at = ", ".join(index)
    for eqn in loop.eqns:
        args = []
        for v in eqn.invars:
            if type(v) is Literal:
                args.append(literal_text(v.value))
            elif v in inner:
                args.append(inner[v])
            elif v.aval.ndim == 0:
                args.append(env[v])
            else:
                args.append(f"{env[v]}[{_broadcast_index(v.aval.shape, shape, index)}]")
        out = eqn.outvars[0]
        inner[out] = name = w.temp()
        w.line(f"{name} = {_scalar_call(w, eqn, args)}")
        if out in read_after:
            w.line(f"{env[out]}[{at}] = {name}")
    w.depth -= len(shape)


def _broadcast_index(have: tuple, shape: tuple, index: list[str]) -> str:
    """The index of an operand of shape ``have`` at the loop's position (NumPy's
    broadcasting: trailing axes line up, unit axes stay at 0)."""
    lead = len(shape) - len(have)
    return ", ".join(index[lead + d] if n == shape[lead + d] else "0" for d, n in enumerate(have))


# --- regions of a top-level graph -------------------------------------------------------------


class Region:
    """Equations of a graph compiled into one kernel: ``eqns`` in order, the variables
    it reads (``inputs``) and those read after it (``outputs``)."""

    __slots__ = ("eqns", "inputs", "loops", "outputs", "start")

    def __init__(self, start: int) -> None:
        self.start = start
        self.eqns: list[Eqn] = []
        self.inputs: list[Var] = []
        self.outputs: list[Var] = []
        self.loops = 0

    def worth_it(self) -> bool:
        """A loop, or ``MIN_EQUATIONS`` elementwise equations on arrays, or
        ``MIN_SCALAR_EQUATIONS`` on scalars (a kernel's call costs about what two NumPy
        calls do: a few operations on 0-d values gain nothing)."""
        if self.loops:
            return True
        shapes = [e.outvars[0].aval.ndim for e in self.eqns if _elementwise(e) is not None]
        arrays = sum(1 for n in shapes if n)
        return arrays >= MIN_EQUATIONS or len(shapes) - arrays >= MIN_SCALAR_EQUATIONS


def regions(graph: Graph, runs_functions: Callable[[Any], bool]) -> list[Region]:
    """The regions of ``graph`` worth compiling (module docstring), each a set of
    equations that lower, gathered like ``_schedule``'s loops: an equation joins the
    open region when every operand it reads existed when the region started or is
    computed in it.  ``runs_functions(prim)``: whether a primitive is control flow."""
    made: dict[Var, int] = {}
    found: list[Region] = []
    current: Region | None = None
    members: set = set()
    for i, eqn in enumerate(graph.eqns):
        loop = runs_functions(eqn.prim)
        if lowerable(eqn):
            ready = current is not None and all(
                type(v) is not Var or v in members or made.get(v, -1) < current.start
                for v in eqn.invars
            )
            if not ready:
                current, members = Region(i), set()
                found.append(current)
            assert current is not None
            current.eqns.append(eqn)
            current.loops += loop
            members.update(eqn.outvars)
        for v in eqn.outvars:
            made[v] = i
    kept = [r for r in found if r.worth_it()]
    if not kept:
        return []
    # inputs and outputs: what each region reads from outside, what is read after it
    inside = {v: r for r in kept for e in r.eqns for v in e.outvars}
    owners = {id(e): id(r) for r in kept for e in r.eqns}
    readers: dict[Var, set] = {}
    for eqn in graph.eqns:
        for v in eqn.invars:
            if type(v) is Var:
                readers.setdefault(v, set()).add(owners.get(id(eqn)))
    final = {v for v in graph.outvars if type(v) is Var}
    for r in kept:
        seen: set = set()
        for e in r.eqns:
            for v in e.invars:
                if type(v) is Var and inside.get(v) is not r and v not in seen:
                    seen.add(v)
                    r.inputs.append(v)
        for e in r.eqns:
            for v in e.outvars:
                if v in final or any(who != id(r) for who in readers.get(v, ())):
                    r.outputs.append(v)
    return kept


def kernel_source(region: Region) -> tuple[str, Writer]:
    """The source of ``region``'s kernel, ``def kernel(a0, ..., k0, ...)``: its inputs
    (0-d ones as scalars), then the constant arrays its functions' graphs hold."""
    w = Writer()
    names = [f"a{i}" for i in range(len(region.inputs))]
    for name in names:
        w.roots[name] = frozenset([name])
    graph = Graph(region.inputs, region.outputs, region.eqns)
    outs = emit_graph(w, graph, names)
    # results that may share memory with an input, a constant or another result: copied
    results: list[str] = []
    taken: frozenset = frozenset()
    outside = frozenset(names) | {name for name, _ in w.consts.values()}
    for var, expr in zip(region.outputs, outs, strict=True):
        if var.aval.ndim:
            roots = w.roots.get(expr, frozenset([expr]))
            if roots & (outside | taken) or not expr.isidentifier():
                expr, roots = f"{expr}.copy()", frozenset()
            taken |= roots
        results.append(expr)
    params = names + [name for name, _ in w.consts.values()]
    head = f"def kernel({', '.join(params)}):"
    body = [*w.lines, f"    return ({''.join(r + ', ' for r in results)})"]
    return "\n".join([head, *body]) + "\n", w
