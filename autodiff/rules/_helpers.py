"""The rule-writing kit: elementwise families, broadcasting, batch axes, backends.

Rule modules declare primitives through these helpers so that each primitive
is one short, table-like block.  Everything here is written with primitives,
so the helpers are differentiable and batchable themselves.  Questions about
arrays that need no primitive (``shape_of``, ``dtype_of``, ``array_like``...)
are answered below the rules, in ``core/arrays.py``.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from autodiff.core.arrays import (
    array_library,
    backend_error,
    broadcast_shapes,
    dtype_of,
    ndim_of,
    shape_of,
)
from autodiff.core.loading import RuleKit
from autodiff.core.lowering import Elementwise
from autodiff.core.overrides import register_numpy
from autodiff.core.primitive import Primitive
from autodiff.core.rule_forms import jvp_taylor, linear_taylor
from autodiff.core.tracer import Tracer
from autodiff.errors import ConcretizationError

if TYPE_CHECKING:
    from autodiff.core.graph import ShapedArray

__all__ = [
    "bring_to_front",
    "broadcasting",
    "elementwise_shape",
    "evaluated_shape",
    "example_dtype",
    "implements",
    "known_values",
    "move_to_front",
    "numpy_impl",
    "shaped_like",
    "sparsity_kit",
    "taylor_kit",
    "to_front_padded",
    "unary",
    "unbroadcast",
]

# The rule-writing kits of sparsity detection (rules/_sparsity.py, with core/index_sets.py)
# and Taylor mode (rules/_taylor.py), which a plain grad program never runs: a rule made
# with one (``sparsity_kit.moves(impl)``) is made, and the kit imported, at its first call
# (core/loading.py).  Shape rules, which only staging (jit, sparsity detection) runs,
# likewise import the staging graph's ShapedArray (core/graph.py) in their bodies.
sparsity_kit = RuleKit("autodiff.rules._sparsity")
taylor_kit = RuleKit("autodiff.rules._taylor")


@functools.cache
def _dask_lacks(func: Callable) -> bool:
    """Whether Dask lacks NumPy function ``func``: Dask would compute its operands into
    NumPy arrays instead (with a FutureWarning).  Looked up the way Dask's
    ``__array_function__`` looks it up: the same name in the same submodule of dask.array."""
    import dask.array  # optional: only asked for Dask's arrays, which imported it already

    module: Any = dask.array
    for submodule in func.__module__.split(".")[1:]:  # numpy.linalg -> dask.array.linalg
        module = getattr(module, submodule, None)
        if module is None:
            return True
    found = getattr(module, func.__name__, None)
    return found is None or found is func


def numpy_impl(func: Callable, impl: Callable | None = None) -> Callable:
    """A primitive's implementation that applies NumPy function ``func`` to its first
    argument (through ``impl``, by default ``func`` itself).  NumPy arrays go straight
    through; for another library's arrays a missing ``func`` (which Dask would silently
    replace by computing into NumPy) or one that rejects NumPy's keywords raises
    ``UnsupportedFunctionError`` naming the function and the library."""
    call = func if impl is None else impl
    name = f"{func.__module__}.{func.__name__}"

    def checked(x, *args, **params):
        if type(x) is np.ndarray:
            return call(x, *args, **params)
        library = array_library(x)
        if library is None:
            return call(x, *args, **params)
        if library == "dask" and _dask_lacks(func):
            raise backend_error(name, x)
        try:
            return call(x, *args, **params)
        except TypeError as e:  # e.g. Dask's cholesky(a, lower=False) has no upper=
            raise backend_error(name, x, f" with NumPy's signature ({e})") from e

    return functools.update_wrapper(checked, call)


def unbroadcast(x: Any, shape: tuple[int, ...]) -> Any:
    """Sum ``x`` down to ``shape``: the VJP of broadcasting to ``x``'s shape.

    >>> import numpy as np
    >>> unbroadcast(np.ones((4, 2, 3)), (1, 3))
    array([[8., 8., 8.]])
    """
    x_shape = shape_of(x)
    if x_shape == tuple(shape):
        return x
    lead = len(x_shape) - len(shape)
    if lead:
        x = _red.sum(x, axis=tuple(range(lead)))
    kept = tuple(i for i, n in enumerate(shape) if n == 1 and x_shape[lead + i] != 1)
    if kept:
        x = _red.sum(x, axis=kept, keepdims=True)
    return x


def move_to_front(x: Any, bdim: int) -> Any:
    """``x`` with its batch axis ``bdim`` moved to the front (axis 0).

    >>> import numpy as np
    >>> move_to_front(np.zeros((2, 3)), 1).shape
    (3, 2)
    """
    return x if bdim == 0 else _comp.moveaxis(x, bdim, 0)


def to_front_padded(x: Any, bdim: int, pad: int) -> Any:
    """Batch axis first, then ``pad`` new unit axes, so ``x`` broadcasts per example.

    >>> import numpy as np
    >>> to_front_padded(np.zeros(3), 0, 2).shape
    (3, 1, 1)
    """
    x = move_to_front(x, bdim)
    return _shp.expand_dims(x, tuple(range(1, 1 + pad))) if pad else x


def bring_to_front(x: Any, bdim: int | None, size: int) -> Any:
    """``x`` with its batch axis first; an unbatched ``x`` is broadcast to ``size``.

    >>> import numpy as np
    >>> bring_to_front(np.zeros((2, 4)), 1, 4).shape, bring_to_front(np.zeros(2), None, 4).shape
    ((4, 2), (4, 2))
    """
    if bdim is None:
        return _shp.broadcast_to(_shp.expand_dims(x, 0), (size, *shape_of(x)))
    return move_to_front(x, bdim)


def implements(prim: Primitive, *numpy_funcs: Any) -> Callable[[Callable], Callable]:
    """Decorator for the public function that binds ``prim``: it records the
    primitive on the function and routes ``numpy_funcs`` on traced values to it.

    >>> import numpy as np
    >>> from autodiff import grad
    >>> square_p = Primitive("my_square", np.square, vjp=[lambda ct, ans, x: 2 * x * ct])
    >>> @implements(square_p)  # then NumPy functions to route here, e.g. np.square
    ... def square(x):
    ...     return square_p.bind(x)
    >>> square.primitive is square_p, float(grad(square)(3.0))
    (True, 6.0)
    """

    def decorate(fn: Callable) -> Callable:
        fn.primitive = prim  # type: ignore[attr-defined]
        return register_numpy(*numpy_funcs)(fn)

    return decorate


def known_values(x: Any) -> np.ndarray | None:
    """``x``'s values as a NumPy array where reading them is free: NumPy arrays and
    Python numbers, also inside ``grad`` and ``jvp`` (their traced values hold them).
    None under ``vmap`` (the values differ across the batch) and for other array
    libraries (reading would compute a Dask graph or wait for a device): what a rule or
    composition may check an argument against, or pick a cheaper path by."""
    if isinstance(x, Tracer):
        try:
            x = x._concrete_value("reading values")
        except ConcretizationError:
            return None
    if isinstance(x, (np.ndarray, np.generic, int, float, bool)):
        return np.asarray(x)
    return None


# --- elementwise families ----------------------------------------------------------


def _broadcasting_batch(prim: Primitive) -> Callable:
    def batch(args, dims, **params):
        ndims = [ndim_of(a) - (d is not None) for a, d in zip(args, dims)]
        out_ndim = max(ndims)
        bdims = {d for d in dims if d is not None}
        if len(bdims) == 1:
            # Fast path: one shared batch axis that no unbatched operand reaches.
            (bdim,) = bdims
            if all(
                nd == out_ndim if d is not None else nd <= out_ndim - bdim
                for nd, d in zip(ndims, dims)
            ):
                return prim.bind(*args, **params), bdim
        moved = [
            a if d is None else to_front_padded(a, d, out_ndim - nd)
            for a, d, nd in zip(args, dims, ndims)
        ]
        return prim.bind(*moved, **params), 0

    return batch


def _scalar_example(aval: Any) -> Any:
    """A 0-d stand-in with ``aval``'s dtype: a Python scalar for a weak type (so it
    promotes like one), else a NumPy scalar."""
    if aval.weak_type:
        return {"f": 0.0, "c": 0j, "b": False}.get(aval.dtype.kind, 0)
    return np.zeros((), aval.dtype)


def elementwise_shape(prim: Primitive) -> Callable:
    """The shape rule of an elementwise primitive: the arguments' shapes broadcast,
    the dtype NumPy gives on 0-d examples of the arguments' dtypes (so weak Python
    scalars promote as they do at run time); one 0-d evaluation per dtype signature.
    The result is never weak: a NumPy function returns a NumPy value."""
    return _ElementwiseShape(prim)


class _ElementwiseShape:
    """``elementwise_shape``'s rule, with its cache of dtypes by dtype signature (made at
    the first call: only staging calls a shape rule).  (An object, not a closure over
    ``prim`` and the cache: one object per primitive instead of four, which the collector
    walks and a program's shutdown frees.)"""

    __slots__ = ("dtypes", "prim")

    def __init__(self, prim: Primitive) -> None:
        self.prim = prim
        self.dtypes: dict | None = None

    def __call__(self, *avals, **params):
        dtypes = self.dtypes
        if dtypes is None:
            dtypes = self.dtypes = {}
        key: Any = [(a.dtype, a.weak_type) for a in avals]
        if params:
            key.append(tuple(params.items()))
        key = tuple(key)
        try:
            dtype = dtypes.get(key)
        except TypeError:  # unhashable parameters: no cache
            key, dtype = None, None
        if dtype is None:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                example = self.prim.impl(*map(_scalar_example, avals), **params)
            dtype = dtype_of(example)
            if key is not None:
                dtypes[key] = dtype
        from autodiff.core.graph import ShapedArray  # staging's (see sparsity_kit above)

        return ShapedArray(broadcast_shapes(*(a.shape for a in avals)), dtype)


_examples: dict = {}


def example_dtype(fn: Any, *dtypes: np.dtype, ndim: int = 1, **params: Any) -> np.dtype:
    """The dtype of ``fn`` on one-element arrays (of ``ndim`` axes) of ``dtypes``, cached:
    for a shape rule where the dtype is NumPy's business (a sum of int8, an FFT of float32).

    >>> example_dtype(np.sum, np.dtype(np.int8), axis=0)
    dtype('int64')
    """
    key = (fn, dtypes, ndim, tuple(params.items()))
    found = _examples.get(key)
    if found is None:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*(np.ones((1,) * ndim, d) for d in dtypes), **params)
        found = _examples[key] = np.result_type(out)
    return found


