"""Random draws that know about ``vmap``'s randomness modes (behind ``anp.random``).

The functions here draw from a ``numpy.random.Generator`` passed explicitly, like
``rng.normal``.  Outside ``vmap`` it is a plain draw.  Inside, every live
``vmap`` decides by its ``randomness`` argument:

- ``"error"`` (the default): the call raises, naming the vmap;
- ``"different"``: each example gets its own draws.  One draw is made with that
  vmap's batch size prepended and batched along it; for one random call per
  example this is exactly what a Python loop over the batch drawing in order
  gives (a ``Generator`` fills arrays in C order).  With several random calls
  per example the draws are still independent per example, but they come from
  the stream in a different order than a loop's;
- ``"same"``: one draw, shared by the whole batch.

Nested vmaps combine: the sizes of the ``"different"`` ones are prepended,
outermost first (outer and inner ``"different"`` equals a double loop drawing
in order), ``"same"`` ones add no axis, and any ``"error"`` one raises.

Parameters (``loc``, ``scale``, ``low``, ``high``, ``p``) may be traced values:
the result is then ``loc + scale * z`` for a standard draw ``z`` (a constant),
so derivatives flow to the parameters (the reparameterisation trick).

A draw is a primitive (``RandomPrimitive``, one per function: ``random_normal``, ...)
whose operand is its source of randomness: the ``Generator``, or ``GLOBAL_STATE`` for
NumPy's legacy global functions.  Under ``jit`` it is an equation of the graph that
draws at every replay (the Generator being an argument, or a constant of the graph:
its state advances either way), never a constant; graph passes never drop, merge or
precompute it.  Its ``bind`` applies the vmaps above the innermost staging, so a
staged draw that is batched later (``vmap(jit(f))``) follows that vmap's
``randomness`` like an eager one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from autodiff.core.primitive import Primitive
from autodiff.core.stack import check_live, current_interpreters
from autodiff.core.tracer import Tracer
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.rules.elementwise import add, less, multiply, subtract

if TYPE_CHECKING:
    from autodiff.interpreters.batching import BatchInterpreter

__all__ = [
    "GLOBAL_STATE",
    "RandomPrimitive",
    "VmappedGenerator",
    "bernoulli",
    "draw",
    "normal",
    "uniform",
]

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def _is_staged_generator(rng: Any) -> bool:
    if not isinstance(rng, Tracer):
        return False
    from autodiff.core.graph import OpaqueAval  # (staging's: loaded with it)
    from autodiff.interpreters.staging import StagedTensor  # (FIRST_USE: tests/test_layers.py)

    aval = getattr(rng, "aval", None) if isinstance(rng, StagedTensor) else None
    return isinstance(aval, OpaqueAval) and issubclass(aval.type, np.random.Generator)


def _check_rng(name: str, rng: Any) -> None:
    if not isinstance(rng, np.random.Generator) and not _is_staged_generator(rng):
        raise TransformTypeError(
            f"anp.random.{name}(rng, ...): rng must be a numpy.random.Generator, got "
            f"{type(rng).__name__} {rng!r:.40}. Create one with "
            f"np.random.default_rng(seed) and pass it as the first argument."
        )


def _check_shape(name: str, shape: Any) -> tuple[int, ...]:
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    if not isinstance(dims, (tuple, list)) or not all(
        isinstance(n, (int, np.integer)) and not isinstance(n, (bool, np.bool_)) for n in dims
    ):
        raise TransformTypeError(
            f"anp.random.{name}(..., shape={shape!r:.60}): shape must be a tuple of ints "
            f"such as (3,) or (2, 3) (or one int)."
        )
    if any(n < 0 for n in dims):
        raise TransformValueError(
            f"anp.random.{name}(..., shape={shape!r:.60}): dimensions must be non-negative."
        )
    return tuple(int(n) for n in dims)


def _check_dtype(name: str, dtype: Any) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError:
        dt = None
    if dt not in _FLOATS:
        raise TransformTypeError(
            f"anp.random.{name}(..., dtype={dtype!r:.40}): dtype must be np.float32 or np.float64."
        )
    return dt


def _param(name: str, what: str, x: Any, dtype: np.dtype | None) -> Any:
    """``x`` checked to be real; a plain one as an array of ``dtype`` (None: as is)."""
    given = type(x).__name__
    if isinstance(x, Tracer):
        check_live(x)
        kind = np.dtype(x.dtype).kind
    else:
        try:
            arr = np.asarray(x)
        except Exception:  # ragged lists and the like
            arr = np.asarray(None)
        kind = arr.dtype.kind
        x = arr
    if kind not in "biuf":
        raise TransformTypeError(
            f"anp.random.{name}(..., {what}=...): {what} must be a real number or an "
            f"array of them, got {given} of dtype kind {kind!r}."
        )
    return x if dtype is None or isinstance(x, Tracer) else x.astype(dtype)


def _shape_of(x: Any) -> tuple[int, ...]:
    return tuple(x.shape)  # logical for tracers


def _event_shape(name: str, shape: tuple[int, ...], **params: Any) -> tuple[int, ...]:
    """``shape`` broadcast with the parameters' logical shapes: the shape of one draw."""
    try:
        return np.broadcast_shapes(shape, *(_shape_of(p) for p in params.values()))
    except ValueError:
        listing = ", ".join(f"{k} has shape {_shape_of(v)}" for k, v in params.items())
        raise TransformValueError(
            f"anp.random.{name}: shape {shape} does not broadcast with the parameters ({listing})."
        ) from None


