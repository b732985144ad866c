"""A region of a staged graph as an LLVM function: NumPy's computation, fused, exactly.

``Codegen`` writes the equations of a region (``llvm_regions.py`` finds them) into one
function.  Shapes and strides are static, so every array is a pointer with a static
layout: a view (``reshape``, ``transpose``, a static index, ``broadcast_to``) costs nothing
at run time, and every buffer a region needs is one workspace laid out at compile time.

- **Values.**  A 0-d value is a :class:`Scalar` (a register); an array an :class:`Array`
  (a base pointer, an offset in elements -- static, plus a register where a loop indexes
  it -- and strides in elements).
- **Elementwise equations of one shape are fused** into one loop nest (``Group``): each
  computes a scalar per element, and only the values read after the loop are stored.
  An operation is either *native* (``llvm_ir.native``: exact IEEE arithmetic,
  comparisons, selection) or a call of NumPy's own loop on a run of elements
  (``npy_loops.py``: ``exp``, ``tanh``, ``power``, ...), on the same runs NumPy's
  iterator would give it (the innermost dimension after NumPy's axis ordering and
  coalescing, in chunks of NumPy's buffer size), with the strides NumPy would pass
  (0 for a scalar operand): NumPy's values to the bit, SIMD included.  Operands are
  cast to the dtypes NumPy's type resolution picks (weak Python scalars as NumPy 2
  treats them); a Python int that does not fit the other operand's dtype stays a
  NumPy call (NumPy compares it exactly, or raises ``OverflowError``).
- **Reductions** (``Reduction`` lowerings) replay NumPy's iteration: its axis order,
  the first element copied where the ufunc has no identity, and its reduce loop on the
  same runs, so sums come out in NumPy's pairwise order, bit for bit.
- **Layouts follow NumPy's**: a stored elementwise result is laid out as NumPy's
  ``K`` order would lay it out, so a later reduction or product sees the strides NumPy
  would, and takes NumPy's path.
- **Products and solves** (``Gufunc`` lowerings) call NumPy's gufunc loop (its BLAS or
  LAPACK call); a solve's singular matrix ends the kernel with a code its caller turns
  into NumPy's ``LinAlgError``.
- **Control flow** (``Emitter`` lowerings, ``Context``): loops and branches with their
  functions' graphs written inline; carries live in slots that an iteration overwrites
  only after its new values are computed.

Nothing is reassociated, contracted or vectorised across a reduction: no fast-math flag
is written.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from autodiff.compiler import llvm_ir, npy_loops
from autodiff.compiler.kernel_call import SINGULAR
from autodiff.compiler.llvm_ir import SCALAR, Function, Lanes, cast, constant, mem_type, reg_type
from autodiff.core.errstate import combined
from autodiff.core.graph import Eqn, Graph, Literal, ShapedArray, Var
from autodiff.core.lowering import Elementwise, Emitter, Gufunc, NotLowered, Reduction, View

__all__ = ["CHUNK", "Array", "Codegen", "Context", "Scalar"]

CHUNK = 8192  # elements per call of a NumPy loop in a long run: NumPy's buffer size
VECTOR = 64  # elements up to which a fused loop is straight-line code on LLVM vectors
_ALIGN = 64


class Scalar:
    """A 0-d value in a register (``ref``: an SSA name or a constant)."""

    __slots__ = ("dtype", "ref")

    def __init__(self, dtype: np.dtype, ref: str) -> None:
        self.dtype, self.ref = dtype, ref

    shape: tuple = ()
    ndim = 0


class Array:
    """An array in memory: element ``i`` (a tuple) at ``base[offset + dyn + sum(i * strides)]``
    (``dyn``: an i64 register or None)."""

    __slots__ = ("base", "dtype", "dyn", "offset", "shape", "strides")

    def __init__(self, dtype: np.dtype, shape: tuple, base: str, offset: int = 0,
                 strides: tuple | None = None, dyn: str | None = None) -> None:  # fmt: skip
        self.dtype, self.shape, self.base, self.offset, self.dyn = dtype, shape, base, offset, dyn
        self.strides = strides if strides is not None else c_strides(shape)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def c_contiguous(self) -> bool:
        return all(s == c or n == 1 for n, s, c in zip(self.shape, self.strides,
                                                       c_strides(self.shape)))  # fmt: skip


Value = Scalar | Array


def c_strides(shape: Sequence[int]) -> tuple:
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def _dtype(aval: Any) -> np.dtype:
    if not isinstance(aval, ShapedArray) or not llvm_ir.supported(aval.dtype):
        raise NotLowered(f"a value of {getattr(aval, 'dtype', aval)} is not compiled")
    return aval.dtype


# --- NumPy's iteration order ------------------------------------------------------------------


def keep_order(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> list[int]:
    """The axes of ``shape`` from outermost to innermost as NumPy's iterator orders them
    for operands of ``strides`` (its insertion sort by stride: where operands disagree, C
    order wins; size-1 axes and stride-0 operands do not vote)."""
    ndim = len(shape)
    perm = list(range(ndim - 1, -1, -1))  # innermost first, as NumPy's axis data
    for i0 in range(1, ndim):
        ipos, j0 = i0, perm[i0]
        for i1 in range(i0 - 1, -1, -1):
            ambiguous, swap = True, False
            j1 = perm[i1]
            for st in strides:
                s0 = st[j0] if shape[j0] != 1 else 0
                s1 = st[j1] if shape[j1] != 1 else 0
                if s0 and s1:
                    if abs(s1) <= abs(s0):
                        swap = False
                    elif ambiguous:
                        swap = True
                    ambiguous = False
            if not ambiguous:
                if swap:
                    ipos = i1
                else:
                    break
        if ipos != i0:
            perm.insert(ipos, perm.pop(i0))
    return perm[::-1]


def numpy_layouts(graph: Graph) -> dict:
    """The strides (in elements) NumPy's arrays have at each variable of ``graph`` when
    its inputs are C-contiguous: views as NumPy makes them (``View`` lowerings, on a
    stand-in), elementwise results in NumPy's ``K`` order, everything else C order (a
    guess: kernels check the layouts they are given)."""
    layouts: dict = {}
    for eqn in graph.eqns:
        lowering = eqn.prim.lowering
        found: list = [None] * len(eqn.outvars)
        try:
            if isinstance(lowering, View) and len(eqn.invars) == 1 and type(eqn.invars[0]) is Var:
                x = eqn.invars[0]
                if x.aval.ndim and eqn.outvars[0].aval.ndim:
                    stand_in = Array(x.aval.dtype, tuple(x.aval.shape), "%x", 0, layouts.get(x))
                    fn, params = lowering.fn or eqn.prim.impl, eqn.params
                    seen = _view_layout(stand_in, lambda a, fn=fn, params=params: fn(a, **params))
                    if seen is not None and seen[0]:
                        found[0] = seen[2]
            elif isinstance(lowering, Elementwise) and eqn.outvars[0].aval.ndim:
                shape = tuple(eqn.outvars[0].aval.shape)
                operands = [Array(v.aval.dtype, tuple(v.aval.shape), "%x", 0, layouts.get(v))
                            for v in eqn.invars if type(v) is Var and v.aval.ndim]  # fmt: skip
                order = keep_order(shape, [_broadcast_strides(a, shape) for a in operands])
                if order != list(range(len(shape))):
                    found[0] = _strides_in_order(shape, order)
        except (NotLowered, ValueError, TypeError, IndexError):
            pass
        for v, strides in zip(eqn.outvars, found):
            if strides is not None and strides != c_strides(v.aval.shape):
                layouts[v] = strides
    return layouts


def _strides_in_order(shape: Sequence[int], order: Sequence[int]) -> tuple:
    """Strides of an array contiguous in the axis ``order`` (outermost first)."""
    inner = c_strides([shape[a] for a in order])
    by_axis = [0] * len(shape)
    for a, s in zip(order, inner):
        by_axis[a] = s
    return tuple(by_axis)


def _coalesced(sizes: list[int], strides: list[list[int]]) -> tuple[list[int], list[list[int]]]:
    """Size-1 dimensions dropped, neighbours merged where every operand allows it (as
    NumPy's iterator coalesces); at least one dimension remains."""
    keep = [d for d, n in enumerate(sizes) if n != 1]
    sizes = [sizes[d] for d in keep]
    strides = [[st[d] for d in keep] for st in strides]
    d = len(sizes) - 1
    while d > 0:
        if all(st[d - 1] == st[d] * sizes[d] for st in strides):
            sizes[d] *= sizes[d - 1]
            del sizes[d - 1]
            for st in strides:
                del st[d - 1]
        d -= 1
    if not sizes:
        return [1], [[0] for _ in strides]
    return sizes, strides


def _broadcast_strides(a: Array, shape: tuple) -> list[int]:
    lead = len(shape) - a.ndim
    out = [0] * lead
    for d, n in enumerate(a.shape):
        out.append(0 if n == 1 and shape[lead + d] != 1 else a.strides[d])
    return out


# --- the code generator -----------------------------------------------------------------------


class Codegen:
    """The body of one kernel: ``param`` declares its arguments, ``emit_graph`` writes
    a graph on values, ``finish`` returns the module's functions."""

    def __init__(self) -> None:
        self.f = Function("")
        self.decls: set[str] = set()
        self.params: list[str] = []
        self.consts: list[np.ndarray] = []
        self._const_values: dict[int, Value] = {}
        self.workspace = 0  # bytes
        self._loops: dict[Any, npy_loops.Loop] = {}
        self.errors: dict[int, str] = {}  # error code -> label
        self.errstate: tuple | None = None  # the region's floating-point setting
        # variables whose values are the kernel's results: written there where made
        self.destinations: dict[Var, Array] = {}
        self.helpers: set[tuple[int, int]] = set()  # (pointers, dimensions) of the loop calls
        self.f.allocas.append("  %status = alloca i8, align 1")
        self.f.allocas.append("  store i8 0, ptr %status")

    # --- arguments and memory ---

    def param(self, aval: Any, name: str, strides: tuple | None = None) -> Value:
        """An argument: a 0-d one by value, an array by pointer (with ``strides`` in
        elements, C order if None)."""
        dtype = _dtype(aval)
        if aval.ndim == 0:
            self.params.append(f"{reg_type(dtype)} %{name}")
            return Scalar(dtype, f"%{name}")
        self.params.append(f"ptr noalias %{name}")
        return Array(dtype, aval.shape, f"%{name}", 0, strides)

    def const(self, value: Any) -> Value:
        """A constant of a graph: a literal, or an array passed as an argument."""
        if not isinstance(value, np.ndarray):
            dtype = np.asarray(value).dtype
            if not llvm_ir.supported(dtype):
                raise NotLowered(f"a constant of {dtype}")
            return Scalar(dtype, constant(dtype, value))
        found = self._const_values.get(id(value))
        if found is None:
            if not llvm_ir.supported(value.dtype):
                raise NotLowered(f"a constant of {value.dtype}")
            if value.ndim == 0:
                found = Scalar(value.dtype, constant(value.dtype, value[()]))
            else:  # its own layout (NumPy's order of a reduction over it follows it)
                name = f"%k{len(self.consts)}"
                self.params.append(f"ptr noalias {name}")
                size = value.dtype.itemsize
                if any(s < 0 or s % size for s in value.strides) or not value.flags.aligned:
                    value = np.ascontiguousarray(value)
                self.consts.append(value)
                strides = tuple(s // size for s in value.strides)
                found = Array(value.dtype, value.shape, name, 0, strides)
            self._const_values[id(value)] = found
        return found

    def alloc(self, shape: tuple, dtype: np.dtype, order: Sequence[int] | None = None) -> Array:
        """A new array in the workspace, C-contiguous (or contiguous in the axis
        ``order``, outermost first)."""
        size = max(math.prod(shape), 1) * dtype.itemsize
        offset = self.workspace
        self.workspace += -(-size // _ALIGN) * _ALIGN
        self.f.n += 1
        name = f"%w{self.f.n}"
        self.f.allocas.append(f"  {name} = getelementptr inbounds i8, ptr %ws, i64 {offset}")
        strides = c_strides(shape)
        if order is not None and list(order) != list(range(len(shape))):
            strides = _strides_in_order(shape, order)
        return Array(dtype, shape, name, 0, strides)

    def index_of(self, a: Array, terms: Sequence[tuple[str, int]]) -> str:
        """The element index (i64) of ``a`` at ``sum(i * stride)`` over ``terms``."""
        f = self.f
        total = str(a.offset)
        if a.dyn is not None:
            total = f.op(f"add i64 {a.dyn}, {a.offset}") if a.offset else a.dyn
        for var, stride in terms:
            if stride == 0:
                continue
            part = var if stride == 1 else f.op(f"mul i64 {var}, {stride}")
            total = part if total == "0" else f.op(f"add i64 {total}, {part}")
        return total

    def pointer(self, a: Array, index: str) -> str:
        return self.f.op(f"getelementptr inbounds {mem_type(a.dtype)}, ptr {a.base}, i64 {index}")

    def load(self, a: Array, index: str) -> str:
        ty = mem_type(a.dtype)
        v = self.f.op(f"load {ty}, ptr {self.pointer(a, index)}")
        return self.f.op(f"icmp ne i8 {v}, 0") if a.dtype.kind == "b" else v

    def store(self, a: Array, index: str, value: str, dtype: np.dtype | None = None) -> None:
        value = cast(self.f, value, dtype or a.dtype, a.dtype)
        if a.dtype.kind == "b":
            value = self.f.op(f"zext i1 {value} to i8")
        self.f.do(f"store {mem_type(a.dtype)} {value}, ptr {self.pointer(a, index)}")

    def element(self, a: Array, position: Sequence[int]) -> Scalar:
        """The element at a static ``position`` as a register."""
        index = a.offset + sum(p * s for p, s in zip(position, a.strides))
        shifted = Array(a.dtype, (), a.base, index, (), a.dyn)
        return Scalar(a.dtype, self.load(shifted, self.index_of(shifted, [])))

    def loop(self, ufunc: Any, dtypes: tuple, reduction: bool = False) -> npy_loops.Loop:
        key = (ufunc, dtypes, reduction)
        found = self._loops.get(key)
        if found is None:
            try:
                found = npy_loops.loop(ufunc, dtypes, reduction)
            except (TypeError, ValueError) as e:
                raise NotLowered(
                    f"NumPy has no loop of {ufunc.__name__} for {dtypes}: {e}"
                ) from None
            self._loops[key] = found
            self.decls.update(found.declarations())
        return found

    def call_loop(self, loop: npy_loops.Loop, pointers: Sequence[str],
                  dims: Sequence[str | int], steps: Sequence[str | int]) -> None:  # fmt: skip
        """Call NumPy's ``loop`` on ``pointers`` (one per operand and result) over
        ``dims`` with byte ``steps``, through a small helper per arity (``helper``); a
        failure (NumPy's exception set) marks the status, which ends the kernel."""
        n = len(pointers)
        self.helpers.add((n, len(dims), len(steps)))
        args = [f'ptr @"{loop.fn}"', f'ptr @"{loop.context}"', f'ptr @"{loop.aux}"',
                "ptr %status", *(f"i64 {d}" for d in dims), *(f"ptr {p}" for p in pointers),
                *(f"i64 {st}" for st in steps)]  # fmt: skip
        self.f.do(f"call void @adx.call{n}.{len(dims)}.{len(steps)}({', '.join(args)})")

    def status_failed(self) -> str:
        """An ``i1``: whether a NumPy loop failed so far."""
        flag = self.f.op("load i8, ptr %status")
        return self.f.op(f"icmp ne i8 {flag}, 0")

    def fail(self, code: int) -> str:
        """The label of a block ending the kernel with ``code`` (its caller's business)."""
        label = self.errors.get(code)
        if label is None:
            label = self.errors[code] = f"error{code}"
        return label

    def opaque(self, value: Scalar) -> Scalar:
        """``value``, a constant, as a register LLVM cannot see through (a volatile load):
        arithmetic on it happens at run time and raises the flags NumPy's would."""
        if value.ref.startswith("%"):
            return value
        slot = self.f.alloca(mem_type(value.dtype), 1)
        stored = value.ref
        if value.dtype.kind == "b":
            stored = "1" if value.ref == "true" else "0"
        self.f.n += 1
        name = f"%q{self.f.n}"
        ty = mem_type(value.dtype)
        self.f.allocas.append(f"  store volatile {ty} {stored}, ptr {slot}")
        self.f.allocas.append(f"  {name} = load volatile {ty}, ptr {slot}")
        if value.dtype.kind == "b":
            self.f.allocas.append(f"  {name}b = icmp ne i8 {name}, 0")
            name += "b"
        return Scalar(value.dtype, name)

    def scalar_slot(self, value: Scalar) -> str:
        """A one-element stack slot holding ``value`` (in memory layout)."""
        slot = self.f.alloca(mem_type(value.dtype), 1)
        v = value.ref
        if value.dtype.kind == "b":
            v = self.f.op(f"zext i1 {v} to i8")
        self.f.do(f"store {mem_type(value.dtype)} {v}, ptr {slot}")
        return slot

    # --- moving data ---

    def materialize(self, value: Value, order: Sequence[int] | None = None) -> Array:
        """``value`` as an array of its own (C-contiguous, or in the axis ``order``)."""
        if isinstance(value, Scalar):
            out = self.alloc((), value.dtype)
            self.store(out, "0", value.ref)
            return out
        out = self.alloc(value.shape, value.dtype, order)
        self.copy_into(out, value)
        return out

    def copy_into(self, dst: Array, src: Value) -> None:
        """``dst[...] = src`` (broadcast, cast to ``dst``'s dtype)."""
        group = Group(self, dst.shape)
        ref = group.operand(src)
        group.store(group.cast(ref, src.dtype, dst.dtype), dst)
        group.emit()

    def fill(self, dst: Array, value: Any) -> None:
        self.copy_into(dst, Scalar(dst.dtype, constant(dst.dtype, value)))

    def view(self, x: Value, fn: Callable[[np.ndarray], Any], element: bool = True) -> Value:
        """``fn(x)`` where ``fn`` returns a view of its argument (a reshape, a transpose,
        a static index): the view's layout, found by running ``fn`` on a stand-in array
        with ``x``'s strides; ``x`` is first copied where NumPy would copy (a reshape of
        a non-contiguous array).  A 0-d view is its element's value (``element``) or a
        0-d array (a place to write into)."""
        if isinstance(x, Scalar):
            x = self.materialize(x)
        result = _view_layout(x, fn)
        if result is None:  # NumPy copies: so do we, in C order, then view
            x = self.materialize(x)
            result = _view_layout(x, fn)
            if result is None:
                raise NotLowered("a view function that copies a contiguous array")
        shape, offset, strides = result
        out = Array(x.dtype, shape, x.base, offset, strides, x.dyn)
        return self.element(out, ()) if not shape and element else out

    # --- graphs ---

    def emit_graph(self, graph: Graph, inputs: Sequence[Value]) -> list[Value]:
        """Write ``graph`` on ``inputs``; the values of its results."""
        env: dict[Var, Value] = dict(zip(graph.invars, inputs, strict=True))
        for var, value in zip(graph.constvars, graph.consts):
            env[var] = self.const(value)
        items = schedule(graph.eqns)
        read_after: set = {v for v in graph.outvars if type(v) is Var}
        for item in items:
            if isinstance(item, _Fused):
                for eqn in item.eqns:
                    read_after.update(v for v in eqn.invars
                                      if type(v) is Var and v not in item.outs)  # fmt: skip
            else:
                read_after.update(v for v in item.invars if type(v) is Var)
        for item in items:
            if isinstance(item, _Fused):
                for eqn in item.eqns:
                    if eqn.errstate and combined(self.errstate, eqn.errstate) != self.errstate:
                        raise NotLowered("an np.errstate of its own inside a compiled region")
                self._emit_fused(item, env, read_after)
            else:
                args = [self.atom(env, v) for v in item.invars]
                env.update(zip(item.outvars, self.emit_eqn(item, args), strict=True))
        return [self.atom(env, v) for v in graph.outvars]

    def atom(self, env: dict, v: Any) -> Value:
        if type(v) is Literal:
            value = v.value
            dtype = v.aval.dtype if isinstance(v.aval, ShapedArray) else np.asarray(value).dtype
            if not llvm_ir.supported(dtype):
                raise NotLowered(f"a literal of {dtype}")
            return Scalar(dtype, constant(dtype, value))
        return env[v]

    def _emit_fused(self, item: _Fused, env: dict, read_after: set) -> None:
        group = Group(self, item.shape)
        refs: dict[Var, Any] = {}
        for eqn in item.eqns:
            args = []
            for v in eqn.invars:
                if v in refs:
                    args.append((refs[v], v.aval))
                else:
                    args.append((group.operand(self.atom(env, v)), _aval_of(v)))
            refs[eqn.outvars[0]] = group.equation(eqn, args)
        for eqn in item.eqns:
            out = eqn.outvars[0]
            if out in read_after:
                env[out] = group.result(refs[out], out.aval.dtype, self.destinations.get(out))
        group.emit()

    def emit_eqn(self, eqn: Eqn, args: list[Value]) -> list[Value]:
        """One equation outside a fused loop."""
        lowering = eqn.prim.lowering
        if lowering is None:
            raise NotLowered(f"{eqn.prim.name} has no lowering")
        if eqn.errstate and combined(self.errstate, eqn.errstate) != self.errstate:
            raise NotLowered("an np.errstate of its own: the kernel reports with one setting")
        for v in eqn.outvars:
            _dtype(v.aval)
        if isinstance(lowering, Elementwise):
            group = Group(self, eqn.outvars[0].aval.shape)
            ref = group.equation(eqn, [(group.operand(a), _aval_of(v))
                                       for a, v in zip(args, eqn.invars)])  # fmt: skip
            out = group.result(ref, eqn.outvars[0].aval.dtype)
            group.emit()
            return [out]
        if isinstance(lowering, Reduction):
            return [self.reduce(lowering.ufunc, args[0], eqn.outvars[0].aval, **eqn.params)]
        if isinstance(lowering, View):
            if len(args) != 1:
                raise NotLowered(f"{eqn.prim.name} with array operands besides the first")
            fn = lowering.fn or eqn.prim.impl
            params = eqn.params

            def apply(a: np.ndarray) -> Any:
                return fn(a, **params)

            return [self.view(args[0], apply)]
        if isinstance(lowering, Gufunc):
            return self.gufunc(lowering, eqn, args)
        if isinstance(lowering, Emitter):
            ctx = Context(self, eqn)
            out = lowering.fn(ctx, *args, **eqn.params)
            outs = list(out) if eqn.prim.multiple_results else [out]
            for value, var in zip(outs, eqn.outvars, strict=True):
                if tuple(value.shape) != tuple(var.aval.shape) or value.dtype != var.aval.dtype:
                    raise NotLowered(f"{eqn.prim.name}'s lowering gave {value.dtype}{value.shape}")
            return outs
        raise NotLowered(f"{eqn.prim.name}: a lowering of another kind ({lowering!r})")

    # --- reductions ---

    def reduce(self, ufunc: np.ufunc, x: Value, out_aval: Any, *, axis: tuple,
               keepdims: bool) -> Value:  # fmt: skip
        """``ufunc.reduce(x, axis, keepdims)`` as NumPy computes it (module docstring)."""
        out_dtype = _dtype(out_aval)
        if isinstance(x, Scalar) or not axis:
            raise NotLowered("a reduction of a 0-d value, or over no axes")
        if x.dtype != out_dtype:
            if out_dtype.kind not in "iu" or x.dtype.kind not in "biu":
                raise NotLowered(f"a reduction from {x.dtype} to {out_dtype}")
            x = self.materialize_cast(x, out_dtype)  # integers: any order is exact
        identity = ufunc.identity
        count = math.prod(x.shape[a] for a in axis)
        if count == 0 and identity is None:
            raise NotLowered("a reduction of no elements (NumPy raises)")
        loop = self.loop(ufunc, (x.dtype, x.dtype, None), reduction=True)
        if loop.dtypes[0] != x.dtype:
            raise NotLowered(f"NumPy reduces {x.dtype} by {loop.dtypes}")
        kept = [d for d in range(x.ndim) if d not in axis]
        out = self.alloc(tuple(x.shape[d] for d in kept), x.dtype)
        if identity is not None:
            self.fill(out, identity)
        else:
            first = self.view(x, lambda a: a[tuple(0 if d in axis else slice(None)
                                                   for d in range(a.ndim))])  # fmt: skip
            self.copy_into(out, first) if isinstance(first, Array) else self.store(
                out, "0", first.ref
            )
        if count:
            self._reduce_loops(loop, x, out, kept, identity is None)
        if keepdims:
            out = Array(out.dtype, tuple(out_aval.shape), out.base, out.offset,
                        _keepdims_strides(x.ndim, kept, out.strides), out.dyn)  # fmt: skip
        return self.element(out, ()) if not out_aval.shape else out

    def materialize_cast(self, x: Array, dtype: np.dtype) -> Array:
        out = self.alloc(x.shape, dtype)
        self.copy_into(out, x)
        return out

    def _reduce_loops(self, loop: npy_loops.Loop, x: Array, out: Array, kept: list,
                      skip_first: bool) -> None:  # fmt: skip
        f = self.f
        size = x.dtype.itemsize
        out_full = [0] * x.ndim
        for d, s in zip(kept, out.strides):
            out_full[d] = s if x.shape[d] != 1 else 0
        order = sorted(range(x.ndim), key=lambda d: abs(x.strides[d]), reverse=True)
        layouts = [[x.strides[d] for d in order], [out_full[d] for d in order]]
        sizes, (si, so) = _coalesced([x.shape[d] for d in order], layouts)
        n = sizes[-1]
        with contextlib.ExitStack() as nest:
            terms_in, terms_out, first = [], [], []
            for d in range(len(sizes) - 1):
                i = nest.enter_context(f.loop(sizes[d]))
                terms_in.append((i, si[d]))
                terms_out.append((i, so[d]))
                if so[d] == 0:
                    first.append(i)
            pin = self.pointer(x, self.index_of(x, terms_in))
            pout = self.pointer(out, self.index_of(out, terms_out))
            count: str | int = n
            if skip_first:
                visit = "true"
                for i in first:
                    zero = f.op(f"icmp eq i64 {i}, 0")
                    visit = zero if visit == "true" else f.op(f"and i1 {visit}, {zero}")
                if so[-1] == 0:
                    count = f.op(f"select i1 {visit}, i64 {n - 1}, i64 {n}")
                    moved = f.op(f"getelementptr inbounds i8, ptr {pin}, i64 {si[-1] * size}")
                    pin = f.op(f"select i1 {visit}, ptr {moved}, ptr {pin}")
                else:
                    count = f.op(f"select i1 {visit}, i64 0, i64 {n}")
            go = f.op(f"icmp sgt i64 {count}, 0")
            with f.when(go):
                self.call_loop(loop, [pout, pin, pout], [count],
                               [so[-1] * size, si[-1] * size, so[-1] * size])  # fmt: skip

    # --- NumPy's gufuncs ---

    def gufunc(self, lowering: Gufunc, eqn: Eqn, args: list[Value]) -> list[Value]:
        """A gufunc (``matmul``, ``solve``) on one set of core operands: NumPy's loop,
        core dimensions a missing flexible one as size 1 with stride 0."""
        ufunc = lowering.select([v.aval for v in eqn.invars])
        (out_aval,) = [v.aval for v in eqn.outvars]
        dtypes = tuple(_dtype(v.aval) for v in (*eqn.invars, *eqn.outvars))
        loop = self.loop(ufunc, dtypes)
        if loop.dtypes != dtypes:
            raise NotLowered(f"NumPy's {ufunc.__name__} loop is for {loop.dtypes}")
        operands = [a if isinstance(a, Array) else self.materialize(a) for a in args]
        out = self.alloc(tuple(out_aval.shape), dtypes[-1])
        dims, core = lowering.core(ufunc, [a.shape for a in operands], out.shape)
        steps: list[int] = [0] * len(dtypes)
        for a, axes in zip((*operands, out), core, strict=True):
            for axis in axes:
                steps.append(0 if axis is None else a.strides[axis] * a.dtype.itemsize)
        pointers = [self.pointer(a, self.index_of(a, [])) for a in (*operands, out)]
        if lowering.singular:
            self._isolated_call(loop, pointers, [1, *dims], steps, SINGULAR)
        else:
            self.call_loop(loop, pointers, [1, *dims], steps)
        return [self.element(out, ()) if not out.shape else out]

    def _isolated_call(self, loop: npy_loops.Loop, pointers: list, dims: list, steps: list,
                       code: int) -> None:  # fmt: skip
        """A call whose floating-point flags NumPy handles itself (a solve: ``invalid``
        means a singular matrix, the others are ignored): the flags raised before are
        kept, the call's own are dropped, ``invalid`` ends the kernel with ``code``."""
        f = self.f
        invalid = _fe_all()[0]
        before = f.op(f"call i32 @adx_fetestexcept(i32 {_fe_all()[4]})")
        f.do(f"call i32 @adx_feclearexcept(i32 {_fe_all()[4]})")
        self.call_loop(loop, pointers, dims, steps)
        raised = f.op(f"call i32 @adx_fetestexcept(i32 {invalid})")
        f.do(f"call i32 @adx_feclearexcept(i32 {_fe_all()[4]})")
        f.do(f"call i32 @adx_feraiseexcept(i32 {before})")
        bad = f.op(f"icmp ne i32 {raised}, 0")
        ok = f.block("ok")
        f.do(f"br i1 {bad}, label %{self.fail(code)}, label %{ok}")
        f.enter(ok)


def helper(pointers: int, dims: int, steps: int) -> str:
    """The function calling a NumPy loop on ``pointers`` operands over ``dims``
    dimensions with ``steps`` strides (``Codegen.call_loop``): its arguments stored
    where the loop reads them."""
    params = ["ptr %fn", "ptr %ctxcell", "ptr %auxcell", "ptr %status",
              *(f"i64 %d{k}" for k in range(dims)), *(f"ptr %p{k}" for k in range(pointers)),
              *(f"i64 %s{k}" for k in range(steps))]  # fmt: skip
    name = f"@adx.call{pointers}.{dims}.{steps}"
    lines = [f"define internal void {name}({', '.join(params)}) noinline nounwind {{", "entry:",
             f"  %args = alloca ptr, i64 {pointers}", f"  %dims = alloca i64, i64 {dims}",
             f"  %steps = alloca i64, i64 {steps}"]  # fmt: skip
    for table, prefix, count, ty in (("args", "p", pointers, "ptr"), ("dims", "d", dims, "i64"),
                                     ("steps", "s", steps, "i64")):  # fmt: skip
        for k in range(count):
            lines += [f"  %{table}{k} = getelementptr inbounds {ty}, ptr %{table}, i64 {k}",
                      f"  store {ty} %{prefix}{k}, ptr %{table}{k}"]  # fmt: skip
    lines += ["  %ctx = load ptr, ptr %ctxcell", "  %aux = load ptr, ptr %auxcell",
              "  %rc = call i32 %fn(ptr %ctx, ptr %args, ptr %dims, ptr %steps, ptr %aux)",
              "  %bad = icmp slt i32 %rc, 0", "  br i1 %bad, label %failed, label %done",
              "failed:", "  store i8 1, ptr %status", "  br label %done",
              "done:", "  ret void", "}"]  # fmt: skip
    return "\n".join(lines)


def _fe_all() -> tuple:
    from autodiff.compiler import llvm_engine

    bits = llvm_engine.fe_bits()
    return (*bits, bits[0] | bits[1] | bits[2] | bits[3])


def _keepdims_strides(ndim: int, kept: list, strides: tuple) -> tuple:
    out = [0] * ndim
    for d, s in zip(kept, strides):
        out[d] = s
    return tuple(out)


def _aval_of(v: Any) -> Any:
    return v.aval


def _view_layout(x: Array, fn: Callable) -> tuple | None:
    """(shape, offset, strides) of ``fn(x)`` in elements, or None where ``fn`` copies."""
    extent = x.offset + sum(max(s, 0) * (n - 1) for n, s in zip(x.shape, x.strides)) + 1
    low = x.offset + sum(min(s, 0) * (n - 1) for n, s in zip(x.shape, x.strides))
    if low < 0 or 0 in x.shape:
        raise NotLowered("a view of an empty array, or one before its buffer")
    buffer = np.empty(max(extent, 1), np.uint8)
    stand_in = as_strided(buffer[x.offset :], x.shape, x.strides, writeable=False)
    result = fn(stand_in)
    if isinstance(result, np.generic):  # one element (an integer index): which one
        positions = np.arange(extent, dtype=np.int64)
        element = fn(as_strided(positions[x.offset :], x.shape,
                                tuple(8 * s for s in x.strides), writeable=False))  # fmt: skip
        return (), int(element), ()
    if not isinstance(result, np.ndarray):
        return None
    start = buffer.__array_interface__["data"][0]
    at = result.__array_interface__["data"][0]
    if result.base is None or not start <= at < start + buffer.size or result.dtype != np.uint8:
        return None
    return tuple(result.shape), at - start, tuple(result.strides)


# --- elementwise: micro-operations and their loops --------------------------------------------


class _Micro:
    """One scalar operation of a fused loop: ``kind`` "native" (``write``), "call"
    (NumPy's ``loop``), "cast" or "select"; ``args`` references, ``dtypes`` the
    operands' and ``dtype`` the result's."""

    __slots__ = ("args", "dtype", "dtypes", "kind", "loop", "write")

    def __init__(self, kind: str, args: list, dtypes: tuple, dtype: np.dtype,
                 write: Any = None, loop: Any = None) -> None:  # fmt: skip
        self.kind, self.args, self.dtypes, self.dtype = kind, args, dtypes, dtype
        self.write, self.loop = write, loop


class Group:
    """Elementwise operations on one shape, computed in one loop nest (module
    docstring).  ``operand`` adds an outside value, ``equation``/``ufunc``/``cast``/
    ``select`` add operations, ``result``/``store`` say which are kept, ``emit``
    writes the loops.  References are ("o", k) for operand k, ("m", j) for micro j."""

    def __init__(self, cg: Codegen, shape: tuple) -> None:
        self.cg, self.shape = cg, tuple(shape)
        self.operands: list[Value] = []
        self.micros: list[_Micro] = []
        self.stores: list[tuple[Any, Any]] = []  # (reference, destination)
        self._operand_ids: dict[int, Any] = {}
        self.registers: dict = {}  # a 0-d group's values, once written

    def operand(self, value: Value) -> Any:
        found = self._operand_ids.get(id(value))
        if found is None:
            if isinstance(value, Array) and value.ndim > len(self.shape):
                raise NotLowered("an operand with more dimensions than its loop")
            self.operands.append(value)
            found = self._operand_ids[id(value)] = ("o", len(self.operands) - 1)
        return found

    def dtype_of(self, ref: Any) -> np.dtype:
        return self.operands[ref[1]].dtype if ref[0] == "o" else self.micros[ref[1]].dtype

    def _add(self, micro: _Micro) -> Any:
        self.micros.append(micro)
        return ("m", len(self.micros) - 1)

    def cast(self, ref: Any, src: np.dtype, dst: np.dtype) -> Any:
        if src == dst:
            return ref
        if ref[0] == "o":
            value = self.operands[ref[1]]
            if isinstance(value, Scalar) and not value.ref.startswith("%"):
                folded = _fold_cast(value, dst)
                if folded is not None:
                    return self.operand(folded)
                # a cast that reports (an overflow): at run time, where LLVM cannot fold it
                ref = self.operand(self.cg.opaque(value))
        cast(Function(""), "%x", src, dst)  # NotLowered where no cast is compiled
        return self._add(_Micro("cast", [ref], (src,), dst))

    def _constant(self, ref: Any) -> bool:
        value = self.operands[ref[1]] if ref[0] == "o" else None
        return isinstance(value, Scalar) and not value.ref.startswith("%")

    def select(self, c: Any, x: Any, y: Any, dtype: np.dtype) -> Any:
        c = self.cast(c, self.dtype_of(c), np.dtype(bool))
        x = self.cast(x, self.dtype_of(x), dtype)
        y = self.cast(y, self.dtype_of(y), dtype)
        return self._add(_Micro("select", [c, x, y], (np.dtype(bool), dtype, dtype), dtype))

    def ufunc(self, ufunc: np.ufunc, args: list[tuple[Any, Any]]) -> Any:
        """``ufunc`` on ``args`` ((reference, abstract value or Python type) pairs: a
        Python type for a weak Python scalar), as NumPy resolves its dtypes."""
        if getattr(np, ufunc.__name__, None) is not ufunc or ufunc.nout != 1:
            raise NotLowered(f"{ufunc.__name__} is not one of NumPy's one-result ufuncs")
        keys = [_weak_key(aval) for _, aval in args]
        if all(isinstance(k, type) for k in keys):  # Python numbers only: NumPy's defaults
            keys = [np.dtype(aval.dtype) for _, aval in args]
        try:
            dtypes = ufunc.resolve_dtypes((*keys, None))
        except (TypeError, ValueError) as e:
            raise NotLowered(str(e)) from None
        dtypes = tuple(np.dtype(d) for d in dtypes)
        cast_args = []
        for (ref, _), key, dt in zip(args, keys, dtypes):
            if not llvm_ir.supported(dt):
                raise NotLowered(f"{ufunc.__name__} computes in {dt}")
            if key in (int, bool) and dt.kind in "iu":
                self._check_python_int(ref, dt)
            cast_args.append(self.cast(ref, self.dtype_of(ref), dt))
        ins, out = dtypes[: ufunc.nin], dtypes[ufunc.nin]
        if not llvm_ir.supported(out):
            raise NotLowered(f"{ufunc.__name__} gives {out}")
        if cast_args and all(self._constant(r) for r in cast_args):
            # constants alone (the passes fold those that report nothing): computed at run
            # time, where their floating-point errors are reported as NumPy's would be
            cast_args[0] = self.operand(self.cg.opaque(self.operands[cast_args[0][1]]))
        write = llvm_ir.native(ufunc.__name__, ins)
        if write is not None:
            return self._add(_Micro("native", cast_args, ins, out, write=write))
        loop = self.cg.loop(ufunc, dtypes)
        return self._add(_Micro("call", cast_args, ins, out, loop=loop))

    def _check_python_int(self, ref: Any, dtype: np.dtype) -> None:
        """A Python int meeting an integer of another size: NumPy 2 compares it exactly,
        or raises ``OverflowError`` where it does not fit; kept to NumPy where it does
        not fit, or where its value is known only at run time and the dtype is not
        int64 (what a Python int becomes)."""
        value = self.operands[ref[1]] if ref[0] == "o" else None
        if isinstance(value, Scalar) and not value.ref.startswith("%"):
            number = int(value.ref) if value.dtype.kind in "iu" else int(value.ref == "true")
            info = np.iinfo(dtype)
            if not info.min <= number <= info.max:
                raise NotLowered(f"the Python int {number} does not fit {dtype}")
        elif dtype != np.dtype(np.int64):
            raise NotLowered(f"a Python int of unknown value meets {dtype}")

    def equation(self, eqn: Eqn, args: list[tuple[Any, Any]]) -> Any:
        """The operations of an elementwise equation (its ``Elementwise`` lowering)."""
        lowering = eqn.prim.lowering
        assert isinstance(lowering, Elementwise)
        out = _dtype(eqn.outvars[0].aval)
        fn = lowering.fn
        if lowering.when is not None and not lowering.when([a for _, a in args],
                                                           eqn.outvars[0].aval):  # fmt: skip
            raise NotLowered(f"{eqn.prim.name} does not lower for these dtypes")
        if isinstance(fn, np.ufunc):
            if eqn.params:
                raise NotLowered(f"{eqn.prim.name} has parameters")
            ref = self.ufunc(fn, args)
        else:
            ref = self._traced(fn, args, eqn.params if lowering.params else {})
        return self.cast(ref, self.dtype_of(ref), out)

    def _traced(self, fn: Callable, args: list, params: dict) -> Any:
        """A Python function of scalars, traced: its operators and NumPy calls become
        operations here (``Sym``); Python control flow on its values does not lower."""
        numeric = [_weak_key(a) for _, a in args if np.dtype(a.dtype).kind != "b"]
        common = np.result_type(*numeric) if numeric else None
        syms = []
        for ref, aval in args:
            dt = np.dtype(aval.dtype)
            if dt.kind != "b" and common is not None:
                ref, dt = self.cast(ref, self.dtype_of(ref), np.dtype(common)), np.dtype(common)
            syms.append(Sym(self, ref, dt))
        for k, v in params.items():
            if v is not None and not isinstance(v, (bool, int, float)):
                raise NotLowered(f"parameter {k}={v!r:.30}")
        out = fn(*syms, **params)
        if not isinstance(out, Sym):
            out = Sym.of(self, out)
        return out.ref

    def result(self, ref: Any, dtype: np.dtype, destination: Array | None = None) -> Value:
        """Keep ``ref``: a register for a 0-d loop, else a new array laid out as NumPy
        would lay it out: ``destination`` (a kernel's result, C order) where that is the
        layout, written there at once."""
        if not self.shape:
            return _LazyScalar(self, ref, dtype)
        layouts = [_broadcast_strides(o, self.shape) for o in self.operands if isinstance(o, Array)]
        order = keep_order(self.shape, layouts)
        c_order = order == list(range(len(self.shape))) or math.prod(self.shape) <= 1
        if destination is not None and c_order and destination.dtype == dtype:
            out = destination
        else:
            out = self.cg.alloc(self.shape, dtype, order)
        self.store(ref, out)
        return out

    def store(self, ref: Any, dst: Array) -> None:
        self.stores.append((self.cast(ref, self.dtype_of(ref), dst.dtype), dst))

    def emit(self) -> None:
        _emit_group(self)


class _LazyScalar(Scalar):
    """A 0-d result of a group, its register known once the group is written."""

    __slots__ = ("_group", "_ref")

    def __init__(self, group: Group, ref: Any, dtype: np.dtype) -> None:
        self._group, self._ref, self.dtype = group, ref, dtype
        group.stores.append((ref, self))

    @property  # type: ignore[override]
    def ref(self) -> str:
        return self._group.registers[self._ref]


def _fold_cast(value: Scalar, dst: np.dtype) -> Scalar | None:
    """A constant cast at compile time, as NumPy casts it (None where that would warn)."""
    src = value.dtype
    text = value.ref
    if src.kind == "b":
        number: Any = text == "true"
    elif src.kind in "iu":
        number = int(text)
        if src.kind == "u" and number < 0:
            number += 1 << (8 * src.itemsize)
    else:
        import struct

        number = struct.unpack(">d", bytes.fromhex(text[2:]))[0]
    with np.errstate(all="raise"):
        try:
            converted = np.array(number, src).astype(dst)
        except (FloatingPointError, OverflowError, ValueError):
            return None
    return Scalar(dst, constant(dst, converted[()]))


def _weak_key(aval: Any) -> Any:
    """What NumPy's type resolution sees of an operand: a Python type for a weak one."""
    if getattr(aval, "weak_type", False):
        return {"f": float, "c": complex, "b": bool}.get(aval.dtype.kind, int)
    return np.dtype(aval.dtype)


class Sym:
    """A scalar of a Python function being traced into a group's operations: its
    operators and NumPy's ufuncs (and ``np.where``) add operations; ``bool()`` of it
    cannot be known, so Python control flow does not lower."""

    __slots__ = ("dtype", "group", "ref")
    __array_priority__ = 1000

    def __init__(self, group: Group, ref: Any, dtype: np.dtype) -> None:
        self.group, self.ref, self.dtype = group, ref, dtype

    @staticmethod
    def of(group: Group, value: Any) -> Sym:
        if isinstance(value, Sym):
            return value
        if isinstance(value, (bool, int, float, np.generic)):
            dtype = np.asarray(value).dtype
            if not llvm_ir.supported(dtype):
                raise NotLowered(f"a constant of {dtype}")
            return Sym(group, group.operand(Scalar(dtype, constant(dtype, value))), dtype)
        raise NotLowered(f"a value {value!r:.40} in a scalar function")

    def _aval(self) -> Any:
        return ShapedArray((), self.dtype)

    def _apply(self, ufunc: np.ufunc, *inputs: Any) -> Sym:
        args = []
        for x in inputs:
            if isinstance(x, Sym):
                args.append((x.ref, x._aval()))
            else:
                s = Sym.of(self.group, x)
                weak = isinstance(x, (bool, int, float))
                args.append((s.ref, ShapedArray((), s.dtype, weak_type=weak)))
        ref = self.group.ufunc(ufunc, args)
        return Sym(self.group, ref, self.group.dtype_of(ref))

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method != "__call__" or kwargs:
            raise NotLowered(f"{ufunc.__name__}.{method} in a scalar function")
        return self._apply(ufunc, *inputs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if func is np.where and len(args) == 3 and not kwargs:
            c, x, y = (Sym.of(self.group, a) for a in args)
            dtype = np.result_type(x.dtype, y.dtype)
            return Sym(self.group, self.group.select(c.ref, x.ref, y.ref, dtype), dtype)
        raise NotLowered(f"{getattr(func, '__name__', func)} in a scalar function")

    def __bool__(self) -> bool:
        raise NotLowered("Python control flow on a value in a scalar function")

    def __float__(self) -> float:
        raise NotLowered("a value converted to a Python float in a scalar function")

    __int__ = __index__ = __float__  # type: ignore[assignment]

    def __add__(self, o: Any) -> Sym:
        return self._apply(np.add, self, o)

    def __radd__(self, o: Any) -> Sym:
        return self._apply(np.add, o, self)

    def __sub__(self, o: Any) -> Sym:
        return self._apply(np.subtract, self, o)

    def __rsub__(self, o: Any) -> Sym:
        return self._apply(np.subtract, o, self)

    def __mul__(self, o: Any) -> Sym:
        return self._apply(np.multiply, self, o)

    def __rmul__(self, o: Any) -> Sym:
        return self._apply(np.multiply, o, self)

    def __truediv__(self, o: Any) -> Sym:
        return self._apply(np.divide, self, o)

    def __rtruediv__(self, o: Any) -> Sym:
        return self._apply(np.divide, o, self)

    def __pow__(self, o: Any) -> Sym:
        return self._apply(np.power, self, o)

    def __rpow__(self, o: Any) -> Sym:
        return self._apply(np.power, o, self)

    def __neg__(self) -> Sym:
        return self._apply(np.negative, self)

    def __pos__(self) -> Sym:
        return self

    def __abs__(self) -> Sym:
        return self._apply(np.absolute, self)

    def __lt__(self, o: Any) -> Sym:
        return self._apply(np.less, self, o)

    def __le__(self, o: Any) -> Sym:
        return self._apply(np.less_equal, self, o)

    def __gt__(self, o: Any) -> Sym:
        return self._apply(np.greater, self, o)

    def __ge__(self, o: Any) -> Sym:
        return self._apply(np.greater_equal, self, o)

    def __eq__(self, o: Any) -> Sym:  # type: ignore[override]
        return self._apply(np.equal, self, o)

    def __ne__(self, o: Any) -> Sym:  # type: ignore[override]
        return self._apply(np.not_equal, self, o)

    __hash__ = None  # type: ignore[assignment]


def _emit_group(group: Group) -> None:
    """Write ``group``'s loops (module docstring): one nest over its shape in NumPy's
    axis order, coalesced; where NumPy loops are called, the innermost dimension in
    runs, values crossing a call kept in run-sized buffers."""
    cg, f = group.cg, group.cg.f
    micros = group.micros
    arrays = [o for o in group.operands if isinstance(o, Array)]
    stored_arrays = [dst for _, dst in group.stores if isinstance(dst, Array)]
    shape = group.shape
    if not shape:
        _emit_scalars(group)
        return
    if 0 in shape:
        return  # no elements
    layouts = [_broadcast_strides(a, shape) for a in (*arrays, *stored_arrays)]
    order = keep_order(shape, layouts)
    sizes, strides = _coalesced(
        [shape[a] for a in order], [[st[a] for a in order] for st in layouts]
    )
    per_array = dict(zip(map(id, (*arrays, *stored_arrays)), strides))
    if math.prod(sizes) <= VECTOR:
        _emit_vector(group, sizes, per_array)
        return
    calls = any(m.kind == "call" for m in micros)
    with contextlib.ExitStack() as nest:
        outer = [nest.enter_context(f.loop(n)) for n in sizes[:-1]]
        n = sizes[-1]
        bases = {}
        for a in (*arrays, *stored_arrays):
            st = per_array[id(a)]
            bases[id(a)] = (cg.index_of(a, list(zip(outer, st[:-1]))), st[-1])
        if not calls:
            with f.loop(n) as j:
                _emit_run(group, range(len(micros)), bases, j, {}, None)
            return
        _emit_chunked(group, n, bases)


def _pieces(n: int) -> list[tuple[int, int]]:
    """``range(n)`` as runs of power-of-two lengths, longest first: LLVM vectors of such
    lengths have no padding lanes (which could raise floating-point flags of their own)."""
    out, start = [], 0
    while start < n:
        size = 1 << ((n - start).bit_length() - 1)
        out.append((start, size))
        start += size
    return out


def _emit_vector(group: Group, sizes: list[int], per_array: dict) -> None:
    """A group of at most ``VECTOR`` elements: no loop, each operation a few instructions
    on LLVM vectors of all its elements (in pieces of power-of-two lengths); NumPy's
    loops called once on all of them."""
    cg, f = group.cg, group.cg.f
    n = math.prod(sizes)
    pieces = _pieces(n)
    positions = [()]
    for size in sizes:
        positions = [(*p, i) for p in positions for i in range(size)]
    offsets: dict = {}  # id(array) -> the static offset of each element
    for key, st in per_array.items():
        offsets[key] = [sum(i * s for i, s in zip(p, st)) for p in positions]
    arrays = {id(o): o for o in group.operands if isinstance(o, Array)}
    arrays.update((id(d), d) for _, d in group.stores if isinstance(d, Array))
    bases = {key: cg.index_of(a, []) for key, a in arrays.items()}

    def pattern(offs: list) -> str:
        if all(o == offs[0] for o in offs):
            return "same"
        return "run" if offs == list(range(offs[0], offs[0] + len(offs))) else "scattered"

    def address(a: Array, off: int) -> str:
        return cg.pointer(a, _plus_static(f, bases[id(a)], off))

    def splat(dtype: np.dtype, scalar: str, lanes: int) -> str:
        t = reg_type(dtype)
        if lanes == 1:
            return f.op(f"insertelement <1 x {t}> poison, {t} {scalar}, i64 0")
        one = f.op(f"insertelement <1 x {t}> poison, {t} {scalar}, i64 0")
        return f.op(f"shufflevector <1 x {t}> {one}, <1 x {t}> poison, "
                    f"<{lanes} x i32> zeroinitializer")  # fmt: skip

    def load(a: Array, start: int, lanes: int) -> str:
        offs = offsets[id(a)][start : start + lanes]
        kind = pattern(offs)
        if kind == "same":
            element = cg.load(Array(a.dtype, (), a.base), _plus_static(f, bases[id(a)], offs[0]))
            return splat(a.dtype, element, lanes)
        mt, v = mem_type(a.dtype), Lanes(lanes)
        if kind == "run":
            raw = f.op(f"load {v.t(mt)}, ptr {address(a, offs[0])}, align {a.dtype.itemsize}")
        else:
            raw = "poison"
            for lane, off in enumerate(offs):
                x = f.op(f"load {mt}, ptr {address(a, off)}")
                raw = f.op(f"insertelement {v.t(mt)} {raw}, {mt} {x}, i64 {lane}")
        return f.op(f"icmp ne {v.t('i8')} {raw}, zeroinitializer") if a.dtype.kind == "b" else raw

    def to_memory(value: str, dtype: np.dtype, v: Lanes) -> str:
        return f.op(f"zext {v.t('i1')} {value} to {v.t('i8')}") if dtype.kind == "b" else value

    def store(a: Array, values: list, dtype: np.dtype) -> None:
        mt = mem_type(a.dtype)
        for (start, lanes), value in zip(pieces, values):
            v = Lanes(lanes)
            value = to_memory(cast(f, value, dtype, a.dtype, v), a.dtype, v)
            offs = offsets[id(a)][start : start + lanes]
            if pattern(offs) == "run" or lanes == 1:
                f.do(
                    f"store {v.t(mt)} {value}, ptr {address(a, offs[0])}, align {a.dtype.itemsize}"
                )
                continue
            for lane, off in enumerate(offs):
                x = f.op(f"extractelement {v.t(mt)} {value}, i64 {lane}")
                f.do(f"store {mt} {x}, ptr {address(a, off)}")

    regs: dict = {}

    def value(ref: Any) -> list:
        found = regs.get(ref)
        if found is None:
            o = group.operands[ref[1]]
            found = regs[ref] = [splat(o.dtype, o.ref, lanes) if isinstance(o, Scalar)
                                 else load(o, start, lanes) for start, lanes in pieces]  # fmt: skip
        return found

    def to_buffer(values: list, dtype: np.dtype) -> str:
        buffer = f.alloca(mem_type(dtype), n, 64)
        for (start, lanes), x in zip(pieces, values):
            v = Lanes(lanes)
            at = f.op(f"getelementptr inbounds {mem_type(dtype)}, ptr {buffer}, i64 {start}")
            f.do(f"store {v.t(mem_type(dtype))} {to_memory(x, dtype, v)}, ptr {at}")
        return buffer

    for k, m in enumerate(group.micros):
        if m.kind != "call":
            args = [value(r) for r in m.args]
            regs[("m", k)] = [_micro_value(f, m, [a[i] for a in args], cg, False, Lanes(lanes))
                              for i, (_, lanes) in enumerate(pieces)]  # fmt: skip
            continue
        pointers, steps = [], []
        for r, dt in zip(m.args, m.dtypes):
            o = group.operands[r[1]] if r[0] == "o" else None
            if isinstance(o, Scalar):
                pointers.append(cg.scalar_slot(o))
                steps.append(0)
            elif isinstance(o, Array) and pattern(offsets[id(o)]) != "scattered" and r not in regs:
                pointers.append(address(o, offsets[id(o)][0]))
                steps.append(0 if pattern(offsets[id(o)]) == "same" else dt.itemsize)
            else:
                pointers.append(to_buffer(value(r), dt))
                steps.append(dt.itemsize)
        out = f.alloca(mem_type(m.dtype), n, 64)
        pointers.append(out)
        steps.append(m.dtype.itemsize)
        cg.call_loop(m.loop, pointers, [n], [0] * len(steps) if n == 1 else steps)
        results = []
        for start, lanes in pieces:
            v = Lanes(lanes)
            at = f.op(f"getelementptr inbounds {mem_type(m.dtype)}, ptr {out}, i64 {start}")
            raw = f.op(f"load {v.t(mem_type(m.dtype))}, ptr {at}")
            results.append(f.op(f"icmp ne {v.t('i8')} {raw}, zeroinitializer")
                           if m.dtype.kind == "b" else raw)  # fmt: skip
        regs[("m", k)] = results
    for ref, dst in group.stores:
        if isinstance(dst, Array):
            store(dst, value(ref), group.dtype_of(ref))


def _plus_static(f: Function, base: str, off: int) -> str:
    return base if off == 0 else f.op(f"add i64 {base}, {off}")


def _emit_scalars(group: Group) -> None:
    """A group of 0-d values: registers; NumPy's loops called on one element (strides 0,
    as NumPy calls them on 0-d arrays)."""
    cg, f = group.cg, group.cg.f
    regs: dict = {}
    for k, o in enumerate(group.operands):
        regs[("o", k)] = o.ref if isinstance(o, Scalar) else cg.load(o, cg.index_of(o, []))

    def value(ref: Any) -> str:
        return regs[ref]

    for j, m in enumerate(group.micros):
        args = [value(r) for r in m.args]
        regs[("m", j)] = _micro_value(f, m, args, cg, scalar=True)
    group.registers = regs
    for ref, dst in group.stores:
        if isinstance(dst, Array):
            dtype = group.dtype_of(ref)
            cg.store(dst, cg.index_of(dst, []), value(ref), dtype)


def _micro_value(f: Function, m: _Micro, args: list[str], cg: Codegen, scalar: bool,
                 lanes: Lanes = SCALAR) -> str:  # fmt: skip
    if m.kind == "native":
        return m.write(f, reg_type(m.dtypes[0]), args, lanes)
    if m.kind == "cast":
        return cast(f, args[0], m.dtypes[0], m.dtype, lanes)
    if m.kind == "select":
        t = lanes.t(reg_type(m.dtype))
        return f.op(f"select {lanes.t('i1')} {args[0]}, {t} {args[1]}, {t} {args[2]}")
    assert scalar  # calls on one element (a 0-d group)
    slots = [cg.scalar_slot(Scalar(d, a)) for d, a in zip(m.dtypes, args)]
    out = f.alloca(mem_type(m.dtype), 1)
    cg.call_loop(m.loop, [*slots, out], [1], [0] * (len(slots) + 1))
    v = f.op(f"load {mem_type(m.dtype)}, ptr {out}")
    return f.op(f"icmp ne i8 {v}, 0") if m.dtype.kind == "b" else v


def _emit_run(group: Group, which: Sequence[int], bases: dict, j: str, buffers: dict,
              start: str | None) -> None:  # fmt: skip
    """The native operations ``which`` at element ``j`` of the innermost dimension
    (``start + j`` of the array operands where ``start`` is a run's first element);
    values in ``buffers`` are read from and written to their run buffers."""
    cg, f = group.cg, group.cg.f
    at = j if start is None else f.op(f"add i64 {start}, {j}")
    regs: dict = {}
    loaded: dict = {}

    def value(ref: Any) -> str:
        if ref in regs:
            return regs[ref]
        if ref in buffers:
            return cg.load(buffers[ref], j)
        if ref[0] == "o":
            o = group.operands[ref[1]]
            if isinstance(o, Scalar):
                return o.ref
            found = loaded.get(ref)
            if found is None:
                base, stride = bases[id(o)]
                index = _plus(f, base, at, stride)
                found = loaded[ref] = cg.load(Array(o.dtype, (), o.base), index)
            return found
        raise AssertionError(ref)

    for k in which:
        m = group.micros[k]
        ref = ("m", k)
        regs[ref] = _micro_value(f, m, [value(r) for r in m.args], cg, scalar=False)
        if ref in buffers:
            cg.store(buffers[ref], j, regs[ref], m.dtype)
    for ref, dst in group.stores:
        if isinstance(dst, Array) and (ref in regs or (start is None and ref[0] == "o")):
            base, stride = bases[id(dst)]
            cg.store(Array(dst.dtype, (), dst.base), _plus(f, base, at, stride), value(ref),
                     group.dtype_of(ref))  # fmt: skip


def _plus(f: Function, base: str, at: str, stride: int) -> str:
    if stride == 0:
        return base
    part = at if stride == 1 else f.op(f"mul i64 {at}, {stride}")
    return part if base == "0" else f.op(f"add i64 {base}, {part}")


def _emit_chunked(group: Group, n: int, bases: dict) -> None:
    """The innermost dimension in runs of at most ``CHUNK`` elements: native
    operations in loops over the run, NumPy's loops called on the whole run."""
    cg, f = group.cg, group.cg.f
    micros = group.micros
    run = min(n, CHUNK)
    # which values cross from one segment (a native run, or a call) to another
    segment: list[int] = []
    seg = -1
    for k, m in enumerate(micros):
        if m.kind == "call" or k == 0 or micros[k - 1].kind == "call":
            seg += 1
        segment.append(seg)
    crossing = set()
    for k, m in enumerate(micros):
        for r in m.args:
            if r[0] == "m" and (segment[r[1]] != segment[k] or m.kind == "call"
                                or micros[r[1]].kind == "call"):  # fmt: skip
                crossing.add(r)
    stored = {ref for ref, dst in group.stores if isinstance(dst, Array)}
    buffers = {}
    for ref in crossing | {r for r in stored if r[0] == "m" and micros[r[1]].kind == "call"}:
        buffers[ref] = cg.alloc((run,), micros[ref[1]].dtype)
    chunks = -(-n // run)
    with contextlib.ExitStack() as nest:
        if chunks == 1:
            start, count = "0", str(n)
        else:
            c = nest.enter_context(f.loop(chunks))
            start = f.op(f"mul i64 {c}, {run}")
            rest = f.op(f"sub i64 {n}, {start}")
            small = f.op(f"icmp slt i64 {rest}, {run}")
            count = f.op(f"select i1 {small}, i64 {rest}, i64 {run}")
        k = 0
        while k < len(micros):
            if micros[k].kind == "call":
                _emit_call(group, k, bases, buffers, start, count)
                k += 1
                continue
            end = k
            while end < len(micros) and micros[end].kind != "call":
                end += 1
            with f.loop(count) as j:
                _emit_run(group, range(k, end), bases, j, buffers, start)
            k = end
        # stored values computed by calls, and operands stored as they are
        late = [(ref, dst) for ref, dst in group.stores if isinstance(dst, Array)
                and (ref[0] == "o" or micros[ref[1]].kind == "call")]  # fmt: skip
        if late:
            with f.loop(count) as j:
                at = f.op(f"add i64 {start}, {j}")
                for ref, dst in late:
                    if ref in buffers:
                        v = cg.load(buffers[ref], j)
                    else:
                        o = group.operands[ref[1]]
                        if isinstance(o, Scalar):
                            v = o.ref
                        else:
                            base, stride = bases[id(o)]
                            v = cg.load(Array(o.dtype, (), o.base), _plus(f, base, at, stride))
                    base, stride = bases[id(dst)]
                    cg.store(Array(dst.dtype, (), dst.base), _plus(f, base, at, stride), v,
                             group.dtype_of(ref))  # fmt: skip


def _emit_call(group: Group, k: int, bases: dict, buffers: dict, start: str, count: str) -> None:
    """Micro ``k``, a NumPy loop, on the run: operands in place where they are arrays
    of its dtype (their own strides, 0 where broadcast), scalars from a slot with
    stride 0, earlier results from their run buffers."""
    cg, f = group.cg, group.cg.f
    m = group.micros[k]
    pointers, steps = [], []
    for r, dt in zip(m.args, m.dtypes):
        size = dt.itemsize
        if r in buffers:
            pointers.append(cg.pointer(buffers[r], "0"))
            steps.append(size)
            continue
        o = group.operands[r[1]]
        if isinstance(o, Scalar):
            pointers.append(cg.scalar_slot(o))
            steps.append(0)
            continue
        base, stride = bases[id(o)]
        pointers.append(cg.pointer(Array(o.dtype, (), o.base), _plus(f, base, start, stride)))
        steps.append(stride * size)
    out = buffers[("m", k)]
    pointers.append(cg.pointer(out, "0"))
    steps.append(m.dtype.itemsize)
    if count == "1":
        steps = [0] * len(steps)
    cg.call_loop(m.loop, pointers, [count], steps)


# --- fusion schedule --------------------------------------------------------------------------


class _Fused:
    """Elementwise equations of one shape, computed in one loop nest."""

    __slots__ = ("eqns", "outs", "shape", "start")

    def __init__(self, shape: tuple, start: int) -> None:
        self.shape, self.start = shape, start
        self.eqns: list[Eqn] = []
        self.outs: set = set()


def schedule(eqns: Sequence[Eqn]) -> list:
    """``eqns`` in order, elementwise ones of each shape gathered into loops: an
    equation joins the open loop of its shape when every operand it reads existed when
    the loop started or is computed in it (the loop is written where it starts)."""
    made: dict[Var, int] = {}
    loops: dict[tuple, _Fused] = {}
    items: list = []
    for i, eqn in enumerate(eqns):
        fusable = isinstance(eqn.prim.lowering, Elementwise) and len(eqn.outvars) == 1
        shape = eqn.outvars[0].aval.shape if fusable else ()
        if not fusable or not shape:
            items.append(eqn)
        else:
            loop = loops.get(shape)
            ready = loop is not None and all(
                type(v) is not Var or v in loop.outs or made.get(v, -1) < loop.start
                for v in eqn.invars
            )
            if not ready:
                loop = loops[shape] = _Fused(shape, i)
                items.append(loop)
            assert loop is not None
            loop.eqns.append(eqn)
            loop.outs.add(eqn.outvars[0])
        for v in eqn.outvars:
            made[v] = i
    return items


# --- what Emitter lowerings write with --------------------------------------------------------


class Slot:
    """A variable of compiled code (a loop's carry, a branch's result): written by
    ``Context.assign``, read by ``Context.read``."""

    __slots__ = ("array", "dtype", "shape", "stack")

    def __init__(self, dtype: np.dtype, shape: tuple, array: Array | None, stack: str | None):
        self.dtype, self.shape, self.array, self.stack = dtype, shape, array, stack


class Context:
    """What an ``Emitter`` lowering writes with (``docs/extending.md``): the equation's
    abstract values, its operands as values, and structured statements -- slots
    (``variables``, ``read``, ``assign``), loops (``loop``, ``while_loop``), branches
    (``branch``), sub-graphs inline (``inline``), arrays (``empty``, ``full``, ``copy``,
    ``view``, ``apply``, ``at``, ``store_at``)."""

    def __init__(self, cg: Codegen, eqn: Eqn) -> None:
        self.cg, self.eqn = cg, eqn
        self.in_avals = [v.aval for v in eqn.invars]
        self.out_avals = [v.aval for v in eqn.outvars]

    # slots
    def variables(self, avals: Sequence[Any], values: Sequence[Value] | None = None) -> list[Slot]:
        """New slots of ``avals``, holding ``values`` where given."""
        slots = []
        for aval in avals:
            dtype = _dtype(aval)
            if aval.ndim == 0:
                slot = Slot(dtype, (), None, self.cg.f.alloca(reg_type(dtype), 1))
            else:
                slot = Slot(dtype, tuple(aval.shape), self.cg.alloc(tuple(aval.shape), dtype), None)
            slots.append(slot)
        if values is not None:
            self.assign(slots, values)
        return slots

    def read(self, slots: Sequence[Slot]) -> list[Value]:
        f = self.cg.f
        out: list[Value] = []
        for s in slots:
            if s.stack is not None:
                out.append(Scalar(s.dtype, f.op(f"load {reg_type(s.dtype)}, ptr {s.stack}")))
            else:
                assert s.array is not None
                out.append(s.array)
        return out

    def assign(self, slots: Sequence[Slot], values: Sequence[Value]) -> None:
        """Write ``values`` into ``slots``: arrays that view another slot are copied
        first, so that no write changes a value still to be written."""
        values = list(values)
        buffers = {s.array.base for s in slots if s.array is not None}
        for k, (s, v) in enumerate(zip(slots, values, strict=True)):
            if (
                isinstance(v, Array)
                and v.base in buffers
                and not (
                    s.array is not None
                    and v.base == s.array.base
                    and v.strides == s.array.strides
                    and v.offset == s.array.offset
                    and v.dyn is None
                )
            ):
                values[k] = self.cg.materialize(v)
        f = self.cg.f
        for s, v in zip(slots, values):
            if s.stack is not None:
                if not isinstance(v, Scalar):
                    raise NotLowered("an array assigned to a 0-d variable")
                v = self.cg.opaque(v)  # (a constant start: LLVM would fold the first steps)
                f.do(f"store {reg_type(s.dtype)} {cast(f, v.ref, v.dtype, s.dtype)}, ptr {s.stack}")
            else:
                assert s.array is not None
                if isinstance(v, Array) and v.base == s.array.base and v.offset == s.array.offset \
                        and v.strides == s.array.strides and v.dyn is None:  # fmt: skip
                    continue
                self.cg.copy_into(s.array, v)

    # statements
    @contextlib.contextmanager
    def loop(self, length: int, reverse: bool = False) -> Iterator[Scalar]:
        """``for step in range(length)`` (reversed: from ``length - 1`` down)."""
        f = self.cg.f
        with f.loop(length) as i:
            step = f.op(f"sub i64 {length - 1}, {i}") if reverse else i
            yield Scalar(np.dtype(np.int64), step)

    @contextlib.contextmanager
    def while_loop(self) -> Iterator[Callable[[Value], None]]:
        """``while True:``; yields ``exit_unless(predicate)``, which leaves the loop
        where the predicate is false."""
        f = self.cg.f
        head, done = f.while_true()

        def exit_unless(predicate: Value) -> None:
            if not isinstance(predicate, Scalar):
                raise NotLowered("a loop predicate that is not 0-d")
            truth = cast(f, predicate.ref, predicate.dtype, np.dtype(bool))
            healthy = f.op(f"xor i1 {self.cg.status_failed()}, true")
            truth = f.op(f"and i1 {truth}, {healthy}")
            body = f.block("wbody")
            f.do(f"br i1 {truth}, label %{body}, label %{done}")
            f.enter(body)

        yield exit_unless
        f.br(head)
        f.enter(done)

    @contextlib.contextmanager
    def branch(self, index: Scalar, case: int) -> Iterator[None]:
        """``if index == case:``."""
        f = self.cg.f
        taken = f.op(f"icmp eq i64 {self.as_index(index)}, {case}")
        with f.when(taken):
            yield

    def as_index(self, value: Scalar) -> str:
        return cast(self.cg.f, value.ref, value.dtype, np.dtype(np.int64))

    def clamp(self, value: Scalar, low: int, high: int) -> Scalar:
        """``min(max(int(value), low), high)`` (an index of branches, as NumPy clips)."""
        f = self.cg.f
        v = self.as_index(value)
        below = f.op(f"icmp slt i64 {v}, {low}")
        v = f.op(f"select i1 {below}, i64 {low}, i64 {v}")
        above = f.op(f"icmp sgt i64 {v}, {high}")
        return Scalar(np.dtype(np.int64), f.op(f"select i1 {above}, i64 {high}, i64 {v}"))

    def inline(self, graph: Graph, values: Sequence[Value]) -> list[Value]:
        """``graph`` written here on ``values``."""
        return self.cg.emit_graph(graph, values)

    # arrays
    def empty(self, aval: Any) -> Array:
        return self.cg.alloc(tuple(aval.shape), _dtype(aval))

    def full(self, aval: Any, fill: Any) -> Value:
        dtype = _dtype(aval)
        if aval.ndim == 0:
            return Scalar(dtype, constant(dtype, fill))
        out = self.empty(aval)
        self.cg.fill(out, fill)
        return out

    def copy_into(self, dst: Array, value: Value) -> None:
        """``dst[...] = value`` (broadcast, cast to ``dst``'s dtype)."""
        self.cg.copy_into(dst, value)

    def copy(self, value: Value) -> Value:
        return value if isinstance(value, Scalar) else self.cg.materialize(value)

    def view(self, value: Value, fn: Callable[[np.ndarray], Any]) -> Value:
        """``fn(value)``, a view (a 0-d one is an array: a place to write into)."""
        return self.cg.view(value, fn, element=False)

    def apply(self, ufunc: np.ufunc, *values: Value, out: Array | None = None) -> Value:
        """``ufunc(*values)`` elementwise, broadcast, NumPy's dtypes (into ``out``)."""
        shape = np.broadcast_shapes(*(v.shape for v in values))
        group = Group(self.cg, tuple(out.shape) if out is not None else shape)
        ref = group.ufunc(ufunc, [(group.operand(v), ShapedArray(v.shape, v.dtype))
                                  for v in values])  # fmt: skip
        if out is not None:
            group.store(ref, out)
            group.emit()
            return out
        result = group.result(ref, group.dtype_of(ref))
        group.emit()
        return result

    def _row(self, stacked: Value, step: Scalar) -> Array:
        if not isinstance(stacked, Array):
            raise NotLowered("indexing a 0-d value")
        f = self.cg.f
        moved = f.op(f"mul i64 {self.as_index(step)}, {stacked.strides[0]}")
        dyn = moved if stacked.dyn is None else f.op(f"add i64 {stacked.dyn}, {moved}")
        return Array(stacked.dtype, stacked.shape[1:], stacked.base, stacked.offset,
                     stacked.strides[1:], dyn)  # fmt: skip

    def reduce(self, ufunc: np.ufunc, value: Value, axis: tuple, keepdims: bool = False) -> Value:
        """``ufunc.reduce(value, axis, keepdims=keepdims)``, in NumPy's order."""
        shape = [n for d, n in enumerate(value.shape) if d not in axis or keepdims]
        shape = [1 if d in axis else n for d, n in enumerate(value.shape)] if keepdims else shape
        aval = ShapedArray(tuple(shape), value.dtype)
        return self.cg.reduce(ufunc, value, aval, axis=tuple(axis), keepdims=keepdims)

    def at(self, stacked: Value, step: Scalar) -> Value:
        """``stacked[step]`` along its first axis (``step`` known at run time)."""
        row = self._row(stacked, step)
        return self.cg.element(row, ()) if not row.shape else row

    def store_at(self, stacked: Array, step: Scalar, value: Value) -> None:
        """``stacked[step] = value``."""
        row = self._row(stacked, step)
        if not row.shape:
            if not isinstance(value, Scalar):
                raise NotLowered("an array stored into one element")
            self.cg.store(row, self.cg.index_of(row, []), value.ref, value.dtype)
            return
        self.cg.copy_into(row, value)
