"""A VJP rule from a JVP rule and back, by transposition.

A VJP and a JVP are transposes of each other (in the bilinear pairing
``Re sum(a * b)`` of the package's complex convention), and both are linear.
So a missing one is derived from the other by running reverse mode through
it: exact whenever the given rule is written with primitives.

The maths ties this to reverse mode both ways: transposing a rule needs reverse
mode (``vjp``), and reverse mode needs the transposed rule of a primitive that was
given only a JVP.  The imports do not: its two derivations are installed on
the core (``core.primitive.transposition``, by ``interpreters/__init__.py``, which
loads this module at the first derivation), where the tape and forward mode find
them through ``Primitive.vjp_rule``/``jvp_rule``, derived once per primitive.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.core.args import at_positions
from autodiff.interpreters.reverse import vjp

__all__ = ["jvp_from_vjp", "vjp_from_jvp"]


def _zeros_for(values: Any) -> Any:
    if isinstance(values, tuple):
        return tuple(np.zeros_like(v) for v in values)
    return np.zeros_like(values)


def _filled(cts: list, primals: tuple, argnums: list) -> tuple:
    """Cotangents for ``argnums``, zeros where a rule returned None."""
    return tuple(np.zeros_like(primals[i]) if c is None else c for c, i in zip(cts, argnums))


def jvp_from_vjp(vjp_rule: Callable) -> Callable:
    """A JVP rule (normalised form) from a VJP rule, by transposition."""

    def jvp(tangents, ans, primals, params):
        argnums = [i for i, t in enumerate(tangents) if t is not None]

        def pullback(ct):
            return _filled(vjp_rule(ct, ans, primals, params, argnums), primals, argnums)

        _, transpose = vjp(pullback, _zeros_for(ans))
        return transpose(tuple(tangents[i] for i in argnums))[0]

    return jvp


def vjp_from_jvp(jvp_rule: Callable) -> Callable:
    """A VJP rule (normalised form) from a JVP rule, by transposition."""

    def vjp_rule(ct, ans, primals, params, argnums):
        def pushforward(*full):
            return jvp_rule(full, ans, primals, params)

        # the JVP as a function of the tangents at argnums (the others are zero)
        pushed = at_positions(pushforward, (None,) * len(primals), argnums)
        _, transpose = vjp(pushed, *(np.zeros_like(primals[i]) for i in argnums))
        return list(transpose(ct))

    return vjp_rule
