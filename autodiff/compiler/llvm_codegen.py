"""A region of a staged graph as an LLVM function: NumPy's computation, fused, exactly.

``Codegen`` writes the equations of a region (``llvm_backend.py`` finds them) into one
function.  Shapes and strides are static (``llvm_values.py``), so a view costs nothing at
run time and every buffer a region needs is one workspace laid out at compile time.

- **Elementwise equations of one shape are fused** into one loop nest (``schedule``,
  ``llvm_fusion.py``): NumPy's own loops and exact native arithmetic, NumPy's values to
  the bit.
- **Reductions** (``Reduction`` lowerings) replay NumPy's iteration: its axis order, the
  first element copied where the ufunc has no identity, its reduce loop on the same runs:
  sums in NumPy's pairwise order, bit for bit.
- **Layouts follow NumPy's**: a stored elementwise result is laid out as NumPy's ``K``
  order would lay it out, so a later reduction or product sees the strides NumPy would;
  a kernel's result is written where its caller gets it (``destinations``).
- **Products and solves** (``Gufunc`` lowerings) call NumPy's gufunc loop (its BLAS or
  LAPACK call); a solve's singular matrix ends the kernel with a code its caller turns
  into NumPy's ``LinAlgError``.
- **Control flow** (``Emitter`` lowerings, ``llvm_context.py``): loops and branches with
  their functions' graphs written inline.

Nothing is reassociated or contracted: no fast-math flag is written.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.compiler import llvm_engine, llvm_ir, llvm_sum, npy_loops
from autodiff.compiler.kernel_call import SINGULAR
from autodiff.compiler.llvm_context import Context
from autodiff.compiler.llvm_fusion import Group
from autodiff.compiler.llvm_ir import Function, cast, constant, mem_type, reg_type
from autodiff.compiler.llvm_values import (
    Array,
    Scalar,
    Value,
    broadcast_strides,
    c_strides,
    coalesced,
    dtype_of,
    keep_order,
    keepdims_strides,
    lowest,
    strides_in_order,
    view_layout,
)
from autodiff.core.errstate import combined
from autodiff.core.graph import Eqn, Graph, Literal, ShapedArray, Var
from autodiff.core.lowering import Elementwise, Emitter, Gufunc, NotLowered, Reduction, View

__all__ = ["Codegen", "helper", "schedule"]

_ALIGN = 64


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
        self.helpers: set[tuple[int, int, int]] = set()  # (pointers, dims, steps) of loop calls
        self._scratch: dict[str, tuple[str, int]] = {}  # key -> (base, bytes): shared areas
        self.f.allocas.append("  %status = alloca i8, align 1")
        self.f.allocas.append("  store i8 0, ptr %status")

    # --- arguments and memory ---

    def param(self, aval: Any, name: str, strides: tuple | None = None) -> Value:
        """An argument: a 0-d one by value, an array by pointer (with ``strides`` in
        elements, C order if None; the pointer is to its lowest element in memory,
        ``lowest``, where a stride is negative)."""
        dtype = dtype_of(aval)
        if aval.ndim == 0:
            self.params.append(f"{reg_type(dtype)} %{name}")
            return Scalar(dtype, f"%{name}")
        self.params.append(f"ptr noalias %{name}")
        offset = 0 if strides is None else -lowest(aval.shape, strides)
        return Array(dtype, aval.shape, f"%{name}", offset, strides)

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
            strides = strides_in_order(shape, order)
        return Array(dtype, shape, name, 0, strides)

    def scratch(self, key: str, shape: tuple, dtype: np.dtype) -> Array:
        """A new C-contiguous array in the workspace area every ``scratch`` of ``key``
        shares (one area per key, as large as its largest request so far): for buffers
        dead once their equation is written, so that a kernel of many such equations
        (a network's convolutions) needs one area, not one each."""
        size = max(math.prod(shape), 1) * dtype.itemsize
        found = self._scratch.get(key)
        if found is None or found[1] < size:
            area = self.alloc((size,), np.dtype(np.uint8))
            found = self._scratch[key] = (area.base, size)
        return Array(dtype, shape, found[0], 0, c_strides(shape))

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
        result = view_layout(x, fn)
        if result is None:  # NumPy copies: so do we, in C order, then view
            x = self.materialize(x)
            result = view_layout(x, fn)
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
        sums = _sums_of_loops(items, graph.outvars)
        summed: set[int] = set()  # the sums written with the loop making their terms
        for item in items:
            if isinstance(item, _Fused):
                for eqn in item.eqns:
                    if eqn.errstate and combined(self.errstate, eqn.errstate) != self.errstate:
                        raise NotLowered("an np.errstate of its own inside a compiled region")
                self._emit_fused(item, env, read_after, sums.get(id(item), []), summed)
            elif id(item) in summed:
                continue
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

    def _emit_fused(self, item: _Fused, env: dict, read_after: set, sums: list[Eqn],
                    summed: set[int]) -> None:  # fmt: skip
        """A loop of elementwise equations; one of ``sums`` (a sum of all of a value the
        loop makes, read by nothing else) summed in it where it is long (``llvm_sum``)."""
        shape = item.shape
        group = Group(self, shape)
        refs: dict[Var, Any] = {}
        # each value's axis order as NumPy lays out its array: K order of its own operands
        # (not of the loop's: x * 3.0 of a transposed x beside x * y of a C-ordered y)
        orders: dict[Var, list[int]] = {}
        for eqn in item.eqns:
            args: list = []
            layouts: list[Sequence[int]] = []
            for v in eqn.invars:
                if v in refs:
                    args.append((refs[v], v.aval))
                    layouts.append(strides_in_order(shape, orders[v]))
                else:
                    value = self.atom(env, v)
                    args.append((group.operand(value), _aval_of(v)))
                    if isinstance(value, Array):
                        layouts.append(broadcast_strides(value, shape))
            refs[eqn.outvars[0]] = group.equation(eqn, args)
            orders[eqn.outvars[0]] = keep_order(shape, layouts)
        if sums:  # those of one dtype: the loops are written once
            dtype = dtype_of(sums[0].invars[0].aval)
            sums = [red for red in sums if dtype_of(red.invars[0].aval) == dtype]
        if sums:  # a sum follows its terms' order, which must be the loop's
            terms = {red.invars[0] for red in sums}
            voters: list[Sequence[int]] = [broadcast_strides(o, shape) for o in group.operands
                                           if isinstance(o, Array)]  # fmt: skip
            voters += [strides_in_order(shape, orders[e.outvars[0]]) for e in item.eqns
                       if e.outvars[0] in read_after and e.outvars[0] not in terms]  # fmt: skip
            order = keep_order(shape, voters)
            if any(orders[v] != order for v in terms):
                sums = []  # (then every value is stored, each in its order)
        summands = [red.invars[0] for red in sums]
        for eqn in item.eqns:
            out = eqn.outvars[0]
            if out in read_after and out not in summands:
                env[out] = group.result(refs[out], out.aval.dtype, self.destinations.get(out),
                                        orders[out])  # fmt: skip
        if sums and group.line() > llvm_sum.LEAF:
            for red in sums:
                if red.errstate and combined(self.errstate, red.errstate) != self.errstate:
                    raise NotLowered("an np.errstate of its own: the kernel reports with one "
                                     "setting")  # fmt: skip
            loop = self.loop(np.add, (dtype, dtype, None), reduction=True)
            totals = llvm_sum.emit_sum(group, [refs[v] for v in summands], loop, dtype)
            for red, total in zip(sums, totals, strict=True):
                env[red.outvars[0]] = self._summed(total, red.outvars[0].aval)
                summed.add(id(red))
            return
        for v in summands:
            env[v] = group.result(refs[v], v.aval.dtype, None, orders[v])
        group.emit()

    def _summed(self, total: str, aval: Any) -> Value:
        """A sum's value: NumPy's reduce loop adds the pairwise sum to the identity."""
        dtype = dtype_of(aval)
        value = self.f.op(f"fadd {reg_type(dtype)} {constant(dtype, 0.0)}, {total}")
        if not aval.shape:
            return Scalar(dtype, value)
        out = self.alloc(tuple(aval.shape), dtype)
        self.store(out, "0", value)
        return out

    def emit_eqn(self, eqn: Eqn, args: list[Value]) -> list[Value]:
        """One equation outside a fused loop."""
        lowering = eqn.prim.lowering
        if lowering is None:
            raise NotLowered(f"{eqn.prim.name} has no lowering")
        if eqn.errstate and combined(self.errstate, eqn.errstate) != self.errstate:
            raise NotLowered("an np.errstate of its own: the kernel reports with one setting")
        for v in eqn.outvars:
            dtype_of(v.aval)
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
        out_dtype = dtype_of(out_aval)
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
                        keepdims_strides(x.ndim, kept, out.strides), out.dyn)  # fmt: skip
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
        sizes, (si, so) = coalesced([x.shape[d] for d in order], layouts)
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
        dtypes = tuple(dtype_of(v.aval) for v in (*eqn.invars, *eqn.outvars))
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
    bits = llvm_engine.fe_bits()
    return (*bits, bits[0] | bits[1] | bits[2] | bits[3])


