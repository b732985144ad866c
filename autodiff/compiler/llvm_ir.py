"""Writing LLVM IR as text: a function's blocks and instructions, NumPy's dtypes as LLVM
types, exact constants, casts as NumPy casts, and the operations compiled code computes
itself.

Text, not llvmlite's IR objects: a kernel of a few thousand instructions is written in a
few milliseconds.  Values are SSA names (``%v12``) or constants; a ``bool`` is an ``i1``
in registers and a byte in memory, as NumPy stores it.

**Native operations** (``native``) are those whose result IEEE arithmetic fixes to the
bit, so that any correct code computes NumPy's: ``+ - * /`` of floats, integer
arithmetic modulo 2**n, comparisons, ``sqrt``, ``floor``/``ceil``/``trunc``/``rint``,
``copysign``, ``fabs``, logic, selection.  Everything else (``exp``, ``power``,
``maximum`` of floats, integer division, ...) is NumPy's own loop (``npy_loops.py``).
Nothing is contracted or reassociated: no fast-math flag is ever written.
"""

from __future__ import annotations

import contextlib
import platform
import struct
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from autodiff.core.lowering import NotLowered

__all__ = [
    "ROLLED",
    "SCALAR",
    "Function",
    "Lanes",
    "cast",
    "constant",
    "mem_type",
    "native",
    "numbered_loops",
    "reg_type",
]

# The loop metadata of a loop written inside ``Function.rolled``: a placeholder that
# ``numbered_loops`` replaces, in a whole module, with one distinct loop identifier each.
ROLLED = "!adx.rolled"


def numbered_loops(text: str) -> str:
    """``text`` (a module) with each ``ROLLED`` placeholder a loop identifier of its own,
    saying: do not unroll, do not vectorise; the metadata appended."""
    parts = text.split(ROLLED)
    if len(parts) == 1:
        return text
    out, tail = [parts[0]], ['!0 = !{!"llvm.loop.unroll.disable"}',
                             '!1 = !{!"llvm.loop.vectorize.enable", i1 false}']  # fmt: skip
    for k, part in enumerate(parts[1:], 2):
        out += [f"!{k}", part]
        tail.append(f"!{k} = distinct !{{!{k}, !0, !1}}")
    return "".join(out) + "\n".join(tail) + "\n"


# --- types and constants ----------------------------------------------------------------------


def mem_type(dtype: np.dtype) -> str:
    """The LLVM type of one element of ``dtype`` in memory."""
    kind, size = dtype.kind, dtype.itemsize
    if kind == "b":
        return "i8"
    if kind in "iu":
        return f"i{8 * size}"
    if kind == "f" and size in (4, 8):
        return "float" if size == 4 else "double"
    raise NotLowered(f"dtype {dtype} is not compiled")


def reg_type(dtype: np.dtype) -> str:
    """The LLVM type of a value of ``dtype`` in a register (``i1`` for bool)."""
    return "i1" if dtype.kind == "b" else mem_type(dtype)


def supported(dtype: Any) -> bool:
    dtype = np.dtype(dtype)
    return dtype.kind in "biu" or (dtype.kind == "f" and dtype.itemsize in (4, 8))


def constant(dtype: np.dtype, value: Any) -> str:
    """``value`` as an LLVM constant of ``dtype``'s register type, exactly (floats by
    their bits; a float32 as the double of the same value, as LLVM writes it)."""
    kind = dtype.kind
    if kind == "b":
        return "true" if value else "false"
    if kind in "iu":
        value = int(value)
        bits = 8 * dtype.itemsize
        if kind == "u" and value >= 1 << (bits - 1):
            value -= 1 << bits  # LLVM's integers are written signed
        return str(value)
    value = float(np.dtype(dtype).type(value))
    return "0x" + struct.pack(">d", value).hex().upper()


# --- a function -------------------------------------------------------------------------------


