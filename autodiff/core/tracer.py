"""The tracer base class: operator overloading and NumPy's protocols, once.

``GradTensor``, ``DualTensor`` and ``BatchedTensor`` subclass :class:`Tracer`.
Every operator and ndarray-style method is routed through the same table that
``__array_ufunc__`` and ``__array_function__`` use, keyed by the NumPy function
it stands for: ``x + y`` means ``np.add(x, y)`` and ``x.sum()`` means
``np.sum(x)``.  That table, which the rule modules fill (``register_numpy``), is
``core/overrides.py``'s.  Here too: the stand-in table (``stand_ins``, ``stood_in``)
and the error of a tracer used after its transform ended (``leaked_error``).
"""

from __future__ import annotations

import contextvars
import math
import operator
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any

import numpy as np

from autodiff.core.loading import load
from autodiff.core.overrides import INDEX_UPDATE, SET_ITEM, has_rule, numpy_overrides
from autodiff.errors import ConcretizationError, LeakedTracerError, UnsupportedFunctionError

if TYPE_CHECKING:
    from autodiff.core import conversions


def _conversions():
    """``core/conversions.py``: the messages and the tests of a conversion of a traced
    value, loaded at the first one (a program that converts none never needs them)."""
    return load("autodiff.core.conversions")


__all__ = ["THEIR_SPELLINGS", "Tracer", "leaked_error", "stand_ins", "stood_in"]


def leaked_error(tracer: Tracer) -> LeakedTracerError:
    if stand_ins.get():  # inside a function a solver or a custom rule runs for itself
        return LeakedTracerError(
            f"{type(tracer).__name__} of {tracer._interp.describe()} reached a function "
            f"that a solver or a custom rule runs on its own values, through a path "
            f"autodiff does not look into (its closure cells, defaults, globals, bound "
            f"objects and containers, a few levels deep, are searched). Pass that value "
            f"to the function as an argument (args=, or an argument of the custom rule) "
            f"or close over it directly."
        )
    return LeakedTracerError(
        f"{type(tracer).__name__} of {tracer._interp.describe()} used after that "
        f"transform ended. Traced values must not escape the function being "
        f"transformed (through a global, a closure, an attribute, a generator or "
        f"a side output); return them from the function instead."
    )


# Stand-ins: while a solver or a custom rule runs a user function on values of its own
# (its operands, unwrapped), the traced values that function closes over stand for those
# values (``core.stack.standing_in`` deactivates their transforms for the time, so
# every use reaches a slow path that looks here): id(tracer) -> (tracer, value).
stand_ins: contextvars.ContextVar[Mapping[Any, tuple[Any, Any]]] = contextvars.ContextVar(
    "autodiff_stand_ins", default=types.MappingProxyType({})
)


def stood_in(x: Any) -> Any:
    """The value ``x`` stands for here (``x`` itself where it stands for none)."""
    found = stand_ins.get().get(id(x))
    return x if found is None else found[1]


_API_VERSIONS = (None, "2021.12", "2022.12", "2023.12", "2024.12")
# What __array_namespace__ returns: autodiff.numpy, which sets it when it is imported
# (it sits layers above this module, which therefore cannot import it).
array_namespace: Any = None


def _binary(ufunc: Any) -> tuple[Callable, Callable]:
    # (an operand whose class sets __array_ufunc__ = None handles the operator itself, as
    # NumPy's protocol says: tracer @ sparse_array is the sparse array's __rmatmul__)
    def forward(self, other):
        if getattr(type(other), "__array_ufunc__", 0) is None:
            return NotImplemented
        return numpy_overrides[ufunc](self, other)

    def reflected(self, other):
        if getattr(type(other), "__array_ufunc__", 0) is None:
            return NotImplemented
        return numpy_overrides[ufunc](other, self)

    forward.__name__ = reflected.__name__ = ufunc.__name__
    return forward, reflected


def _inplace(ufunc: Any) -> Callable:
    def method(self, other):
        return self._rebind(numpy_overrides[ufunc](self, other))

    method.__name__ = f"i{ufunc.__name__}"
    return method


def _unary(func: Any) -> Callable:
    def method(self):
        return numpy_overrides[func](self)

    method.__name__ = func.__name__
    return method


