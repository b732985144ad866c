"""``autodiff.numpy.random``: ``numpy.random``, with draws that know about ``vmap``.

Every public name of ``numpy.random`` exists.  Two ways to draw:

- **From an explicit Generator** (reproducible; the recommended way):
  ``anp.random.normal(rng, shape, loc, scale)``, ``uniform(rng, shape, low, high)``,
  ``bernoulli(rng, p, shape)``.  Traced parameters are differentiable (the draw is
  ``loc + scale * z`` for a constant standard draw ``z``).
- **NumPy's legacy global functions**, as a NumPy program calls them:
  ``anp.random.normal(loc, scale, size)``, ``randn(3)``, ``rand``, ``gamma``,
  ``choice``, ... .  ``normal`` and ``uniform`` take traced parameters here too;
  the others raise ``UnsupportedFunctionError`` on them.

Inside ``vmap`` every draw follows that vmap's ``randomness``: ``"error"`` (the
default) raises, ``"same"`` draws once for the whole batch, ``"different"`` gives
each example its own draws (for one random call per example exactly what a Python
loop over the batch draws, in order).  So do the draws of a ``numpy.random.Generator``
passed to the vmapped function as an argument (``rng.normal(...)``, with ``in_dims=None``
for it).  ``seed``, ``get_state``, ``default_rng``, ``Generator`` and the bit generators
are NumPy's own.

**NumPy's own draws that vmap does not see draw once for the whole batch**: a Generator
the function closes over (``rng.normal()``) and ``np.random.normal()`` give every
example the same value, whatever ``randomness`` says.  Under ``randomness="error"``
vmap checks after the call that the generators the function closes over or names (and
NumPy's global functions its code names) did not draw, and raises if they did; a
generator reached only through another object's attributes or another module's
function is not seen.  Write ``anp.random.normal(...)`` for NumPy's global functions,
and pass a Generator as an argument.

>>> import numpy as np, autodiff.numpy as anp
>>> from autodiff import vmap
>>> np.random.seed(0)
>>> out = vmap(lambda x: x + anp.random.randn(2), randomness="different")(np.zeros((3, 2)))
>>> np.random.seed(0)
>>> bool(np.all(out == np.stack([np.random.randn(2) for _ in range(3)])))
True
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.core import trees
from autodiff.core.loading import load
from autodiff.core.stack import current_interpreters
from autodiff.core.tracer import Tracer
from autodiff.errors import UnsupportedFunctionError
from autodiff.numpy._borrow import borrow as _borrow
from autodiff.rules.elementwise import add, multiply, subtract

# Legacy functions that keep NumPy's global state, draw nothing, or make generators.
_NOT_DRAWS = {
    "seed", "get_state", "set_state", "default_rng", "Generator", "RandomState",
    "SeedSequence", "BitGenerator", "MT19937", "Philox", "PCG64", "PCG64DXSM", "SFC64",
    "normal", "uniform",
}  # fmt: skip


def _kit() -> Any:
    """``_draws.py``, the draws as primitives: loaded at the first draw that meets a
    transform (or takes a Generator); a draw outside any transform is NumPy's call."""
    return load("autodiff.numpy._draws")


def _has_tracer(args: tuple, kwargs: dict) -> bool:
    leaves = trees.leaves(args) + (trees.leaves(kwargs) if kwargs else [])
    return any(isinstance(leaf, Tracer) for leaf in leaves)


def _looped(draw: Any, args: tuple, kwargs: dict, sizes: tuple[int, ...]) -> Any:
    """``prod(sizes)`` calls of ``draw`` in order, stacked with ``sizes`` in front."""
    if not sizes:  # no vmap wants its own draws: exactly NumPy's call
        return draw(*args, **kwargs)
    n = math.prod(sizes)
    first = np.asarray(draw(*args, **kwargs))
    if n == 0:
        return np.empty((0, *first.shape), first.dtype)
    out = np.stack([first] + [np.asarray(draw(*args, **kwargs)) for _ in range(n - 1)])
    return out.reshape(sizes + first.shape)