class Function:
    """One LLVM function being written: ``op`` emits an instruction and returns its
    value's name, ``do`` one without a value; ``block``/``enter`` make and start basic
    blocks; ``alloca`` reserves stack in the entry block; ``loop``, ``when`` and
    ``while_true`` write structured control flow."""

    def __init__(self, header: str) -> None:
        self.header = header
        self.allocas: list[str] = []
        self.lines: list[str] = []
        self.n = 0
        self.label = "start"
        self.intrinsics: set[str] = set()
        self._rolled = 0  # inside ``rolled``: loops marked to stay as written

    def tmp(self) -> str:
        self.n += 1
        return f"%v{self.n}"

    def op(self, text: str) -> str:
        name = self.tmp()
        self.lines.append(f"  {name} = {text}")
        return name

    def do(self, text: str) -> None:
        self.lines.append(f"  {text}")

    def block(self, hint: str = "b") -> str:
        self.n += 1
        return f"{hint}{self.n}"

    def enter(self, label: str) -> None:
        self.lines.append(f"{label}:")
        self.label = label

    def br(self, label: str) -> None:
        self.do(f"br label %{label}")

    def alloca(self, ty: str, count: int = 1, align: int = 16) -> str:
        self.n += 1
        name = f"%a{self.n}"
        self.allocas.append(f"  {name} = alloca {ty}, i64 {count}, align {align}")
        return name

    def intrinsic(self, declaration: str) -> None:
        self.intrinsics.add(declaration)

    def call_intrinsic(self, ret: str, name: str, args: list[tuple[str, str]]) -> str:
        self.intrinsic(f"declare {ret} @{name}({', '.join(t for t, _ in args)})")
        return self.op(f"call {ret} @{name}({', '.join(f'{t} {v}' for t, v in args)})")

    def text(self) -> str:
        return "\n".join([f"{self.header} {{", "entry:", *self.allocas, "  br label %start",
                          "start:", *self.lines, "}"])  # fmt: skip

    # --- structured control flow ---

    @contextlib.contextmanager
    def rolled(self) -> Iterator[None]:
        """Loops written inside are left as written: LLVM neither unrolls nor vectorises
        them (``ROLLED``, their loop metadata).  For nests of small loops copying strided
        windows (a convolution's), which gain little from either and would grow the code
        several times over and take seconds to compile."""
        self._rolled += 1
        try:
            yield
        finally:
            self._rolled -= 1

    @contextlib.contextmanager
    def loop(self, count: str | int) -> Iterator[str]:
        """``for i in range(count)``: the body is written inside; yields ``i`` (i64)."""
        rolled = self._rolled > 0
        before = self.label
        head, body, done = self.block("loop"), self.block("body"), self.block("done")
        self.br(head)
        self.enter(head)
        i = self.tmp()
        at = len(self.lines)
        self.lines.append("")  # the phi, once the latch is known
        more = self.op(f"icmp slt i64 {i}, {count}")
        self.do(f"br i1 {more}, label %{body}, label %{done}")
        self.enter(body)
        yield i
        latch = self.label
        following = self.op(f"add nuw nsw i64 {i}, 1")
        self.do(f"br label %{head}, !llvm.loop {ROLLED}") if rolled else self.br(head)
        self.lines[at] = f"  {i} = phi i64 [ 0, %{before} ], [ {following}, %{latch} ]"
        self.enter(done)

    @contextlib.contextmanager
    def when(self, condition: str) -> Iterator[None]:
        """``if condition:`` (an ``i1``); the body is written inside."""
        then, done = self.block("then"), self.block("endif")
        self.do(f"br i1 {condition}, label %{then}, label %{done}")
        self.enter(then)
        yield
        self.br(done)
        self.enter(done)

    def while_true(self) -> tuple[str, str]:
        """Start ``while True:``; returns (head, exit) labels: the body ends with
        ``br head``, and breaks by branching to ``exit``."""
        head, done = self.block("while"), self.block("wend")
        self.br(head)
        self.enter(head)
        return head, done


# --- lanes: scalars or vectors ----------------------------------------------------------------


class Lanes:
    """Whether values are scalars (``n`` None) or vectors of ``n`` lanes: the types,
    constants and intrinsic names of either."""

    __slots__ = ("n",)

    def __init__(self, n: int | None = None) -> None:
        self.n = n

    def t(self, scalar: str) -> str:
        return scalar if self.n is None else f"<{self.n} x {scalar}>"

    def k(self, scalar: str, value: str) -> str:
        """A constant of every lane."""
        return value if self.n is None else f"splat ({scalar} {value})"

    def name(self, scalar: str) -> str:
        """The intrinsic suffix: ``f64``, ``v8f64``."""
        base = {"float": "f32", "double": "f64"}.get(scalar, scalar)
        return base if self.n is None else f"v{self.n}{base}"


