"""``autograd.extend`` on autodiff: a user's ``@primitive`` with its ``defvjp``.

autograd's ``@primitive`` makes a function opaque to differentiation: under ``grad`` it
runs on the arguments' values and its derivative comes from the VJP makers ``defvjp``
gave, ``vjpmaker(ans, *args, **kwargs)(g)``, one per differentiated argument.  Here it
is an autodiff ``Primitive``, one per decorated function, made at its first call under
a transform, so a gradient through it costs what any primitive's does:

* its operands are the arguments at the positions that have a VJP maker and hold an
  array or a float; everything else (integers, functions, containers, keywords, arrays
  without a VJP) travels with the call as the parameter ``call`` (a ``_Call``);
* its output is the function's, flattened (a tuple of arrays is several results);
* its VJP rule calls the VJP makers; its JVP is their transpose (exact where they are
  written with ``autograd.numpy``); under ``vmap`` the call goes through ``custom_vjp``,
  which maps the function and the VJP makers; under a ``grad`` of a ``grad`` it is a
  primitive again one level down, as in autograd.

A call whose function, VJP makers or fixed arguments reach a traced value (a closure
over a parameter being differentiated) goes through ``custom_vjp`` too, whose closure
conversion makes that value an operand: its derivative then flows through the
function's own code, as autograd's closed-over boxes do.

>>> import numpy as np
>>> from autodiff.compat import autograd
>>> from autodiff.compat.autograd_extend import primitive, defvjp
>>> @primitive
... def cube(x):
...     return x**3
>>> defvjp(cube, lambda ans, x: lambda g: g * 3 * x**2)
>>> float(autograd.grad(cube)(2.0))
12.0
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from autodiff.core import trees
from autodiff.core.arrays import batch_size_of, shape_of
from autodiff.core.loading import load, unchecked_rules
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import jvp_taylor
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformValueError
from autodiff.interpreters.reverse import stop_gradient
from autodiff.transforms.closures import closed_over

__all__ = ["defjvp", "defvjp", "notrace_primitive", "primitive"]


def _is_value(x: Any) -> bool:
    return isinstance(x, (Tracer, np.ndarray, np.generic, float, complex)) and not isinstance(
        x, bool
    )


# Arguments of these types hold no traced value (the check of a plain call stops there).
_PLAIN = frozenset({np.ndarray, np.float64, float, int, bool, complex, str, type(None)})


def _traced(args: tuple, kwargs: dict) -> bool:
    """Whether an argument is, or holds, a traced value."""
    for a in args:
        if type(a) not in _PLAIN:
            break
    else:
        if not kwargs or all(type(v) in _PLAIN for v in kwargs.values()):
            return False
    for a in args:
        if isinstance(a, Tracer):
            return True
    leaves = trees.leaves((args, tuple(kwargs.values())) if kwargs else args)
    return any(isinstance(leaf, Tracer) for leaf in leaves)


class _Call:
    """One call of a primitive under a transform: its function, VJP makers and
    differentiated positions, the other arguments (None at those positions), the
    keywords, and (once the function has run) the structure of its output.  The
    primitive's parameter; under ``custom_vjp`` (below), its non-differentiable argument,
    where the search for closed-over traced values looks."""

    __slots__ = ("args", "diff", "fun", "kwargs", "out_tree", "vjps")

    def __init__(self, fun: Callable, vjps: dict, diff: tuple, args: list, kwargs: dict):
        self.fun, self.vjps, self.diff, self.args, self.kwargs = fun, vjps, diff, args, kwargs
        self.out_tree: Any = None

    def __repr__(self) -> str:  # (as a staged graph prints its parameter)
        return f"<call of {getattr(self.fun, '__name__', 'a primitive')}>"

    def filled(self, values: Sequence[Any]) -> list:
        full = list(self.args)
        for i, v in zip(self.diff, values):
            full[i] = v
        return full


# --- the primitive: one per decorated function --------------------------------------------------


def _impl(*values: Any, call: _Call) -> tuple:
    out = _call(call, *values)
    if type(out) in _ONE:  # (the common case: one array, which needs no structure)
        return (out,)
    leaves, call.out_tree = trees.flatten(out)
    return tuple(leaves)


_ONE = frozenset({np.ndarray, np.float64, float})


def _structured(call: _Call, leaves: Sequence[Any]) -> Any:
    """The primitive's results as the function returned them."""
    tree = call.out_tree
    return leaves[0] if tree is None else trees.unflatten(tree, list(leaves))


def _vjp_rule(cts: Sequence[Any], ans: Sequence[Any], primals: Sequence[Any], params: dict,
              argnums: Sequence[int]) -> list:  # fmt: skip
    """The VJP makers of the differentiated positions ``argnums``, on the output and
    cotangent structured as the function returned them."""
    call = params["call"]
    g, out = _structured(call, cts), _structured(call, ans)
    full = call.filled(primals)
    found = []
    for i in argnums:
        ct = call.vjps[call.diff[i]](out, *full, **call.kwargs)(g)
        if ct is not None and shape_of(ct) != shape_of(primals[i]):
            name = getattr(call.fun, "__name__", "primitive")
            raise TransformValueError(
                f"autograd primitive '{name}': the VJP maker given to defvjp for argument "
                f"{call.diff[i]} returned a cotangent of shape {shape_of(ct)} for an argument "
                f"of shape {shape_of(primals[i])}; return one shaped like the argument "
                f"(sum over the axes it was broadcast along)."
            )
        found.append(ct)
    return found


