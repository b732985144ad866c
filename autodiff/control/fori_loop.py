"""``fori_loop``: a ``scan`` with Python-int bounds, a ``while_loop`` with traced ones."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optree

from autodiff.control.leaves import (
    CARRY_HINT,
    check_like,
    check_predicate,
    is_static_int,
    leaves_of,
)
from autodiff.control.scan import run_scan
from autodiff.control.while_loop import run_while
from autodiff.core.args import check_callable

__all__ = ["fori_loop"]


def fori_loop(lower: Any, upper: Any, body_fun: Callable, init_val: Any) -> Any:
    """``val = init_val; for i in range(lower, upper): val = body_fun(i, val)``
    (JAX's ``lax.fori_loop``).

    With Python ints as bounds it is a :func:`scan` of ``upper - lower`` steps;
    with traced bounds (which may differ per example under ``vmap``) a
    :func:`while_loop`.  ``body_fun`` keeps the structure, shapes and dtypes of
    ``init_val``.

    >>> import numpy as np, autodiff
    >>> power = lambda x, n: autodiff.fori_loop(0, n, lambda i, p: p * x, 1.0)
    >>> float(power(2.0, 10)), float(autodiff.grad(power)(2.0, 3))
    (1024.0, 12.0)
    >>> autodiff.vmap(power)(np.array([2.0, 3.0]), np.array([3, 2]))
    array([8., 9.])
    """
    check_callable(body_fun, "fori_loop (body_fun)")
    for name, bound in (("lower", lower), ("upper", upper)):
        check_predicate(bound, f"fori_loop: {name}", "int")
    _, tree, names = leaves_of(init_val, "init_val", "fori_loop")

    def step(i: Any, x: Any) -> Any:
        out = body_fun(i, x)
        got, got_tree = optree.tree_flatten(out)
        check_like(got, got_tree, optree.tree_leaves(x), tree, names,
                   "fori_loop: the value body_fun returned", "the value it was given",
                   CARRY_HINT)  # fmt: skip
        return out

    if is_static_int(lower) and is_static_int(upper):
        if upper <= lower:
            return init_val
        # step checks the carry, with fori_loop's names: the scan need not
        steps = int(upper) - int(lower)
        (_, out), _ = run_scan(lambda c, _: ((c[0] + 1, step(*c)), None), (int(lower), init_val),
                            None, steps, False, False, check_carry=False)  # fmt: skip
        return out
    _, out = run_while("fori_loop", lambda c: c[0] < upper, lambda c: (c[0] + 1, step(*c)),
                    (lower, init_val), check_carry=False)  # fmt: skip
    return out