def _legacy(name: str) -> Any:
    draw = getattr(np.random, name)

    def legacy(*args, **kwargs):
        if _has_tracer(args, kwargs):
            raise UnsupportedFunctionError(
                f"anp.random.{name}: the parameters are traced values, which NumPy's "
                f"{name} cannot take. Draws with differentiable parameters: "
                f"anp.random.normal and anp.random.uniform (loc + scale * z), or build "
                f"the draw from a standard one yourself."
            )

        if not current_interpreters():  # no vmap to batch it, no jit to stage it
            return draw(*args, **kwargs)

        # Under vmap the batch axes of "different" vmaps come first; one call per example.
        def sample(_state, sizes):
            return _looped(draw, args, kwargs, sizes)

        sample.__name__ = sample.__qualname__ = name
        return _kit().draw(name, _kit().GLOBAL_STATE, sample, ())

    # functools.wraps' attributes (it costs ~3x this, for 45 of them at import): NumPy's
    # module too, where its docstring's examples run (not this module's doctests)
    legacy.__name__ = legacy.__qualname__ = name
    legacy.__module__, legacy.__wrapped__ = draw.__module__, draw  # type: ignore[attr-defined]
    legacy.__doc__ = (
        f"NumPy's legacy ``numpy.random.{name}``; inside ``vmap`` it follows the vmap's "
        f"``randomness`` (see ``autodiff.numpy.random``).\n\n" + (draw.__doc__ or "")
    )
    return legacy


def _global_draw(name: str, size: Any, standard: Any, **params: Any) -> Any:
    """A draw from NumPy's global state shaped like ``size`` broadcast with ``params``."""
    shape = () if size is None else _kit()._check_shape(name, size)
    event = _kit()._event_shape(name, shape, **params)

    def sample(_state, n):
        return standard(n)

    sample.__name__ = sample.__qualname__ = standard.__name__
    return _kit().draw(name, _kit().GLOBAL_STATE, sample, event, np.float64)


def _explicit(args: tuple, kwargs: dict) -> bool:
    """Whether a call passes a generator (the explicit form); a RandomState there is
    refused by the explicit form, with a message naming Generator."""
    first = args[0] if args else kwargs.get("rng")
    return isinstance(first, (np.random.Generator, np.random.RandomState)) or (
        isinstance(first, Tracer) and _kit()._is_staged_generator(first)  # (under jit)
    )


def normal(*args: Any, **kwargs: Any) -> Any:
    """Normal draws, either way (see the module docstring): ``normal(rng, shape=(),
    loc=0.0, scale=1.0, dtype=np.float64)`` from a Generator, or NumPy's
    ``normal(loc=0.0, scale=1.0, size=None)`` from the global state.  ``loc`` and
    ``scale`` may be traced: derivatives flow to them.

    >>> import numpy as np, autodiff.numpy as anp
    >>> from autodiff import grad
    >>> float(grad(lambda mu: anp.random.normal(mu, 0.0))(1.5))  # d/dmu (mu + 0 * z)
    1.0
    """
    if _explicit(args, kwargs):
        return _kit().normal(*args, **kwargs)
    return _legacy_normal(*args, **kwargs)


def _legacy_normal(loc: Any = 0.0, scale: Any = 1.0, size: Any = None) -> Any:
    if not _has_tracer((loc, scale), {}):
        return _plain_normal(loc, scale, size)
    loc = _kit()._param("normal", "loc", loc, None)
    scale = _kit()._param("normal", "scale", scale, None)
    z = _global_draw("normal", size, np.random.standard_normal, loc=loc, scale=scale)
    return add(loc, multiply(scale, z))


def uniform(*args: Any, **kwargs: Any) -> Any:
    """Uniform draws, either way (see the module docstring): ``uniform(rng, shape=(),
    low=0.0, high=1.0, dtype=np.float64)`` from a Generator, or NumPy's
    ``uniform(low=0.0, high=1.0, size=None)`` from the global state.  ``low`` and
    ``high`` may be traced: derivatives flow to them.

    >>> import numpy as np, autodiff.numpy as anp
    >>> from autodiff import grad
    >>> float(grad(lambda b: anp.random.uniform(b, b))(2.0))  # b + (b - b) * u
    1.0
    """
    if _explicit(args, kwargs):
        return _kit().uniform(*args, **kwargs)
    return _legacy_uniform(*args, **kwargs)


def _legacy_uniform(low: Any = 0.0, high: Any = 1.0, size: Any = None) -> Any:
    if not _has_tracer((low, high), {}):
        return _plain_uniform(low, high, size)
    low = _kit()._param("uniform", "low", low, None)
    high = _kit()._param("uniform", "high", high, None)
    u = _global_draw("uniform", size, np.random.random_sample, low=low, high=high)
    return add(low, multiply(subtract(high, low), u))