def _check_concrete(name: str, what: str, x: Any, ok: Callable, rule: str) -> None:
    if not isinstance(x, Tracer) and not np.all(ok(x)):
        raise TransformValueError(f"anp.random.{name}(..., {what}=...): {what} must be {rule}.")


def _batch_levels(name: str) -> list[BatchInterpreter]:
    """The live vmaps that want their own draws (outermost first); raises for "error".
    Only the vmaps above the innermost staging count: the ones below it see the staged
    graph as one call, which they batch (again through this function)."""
    from autodiff.interpreters.batching import BatchInterpreter
    from autodiff.interpreters.staging import StagingInterpreter

    levels = []
    stack = current_interpreters()
    for k in range(len(stack) - 1, -1, -1):
        if isinstance(stack[k], StagingInterpreter):
            stack = stack[k + 1 :]
            break
    for interp in stack:
        if not isinstance(interp, BatchInterpreter):
            continue
        if interp.randomness == "error":
            raise TransformValueError(
                f"anp.random.{name} (or a Generator argument's {name}) inside "
                f"{interp.describe()} with randomness='error' (the default): pass "
                f'randomness="different" for a draw per example or randomness="same" for '
                f"one shared draw. vmap cannot tell which is meant."
            )
        if interp.randomness == "different":
            levels.append(interp)
    return levels


class VmappedGenerator(np.random.Generator):
    """A ``numpy.random.Generator`` argument of ``vmap``, as the function sees it: the
    same stream (the same bit generator), whose draws follow the vmap's ``randomness``
    like ``anp.random``'s, as a Generator argument of a jitted function does
    (``random.py`` gives it its draw methods).  A draw's source is the Generator it
    stands for: the primitive's implementation draws from that one."""

    def __init__(self, rng: np.random.Generator) -> None:
        super().__init__(rng.bit_generator)
        self._rng = rng

    def __repr__(self) -> str:
        return f"{self._rng!r} (under vmap: its draws follow randomness)"


def _drawn_from(source: Any) -> Any:
    return source._rng if isinstance(source, VmappedGenerator) else source


class _GlobalState:
    """NumPy's global random state (``np.random.seed``), as the source of a draw."""

    def __repr__(self) -> str:
        return "GLOBAL_STATE"


GLOBAL_STATE = _GlobalState()


