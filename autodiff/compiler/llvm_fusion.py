"""Elementwise equations of one shape, fused into one loop: NumPy's values, to the bit.

A :class:`Group` gathers the elementwise equations of one shape (``llvm_codegen``'s
schedule) as *micro-operations*: casts to the dtypes NumPy's type resolution picks (weak
Python scalars as NumPy 2 treats them; a Python int that does not fit the other operand's
dtype stays a NumPy call: NumPy compares it exactly, or raises ``OverflowError``),
*native* operations (``llvm_ir.native``: exact IEEE arithmetic, comparisons, selection)
and calls of NumPy's own loops (``npy_loops.py``: ``exp``, ``tanh``, ``power``, ...).  A
Python scalar function (a user's ``Elementwise`` lowering) is traced into them (``Sym``).

``emit`` writes the loop nest over the group's shape, in NumPy's axis order, coalesced:

- up to ``VECTOR`` elements, no loop: each operation one instruction on LLVM vectors of
  power-of-two lengths (no padding lanes, which could raise floating-point flags);
- longer, loops; where NumPy's loops are called, the innermost dimension in runs of
  ``CHUNK`` elements (NumPy's buffer size), each NumPy loop called once per run with the
  strides NumPy would pass (0 for a scalar operand), native operations in loops over the
  run between the calls, values crossing a call in run-sized buffers;
- constants LLVM could fold where NumPy would report a floating-point error at run time
  (a literal's overflowing cast, operations on constants alone) are opaque to it.
"""

from __future__ import annotations

import contextlib
import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.compiler import llvm_ir
from autodiff.compiler.llvm_ir import SCALAR, Function, Lanes, cast, constant, mem_type, reg_type
from autodiff.compiler.llvm_values import (
    Array,
    Emitting,
    Scalar,
    Value,
    broadcast_strides,
    coalesced,
    dtype_of,
    keep_order,
    strides_in_order,
)
from autodiff.core.graph import Eqn, ShapedArray
from autodiff.core.lowering import Elementwise, NotLowered

__all__ = ["CHUNK", "VECTOR", "Group", "Sym"]

CHUNK = 8192  # elements per call of a NumPy loop in a long run: NumPy's buffer size
VECTOR = 64  # elements up to which a fused loop is straight-line code on LLVM vectors


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

    def __init__(self, cg: Emitting, shape: tuple) -> None:
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
        out = dtype_of(eqn.outvars[0].aval)
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

    def result(self, ref: Any, dtype: np.dtype, destination: Array | None = None,
               order: list[int] | None = None) -> Value:  # fmt: skip
        """Keep ``ref``: a register for a 0-d loop, else a new array laid out as NumPy
        would lay it out (axes in ``order``, outermost first; None: the ``K`` order of
        the group's operands): ``destination`` (a kernel's result) where that is its
        layout, written there at once."""
        if not self.shape:
            return _LazyScalar(self, ref, dtype)
        if order is None:
            layouts = [broadcast_strides(o, self.shape) for o in self.operands
                       if isinstance(o, Array)]  # fmt: skip
            order = keep_order(self.shape, layouts)
        c_order = order == list(range(len(self.shape))) or math.prod(self.shape) <= 1
        if (
            destination is not None
            and destination.dtype == dtype
            and (
                destination.c_contiguous()
                if c_order
                else destination.strides == strides_in_order(self.shape, order)
            )
        ):
            out = destination
        else:
            out = self.cg.alloc(self.shape, dtype, order)
        self.store(ref, out)
        return out

    def store(self, ref: Any, dst: Array) -> None:
        self.stores.append((self.cast(ref, self.dtype_of(ref), dst.dtype), dst))

    def emit(self) -> None:
        _emit_group(self)

    def line(self) -> int:
        """The number of elements where the group's loops coalesce to one dimension (NumPy's
        iterator would see one run of them), else 0."""
        if not self.shape or 0 in self.shape:
            return 0
        sizes, _ = _layout(self)
        return sizes[0] if len(sizes) == 1 else 0

    def emit_range(self, start: str, count: str, run: int, into: list[tuple[Any, Array]]) -> None:
        """Elements ``start`` to ``start + count`` (at most ``run``) of a group on one
        dimension (``line``), each value ``ref`` of ``into`` written to ``buffer[0:count]``
        (a buffer of its dtype); the group's other stores as ``emit`` writes them."""
        _, per_array = _layout(self)
        bases = {id(a): (self.cg.index_of(a, []), per_array[id(a)][0]) for a in _arrays(self)}
        shift = self.cg.f.op(f"sub i64 0, {start}")
        for ref, buffer in into:
            assert self.dtype_of(ref) == buffer.dtype
            bases[id(buffer)] = (shift, 1)  # element start at 0
            self.stores.append((ref, buffer))
        try:
            _emit_segments(self, bases, _run_buffers(self, run), start, count)
        finally:
            del self.stores[len(self.stores) - len(into) :]


class _LazyScalar(Scalar):
    """A 0-d result of a group, its register known once the group is written."""

    __slots__ = ("_group", "_ref")

    def __init__(self, group: Group, ref: Any, dtype: np.dtype) -> None:
        self._group, self._ref, self.dtype = group, ref, dtype
        group.stores.append((ref, self))

    @property
    def ref(self) -> str:  # type: ignore[override]
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