class _Primitive:
    """A decorated function's primitive and its ``custom_vjp``, each made at first need."""

    __slots__ = ("custom", "fun", "prim")

    def __init__(self, fun: Callable) -> None:
        self.fun = fun
        self.prim: Primitive | None = None
        self.custom: Any = None

    def primitive(self) -> Primitive:
        if self.prim is None:
            name = getattr(self.fun, "__name__", "primitive")
            with unchecked_rules():  # (the package's rules: their forms need no check)
                prim = Primitive(name, _impl, multiple_results=True, traceable=True)
                prim.def_vjp(_vjp_rule, packed=True)  # (its JVP: the transpose, at first use)
                prim.def_taylor(jvp_taylor(prim))
                prim.def_batch(self._batch)
            self.prim = prim
        return self.prim

    def custom_vjp(self) -> Any:
        """The function as a ``custom_vjp`` whose functions are the package's and close over
        nothing (``_call``, copied to carry the function's name into messages)."""
        if self.custom is None:
            name = getattr(self.fun, "__name__", "primitive")
            named = types.FunctionType(_call.__code__, _call.__globals__, name)
            named.__qualname__ = getattr(self.fun, "__qualname__", name)
            custom = load("autodiff.transforms.custom").custom_vjp(named, nondiff_argnums=(0,))
            custom.defvjp(_fwd, _bwd)
            self.custom = custom
        return self.custom

    def _batch(self, args: Sequence[Any], dims: Sequence[int | None], *, call: _Call) -> tuple:
        """Under ``vmap``: the call through ``custom_vjp``, which maps the function and its
        VJP makers, on batch-first values."""
        vmap = load("autodiff.interpreters.batching").vmap
        bring_to_front = load("autodiff.rules._helpers").bring_to_front
        size = batch_size_of(args, dims)
        moved = [bring_to_front(a, d, size) for a, d in zip(args, dims)]
        out = vmap(lambda *v: self.custom_vjp()(call, *v))(*moved)
        outs, tree = trees.flatten(out)
        call.out_tree = None if type(out) in _ONE else tree
        return tuple(outs), (0,) * len(outs)


# --- the same call through custom_vjp: closures over traced values, vmap ------------------------


def _call(call: _Call, *values: Any) -> Any:
    return call.fun(*call.filled(values), **call.kwargs)


def _fwd(call: _Call, *values: Any) -> tuple[Any, Any]:
    ans = _call(call, *values)
    return ans, (ans, values)


def _bwd(call: _Call, res: Any, g: Any) -> tuple:
    ans, values = res
    full = call.filled(values)
    return tuple(call.vjps[i](ans, *full, **call.kwargs)(g) for i in call.diff)


# --- autograd.extend ---------------------------------------------------------------------------


def primitive(fun: Callable) -> Callable:
    """autograd.extend.primitive: ``fun`` gets its derivatives from ``defvjp`` (and
    ``defjvp``) instead of from its body; arguments that are not arrays or floats (functions,
    integers, containers) are passed through undifferentiated.

    >>> import autodiff.numpy as anp
    >>> from autodiff.compat import autograd
    >>> @primitive
    ... def softplus(x):
    ...     return anp.logaddexp(0.0, x)
    >>> defvjp(softplus, lambda ans, x: lambda g: g / (1 + anp.exp(-x)))
    >>> float(autograd.grad(softplus)(0.0))
    0.5
    """
    vjps: dict[int, Callable] = {}
    made = _Primitive(fun)

    @functools.wraps(fun)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not _traced(args, kwargs):  # (the call outside any transform: the function)
            return fun(*args, **kwargs)
        diff: list[int] = []
        fixed: list[Any] = []
        values: list[Any] = []
        for i, a in enumerate(args):
            if i in vjps and _is_value(a):
                diff.append(i)
                fixed.append(None)
                values.append(a)
            else:
                fixed.append(a)
        if not diff:
            return fun(*args, **kwargs)
        call = _Call(fun, vjps, tuple(diff), fixed, kwargs)
        # a traced value the function, its VJP makers or the other arguments reach
        if closed_over(fun, *[vjps[i] for i in diff], *fixed, *kwargs.values()):
            return made.custom_vjp()(call, *values)
        return _structured(call, made.primitive().bind(*values, call=call))

    wrapped.vjps = vjps  # type: ignore[attr-defined]
    wrapped.jvps = {}  # type: ignore[attr-defined]
    return wrapped


def defvjp(fun: Callable, *vjpmakers: Callable | None, argnums: Sequence[int] | None = None
           ) -> None:  # fmt: skip
    """autograd.extend.defvjp: ``vjpmaker(ans, *args, **kwargs)`` returns the function of
    ``g`` giving argument ``i``'s cotangent (None: no derivative there).  See
    ``primitive``'s example."""
    for i, maker in zip(range(len(vjpmakers)) if argnums is None else argnums, vjpmakers):
        if maker is not None:
            fun.vjps[i] = maker  # type: ignore[attr-defined]


def defjvp(fun: Callable, *jvpfuns: Callable | None, argnums: Sequence[int] | None = None
           ) -> None:  # fmt: skip
    """autograd.extend.defjvp: kept for completeness; the VJPs given by ``defvjp`` serve
    forward mode too (autodiff transposes them)."""
    for i, rule in zip(range(len(jvpfuns)) if argnums is None else argnums, jvpfuns):
        if rule is not None:
            fun.jvps[i] = rule  # type: ignore[attr-defined]


def notrace_primitive(fun: Callable) -> Callable:
    """autograd.extend.notrace_primitive: ``fun`` of plain values (no derivative)."""
    return lambda *args, **kwargs: fun(*stop_gradient(args), **kwargs)