SCALAR = Lanes()


# --- casts ------------------------------------------------------------------------------------


def _x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def cast(f: Function, value: str, src: np.dtype, dst: np.dtype, v: Lanes = SCALAR) -> str:
    """``value`` (a register of ``src``) converted as NumPy's cast converts it."""
    if src == dst:
        return value
    sk, dk = src.kind, dst.kind
    st, dt = reg_type(src), reg_type(dst)
    if dk == "b":
        if sk == "f":
            return f.op(f"fcmp une {v.t(st)} {value}, zeroinitializer")
        return f.op(f"icmp ne {v.t(st)} {value}, zeroinitializer")
    if sk == "b":
        return f.op(f"{'uitofp' if dk == 'f' else 'zext'} {v.t('i1')} {value} to {v.t(dt)}")
    if sk in "iu" and dk in "iu":
        sb, db = src.itemsize, dst.itemsize
        if sb == db:
            return value
        if sb > db:
            return f.op(f"trunc {v.t(st)} {value} to {v.t(dt)}")
        return f.op(f"{'sext' if sk == 'i' else 'zext'} {v.t(st)} {value} to {v.t(dt)}")
    if sk in "iu" and dk == "f":
        return f.op(f"{'sitofp' if sk == 'i' else 'uitofp'} {v.t(st)} {value} to {v.t(dt)}")
    if sk == "f" and dk == "f":
        how = "fpext" if dst.itemsize > src.itemsize else "fptrunc"
        return f.op(f"{how} {v.t(st)} {value} to {v.t(dt)}")
    if sk == "f" and dk == "i" and dst.itemsize in (4, 8):
        if v.n is not None:  # lane by lane
            out = "poison"
            for lane in range(v.n):
                x = f.op(f"extractelement {v.t(st)} {value}, i64 {lane}")
                y = cast(f, x, src, dst)
                out = f.op(f"insertelement {v.t(dt)} {out}, {dt} {y}, i64 {lane}")
            return out
        # C's conversion on this processor (NumPy's): out of range and NaN give the
        # "integer indefinite" value and raise the invalid flag on x86; saturate on ARM
        if _x86():
            name = {("float", 8): "cvttss2si64", ("float", 4): "cvttss2si", ("double", 8):
                    "cvttsd2si64", ("double", 4): "cvttsd2si"}[(st, dst.itemsize)]  # fmt: skip
            prefix = "sse" if st == "float" else "sse2"
            vector = "<4 x float>" if st == "float" else "<2 x double>"
            packed = f.op(f"insertelement {vector} poison, {st} {value}, i64 0")
            return f.call_intrinsic(dt, f"llvm.x86.{prefix}.{name}", [(vector, packed)])
        return f.call_intrinsic(dt, f"llvm.fptosi.sat.{dt}.{'f32' if st == 'float' else 'f64'}",
                                [(st, value)])  # fmt: skip
    raise NotLowered(f"a cast from {src} to {dst} is not compiled")


# --- native operations ------------------------------------------------------------------------

# a writer: (function, the operands' scalar LLVM type, operand registers, lanes) -> register
_Writer = Callable[[Function, str, list, Lanes], str]
_INF = "0x7FF0000000000000"


def _binary(opcode: str) -> _Writer:
    return lambda f, t, a, v: f.op(f"{opcode} {v.t(t)} {a[0]}, {a[1]}")


def _intrinsic(name: str, n: int = 1) -> _Writer:
    def write(f: Function, t: str, a: list, v: Lanes) -> str:
        return f.call_intrinsic(v.t(t), f"llvm.{name}.{v.name(t)}", [(v.t(t), x) for x in a[:n]])

    return write


_ORDERS = {"olt": "slt", "ole": "sle", "ogt": "sgt", "oge": "sge"}


