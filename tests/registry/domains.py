"""Input domains for samples: each draws reproducible arrays where the
function is smooth (away from kinks, poles and domain edges), so finite
differences are meaningful.  Behaviour at kinks is pinned separately.

Every array a domain draws remembers how it was drawn: it is a ``Drawn``
array whose ``redraw(rng)`` draws a fresh array of the same shape from the same
domain.  ``vmap`` tests build their batches from such independent draws (not
from rescaled copies of one sample, which a scale-invariant function such as
``sort`` or ``argmax`` cannot tell apart).  Arithmetic with constants keeps
the recipe: ``positive(3) * 3`` redraws as ``positive(3) * 3`` and
``np.sort(real(6))`` as a fresh sorted draw.  ``Sample`` stores plain arrays
and keeps the redraw functions beside them (``Sample.redraws``); an argument
that was not drawn from a domain (a literal array) gets ``near``: the same
array with every element scaled by its own factor in [0.9, 1.1] (floats;
zeros, signs, NaN and infinities stay), or its elements shuffled (integers,
booleans: indices stay in range).

A new domain is a function ``fn(rng, *args)`` decorated with
``@domain(module_rng)``: called as ``fn(*args)`` it draws from the module's
generator (so samples are the same on every run), and redraws call it with
the test's generator.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

Redraw = Callable[[np.random.Generator], np.ndarray]


class Drawn(np.ndarray):
    """An array that knows how it was drawn: ``redraw(rng)`` draws another like it.

    Views, slices and results of operations this class does not follow lose
    the recipe (``redraw`` is None) and are treated like literal arrays."""

    redraw: Redraw | None

    def __new__(cls, value: Any, redraw: Redraw | None) -> Drawn:
        obj = np.asarray(value).view(cls)
        obj.redraw = redraw
        return obj

    def __array_finalize__(self, obj: Any) -> None:
        self.redraw = None

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        plain = [_plain(x) for x in inputs]
        out = getattr(ufunc, method)(*plain, **{k: _plain(v) for k, v in kwargs.items()})
        if method != "__call__" or "out" in kwargs or ufunc.nout != 1 or not _known(inputs):
            return out

        def redraw(rng):
            return getattr(ufunc, method)(*_fresh(inputs, rng), **kwargs)

        return Drawn(out, redraw)

    def __array_function__(self, func, types, args, kwargs):
        out = func(*_plain_tree(args), **_plain_tree(kwargs))
        if not isinstance(out, np.ndarray) or not _known((args, kwargs)):
            return out

        def redraw(rng):
            return func(*_fresh(args, rng), **_fresh(kwargs, rng))

        return Drawn(out, redraw)

    def astype(self, dtype, *args, **kwargs):  # type: ignore[override]
        out = np.asarray(self).astype(dtype, *args, **kwargs)
        if self.redraw is None:
            return out
        parent = self.redraw
        return Drawn(out, lambda rng: np.asarray(parent(rng)).astype(dtype, *args, **kwargs))


def _plain(x: Any) -> Any:
    return x.view(np.ndarray) if isinstance(x, Drawn) else x


def _plain_tree(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _plain_tree(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_plain_tree(v) for v in x)
    return _plain(x)


def _drawn_in(x: Any) -> list[Drawn]:
    if isinstance(x, dict):
        return [d for v in x.values() for d in _drawn_in(v)]
    if isinstance(x, (list, tuple)):
        return [d for v in x for d in _drawn_in(v)]
    return [x] if isinstance(x, Drawn) else []


def _known(x: Any) -> bool:
    """Every Drawn array in ``x`` knows its recipe (and there is one)."""
    drawn = _drawn_in(x)
    return bool(drawn) and all(d.redraw is not None for d in drawn)


def _fresh(x: Any, rng: np.random.Generator) -> Any:
    """``x`` with every Drawn array in it replaced by a fresh draw."""
    if isinstance(x, dict):
        return {k: _fresh(v, rng) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_fresh(v, rng) for v in x)
    if isinstance(x, Drawn):
        assert x.redraw is not None
        return np.asarray(x.redraw(rng))
    return x


def domain(module_rng: np.random.Generator) -> Callable:
    """Make ``fn(rng, *args)`` a domain: ``fn(*args)`` draws from ``module_rng``
    and returns a ``Drawn`` array that redraws with ``fn(rng, *args)``."""

    def wrap(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def draw(*args: Any, **kwargs: Any) -> Drawn:
            return Drawn(
                fn(module_rng, *args, **kwargs), lambda rng: np.asarray(fn(rng, *args, **kwargs))
            )

        draw.draw_with = fn  # type: ignore[attr-defined]
        return draw

    return wrap


def drawn_as(value: Any, redraw: Redraw) -> Drawn:
    """A literal sample ``value`` whose other examples ``redraw(rng)`` draws."""
    return Drawn(np.asarray(value), redraw)


def fixed(value: Any) -> Drawn:
    """An argument that is the same in every example (a constant of the sample)."""
    value = np.asarray(value)
    return Drawn(value, lambda rng: value.copy())


def near(value: Any) -> Redraw:
    """How an argument drawn from no domain is redrawn: floats with every element
    scaled by its own factor in [0.9, 1.1] (zeros, signs, NaN and infinities stay),
    integers and booleans with their elements shuffled (indices stay in range)."""
    value = np.asarray(value)
    if value.dtype.kind in "fc":
        return lambda rng: (value * rng.uniform(0.9, 1.1, value.shape)).astype(value.dtype)
    return lambda rng: rng.permutation(value.ravel()).reshape(value.shape)


def redraw_of(value: Any) -> Redraw:
    """The recipe of ``value``: its own when it was drawn from a domain, else ``near``."""
    recipe = getattr(value, "redraw", None)
    return recipe if recipe is not None else near(value)


# --- the shared domains ----------------------------------------------------------------------

_rng = np.random.default_rng(1234)


@domain(_rng)
def real(rng, *shape):
    return rng.standard_normal(shape)


@domain(_rng)
def positive(rng, *shape):
    return rng.uniform(0.5, 2.0, shape)


@domain(_rng)
def unit(rng, *shape):
    """Inside (-1, 1), away from the ends."""
    return rng.uniform(-0.8, 0.8, shape)


@domain(_rng)
def above_one(rng, *shape):
    return rng.uniform(1.2, 3.0, shape)


@domain(_rng)
def away_from_zero(rng, *shape):
    return rng.choice([-1.0, 1.0], shape) * rng.uniform(0.5, 2.0, shape)


@domain(_rng)
def distinct(rng, *shape):
    """No ties anywhere (so max, min, sort and maximum are smooth)."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.37 + rng.uniform(0, 0.1)).reshape(shape) - n * 0.18


