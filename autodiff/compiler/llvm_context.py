"""What an ``Emitter`` lowering writes with: structured statements on compiled values.

``Context`` (``docs/extending.md``) knows the equation's abstract values and offers
*slots* (a loop's carry, a branch's results: ``variables``, ``read``, ``assign``, which
copies a new value that views another slot before anything is overwritten), *loops*
(``loop``, ``while_loop``), *branches* (``branch``, ``clamp``), sub-graphs written inline
(``inline``), and arrays (``empty``, ``full``, ``copy``, ``copy_into``, ``view``, ``apply``
a ufunc, ``elementwise`` a scalar function in one loop, ``reduce``, ``matmul``: NumPy's
loop, its BLAS call; ``at`` and ``store_at`` a step of a stacked array, ``block`` a slice
whose start is known at run time).  Control flow
(``control/``) lowers with it; so may a user's primitive.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from autodiff.compiler.llvm_fusion import Group, Sym
from autodiff.compiler.llvm_ir import cast, constant, reg_type
from autodiff.compiler.llvm_values import Array, Emitting, Scalar, Value, dtype_of
from autodiff.core.graph import Eqn, Graph, ShapedArray
from autodiff.core.lowering import NotLowered

__all__ = ["Context", "Slot"]


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

    def __init__(self, cg: Emitting, eqn: Eqn) -> None:
        self.cg, self.eqn = cg, eqn
        self.in_avals = [v.aval for v in eqn.invars]
        self.out_avals = [v.aval for v in eqn.outvars]

    # slots
    def variables(self, avals: Sequence[Any], values: Sequence[Value] | None = None) -> list[Slot]:
        """New slots of ``avals``, holding ``values`` where given."""
        slots = []
        for aval in avals:
            dtype = dtype_of(aval)
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
        return self.cg.alloc(tuple(aval.shape), dtype_of(aval))

    def scratch(self, key: str, aval: Any) -> Array:
        """A new array in a workspace area shared by every ``scratch`` of ``key`` in the
        kernel: only for a buffer that is dead when the equation is written (neither
        returned nor viewed by what it returns)."""
        return self.cg.scratch(key, tuple(aval.shape), dtype_of(aval))

    def full(self, aval: Any, fill: Any) -> Value:
        dtype = dtype_of(aval)
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

    def constant(self, value: np.ndarray) -> Value:
        """A NumPy array the kernel reads (an argument of the kernel, as a graph's
        constants are: never written into its code)."""
        return self.cg.const(value)

    def rolled(self) -> contextlib.AbstractContextManager[None]:
        """Loops written inside are not unrolled in full (``llvm_ir.Function.rolled``):
        for lowerings that write many small loop nests."""
        return self.cg.f.rolled()

    def elementwise(self, fn: Callable[..., Any], *values: Value,
                    out: Array | None = None) -> Value:  # fmt: skip
        """``fn`` on the elements of ``values`` (broadcast) in one fused loop (into
        ``out``): ``fn`` is a Python function of scalars written with operators, NumPy's
        ufuncs and ``np.where``, as an ``Elementwise`` lowering's, and each operand keeps
        its dtype (NumPy's rules for each operation, as on 0-d arrays of the dtypes)."""
        shape = tuple(out.shape) if out is not None else np.broadcast_shapes(
            *(v.shape for v in values))  # fmt: skip
        group = Group(self.cg, shape)
        result = fn(*(Sym(group, group.operand(v), v.dtype) for v in values))
        if not isinstance(result, Sym):
            raise NotLowered("an elementwise function that returns a constant")
        if out is not None:
            group.store(result.ref, out)
            group.emit()
            return out
        value = group.result(result.ref, result.dtype)
        group.emit()
        return value

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

    def matmul(self, a: Value, b: Value, out: Array | None = None) -> Array:
        """``np.matmul(a, b)`` of two stacks of matrices (3-D, one dtype) into ``out`` (a
        new C-ordered array if None): NumPy's own matmul loop, called on the same shapes
        and strides as NumPy calls it (its BLAS call where NumPy makes one), so the same
        values to the bit as ``np.matmul`` on arrays of these layouts."""
        cg = self.cg
        if not (isinstance(a, Array) and isinstance(b, Array) and a.ndim == b.ndim == 3):
            raise NotLowered("matmul of anything but two stacks of matrices")
        if a.dtype != b.dtype or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
            raise NotLowered("matmul of anything but two stacks of matrices of one dtype")
        stack, n = a.shape[:2]
        if out is None:
            out = cg.alloc((stack, n, b.shape[2]), a.dtype)
        dtypes = (a.dtype, a.dtype, a.dtype)
        loop = cg.loop(np.matmul, dtypes)
        if loop.dtypes != dtypes:
            raise NotLowered(f"NumPy's matmul loop is for {loop.dtypes}")
        size = a.dtype.itemsize
        arrays = (a, b, out)
        steps = [x.strides[0] * size for x in arrays]
        steps += [st * size for x in arrays for st in x.strides[1:]]
        pointers = [cg.pointer(x, cg.index_of(x, [])) for x in arrays]
        cg.call_loop(loop, pointers, [stack, n, a.shape[2], b.shape[2]], steps)
        return out

    def block(self, value: Value, axis: int, step: Scalar, size: int) -> Array:
        """``value[..., step * size : (step + 1) * size, ...]`` along ``axis``, ``step``
        known at run time (a view)."""
        if not isinstance(value, Array):
            raise NotLowered("slicing a 0-d value")
        f = self.cg.f
        moved = f.op(f"mul i64 {self.as_index(step)}, {value.strides[axis] * size}")
        dyn = moved if value.dyn is None else f.op(f"add i64 {value.dyn}, {moved}")
        shape = (*value.shape[:axis], size, *value.shape[axis + 1 :])
        return Array(value.dtype, shape, value.base, value.offset, value.strides, dyn)

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