def shaped_like(x: Any, shape: Any = None, dtype: Any = None) -> ShapedArray:
    """A shape rule's result: abstract value ``x`` with its shape or dtype replaced."""
    from autodiff.core.graph import ShapedArray  # staging's (see sparsity_kit above)

    return ShapedArray(x.shape if shape is None else shape, x.dtype if dtype is None else dtype)


def evaluated_shape(prim: Primitive) -> Callable:
    """A shape rule that runs ``prim``'s implementation on placeholders (read-only
    zero-strided views: indexing them costs nothing), letting its errors (an index out of
    range) through as they are."""

    def rule(*avals, **params):
        args = [
            {"f": 0.0, "c": 0j}.get(a.dtype.kind, 0)
            if a.weak_type
            else np.broadcast_to(np.zeros((), a.dtype), a.shape)
            for a in avals
        ]
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = prim.impl(*args, **params)
        from autodiff.core.graph import ShapedArray  # staging's (see sparsity_kit above)

        if prim.multiple_results:
            return tuple(ShapedArray(np.shape(o), np.result_type(o)) for o in out)
        return ShapedArray(np.shape(out), np.result_type(out))

    return rule


def ufunc_lowering(impl: Callable) -> Elementwise | None:
    """The lowering ``unary`` and ``broadcasting`` give a primitive whose implementation
    is one of NumPy's ufuncs: that ufunc on each element, in every dtype (compiled code
    computes it as NumPy's own loop does, ``compiler/llvm_fusion.py``)."""
    if isinstance(impl, np.ufunc) and impl.nout == 1 and getattr(np, impl.__name__, None) is impl:
        return Elementwise(impl, kinds="fbiu")
    return None