@domain(_rng)
def cplx(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


@domain(_rng)
def ints(rng, high, *shape):
    return rng.integers(0, high, shape)


# Domains added later draw their samples from generators of their own, so that samples
# using them do not shift the draws of every sample after them.


@domain(np.random.default_rng(5678))
def unique_ints(rng, high, *shape):
    """Integers in [0, high), none repeated (indices naming each position once)."""
    n = int(np.prod(shape))
    return rng.permutation(high)[:n].reshape(shape)


@domain(_rng)
def mask(rng, *shape):
    return rng.random(shape) > 0.5


@domain(_rng)
def spd(rng, n, *batch):
    """Symmetric positive definite matrices, well conditioned."""
    a = rng.standard_normal((*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) / n + np.eye(n)


@domain(_rng)
def well_conditioned(rng, n, *batch):
    """Square matrices with singular values in [1, 3]."""
    q1, _ = np.linalg.qr(rng.standard_normal((*batch, n, n)))
    q2, _ = np.linalg.qr(rng.standard_normal((*batch, n, n)))
    s = rng.uniform(1.0, 3.0, (*batch, n))
    return (q1 * s[..., None, :]) @ q2


@domain(_rng)
def distinct_spectrum(rng, n, *batch):
    """Symmetric matrices with well-separated eigenvalues (eigh is smooth there)."""
    q, _ = np.linalg.qr(rng.standard_normal((*batch, n, n)))
    w = np.arange(1, n + 1) * 1.5 + rng.uniform(0, 0.2, n)
    return (q * w) @ np.swapaxes(q, -1, -2)