def _fcmp(pred: str) -> _Writer:
    """A comparison as NumPy's: quiet, no invalid flag for a NaN operand.  Equality is
    quiet as an instruction (``fcmp oeq``, ``une``); the ordered relations (``<``, ...)
    signal on any NaN (x86's ``cmpltpd``, and ``minpd``, which LLVM makes of ``x < y ?
    x : y``), so they are written quietly: ordered (``fcmp ord``, quiet) and the
    operands' bits compared as integers, in the order of their values (a float's
    magnitude bits flipped where it is negative, ``-0.0`` first made ``+0.0`` by an
    exact ``+ 0.0``).  LLVM's constrained ``fcmp`` is quiet too, but no loop with one
    is vectorised (3x slower on long loops)."""
    if pred not in _ORDERS:
        return lambda f, t, a, v: f.op(f"fcmp {pred} {v.t(t)} {a[0]}, {a[1]}")

    def write(f: Function, t: str, a: list, v: Lanes) -> str:
        bits, top = ("i32", "31") if t == "float" else ("i64", "63")
        keys = []
        for x in a[:2]:
            plus = f.op(f"fadd {v.t(t)} {x}, {v.k(t, '0.0')}")
            raw = f.op(f"bitcast {v.t(t)} {plus} to {v.t(bits)}")
            sign = f.op(f"ashr {v.t(bits)} {raw}, {v.k(bits, top)}")
            flip = f.op(f"lshr {v.t(bits)} {sign}, {v.k(bits, '1')}")
            keys.append(f.op(f"xor {v.t(bits)} {raw}, {flip}"))
        ordered = f.op(f"fcmp ord {v.t(t)} {a[0]}, {a[1]}")
        holds = f.op(f"icmp {_ORDERS[pred]} {v.t(bits)} {keys[0]}, {keys[1]}")
        return f.op(f"and {v.t('i1')} {ordered}, {holds}")

    return write


def _icmp(signed: str, unsigned: str | None = None) -> Callable[[str], _Writer]:
    def for_kind(kind: str) -> _Writer:
        pred = signed if kind == "i" or unsigned is None else unsigned
        return lambda f, t, a, v: f.op(f"icmp {pred} {v.t(t)} {a[0]}, {a[1]}")

    return for_kind


def _truth(f: Function, t: str, x: str, v: Lanes) -> str:
    if t == "i1":
        return x
    if t in ("float", "double"):
        return f.op(f"fcmp une {v.t(t)} {x}, zeroinitializer")
    return f.op(f"icmp ne {v.t(t)} {x}, zeroinitializer")


def _logical(opcode: str) -> _Writer:
    def write(f: Function, t: str, a: list, v: Lanes) -> str:
        return f.op(f"{opcode} {v.t('i1')} {_truth(f, t, a[0], v)}, {_truth(f, t, a[1], v)}")

    return write


def _not(f: Function, t: str, a: list, v: Lanes) -> str:
    return f.op(f"xor {v.t('i1')} {_truth(f, t, a[0], v)}, {v.k('i1', 'true')}")


def _fabs(f: Function, t: str, a: list, v: Lanes) -> str:
    return _intrinsic("fabs")(f, t, a, v)


def _isinf(f: Function, t: str, a: list, v: Lanes) -> str:
    return f.op(f"fcmp oeq {v.t(t)} {_fabs(f, t, a, v)}, {v.k(t, _INF)}")


def _isfinite(f: Function, t: str, a: list, v: Lanes) -> str:  # |x| != inf and not NaN: quiet
    return f.op(f"fcmp one {v.t(t)} {_fabs(f, t, a, v)}, {v.k(t, _INF)}")


def _signbit(f: Function, t: str, a: list, v: Lanes) -> str:
    bits = "i32" if t == "float" else "i64"
    as_int = f.op(f"bitcast {v.t(t)} {a[0]} to {v.t(bits)}")
    return f.op(f"icmp slt {v.t(bits)} {as_int}, zeroinitializer")


def _iabs(f: Function, t: str, a: list, v: Lanes) -> str:
    negative = f.op(f"icmp slt {v.t(t)} {a[0]}, zeroinitializer")
    flipped = f.op(f"sub {v.t(t)} zeroinitializer, {a[0]}")
    return f.op(f"select {v.t('i1')} {negative}, {v.t(t)} {flipped}, {v.t(t)} {a[0]}")


def _extreme(signed: str, unsigned: str) -> Callable[[str], _Writer]:
    def for_kind(kind: str) -> _Writer:
        pred = signed if kind == "i" else unsigned

        def write(f: Function, t: str, a: list, v: Lanes) -> str:
            keep = f.op(f"icmp {pred} {v.t(t)} {a[0]}, {a[1]}")
            return f.op(f"select {v.t('i1')} {keep}, {v.t(t)} {a[0]}, {v.t(t)} {a[1]}")

        return write

    return for_kind