def _unbroadcast_vjp(rule: Callable, argnum: int) -> Callable:
    def vjp(ct, ans, *args, **params):
        out = rule(ct, ans, *args, **params)
        shape = getattr(args[argnum], "shape", None)
        if shape is not None and getattr(out, "shape", None) == shape:
            return out  # the common case: no broadcasting happened
        return unbroadcast(out, shape_of(args[argnum]))

    return vjp


def _broadcast_jvp(rule: Callable) -> Callable:
    def jvp(t, ans, *args, **params):
        out = rule(t, ans, *args, **params)
        shape = shape_of(ans)
        return out if shape_of(out) == shape else _shp.broadcast_to(out, shape)

    return jvp


def _public(
    prim: Primitive,
    nargs: int,
    numpy_funcs: Sequence[Any],
    doc: str,
    otherwise: Callable | None = None,
) -> Callable:
    # With no tracer in the arguments the NumPy implementation is called
    # directly: no transform active means no tracer work at all.  Lists and tuples
    # (array_likes, which may hold traced values) become arrays first, as NumPy's
    # ufuncs take them: beside a tracer, checked; alone, the implementation is tried
    # first (NumPy takes a list of numbers), and converts them where it cannot (one
    # holding traced values raises ConcretizationError as NumPy converts it).
    bind, impl = prim.bind, prim.impl
    fn: Callable[..., Any]
    if nargs == 1:

        def fn(x, /):  # type: ignore[misc]
            if isinstance(x, Tracer):
                return bind(x)
            try:
                return impl(x)
            except (ConcretizationError, TypeError):
                if x.__class__ not in _SEQUENCES:
                    raise
            x = _as_array(x)
            return bind(x) if isinstance(x, Tracer) else impl(x)
    elif nargs == 2:

        def fn(x1, x2, /):  # type: ignore[misc]
            if isinstance(x1, Tracer):  # (the hot path: one check of the other argument)
                return bind(x1, _as_array(x2) if type(x2) in _SEQUENCES else x2)
            if isinstance(x2, Tracer):
                return bind(_as_array(x1) if type(x1) in _SEQUENCES else x1, x2)
            try:
                return impl(x1, x2)
            except (ConcretizationError, TypeError):
                if x1.__class__ not in _SEQUENCES and x2.__class__ not in _SEQUENCES:
                    raise
            x1, x2 = _as_array(x1), _as_array(x2)
            if isinstance(x1, Tracer) or isinstance(x2, Tracer):
                return bind(x1, x2)
            return impl(x1, x2)
    else:

        def fn(*args):  # type: ignore[misc]
            if len(args) != nargs:
                if otherwise is not None:
                    return otherwise(*args)
                raise TypeError(f"{prim.name}() takes {nargs} arguments ({len(args)} given)")
            return bind(*map(_as_array, args))

    fn.__name__ = fn.__qualname__ = prim.name
    fn.__doc__ = doc
    fn.primitive = prim  # type: ignore[attr-defined,union-attr]
    fn.takes_array_likes = True  # type: ignore[attr-defined,union-attr]
    if nargs == 2:  # ufunc.outer(a, b): every pair, a's axes first
        for ufunc in numpy_funcs:
            register_numpy((ufunc, "outer"))(lambda a, b, fn=fn: fn(_outer_left(a, b), b))
    return register_numpy(*numpy_funcs)(fn)