def _method(func: Any) -> Callable:
    def method(self, *args, **kwargs):
        return numpy_overrides[func](self, *args, **kwargs)

    method.__name__ = func.__name__
    method.__doc__ = f"Like ndarray.{func.__name__}; see autodiff.numpy."
    return method


# torch's and JAX's spellings a traced value does not have, and autodiff's for them.
THEIR_SPELLINGS = {
    "detach": "torch's x.detach() is autodiff.stop_gradient(x)",
    "requires_grad": "the inputs a transform differentiates are its argnums (grad(f, argnums=1))",
    "requires_grad_": "the inputs a transform differentiates are its argnums (grad(f, argnums=1))",
    "backward": "write autodiff.grad(f)(x) (or vjp) around the function: it returns the gradient",
    "grad": "write autodiff.grad(f)(x) around the function: it returns the gradient",
    "numpy": "a traced value has no NumPy array (it would drop the derivative or the batch); "
    "return it from the function, or convert autodiff.stop_gradient(x) for a constant",
    "block_until_ready": "autodiff computes eagerly: a result is ready when it is returned",
}


def _their_spelling(name: str, hint: str) -> property:
    """A property that raises as a missing attribute does (``hasattr`` is False), naming
    autodiff's spelling: a class attribute, so that looking up the others costs nothing
    more (a ``__getattr__`` would slow every attribute access of a tracer)."""

    def missing(self: Tracer) -> Any:
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}': {hint}.")

    return property(missing, doc=f"Not an attribute of traced values: {hint}.")


def _copy_slots(source: Tracer, target: Tracer) -> None:
    for cls in type(source).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot != "__weakref__":
                setattr(target, slot, getattr(source, slot))


