"""The table from NumPy's functions to ours: what a NumPy function does when it meets a
traced value.

A tracer hands every operator, ndarray method and NumPy protocol call
(``__array_ufunc__``, ``__array_function__``) to ``numpy_overrides``, keyed by the NumPy
function it stands for: ``x + y`` is ``np.add(x, y)``, ``x.sum()`` is ``np.sum(x)``,
``np.add.reduce`` is ``(np.add, "reduce")`` (``core/tracer.py``).  The rule modules and
the namespaces fill the table with ``register_numpy``; rules loaded on first use (SciPy's
special functions, NumPy's linear algebra, sorting, ...) hook in through ``lazy_rules``.
A NumPy function with no entry raises ``UnsupportedFunctionError`` rather than being
silently treated as a constant.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from autodiff.core.numpy_args import takes_array_likes
from autodiff.errors import UnsupportedFunctionError

__all__ = [
    "INDEX_UPDATE",
    "SET_ITEM",
    "has_rule",
    "lazy_rules",
    "numpy_overrides",
    "register_numpy",
]


def _function_name(func: Any) -> str:
    if isinstance(func, tuple):  # (ufunc, method)
        return f"numpy.{func[0].__name__}.{func[1]}"
    if func is operator.getitem:
        return "indexing (x[...])"
    module = getattr(func, "__module__", None) or "numpy"
    module = "numpy" if module.startswith("numpy") else module
    return f"{module}.{getattr(func, '__name__', func)}"


# Rules registered when first needed: each is called with a NumPy function that has no
# entry yet, loads the rules it may have and says whether it did (rules/__init__.py:
# scipy.special's, once SciPy is imported; numpy/__init__.py: linear algebra, sorting,
# statistics, ...).
lazy_rules: list[Callable[[Any], bool]] = []


class _Overrides(dict):
    """NumPy function -> autodiff implementation; a missing key is an error."""

    def __missing__(self, func: Any) -> Callable:
        if has_rule(func):
            return dict.__getitem__(self, func)
        if isinstance(func, np.ufunc) and all(set(t) <= set("O->") for t in func.types):
            raise UnsupportedFunctionError(
                f"numpy.frompyfunc's ufunc {func.__name__!r} computes on object arrays, "
                f"which cannot hold traced values: write anp.frompyfunc(f, nin, nout) or "
                f"anp.vectorize(f), which call f under vmap."
            )
        raise UnsupportedFunctionError(
            f"{_function_name(func)} has no autodiff rule, so it cannot be applied "
            f"to a traced value (it would silently lose derivatives or batching). "
            f"Compute it from functions that have rules (docs/coverage.md lists them), "
            f"or define a primitive for it (see autodiff/rules/README.md)."
        )


numpy_overrides: dict[Any, Callable] = _Overrides()


def has_rule(func: Any) -> bool:
    """Whether ``func`` has an entry, after loading the rules it may have (``lazy_rules``):
    a lookup, or an error message that suggests autodiff's function for NumPy's."""
    return dict.__contains__(numpy_overrides, func) or any(
        load(func) and dict.__contains__(numpy_overrides, func) for load in lazy_rules
    )


def register_numpy(*numpy_funcs: Any) -> Callable[[Callable], Callable]:
    """Decorator: ``fn`` implements ``numpy_funcs`` when they meet a tracer.  It then
    takes the first one's ``array_like`` arguments as NumPy does (lists and tuples,
    traced items included: ``core/numpy_args.py``), and that is the function returned.

    >>> import numpy as np, autodiff, autodiff.numpy as anp
    >>> float(autodiff.grad(np.sinc)(0.5)) == float(autodiff.grad(anp.sinc)(0.5))  # rules/' sinc
    True
    """

    def register(fn: Callable) -> Callable:
        reference = next((f for f in numpy_funcs if _takes_arrays(f)), None)
        public = fn if reference is None else takes_array_likes(fn, reference)
        for func in numpy_funcs:
            numpy_overrides[func] = public
        return public

    return register


def _takes_arrays(func: Any) -> bool:
    """Whether ``func`` is a NumPy function (or ufunc method) whose arguments NumPy
    converts; not the indexing keys, whose indices are indices."""
    return isinstance(func, tuple) or (
        callable(func) and func not in (operator.getitem, operator.setitem)
    )


# Keys of numpy_overrides for the index-update API, which has no NumPy function.
INDEX_UPDATE = "ndarray.at"
SET_ITEM = operator.setitem