_SEQUENCES = frozenset((list, tuple))


def _as_array(x: Any) -> Any:
    """A list or tuple (which may hold traced values) as an array; else ``x``."""
    return _comp.asarray(x) if x.__class__ in _SEQUENCES else x


def _outer_left(a: Any, b: Any) -> Any:
    n = ndim_of(b)
    return _shp.expand_dims(a, tuple(range(ndim_of(a), ndim_of(a) + n))) if n else a


def _doc(name: str, numpy_funcs: Sequence[Any], differentiable: bool) -> str:
    like = f"numpy.{numpy_funcs[0].__name__}" if numpy_funcs else name
    how = (
        "Differentiable (grad, vjp, jvp) and batchable (vmap)."
        if differentiable
        else "Not differentiable (its output carries no derivative); batchable (vmap)."
    )
    return f"Elementwise {name}, like {like}, with broadcasting. {how}"


def broadcasting(
    name: str,
    impl: Callable,
    *derivs: Callable | None,
    nargs: int | None = None,
    numpy: Sequence[Any] = (),
    differentiable: bool = True,
    reads: Sequence[Sequence[int | str]] | None = None,
    pairs: Sequence[tuple[int, int]] | None = None,
    otherwise: Callable | None = None,
) -> tuple[Primitive, Callable]:
    """Declare an elementwise primitive of several arguments, with broadcasting.

    ``derivs`` has one entry per argument: ``deriv(g, ans, *args)`` maps a
    per-element perturbation ``g`` of that argument to the output's (``None``
    for an argument with no derivative).  An elementwise Jacobian is diagonal,
    so the same map serves as JVP (broadcast up to the output) and as VJP
    (summed back down to the argument's shape).  ``reads`` is the primitive's
    ``vjp_reads`` (what each argument's ``deriv`` reads, for a lean tape).
    ``pairs`` says which arguments interact non-linearly, for Hessian sparsity
    (``[(0, 1)]`` for ``multiply``, ``()`` for ``add``; None, the default: every pair);
    with ``pairs=()`` the function is (piecewise) linear and Taylor mode maps each
    coefficient through its JVP, else it derives the coefficients from it (a block
    declares a recurrence where there is one: ``rules/_taylor.py``).  ``otherwise``
    answers a call with another number of arguments (``where(c)``: NumPy's ``nonzero``).
    Returns the primitive and its public function: ``hypot_p, hypot = broadcasting(...)``.

    >>> import numpy as np
    >>> from autodiff import grad
    >>> hypot_p, hypot = broadcasting(
    ...     "my_hypot", np.hypot, lambda g, ans, x, y: g * x / ans, lambda g, ans, x, y: g * y / ans
    ... )
    >>> [float(d) for d in grad(hypot, argnums=(0, 1))(3.0, 4.0)]
    [0.6, 0.8]
    """
    nargs = nargs or len(derivs)
    prim = Primitive(name, impl, differentiable=differentiable, vjp_reads=reads)
    if differentiable:
        prim.def_vjp([d and _unbroadcast_vjp(d, i) for i, d in enumerate(derivs)])
        prim.def_jvp([d and _broadcast_jvp(d) for d in derivs])
        taylor = linear_taylor(prim) if pairs == () else jvp_taylor(prim)
        taylor.elementwise = pairs != ()  # type: ignore[attr-defined]  # (collapsed Taylor mode)
        prim.def_taylor(taylor)
    prim.def_batch(_broadcasting_batch(prim))
    prim.def_shape(elementwise_shape(prim))
    prim.def_lowering(ufunc_lowering(impl))
    prim.def_sparsity(
        sparsity_kit.elementwise(
            [d is not None for d in derivs] + [False] * (nargs - len(derivs)), pairs
        )
    )
    return prim, _public(prim, nargs, numpy, _doc(name, numpy, differentiable), otherwise)