class Tracer:
    """A value being transformed; behaves like an ndarray of its logical shape.

    Subclasses define ``_inner``: the lower-level value they stand for, whose
    shape, dtype and concrete value are the tracer's.  ``BatchedTensor``
    overrides ``shape`` (its value has an extra batch axis) and ``_concrete``
    (a batched value has no single concrete value).
    """

    __slots__ = ("_interp",)
    # Make ``ndarray <op> tracer`` defer to the tracer (legacy protocol; the
    # __array_ufunc__ below is what NumPy consults first).
    __array_priority__ = 1000
    __hash__ = None  # type: ignore[assignment]  # mutable array semantics, like ndarray

    _interp: Any  # the Interpreter that owns this tracer (set by subclasses)

    @property
    def _inner(self) -> Any:
        raise NotImplementedError

    @property
    def shape(self) -> tuple[int, ...]:
        inner = self._inner
        return inner.shape if hasattr(inner, "shape") else np.shape(inner)

    @property
    def dtype(self) -> np.dtype:
        inner = self._inner
        return inner.dtype if hasattr(inner, "dtype") else np.result_type(inner)

    def _concrete(self, what: str | conversions.Described, kind: str = "read") -> Any:
        """The concrete value, for ``what`` (a description: ``"float(s)"``).  ``kind``
        says what the value is for: ``"read"`` (the library reads it), ``"condition"``
        (Python control flow), ``"value"`` (a Python number), ``"array"`` (NumPy's);
        tracers without one (batched, staged) name their fix by it."""
        inner = self._inner
        return inner._concrete_value(what, kind) if isinstance(inner, Tracer) else inner

    def _concrete_value(self, what: str | conversions.Described, kind: str = "read") -> Any:
        """The value a library function reads where that is right (a size, a position,
        a Python branch under ``grad``): derivatives are not dropped silently by this,
        the caller decides.  Batched and staged values have none and raise."""
        if not self._interp.active:
            value = stood_in(self)
            if value is self:
                raise leaked_error(self)
            return value._concrete_value(what, kind) if isinstance(value, Tracer) else value
        return self._concrete(what, kind)

    def _convert(self, what: str, kind: str, frame: FrameType) -> Any:
        """The value for a user's conversion that leaves the transforms (``float(x)``,
        ``x.item()``, ``np.asarray(x)``), made by the code in ``frame``: refused by every
        transform whose value would be lost (a derivative, a batch)."""
        if not self._interp.active:
            value = stood_in(self)  # (a closed-over value a solver's function converts)
            if value is self:
                raise leaked_error(self)
            return value._convert(what, kind, frame) if isinstance(value, Tracer) else value
        self._refuse(what, kind, frame)
        inner = self._inner
        return inner._convert(what, kind, frame) if isinstance(inner, Tracer) else inner

    def _refuse(self, what: str, kind: str, frame: FrameType) -> None:
        """Raise if converting this value for ``kind`` would lose what its transform
        carries.  Transforms that carry nothing a conversion loses keep this."""

    def _derivative_error(self, what: str, frame: FrameType) -> ConcretizationError:
        """The error of a conversion that would drop this value's derivative."""
        return ConcretizationError(
            _conversions().derivative_message(what, self._interp.describe(), frame, array_namespace)
        )

    # --- array attributes -----------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def T(self):
        return numpy_overrides[np.transpose](self)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of unsized object (a 0-d traced value)")
        return self.shape[0]

    def __iter__(self) -> Iterator:
        if not self.shape:
            raise TypeError("iteration over a 0-d traced value")
        for i in range(self.shape[0]):
            yield self[i]

    def __repr__(self) -> str:
        # What print(x) shows inside a transform: the value where there is one (under
        # grad and jvp it is concrete), as torch.func's and JAX's tracers show theirs.
        return f"{type(self).__name__}({', '.join(self._fields())}, {self._interp.describe()})"

    def _fields(self) -> list[str]:
        """``["value=array([1., 2.])"]``: what ``repr`` shows of this tracer."""
        return [f"value={self._inner!r}"]

    def __format__(self, spec: str) -> str:
        if not spec:  # f"{x}": as print(x)
            return str(self)
        return format(self._python_value("format(x, spec)", "value", sys._getframe(1)), spec)

    # --- operators ----------------------------------------------------------
    __add__, __radd__ = _binary(np.add)
    __sub__, __rsub__ = _binary(np.subtract)
    __mul__, __rmul__ = _binary(np.multiply)
    __truediv__, __rtruediv__ = _binary(np.true_divide)
    __floordiv__, __rfloordiv__ = _binary(np.floor_divide)
    __mod__, __rmod__ = _binary(np.remainder)
    __divmod__, __rdivmod__ = _binary(np.divmod)
    __pow__, __rpow__ = _binary(np.power)
    __matmul__, __rmatmul__ = _binary(np.matmul)
    __and__, __rand__ = _binary(np.bitwise_and)
    __or__, __ror__ = _binary(np.bitwise_or)
    __xor__, __rxor__ = _binary(np.bitwise_xor)
    __lt__, _ = _binary(np.less)
    __le__, _ = _binary(np.less_equal)
    __gt__, _ = _binary(np.greater)
    __ge__, _ = _binary(np.greater_equal)
    __eq__, _ = _binary(np.equal)  # type: ignore[assignment]
    __ne__, _ = _binary(np.not_equal)  # type: ignore[assignment]
    del _
    # In-place operators rebind this tracer to the result (see _rebind), so an
    # alias of ``x`` sees ``x += y`` as it would for an ndarray.
    __iadd__ = _inplace(np.add)
    __isub__ = _inplace(np.subtract)
    __imul__ = _inplace(np.multiply)
    __itruediv__ = _inplace(np.true_divide)
    __ipow__ = _inplace(np.power)
    __imatmul__ = _inplace(np.matmul)
    __neg__ = _unary(np.negative)
    __pos__ = _unary(np.positive)
    __abs__ = _unary(np.absolute)
    __invert__ = _unary(np.invert)

    def __getitem__(self, index):
        return numpy_overrides[operator.getitem](self, index)

    def __setitem__(self, index, value):
        """``x[index] = value``: ``x`` becomes ``x.at[index].set(value)``.

        Tracers are values, not memory: slices of a tracer are copies, so
        writing into a slice does not change the tracer it came from.
        """
        updated = numpy_overrides[SET_ITEM](self, index, value)
        if self._rebind(updated) is not self:
            raise TypeError(
                f"x[...] = value: value is traced by a transform running inside the "
                f"one that traces x ({self._interp.describe()}), so x cannot hold the "
                f"result; write x = x.at[...].set(value) instead."
            )

    @property
    def at(self):
        """Functional index updates: ``x.at[idx].set(v)``, ``.add(v)``,
        ``.multiply(v)``, ``.min(v)``, ``.max(v)``, ``.get()`` return new values."""
        return numpy_overrides[INDEX_UPDATE](self)

    def _rebind(self, new: Any) -> Any:
        """Make this tracer stand for ``new`` if it can (same transform level)."""
        if type(new) is not type(self) or new._interp is not self._interp:
            return new
        _copy_slots(new, self)
        return self

    # --- ndarray methods ----------------------------------------------------
    sum = _method(np.sum)
    mean = _method(np.mean)
    max = _method(np.max)
    min = _method(np.min)
    argmax = _method(np.argmax)
    argmin = _method(np.argmin)
    dot = _method(np.dot)
    ravel = _method(np.ravel)
    squeeze = _method(np.squeeze)
    clip = _method(np.clip)
    astype = _method(np.astype)
    prod = _method(np.prod)
    cumsum = _method(np.cumsum)
    cumprod = _method(np.cumprod)
    var = _method(np.var)
    std = _method(np.std)
    any = _method(np.any)
    all = _method(np.all)
    argsort = _method(np.argsort)
    round = _method(np.round)
    conj = conjugate = _method(np.conj)
    trace = _method(np.trace)
    diagonal = _method(np.diagonal)
    repeat = _method(np.repeat)
    take = _method(np.take)
    swapaxes = _method(np.swapaxes)

    @property
    def real(self):
        return numpy_overrides[np.real](self)

    @property
    def imag(self):
        return numpy_overrides[np.imag](self)

    def copy(self):
        """A new handle on the same value (values are immutable; updates rebind)."""
        new = object.__new__(type(self))
        _copy_slots(self, new)
        return new

    def sort(self, axis=-1, kind=None, order=None):
        """In place, like ndarray.sort: this tracer becomes the sorted value."""
        self._rebind(numpy_overrides[np.sort](self, axis, kind, order))

    def reshape(self, *shape, order="C"):
        """Like ndarray.reshape: ``x.reshape(2, 3)`` or ``x.reshape((2, 3))``."""
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = shape[0]
        return numpy_overrides[np.reshape](self, shape, order=order)

    def transpose(self, *axes):
        """Like ndarray.transpose: ``x.transpose(1, 0)`` or ``x.transpose((1, 0))``."""
        if len(axes) == 1 and not isinstance(axes[0], int):
            axes = axes[0]
        return numpy_overrides[np.transpose](self, axes or None)

    def flatten(self):
        return numpy_overrides[np.reshape](self, (-1,))

    # --- NumPy protocols ------------------------------------------------------
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__":  # reduce, accumulate, outer: keywords such as axis=
            return numpy_overrides[(ufunc, method)](*inputs, **kwargs)
        if kwargs.keys() == {"axis"} and ufunc.signature is not None:  # np.vecdot(a, b, axis=0)
            return numpy_overrides[ufunc](*inputs, **kwargs)
        if kwargs:
            name = sorted(kwargs)[0]
            raise UnsupportedFunctionError(
                f"numpy.{ufunc.__name__}(..., {name}=...) is not supported on traced "
                f"values"
                + (
                    ": out= would write a traced value into a plain array; use the "
                    "returned value instead."
                    if name == "out"
                    else f"; call it without {name}=."
                )
            )
        return numpy_overrides[ufunc](*inputs)

    def __array_function__(self, func, types, args, kwargs):
        return numpy_overrides[func](*args, **kwargs)

    def __array__(self, dtype=None, copy=None):
        if not self._interp.active and stood_in(self) is not self:  # a concrete stand-in
            return np.asarray(stood_in(self), dtype=dtype)
        # NumPy converts: np.asarray(x), np.array([x, y]), np.float32(x), plain[i:j] = x,
        # or a NumPy function given a list holding x (np.mean([x, y])).
        caller = sys._getframe(1)
        numpy_function = _conversions().numpy_function(caller, has_rule)
        while caller.f_globals.get("__name__", "").split(".")[0] == "numpy":
            caller = caller.f_back  # the code that called NumPy, for the message
        if numpy_function is not None:
            raise ConcretizationError(
                _conversions().list_message(
                    numpy_function, self._interp.describe(), caller, array_namespace
                )
            )
        value = self._python_value("np.asarray(x)", "array", caller)  # (a constant here)
        return np.array(value, dtype=dtype, copy=True) if copy else np.asarray(value, dtype)

    def _store_error(self, frame: FrameType) -> ConcretizationError:
        """The error for ``plain_array[i] = x``, where NumPy converts ``x`` itself."""
        reason = "would drop its derivative"
        try:
            self._concrete_value("a store")
        except ConcretizationError:  # staged, batched: there is no one value to store
            reason = "needs one value, which it does not have here"
        return ConcretizationError(
            _conversions().store_message(self._interp.describe(), reason, frame)
        )

    # --- the array API standard ------------------------------------------------
    def __array_namespace__(self, /, *, api_version=None):
        """``autodiff.numpy``: array-API-aware libraries (SciPy with
        ``SCIPY_ARRAY_API=1``, scikit-learn's ``array_api_dispatch``) compute with it."""
        if api_version not in _API_VERSIONS:
            raise ValueError(
                f"autodiff.numpy implements the array API standard {_API_VERSIONS[-1]}; "
                f"api_version={api_version!r} is not one of {_API_VERSIONS[1:]}"
            )
        return array_namespace

    @property
    def device(self):
        """The device of the underlying array (``"cpu"`` for NumPy's)."""
        inner = self._inner
        return getattr(inner, "device", "cpu")

    def to_device(self, device, /, *, stream=None):  # noqa: ARG002  (the standard's signature)
        if device != self.device:
            raise ValueError(
                f"to_device({device!r}): traced values stay on their array's device "
                f"({self.device!r}); move the inputs before the transform instead."
            )
        return self

    @property
    def mT(self):
        return numpy_overrides[np.matrix_transpose](self)

    # --- concrete Python values -------------------------------------------------------
    # Conversions that leave the transforms (float(x), x.item(), "%f" % x, math.sqrt(x),
    # np.float64(x), operator.index(x)) are refused wherever they would drop a derivative
    # or a batch; bool() (Python control flow) is refused only where there is no one
    # value (vmap, jit).  The error is surfaced in the converting frame: C code between
    # (NumPy's store, %-formatting) would otherwise raise its own instead.
    def _python_value(self, what: str, kind: str, frame: FrameType) -> Any:
        conversions = _conversions()
        try:
            if conversions.is_storing(frame):  # plain_array[i] = x: NumPy converts x
                raise self._store_error(frame)
            if kind == "condition":  # (spelled out only if it raises)
                return self._concrete_value(conversions.Described(frame, what, kind), kind)
            return self._convert(what, kind, frame)
        except (ConcretizationError, LeakedTracerError) as error:
            load("autodiff.core.last_word").surface(error, frame)
            raise

    def __bool__(self) -> bool:
        return bool(self._python_value("bool(x)", "condition", sys._getframe(1)))

    def __float__(self) -> float:
        return float(self._python_value("float(x)", "value", sys._getframe(1)))

    def __int__(self) -> int:
        return int(self._python_value("int(x)", "value", sys._getframe(1)))

    def __complex__(self) -> complex:
        return complex(self._python_value("complex(x)", "value", sys._getframe(1)))

    def __index__(self) -> int:
        return operator.index(self._python_value("operator.index(x)", "value", sys._getframe(1)))

    def __round__(self, ndigits=None):
        if ndigits is not None:  # round(x, 2): an array, as np.round(x, 2)
            return numpy_overrides[np.round](self, ndigits)
        return round(np.asarray(self._python_value("round(x)", "value", sys._getframe(1))).item())

    def __trunc__(self) -> int:
        return math.trunc(float(self._python_value("math.trunc(x)", "value", sys._getframe(1))))

    def item(self, *args):
        return self._python_value("x.item()", "value", sys._getframe(1)).item(*args)

    def tolist(self):
        return self._python_value("x.tolist()", "value", sys._getframe(1)).tolist()


# torch's and JAX's spellings, which name autodiff's (x.detach(): stop_gradient(x))
for _name, _hint in THEIR_SPELLINGS.items():
    setattr(Tracer, _name, _their_spelling(_name, _hint))
