"""How a primitive lowers to compiled code: one more kind of rule, declared in its block.

``jit``'s compiling tier (``compiler/llvm_codegen.py``) writes the regions of a staged graph
it can compile as LLVM functions.  A primitive says how its equations are written there
with its ``lowering``, one of:

``Elementwise(fn, kinds=...)``
    ``fn`` applied to one element of each operand (broadcast as NumPy does), fused with
    the elementwise equations around it into one loop.  ``fn`` is one of NumPy's ufuncs
    (compiled code computes it as NumPy's own loop does: the same values to the bit), or
    a Python function of scalars written with operators, NumPy's ufuncs and ``np.where``
    (traced into those; Python ``if`` on a value does not lower).  A ufunc receives its
    operands in the dtypes of the loop NumPy would choose; a Python function receives
    them promoted as NumPy promotes them (booleans stay booleans); the result is cast to
    the equation's dtype.  ``kinds`` lists the dtype kinds of the operands (``"f"``
    float32 and float64, ``"d"`` float64 only, ``"b"`` boolean, ``"i"``/``"u"``
    integers) for which ``fn`` computes what the primitive's implementation computes.
``Reduction(ufunc)``
    ``ufunc.reduce`` over the static ``axis`` and ``keepdims`` parameters, in NumPy's
    order (``sum``: pairwise, bit for bit).
``View(fn=None)``
    The result is a view of the first operand, which ``fn(x, **params)`` (the
    implementation if None) computes from the static parameters alone: a reshape, a
    transpose, a static index.  Compiled code learns the view's layout by running ``fn``
    on a stand-in array, so a view costs nothing at run time.
``Gufunc(select, core, singular=None)``
    One of NumPy's generalized ufuncs on one set of core operands (``matmul``,
    ``solve``): ``select(in_avals)`` picks it, ``core(ufunc, in_shapes, out_shape)`` gives
    its core dimensions and which axis of each operand is which (None: a missing
    flexible dimension); ``singular``: a raised invalid flag means a singular matrix
    (NumPy raises ``LinAlgError`` whatever ``np.errstate`` says).
``Emitter(fn)``
    ``fn(ctx, *operands, **params)`` writes the equation with the statements of
    ``ctx`` (``compiler/llvm_context.py``'s ``Context``: variables, loops, branches,
    sub-graphs inline, new arrays, views, ufuncs on whole arrays) and returns its
    result values (a tuple for a primitive with several results).  It raises
    ``NotLowered`` where the parameters are ones it cannot express: the equation then
    stays a NumPy call.  The values it returns may be its operands or views of them:
    compiled code copies what it returns where that would share memory.

**What an Emitter may do with values.**  A value is never written once it is made: an
emitter writes only into arrays it made itself (``ctx.empty``, ``ctx.full``,
``ctx.copy``, or views of those), never into an operand (it may be the caller's argument,
a constant of the graph, or a value later equations still read): to update one, copy it
first (``out = ctx.copy(x)``, then ``ctx.apply(np.add, ctx.view(out, ...), y, out=...)``,
as ``index_add`` does).  It may return its operands or views of them: the kernel copies,
on the way out, each result that shares memory with an input, a constant or another
result.  It may be called more than once for one equation (``llvm_backend.lowerable``
writes it on a scratch ``Codegen`` to learn whether it lowers), so it has no effect
besides ``ctx``'s.

A primitive without a lowering is a NumPy call between compiled regions: never wrong,
only not compiled.  Nothing here imports LLVM: a lowering is a description.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Elementwise", "Emitter", "Gufunc", "Lowering", "NotLowered", "Reduction", "View"]


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


class Reduction(Lowering):
    """Lowers to ``ufunc.reduce`` over the equation's ``axis`` (see the module docstring)."""

    __slots__ = ("ufunc",)

    def __init__(self, ufunc: Any) -> None:
        self.ufunc = ufunc

    def __repr__(self) -> str:
        return f"Reduction({self.ufunc.__name__!r})"


class View(Lowering):
    """Lowers to a view of the first operand (see the module docstring)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable | None = None) -> None:
        self.fn = fn

    def __repr__(self) -> str:
        return "View()" if self.fn is None else f"View({getattr(self.fn, '__name__', self.fn)!r})"


class Gufunc(Lowering):
    """Lowers to one of NumPy's generalized ufuncs (see the module docstring)."""

    __slots__ = ("core", "select", "singular")

    def __init__(self, select: Callable[[list], Any], core: Callable[..., tuple],
                 singular: bool = False) -> None:  # fmt: skip
        self.select, self.core, self.singular = select, core, singular

    def __repr__(self) -> str:
        return f"Gufunc({getattr(self.select, '__name__', self.select)!r})"


class Emitter(Lowering):
    """Lowers by writing statements, keeping the contract of the module docstring.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> from autodiff.extend import Primitive
    >>> def _rows_lowering(ctx, x):  # a view of its operand
    ...     return ctx.view(x, lambda a: a[::-1])
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
