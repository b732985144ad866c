"""The contract of ``jit`` (its docstring, ``docs/internals.md``): ``jit(f)(x)`` behaves
like ``f(x)`` in everything a NumPy user can observe, checked beyond the values.

``check_calls(jitted, eager, args)`` calls ``jitted`` three times (the first call,
which interprets the staged graph; the second, which compiles it; a warm third) and
checks, each time:

* the results equal ``eager``'s: structure, shapes, dtypes, scalar or array, values (NaNs where
  ``eager`` has them, and the sign of every zero: a rewrite must be exact);
* every result is an array of its own: it shares memory with no argument and no other
  result (``np.shares_memory``);
* the arguments are unchanged, and after the harness writes garbage into every result,
  the next call still gives ``eager``'s results (nothing the caller holds is part of
  the graph).

``check_captured(make, closed, args)`` checks what a jitted function keeps of the arrays
it closes over: staged once, a later write into them changes neither its value nor its
gradient (both keep the values they had when staged).

Used by ``tests/test_jit_registry.py`` (every sample of the registry),
``tests/test_jit_programs.py`` (random programs) and ``tests/test_jit_contract.py``
(each class of the contract, and each one broken on purpose to show the harness fails).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import optree

__all__ = ["arrays_of", "assert_exact", "check_calls", "check_captured", "scribble"]

CALLS = ("first call (interpreted)", "second call (compiled)", "warm call")


def arrays_of(tree: Any) -> list:
    """The NumPy arrays and scalars among the leaves of ``tree``."""
    return [x for x in optree.tree_leaves(tree) if isinstance(x, (np.ndarray, np.generic))]


def assert_exact(got: Any, want: Any, rtol: float = 1e-12, what: str = "") -> None:
    """Same structure, shapes, dtypes and values, NaNs where ``want`` has them; a NumPy
    scalar where ``want`` has one, an array where it has one; where ``want`` is exactly
    zero, ``got`` is a zero of the same sign."""
    assert optree.tree_structure(got) == optree.tree_structure(want), what
    leaves = zip(optree.tree_leaves(got), optree.tree_leaves(want), strict=True)
    for i, (g, w) in enumerate(leaves):
        assert np.shape(g) == np.shape(w), what
        assert isinstance(g, np.ndarray) == isinstance(w, np.ndarray), (  # a scalar or an array
            f"{what}: result {i} is {type(g).__name__}, not {type(w).__name__}"
        )
        assert np.result_type(g) == np.result_type(w), what
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-12, equal_nan=True, err_msg=what)
        w_arr, g_arr = np.asarray(w), np.asarray(g)
        if w_arr.dtype.kind == "f":
            zeros = w_arr == 0
            np.testing.assert_array_equal(np.signbit(g_arr[zeros]), np.signbit(w_arr[zeros]),
                                          err_msg=f"{what}: the sign of a zero")  # fmt: skip


def assert_fresh(results: Any, args: Any, what: str) -> None:
    """No result shares memory with an argument or with another result."""
    outs, ins = arrays_of(results), arrays_of(args)
    for i, r in enumerate(outs):
        if not isinstance(r, np.ndarray):
            continue  # NumPy scalars are immutable
        for a in ins:
            if isinstance(a, np.ndarray):
                assert not np.shares_memory(r, a), f"{what}: result {i} shares an argument's memory"
        for j, other in enumerate(outs[:i]):
            if isinstance(other, np.ndarray):
                assert not np.shares_memory(r, other), f"{what}: results {j} and {i} share memory"


def scribble(results: Any) -> None:
    """Write garbage into every result the caller could write into."""
    for r in arrays_of(results):
        if isinstance(r, np.ndarray) and r.flags.writeable and r.size:
            r[...] = 7 if r.dtype.kind in "iub" else -12345.5


def check_calls(jitted: Callable, eager: Callable | Any, args: tuple, rtol: float = 1e-12) -> None:
    """``jitted`` against ``eager`` (a function of ``args``, or its results) on three
    calls: results equal, fresh, and immune to the caller's writes (module docstring)."""
    want = eager(*args) if callable(eager) else eager
    before = [np.copy(a) for a in arrays_of(args)]
    for what in CALLS:
        got = jitted(*args)
        assert_exact(got, want, rtol, what)
        assert_fresh(got, args, what)
        scribble(got)
        for a, b in zip(arrays_of(args), before, strict=True):
            np.testing.assert_array_equal(a, b, err_msg=f"{what}: an argument was written into")


def check_captured(make: Callable[[], tuple[Callable, Callable]], closed: list, args: tuple,
                   change: Callable[[np.ndarray], None]) -> None:  # fmt: skip
    """``make()`` returns a jitted function and its jitted gradient, both closing over the
    arrays ``closed``; ``change(c)`` writes into one.  Staged and called once, then with
    every closed array changed, both give the results they gave before (captured by
    value when staged), on the first, compiled and warm calls."""
    value_fn, grad_fn = make()
    value, gradient = value_fn(*args), grad_fn(*args)  # staged (and interpreted)
    for c in closed:
        change(c)
    for what in (*CALLS[1:], "another warm call"):
        assert_exact(value_fn(*args), value, 0.0, f"value after the write, {what}")
        assert_exact(grad_fn(*args), gradient, 0.0, f"gradient after the write, {what}")
