"""How a primitive lowers to compiled code: one more kind of rule, declared in its block.

``jit``'s compiling tier (``compiler/kernels.py``) writes the regions of a staged graph it
can compile as Python source that numba turns into machine code.  A primitive says how
its equations are written there with its ``lowering``, one of:

``Elementwise(fn, kinds=...)``
    ``fn`` applied to one element of each operand (broadcast as NumPy does): a NumPy
    ufunc (numba implements them on scalars) or a Python function of scalars that numba
    compiles.  A ufunc receives its operands in the dtypes of the loop NumPy would
    choose; a Python function receives them promoted as NumPy promotes them (booleans
    stay booleans); the result is cast to the equation's dtype.  ``kinds`` lists the
    dtype kinds of the operands (``"f"`` float32 and float64, ``"d"`` float64 only, ``"b"``
    boolean, ``"i"``/``"u"`` integers) for which ``fn`` computes exactly what the
    primitive's NumPy implementation computes, NaN, infinities and signed zeros
    included (float64 to within a unit in the last place where the C library and
    NumPy's SIMD loops round differently).  Equations of
    one shape are fused: one loop over the elements computes them all.
``Emitter(fn)``
    ``fn(ctx, *operands, **params)`` writes source for whole operands (the names, or
    literals, of arrays, or of scalars for 0-d values) and returns the expression of the
    result (a tuple of them for a primitive with several results; a scalar for a 0-d
    result).  ``ctx`` (``compiler/kernels.py``'s ``Context``) knows the equation's
    abstract values (``in_avals``, ``out_avals``), writes statements (``line``,
    ``indented``), gives fresh names (``temp``), renders dtypes, literals and static
    indices, calls a Python function numba compiles (``call``), and writes a sub-graph
    inline (``inline``: control flow).  It raises ``NotLowered`` where the parameters are
    ones it cannot express: the equation then stays a NumPy call.

**What an Emitter may do with buffers.**  In a kernel every value has one name and no
array is written once it is made, and every array a kernel returns is new (``jit``'s
results share memory with nothing).  So an emitter

- never writes into an operand, nor assigns to an operand's name: an operand may be the
  caller's argument (compiled read-only, so numba refuses the kernel and the region
  stays NumPy calls), a constant of the graph, or a value later equations still read.
  To update one, copy it into a name of its own first (``v = x.copy()``, then
  ``v[i] += y``), as ``index_add`` does;
- assigns only names it got from ``ctx.temp()``;
- returns a new array (allocated by its statements, or by an expression that allocates,
  ``a @ b``, ``x * 2``), one of its operands as it is (a result passed through), or a
  view of its operands (``x.reshape(...)``, ``x.T``, ``x[1:]``, ``np.broadcast_to``).  A
  view it declares: ``ctx.view = True``, or the set of the result positions that may be
  views.  The code writer then copies, on the way out of the kernel, each result that
  may share memory with an input, a constant or another result.  An undeclared view
  would return memory shared with an argument;
- may be called more than once for one equation (``kernels.lowerable`` writes it into a
  scratch writer to learn whether it lowers), so it has no effect besides ``ctx``'s.

A primitive without a lowering is a NumPy call between compiled regions: never wrong,
only not compiled.  Nothing here imports numba: a lowering is a description, and
another code writer (CuPy's elementwise and reduction kernels, say) could read the same
descriptions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Elementwise", "Emitter", "Lowering", "NotLowered"]


class NotLowered(Exception):
    """An equation that cannot be written as compiled code (parameters a lowering cannot
    express, a dtype it is not exact for): it stays a NumPy call."""


class Lowering:
    """The base of the kinds of lowering below."""

    __slots__ = ()


class Elementwise(Lowering):
    """Lowers to ``fn`` applied elementwise (see the module docstring).  ``kinds`` are
    checked on the operands (a Python number among them is converted to the dtype the
    operation computes in); ``when(in_avals, out_aval)``, if given, says whether it
    lowers for these dtypes besides.  ``params``: whether ``fn`` takes the equation's
    static parameters as keywords (they must then be Python numbers, booleans or None)."""

    __slots__ = ("fn", "kinds", "params", "when")

    def __init__(self, fn: Callable, *, kinds: str = "f", params: bool = False,
                 when: Callable[[list, Any], bool] | None = None) -> None:  # fmt: skip
        if not callable(fn):
            raise TypeError(f"Elementwise lowering: fn must be callable, got {fn!r:.60}")
        self.fn, self.kinds, self.params, self.when = fn, kinds, params, when

    def __repr__(self) -> str:
        return f"Elementwise({getattr(self.fn, '__name__', self.fn)!r}, kinds={self.kinds!r})"


class Emitter(Lowering):
    """Lowers by writing source, keeping the buffer contract of the module docstring.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> from autodiff.extend import Primitive
    >>> def _rows_lowering(ctx, x):  # a view of its operand: declared
    ...     ctx.view = True
    ...     return f"{x}[::-1]"
    >>> flip_rows_p = Primitive("flip_rows", lambda x: x[::-1], lowering=Emitter(_rows_lowering))
    >>> f = autodiff.jit(lambda x: flip_rows_p.bind(anp.sin(x) * 2.0) + 1.0)
    >>> [r.primitives for r in f.trace(np.ones(3)).lower().regions]
    [['sin', 'multiply', 'flip_rows', 'add']]
    """

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def __repr__(self) -> str:
        return f"Emitter({getattr(self.fn, '__name__', self.fn)!r})"