class RandomPrimitive(Primitive):
    """A draw, ``sample(source, size)`` (see the module docstring)."""

    __slots__ = ()
    effectful = True

    def bind(self, source: Any, *, sample: Callable, size: tuple, dtype: Any) -> Any:
        if not current_interpreters():  # a plain draw: no vmap to batch it, no jit to stage it
            return Primitive.bind(self, source, sample=sample, size=size, dtype=dtype)
        # vmap's and jit's interpreters: loaded with those transforms, or here, the first
        # time a draw meets a transform (a program that draws data never needs them)
        from autodiff.interpreters.batching import BatchedTensor
        from autodiff.interpreters.staging import StagedTensor, innermost_staging

        levels = _batch_levels(self.name.removeprefix("random_"))
        size = (*(interp.size for interp in levels), *size)
        staging = innermost_staging()
        if staging is not None and not (type(source) is StagedTensor and source._interp is staging):
            source = staging.staged(source)  # drawn at replay, not now
        out = Primitive.bind(self, source, sample=sample, size=size, dtype=dtype)
        for interp in levels:  # outermost first: a tracer holds only lower levels' values
            out = BatchedTensor(interp, out, 0)
        return out


def _draw_shape(source, *, sample, size, dtype):
    from autodiff.core.graph import OpaqueAval, ShapedArray  # (staging's: loaded with it)

    if dtype is not None:
        return ShapedArray(size, dtype)
    # A Generator's other methods (integers, choice, ...): draw once from another
    # Generator for the dtype and shape (the staged one has no value yet).
    if isinstance(source, OpaqueAval) and issubclass(source.type, np.random.Generator):
        x = sample(np.random.default_rng(0), size)
        return ShapedArray(np.shape(x), np.result_type(x))
    # NumPy's legacy functions (randint, choice, ...): draw once for the dtype and shape,
    # from a copy of the state, so staging leaves the global state as it was.
    state = np.random.get_state()
    try:
        return ShapedArray(np.shape(x := sample(GLOBAL_STATE, size)), np.result_type(x))
    finally:
        np.random.set_state(state)


_primitives: dict[str, RandomPrimitive] = {}


def random_primitive(name: str) -> RandomPrimitive:
    """The primitive of draws of ``name`` (``"normal"``, ``"randint"``, ...)."""
    prim = _primitives.get(name)
    if prim is None:
        prim = _primitives[name] = RandomPrimitive(
            f"random_{name}",
            lambda source, *, sample, size, dtype: sample(_drawn_from(source), size),
            differentiable=False,
            shape=_draw_shape,
        )
    return prim


def draw(
    name: str,
    source: Any,
    sample: Callable[[Any, tuple[int, ...]], Any],
    shape: tuple[int, ...],
    dtype: Any = None,
) -> Any:
    """``sample(source, size)`` with ``size`` the "different" vmaps' sizes prepended to
    ``shape``, batched along them; ``dtype`` is the result's (None: found by drawing
    once from a copy of the state, when the draw is staged)."""
    return random_primitive(name).bind(source, sample=sample, size=tuple(shape), dtype=dtype)


def _standard_normal(rng: Any, size: tuple, dtype: Any) -> Any:
    return rng.standard_normal(size=size, dtype=dtype)


def _random(rng: Any, size: tuple, dtype: Any) -> Any:
    return rng.random(size=size, dtype=dtype)


def _sampler(method: Callable, dtype: Any) -> Callable:
    def sample(rng, size):
        return method(rng, size, dtype)

    sample.__name__ = sample.__qualname__ = method.__name__.lstrip("_")
    return sample


def _is(x: Any, value: float) -> bool:
    return not isinstance(x, Tracer) and np.ndim(x) == 0 and x == value