def unary(
    name: str,
    impl: Callable,
    deriv: Callable | None = None,
    *,
    vjp: Callable | None = None,
    numpy: Sequence[Any] = (),
    differentiable: bool = True,
    reads: Sequence[int | str] | None = None,
    linear: bool = False,
) -> tuple[Primitive, Callable]:
    """Declare an elementwise primitive of one argument.

    ``deriv(g, ans, x)`` maps a perturbation ``g`` of ``x`` to the output's; it
    serves as the JVP and, unless ``vjp(ct, ans, x)`` is given, as the VJP
    (a separate VJP is needed only where real and complex values meet: the
    JVP of ``real`` is ``real(t)`` but its VJP makes ``ct`` complex).
    ``reads`` says what the VJP reads: ``(0,)`` for ``x``, ``("ans",)``, both,
    or ``()`` (see ``Primitive``'s ``vjp_reads``).  ``linear=True``: its second
    derivative is zero (``negative``, ``real``; also piecewise, ``abs``), which Hessian
    sparsity and Taylor mode use (each coefficient mapped by the JVP); otherwise Taylor
    mode derives the coefficients from ``deriv`` unless the block declares a recurrence
    (``rules/_taylor.py``).  Returns the primitive and its public function:
    ``cosh_p, cosh = unary(...)``.

    >>> import numpy as np
    >>> from autodiff import grad, vmap
    >>> cube_p, cube = unary("my_cube", lambda x: x**3, lambda g, ans, x: 3 * x**2 * g)
    >>> float(grad(cube)(2.0)), vmap(grad(cube))(np.array([0.0, 1.0]))
    (12.0, array([0., 3.]))
    """
    prim = Primitive(
        name, impl, differentiable=differentiable, vjp_reads=None if reads is None else [reads]
    )
    if differentiable:
        prim.def_vjp([vjp or deriv])
        prim.def_jvp([deriv])
        taylor = linear_taylor(prim) if linear else jvp_taylor(prim)
        taylor.elementwise = True  # type: ignore[attr-defined]  # (collapsed Taylor mode)
        prim.def_taylor(taylor)
    prim.def_batch(lambda args, dims, **params: (prim.bind(*args, **params), dims[0]))
    prim.def_shape(elementwise_shape(prim))
    prim.def_lowering(ufunc_lowering(impl))
    prim.def_sparsity(sparsity_kit.elementwise([True], () if linear else None))
    return prim, _public(prim, 1, numpy, _doc(name, numpy, differentiable))


# The structural primitives these helpers call are declared with the helpers'
# own utilities, so they are imported last (a cycle that is safe because
# neither side uses the other before both modules are complete).
from autodiff.rules import compositions as _comp  # noqa: E402
from autodiff.rules import reductions as _red  # noqa: E402
from autodiff.rules import shape as _shp  # noqa: E402
