"""The rest of a NumPy namespace, borrowed: what ``anp`` has no rules for is NumPy's own.

Constants, dtypes, file I/O, printing options, error state, and the functions that have
no autodiff rules yet are re-exported unchanged, so ``import autodiff.numpy as np`` runs
a NumPy program's every line.  On a traced value such a function is reached through
NumPy's protocols (``__array_function__``, ``__array_ufunc__``), which hand it to the
tracer, and the tracer raises ``UnsupportedFunctionError``: never a silent computation
on concrete values.  Submodules (``np.ma``, ``np.polynomial``, ...) are borrowed on
first use, so importing autodiff does not import them.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

from autodiff.core.loading import load

__all__ = ["borrow"]


def borrow(
    namespace: dict[str, Any], module: types.ModuleType, own: Mapping[str, str] | None = None
) -> tuple[tuple[str, ...], Callable]:
    """Copy every public name of ``module`` that ``namespace`` lacks into it (submodules
    lazily).  Returns the names borrowed and a module ``__getattr__`` for the lazy ones.
    ``own``: names the namespace defines itself but loads at first use, never borrowed,
    each with the module the ``__getattr__`` imports for it: the name's submodule of the
    namespace (``anp.random``), or a module that defines the name (``anp.sort``)."""
    own = own or {}
    names = getattr(module, "__all__", None) or [n for n in dir(module) if not n.startswith("_")]
    borrowed, lazy = [], set()
    for name in names:
        if name in namespace or name in own:
            continue
        borrowed.append(name)
        if isinstance(getattr(type(module), name, None), property):  # pragma: no cover
            continue
        value = module.__dict__.get(name)
        if value is None or isinstance(value, types.ModuleType):
            lazy.add(name)  # a submodule, or one the module itself loads lazily
        else:
            namespace[name] = value
    owner = namespace["__name__"]

    def __getattr__(name: str) -> Any:
        if name in own:
            defining = load(own[name])
            value = defining if own[name] == f"{owner}.{name}" else getattr(defining, name)
            namespace[name] = value
            return value
        if name in lazy:
            value = getattr(module, name)
            namespace[name] = value
            return value
        raise AttributeError(f"module {owner!r} has no attribute {name!r}")

    return tuple(borrowed), __getattr__
