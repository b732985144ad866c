"""Random directions for the stochastic estimators of differential operators.

- **Hutchinson** (Hutchinson 1989; Bekas et al. 2007 for diagonals): for probes ``v``
  with ``E[v v^T] = I`` (Rademacher signs or standard Gaussians), ``E[v^T A v] = tr(A)``
  and ``E[v * (A v)] = diag(A)``; the mean over ``m`` probes is unbiased, its variance
  falls as ``1/m`` (Rademacher: ``2 (||A||_F^2 - sum_i A_ii^2) / m`` for symmetric ``A``).
  The operators feed the probes to collapsed Taylor mode as directions of weight
  ``1/m``.
- **Hutch++** (Meyer et al. 2021): a third of the probes sketches ``A``'s range (``Q``,
  orthonormal, from ``A S``); the trace is ``tr(Q^T A Q)`` exactly plus Hutchinson's
  estimate on the rest, ``(I - Q Q^T) G``: unbiased for any ``Q``, with far less variance
  where ``A`` has a few large eigenvalues.  ``Q`` is held constant for derivatives
  (``stop_gradient``), so the gradient of the estimate is an unbiased estimate of the
  gradient too.
- **STDE's sparse random jets** (Shi et al. 2024): ``m`` of the operator's own directions
  (coordinates for a Laplacian or a diagonal) drawn uniformly with replacement, weighted
  ``R / m``: unbiased, and each costs one jet of a unit vector.

``seed`` says where the randomness comes from: an ``int`` draws fixed probes (the same at
every call and for every example of a ``vmap``; a ``jit`` keeps them as constants); a
``numpy.random.Generator`` draws new ones at every call through ``autodiff.numpy.random``
(so a ``vmap``'s ``randomness=`` decides whether examples share them, and a ``jit``
draws them at every call); ``None`` draws from NumPy's global state, likewise, and is
refused under a ``vmap`` whose ``randomness`` is ``"error"``, where the choice must be made.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from autodiff.core import tracer as _tracer
from autodiff.core.stack import current_interpreters
from autodiff.errors import TransformTypeError, TransformValueError
from autodiff.interpreters.batching import BatchInterpreter
from autodiff.interpreters.staging import innermost_staging
from autodiff.rules import elementwise as _elt
from autodiff.rules import shape as _shp

__all__ = ["PROBES", "check_samples", "check_seed", "coordinates", "probes"]

PROBES = ("rademacher", "gaussian")


def check_seed(seed: Any, who: str) -> None:
    if seed is None or isinstance(seed, np.random.Generator):
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise TransformTypeError(
            f"{who}: seed must be a non-negative int (fixed probes), a "
            f"numpy.random.Generator (new probes at every call) or None (NumPy's global "
            f"state), got {seed!r:.40}."
        )


def check_samples(samples: Any, who: str, method: str, least: int = 1) -> int:
    if samples is None:
        raise TransformValueError(
            f"{who}: method={method!r} is a random estimate: give samples=, the number of "
            f"probes (its variance falls as 1/samples), and seed=."
        )
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < least:
        raise TransformValueError(
            f"{who}: samples must be an int >= {least} for method={method!r}, got {samples!r}."
        )
    return int(samples)


def _random_module(seed: Any, who: str, method: str) -> Any:
    """``autodiff.numpy.random`` (handed down to the core), after checking that no live
    ``vmap`` leaves the choice of randomness open."""
    staging = innermost_staging()  # the vmaps below it batch the staged graph instead
    for interp in current_interpreters():
        if staging is not None and interp.level < staging.level:
            continue
        if isinstance(interp, BatchInterpreter) and interp.randomness == "error":
            source = "NumPy's global state" if seed is None else "the Generator given"
            raise TransformValueError(
                f"{who}: method={method!r} draws random probes from {source} inside "
                f"{interp.describe()}, whose randomness is 'error' (the default): whether "
                f"the examples share the probes or each gets its own must be chosen. Pass "
                f"seed=<an int> (fixed probes, shared by every example), or give that vmap "
                f"randomness='same' (shared) or randomness='different' (one set per example)."
            )
    return _tracer.array_namespace.random


def probes(kind: str, seed: Any, shape: tuple, dtype: Any, who: str, method: str) -> Any:
    """``shape`` probes with ``E[v v^T] = I``: Rademacher signs or standard Gaussians."""
    if kind not in PROBES:
        raise TransformValueError(
            f"{who}: probes must be 'rademacher' or 'gaussian', got {kind!r:.40}."
        )
    if isinstance(seed, (int, np.integer)):
        rng = np.random.default_rng(int(seed))
        if kind == "gaussian":
            return rng.standard_normal(shape).astype(dtype)
        return (2 * rng.integers(0, 2, shape) - 1).astype(dtype)
    random = _random_module(seed, who, method)
    if kind == "gaussian":
        z = random.standard_normal(shape) if seed is None else random.normal(seed, shape)
        return _elt.astype(z, dtype)
    u = random.random(shape) if seed is None else random.uniform(seed, shape)
    return _elt.where(_elt.less(u, 0.5), -1.0, 1.0).astype(dtype)


def coordinates(seed: Any, samples: int, n: int, dtype: Any, who: str, method: str) -> Any:
    """``samples`` unit vectors of ``n`` drawn uniformly with replacement, ``(samples, n)``."""
    if isinstance(seed, (int, np.integer)):
        picks = np.random.default_rng(int(seed)).integers(0, n, samples)
        out = np.zeros((samples, n), dtype)
        out[np.arange(samples), picks] = 1
        return out
    random = _random_module(seed, who, method)
    u = random.random((samples,)) if seed is None else random.uniform(seed, (samples,))
    picks = _elt.minimum(_elt.floor(u * n), n - 1)  # floats: a uniform pick of 0..n-1
    columns = np.arange(n, dtype=dtype)
    return _elt.astype(_elt.equal(_shp.expand_dims(picks, 1), columns), dtype)