# --- a Generator argument of a jitted function --------------------------------------------------

_GENERATOR_METHODS: dict[str, Callable[..., Any]] = {
    # NumPy's Generator method -> its draw from a staged Generator (NumPy's signature)
    "normal": lambda rng, loc=0.0, scale=1.0, size=None: _kit().normal(
        rng, () if size is None else size, loc, scale),
    "uniform": lambda rng, low=0.0, high=1.0, size=None: _kit().uniform(
        rng, () if size is None else size, low, high),
    "standard_normal": lambda rng, size=None, dtype=np.float64: _kit().normal(
        rng, () if size is None else size, dtype=dtype),
    "random": lambda rng, size=None, dtype=np.float64: _kit().uniform(
        rng, () if size is None else size, dtype=dtype),
}  # fmt: skip
# Methods that are not draws of new values (or write into their argument).
_NOT_GENERATOR_DRAWS = {"bit_generator", "spawn", "shuffle", "permuted", "bytes"}


def generator_method(rng: Any, name: str) -> Any:
    """``rng.<name>`` for a ``numpy.random.Generator`` argument of a jitted function (a
    staged value): the draw, staged, drawn from the Generator at every call.  ``normal``,
    ``uniform``, ``standard_normal`` and ``random`` take traced parameters; the other
    draws (``integers``, ``choice``, ``exponential``, ...) plain ones."""
    if name in _GENERATOR_METHODS:
        return functools.partial(_GENERATOR_METHODS[name], rng)
    method = getattr(np.random.Generator, name, None)
    if method is None or name in _NOT_GENERATOR_DRAWS or not callable(method):
        raise AttributeError(
            f"a numpy.random.Generator argument of a jitted function is staged: its draws "
            f"are staged too (rng.normal(...), rng.integers(...), ...), but {name!r} is "
            f"{'not a draw' if method is not None else 'not a Generator method'}. Mark "
            f"the argument static (jit(f, static_argnames=...)) to use the Generator "
            f"itself, or call it outside the jitted function."
        )

    @functools.wraps(method)
    def staged_draw(*args: Any, **kwargs: Any) -> Any:
        if _has_tracer(args, kwargs):
            raise UnsupportedFunctionError(
                f"rng.{name}: the parameters are traced values, which NumPy's Generator."
                f"{name} cannot take. Draws with traced parameters: rng.normal, "
                f"rng.uniform (or anp.random.normal(rng, ...), anp.random.uniform(rng, ...))."
            )

        def sample(generator, sizes):
            return _looped(getattr(generator, name), args, kwargs, sizes)

        sample.__name__ = sample.__qualname__ = name
        return _kit().draw(name, rng, sample, ())

    return staged_draw


def _vmapped_draw(name: str) -> Callable:
    def method(self, *args, **kwargs):
        return generator_method(self._rng, name)(*args, **kwargs)

    method.__name__ = name
    method.__doc__ = getattr(np.random.Generator, name).__doc__
    return method


@functools.cache  # (once, at the first vmap of a Generator: most programs have none)
def _give_draw_methods() -> None:
    for name in dir(np.random.Generator):
        if not name.startswith("_") and name not in _NOT_GENERATOR_DRAWS:  # its draws
            setattr(_kit().VmappedGenerator, name, _vmapped_draw(name))


def vmapped_generator(rng: np.random.Generator) -> np.random.Generator:
    """``rng`` as a function under ``vmap`` gets it (``interpreters/batching.py``)."""
    if isinstance(rng, _kit().VmappedGenerator):
        return rng
    _give_draw_methods()
    return _kit().VmappedGenerator(rng)


_plain_normal, _plain_uniform = _legacy("normal"), _legacy("uniform")
for _name in np.random.__all__:
    if _name not in _NOT_DRAWS:
        globals()[_name] = _legacy(_name)

_own = frozenset(["bernoulli", "normal", "uniform", *(set(np.random.__all__) - _NOT_DRAWS)])
# generator_method and vmapped_generator are reached through staged Generators
# (interpreters/staging.py) and vmap's (interpreters/batching.py), not NumPy names: they
# are not in __all__.
# Seeding, state and generator classes: NumPy's own (see autodiff/numpy/_borrow.py).
_borrowed, __getattr__ = _borrow(globals(), np.random, {"bernoulli": "autodiff.numpy._draws"})
__all__ = sorted(_own | set(_borrowed))