def _aval_of(v: Any) -> Any:
    return v.aval


# --- fusion schedule --------------------------------------------------------------------------


class _Fused:
    """Elementwise equations of one shape, computed in one loop nest."""

    __slots__ = ("eqns", "outs", "shape", "start")

    def __init__(self, shape: tuple, start: int) -> None:
        self.shape, self.start = shape, start
        self.eqns: list[Eqn] = []
        self.outs: set = set()


def _sums_of_loops(items: list, outvars: Sequence[Any]) -> dict[int, list[Eqn]]:
    """Per fused loop (by ``id``), the sums that may be written with it: ``np.add``
    reductions over every axis of a float value the loop makes, which nothing else
    reads (its terms need not be kept)."""
    readers: dict[Var, int] = {v: 1 for v in outvars if type(v) is Var}
    maker: dict[Var, _Fused] = {}
    for item in items:
        eqns = item.eqns if isinstance(item, _Fused) else [item]
        for eqn in eqns:
            for v in eqn.invars:
                if type(v) is Var and not (isinstance(item, _Fused) and v in item.outs):
                    readers[v] = readers.get(v, 0) + 1
        if isinstance(item, _Fused):
            maker.update((v, item) for v in item.outs)
    out: dict[int, list[Eqn]] = {}
    for item in items:
        if isinstance(item, _Fused) or not isinstance(item.prim.lowering, Reduction):
            continue
        x = item.invars[0]
        if (item.prim.lowering.ufunc is not np.add or len(item.invars) != 1
                or type(x) is not Var or x not in maker or readers.get(x) != 1
                or dtype_of(x.aval) not in (np.dtype(np.float32), np.dtype(np.float64))
                or dtype_of(item.outvars[0].aval) != dtype_of(x.aval)
                or sorted(item.params.get("axis", ())) != list(range(x.aval.ndim))):  # fmt: skip
            continue
        out.setdefault(id(maker[x]), []).append(item)
    return out


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