def _layout(group: Group) -> tuple[list[int], dict]:
    """The group's loop nest: its sizes in NumPy's axis order, coalesced, and each array's
    strides along them (by ``id``)."""
    arrays = [o for o in group.operands if isinstance(o, Array)]
    stored = [dst for _, dst in group.stores if isinstance(dst, Array)]
    shape = group.shape
    layouts = [broadcast_strides(a, shape) for a in (*arrays, *stored)]
    order = keep_order(shape, layouts)
    sizes, strides = coalesced(
        [shape[a] for a in order], [[st[a] for a in order] for st in layouts]
    )
    return sizes, dict(zip(map(id, (*arrays, *stored)), strides))


def _arrays(group: Group) -> list[Array]:
    return [o for o in group.operands if isinstance(o, Array)] + [
        dst for _, dst in group.stores if isinstance(dst, Array)
    ]


def _emit_group(group: Group) -> None:
    """Write ``group``'s loops (module docstring): one nest over its shape in NumPy's
    axis order, coalesced; where NumPy loops are called, the innermost dimension in
    runs, values crossing a call kept in run-sized buffers."""
    cg, f = group.cg, group.cg.f
    micros = group.micros
    shape = group.shape
    if not shape:
        _emit_scalars(group)
        return
    if 0 in shape:
        return  # no elements
    sizes, per_array = _layout(group)
    if math.prod(sizes) <= VECTOR:
        _emit_vector(group, sizes, per_array)
        return
    calls = any(micros[k].kind == "call" for k in _live(group))
    with contextlib.ExitStack() as nest:
        outer = [nest.enter_context(f.loop(n)) for n in sizes[:-1]]
        n = sizes[-1]
        bases = {}
        for a in _arrays(group):
            st = per_array[id(a)]
            bases[id(a)] = (cg.index_of(a, list(zip(outer, st[:-1]))), st[-1])
        if not calls:
            with f.loop(n) as j:
                _emit_run(group, _live(group), bases, j, {}, None)
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
    positions: list[tuple[int, ...]] = [()]
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

    for k in _live(group):
        m = group.micros[k]
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


def _live(group: Group) -> list[int]:
    """The micro-operations a kept value depends on, in order.  The others (a scalar
    function's value it dropped) are not written: LLVM drops dead native operations
    itself, but not a call of NumPy's loop, which would also report its flags."""
    live = {ref for ref, _ in group.stores}
    for k in range(len(group.micros) - 1, -1, -1):
        if ("m", k) in live:
            live.update(group.micros[k].args)
    return [k for k in range(len(group.micros)) if ("m", k) in live]


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

    for j in _live(group):
        m = group.micros[j]
        args = [value(r) for r in m.args]
        regs[("m", j)] = _micro_value(f, m, args, cg, scalar=True)
    group.registers = regs
    for ref, dst in group.stores:
        if isinstance(dst, Array):
            dtype = group.dtype_of(ref)
            cg.store(dst, cg.index_of(dst, []), value(ref), dtype)


def _micro_value(f: Function, m: _Micro, args: list[str], cg: Emitting, scalar: bool,
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
    f = group.cg.f
    run = min(n, CHUNK)
    buffers = _run_buffers(group, run)
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
        _emit_segments(group, bases, buffers, start, count)


def _run_buffers(group: Group, run: int) -> dict:
    """Run-sized buffers for the values that cross from one segment (a native run, or a
    call of NumPy's loop) to another, and for stored results of calls."""
    micros = group.micros
    live = _live(group)  # the segments _emit_segments writes
    segment: dict[int, int] = {}
    seg = -1
    for i, k in enumerate(live):
        if micros[k].kind == "call" or i == 0 or micros[live[i - 1]].kind == "call":
            seg += 1
        segment[k] = seg
    crossing = set()
    for k in live:
        m = micros[k]
        for r in m.args:
            if r[0] == "m" and (segment[r[1]] != segment[k] or m.kind == "call"
                                or micros[r[1]].kind == "call"):  # fmt: skip
                crossing.add(r)
    stored = {ref for ref, dst in group.stores if isinstance(dst, Array)}
    buffers = {}
    for ref in crossing | {r for r in stored if r[0] == "m" and micros[r[1]].kind == "call"}:
        buffers[ref] = group.cg.alloc((run,), micros[ref[1]].dtype)
    return buffers


def _emit_segments(group: Group, bases: dict, buffers: dict, start: str, count: str) -> None:
    """Elements ``start`` to ``start + count`` (at most a run) of the innermost dimension:
    each segment of native operations one loop, each call of NumPy's loop one call."""
    cg, f = group.cg, group.cg.f
    micros = group.micros
    live = _live(group)
    i = 0
    while i < len(live):
        if micros[live[i]].kind == "call":
            _emit_call(group, live[i], bases, buffers, start, count)
            i += 1
            continue
        end = i
        while end < len(live) and micros[live[end]].kind != "call":
            end += 1
        with f.loop(count) as j:
            _emit_run(group, live[i:end], bases, j, buffers, start)
        i = end
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