def normal(
    rng: np.random.Generator,
    shape: Any = (),
    loc: Any = 0.0,
    scale: Any = 1.0,
    dtype: Any = np.float64,
) -> Any:
    """Normal draws: ``loc + scale * rng.standard_normal(size, dtype=dtype)``.

    ``size`` is ``shape`` broadcast with the shapes of ``loc`` and ``scale``.
    ``loc`` and ``scale`` may be traced: derivatives flow to them (``z`` is a
    constant).  Under ``vmap(..., randomness="different")`` each example gets
    its own draws; for one random call per example they equal a Python loop over
    the batch drawing in order (with several calls, independent per example but
    in a different order than a loop's).  ``"same"``: one draw for the batch.
    Plain parameters are cast to ``dtype``; traced ones follow NumPy promotion.

    >>> import numpy as np
    >>> import autodiff.numpy as anp
    >>> from autodiff import vmap
    >>> rng, loop = np.random.default_rng(0), np.random.default_rng(0)
    >>> out = vmap(lambda x: x + anp.random.normal(rng, (3,)), randomness="different")(
    ...     np.zeros((4, 3)))
    >>> bool(np.all(out == np.stack([loop.normal(size=3) for _ in range(4)])))
    True
    """
    _check_rng("normal", rng)
    shape = _check_shape("normal", shape)
    dtype = _check_dtype("normal", dtype)
    loc = _param("normal", "loc", loc, dtype)
    scale = _param("normal", "scale", scale, dtype)
    _check_concrete("normal", "scale", scale, lambda s: s >= 0, "non-negative")
    size = _event_shape("normal", shape, loc=loc, scale=scale)
    z = draw("normal", rng, _sampler(_standard_normal, dtype), size, dtype)
    if _is(loc, 0.0) and _is(scale, 1.0):
        return z
    return add(loc, multiply(scale, z))


def uniform(
    rng: np.random.Generator,
    shape: Any = (),
    low: Any = 0.0,
    high: Any = 1.0,
    dtype: Any = np.float64,
) -> Any:
    """Uniform draws on ``[low, high)``: ``low + (high - low) * rng.random(size, dtype)``.

    ``size`` is ``shape`` broadcast with the shapes of ``low`` and ``high``;
    ``low`` and ``high`` may be traced (derivatives flow to them).  ``vmap``
    modes as for :func:`normal`: ``"different"`` equals a Python loop drawing in
    order for one random call per example; ``"same"`` shares one draw.

    >>> import numpy as np
    >>> import autodiff.numpy as anp
    >>> from autodiff import vmap
    >>> rng, loop = np.random.default_rng(0), np.random.default_rng(0)
    >>> out = vmap(lambda x: anp.random.uniform(rng, (2,)) + x, randomness="same")(np.zeros(3))
    >>> bool(np.all(out == loop.random(2)))
    True
    """
    _check_rng("uniform", rng)
    shape = _check_shape("uniform", shape)
    dtype = _check_dtype("uniform", dtype)
    low = _param("uniform", "low", low, dtype)
    high = _param("uniform", "high", high, dtype)
    size = _event_shape("uniform", shape, low=low, high=high)
    u = draw("uniform", rng, _sampler(_random, dtype), size, dtype)
    if _is(low, 0.0) and _is(high, 1.0):
        return u
    return add(low, multiply(subtract(high, low), u))


def bernoulli(rng: np.random.Generator, p: Any = 0.5, shape: Any = None) -> Any:
    """Boolean draws that are True with probability ``p``: ``rng.random(size) < p``.

    ``size`` is ``shape`` (default: ``p``'s logical shape) broadcast with
    ``p``'s shape.  ``p`` may be traced (e.g. batched); the result is not
    differentiable.  ``vmap`` modes as for :func:`normal`: ``"different"``
    equals a Python loop drawing in order for one random call per example.

    >>> import numpy as np
    >>> import autodiff.numpy as anp
    >>> rng, loop = np.random.default_rng(0), np.random.default_rng(0)
    >>> draws = anp.random.bernoulli(rng, np.array([0.0, 0.5, 1.0]))
    >>> draws.dtype, bool(np.all(draws == (loop.random(3) < [0.0, 0.5, 1.0])))
    (dtype('bool'), True)
    """
    _check_rng("bernoulli", rng)
    shape = () if shape is None else _check_shape("bernoulli", shape)
    p = _param("bernoulli", "p", p, None)
    _check_concrete("bernoulli", "p", p, lambda q: (q >= 0) & (q <= 1), "in [0, 1]")
    size = _event_shape("bernoulli", shape, p=p)
    u = draw("bernoulli", rng, _sampler(_random, np.float64), size, np.float64)
    return less(u, p)