def _same(f: Function, t: str, a: list, v: Lanes) -> str:
    return a[0]


_FLOAT: dict[str, _Writer] = {
    "add": _binary("fadd"), "subtract": _binary("fsub"), "multiply": _binary("fmul"),
    "divide": _binary("fdiv"),
    "negative": lambda f, t, a, v: f.op(f"fneg {v.t(t)} {a[0]}"),
    "positive": _same,
    "square": lambda f, t, a, v: f.op(f"fmul {v.t(t)} {a[0]}, {a[0]}"),
    "reciprocal": lambda f, t, a, v: f.op(f"fdiv {v.t(t)} {v.k(t, '1.0')}, {a[0]}"),
    "sqrt": _intrinsic("sqrt"), "absolute": _fabs, "fabs": _fabs,
    "floor": _intrinsic("floor"), "ceil": _intrinsic("ceil"), "trunc": _intrinsic("trunc"),
    "rint": _intrinsic("roundeven"), "copysign": _intrinsic("copysign", 2),
    "equal": _fcmp("oeq"), "not_equal": _fcmp("une"), "less": _fcmp("olt"),
    "less_equal": _fcmp("ole"), "greater": _fcmp("ogt"), "greater_equal": _fcmp("oge"),
    "isnan": lambda f, t, a, v: f.op(f"fcmp uno {v.t(t)} {a[0]}, {a[0]}"),
    "isinf": _isinf, "isfinite": _isfinite, "signbit": _signbit,
    "logical_and": _logical("and"), "logical_or": _logical("or"), "logical_xor": _logical("xor"),
    "logical_not": _not,
}  # fmt: skip

_INT: dict[str, Callable[[str], _Writer]] = {
    "add": lambda k: _binary("add"), "subtract": lambda k: _binary("sub"),
    "multiply": lambda k: _binary("mul"),
    "negative": lambda k: (lambda f, t, a, v: f.op(f"sub {v.t(t)} zeroinitializer, {a[0]}")),
    "positive": lambda k: _same,
    "square": lambda k: (lambda f, t, a, v: f.op(f"mul {v.t(t)} {a[0]}, {a[0]}")),
    "absolute": lambda k: _iabs if k == "i" else _same,
    "equal": _icmp("eq"), "not_equal": _icmp("ne"), "less": _icmp("slt", "ult"),
    "less_equal": _icmp("sle", "ule"), "greater": _icmp("sgt", "ugt"),
    "greater_equal": _icmp("sge", "uge"),
    "maximum": _extreme("sgt", "ugt"), "minimum": _extreme("slt", "ult"),
    "bitwise_and": lambda k: _binary("and"), "bitwise_or": lambda k: _binary("or"),
    "bitwise_xor": lambda k: _binary("xor"),
    "logical_and": lambda k: _logical("and"), "logical_or": lambda k: _logical("or"),
    "logical_xor": lambda k: _logical("xor"), "logical_not": lambda k: _not,
}  # fmt: skip

_BOOL: dict[str, _Writer] = {
    "logical_and": _binary("and"), "logical_or": _binary("or"), "logical_xor": _binary("xor"),
    "logical_not": _not,
    "bitwise_and": _binary("and"), "bitwise_or": _binary("or"), "bitwise_xor": _binary("xor"),
    "equal": _binary("icmp eq"), "not_equal": _binary("icmp ne"), "less": _binary("icmp ult"),
    "less_equal": _binary("icmp ule"), "greater": _binary("icmp ugt"),
    "greater_equal": _binary("icmp uge"), "add": _binary("or"), "multiply": _binary("and"),
    "maximum": _binary("or"), "minimum": _binary("and"), "positive": _same,
}  # fmt: skip


def native(name: str, dtypes: tuple) -> _Writer | None:
    """How compiled code computes NumPy's ufunc ``name`` on operands of ``dtypes`` (the
    loop's input dtypes, all one kind), or None where NumPy's loop does it."""
    if not dtypes:
        return None
    kinds = {d.kind for d in dtypes}
    if len(kinds) != 1 or len({d.itemsize for d in dtypes}) != 1:
        return None
    kind = kinds.pop()
    if kind == "f":
        return _FLOAT.get(name)
    if kind in "iu":
        make = _INT.get(name)
        return make(kind) if make is not None else None
    if kind == "b":
        return _BOOL.get(name)
    return None
