"""``autodiff.numpy`` (imported as ``anp``): a drop-in for ``numpy`` whose functions
accept traced values and are differentiable and batchable.

Every public name of NumPy exists here.  The functions with rules are declared, each
in one block of ``autodiff/rules/``; the same functions run when plain ``numpy``
functions, operators or ndarray methods meet a traced value.  Everything else
(constants, dtypes, I/O, printing, and functions without rules yet) is NumPy's own
object; on a traced value those raise ``UnsupportedFunctionError`` (see ``_borrow``).
``docs/coverage.md`` lists which is which.

>>> import numpy as np
>>> import autodiff, autodiff.numpy as anp
>>> float(autodiff.grad(lambda x: anp.sum(anp.sin(x) ** 2))(np.array(0.5)))
0.8414709848078965
>>> anp.pi == np.pi, anp.zeros(2), anp.array([1, 2.5])
(True, array([0., 0.]), array([1. , 2.5]))
"""

import sys as _sys

import numpy as _np

from autodiff.core import overrides as _overrides
from autodiff.core import tracer as _tracer
from autodiff.core.loading import load as _load
from autodiff.numpy._borrow import borrow as _borrow
from autodiff.numpy._types import SCALAR_NAMES as _SCALAR_NAMES
from autodiff.numpy._types import ndarray as ndarray
from autodiff.rules.compositions import *  # noqa: F403
from autodiff.rules.compositions import __all__ as _compositions_names
from autodiff.rules.creation import *  # noqa: F403
from autodiff.rules.creation import __all__ as _creation_primitives
from autodiff.rules.elementwise import *  # noqa: F403
from autodiff.rules.elementwise import __all__ as _elementwise_primitives
from autodiff.rules.indexing import *  # noqa: F403
from autodiff.rules.indexing import __all__ as _indexing_primitives
from autodiff.rules.products import *  # noqa: F403
from autodiff.rules.products import __all__ as _products_primitives
from autodiff.rules.reductions import *  # noqa: F403
from autodiff.rules.reductions import __all__ as _reductions_primitives
from autodiff.rules.shape import *  # noqa: F403
from autodiff.rules.shape import __all__ as _shape_primitives

# Loaded at first use, as NumPy loads its own submodules: each module with the names of
# anp it defines (tests/test_namespace.py checks them against the modules' __all__).
# anp.random needs numpy.random (and with it secrets, hashlib, ...); fft, linear algebra,
# sorting, sets, polynomials and statistics build their primitives' rules, a fifth of
# autodiff's own import time, which a short grad program never needs; vectorize and the
# rest of _apply.py run under vmap, whose interpreter such a program never imports
# either.  The NumPy-level compositions (_creation.py ... _shape.py: anp.array, mean,
# dot, diag, nonzero, at, r_, ...) wait too, each for the first of its names a program
# uses: import autodiff builds none of them, and a short program only those it calls
# (~190 KB of byte code, a fifth of the package's at import).  A name loads its module
# when first read; NumPy's function of the same name (or ndarray method, operator, ufunc
# method or index update that stands for it), when it first meets a traced value
# (_load_rules below).
_FIRST_USE = {
    "autodiff.numpy.fft": ("fft",),
    "autodiff.numpy.linalg": ("linalg",),
    "autodiff.numpy.random": ("random",),
    "autodiff.numpy._creation": ("arange", "array", "asanyarray", "ascontiguousarray",
                                 "asfortranarray", "copy", "empty", "empty_like", "eye", "full",
                                 "full_like", "geomspace", "identity", "linspace", "logspace",
                                 "meshgrid", "ones", "tri", "zeros"),
    "autodiff.numpy._dtypes": ("can_cast", "common_type", "iscomplex", "iscomplexobj", "isreal",
                               "isrealobj", "result_type"),
    "autodiff.numpy._elementwise": ("allclose", "array_equal", "array_equiv", "divmod", "frexp",
                                    "isclose", "isneginf", "isposinf", "modf", "select",
                                    "unwrap"),
    "autodiff.numpy._index_tricks": ("c_", "r_"),
    "autodiff.numpy._index_update": ("at",),
    "autodiff.numpy._indexing": ("argwhere", "choose", "compress", "copyto", "extract",
                                 "fill_diagonal", "flatnonzero", "nonzero", "place", "put",
                                 "put_along_axis", "putmask"),
    "autodiff.numpy._products": ("dot", "inner", "kron", "matvec", "outer", "tensordot", "vdot",
                                 "vecdot", "vecmat"),
    "autodiff.numpy._reductions": ("average", "count_nonzero", "cumulative_prod",
                                   "cumulative_sum", "mean", "nanargmax", "nanargmin",
                                   "nancumprod", "nancumsum", "nanmax", "nanmean", "nanmin",
                                   "nanprod", "nanstd", "nansum", "nanvar", "ptp", "std",
                                   "trapezoid", "var"),
    "autodiff.numpy._shape": ("append", "array_split", "atleast_1d", "atleast_2d", "atleast_3d",
                              "block", "column_stack", "delete", "diag", "diagflat", "diagonal",
                              "diff", "dsplit", "dstack", "ediff1d", "fliplr", "flipud",
                              "gradient", "hsplit", "hstack", "insert", "matrix_transpose",
                              "ndim", "repeat", "resize", "rollaxis", "rot90", "shape", "size",
                              "split", "tile", "trace", "unstack", "vsplit", "vstack"),
    "autodiff.numpy._apply": ("apply_along_axis", "apply_over_axes", "frompyfunc", "piecewise",
                              "vectorize"),
    "autodiff.numpy._polynomial": ("interp", "poly", "polyadd", "polyder", "polydiv",
                                   "polyfit", "polyint", "polymul", "polysub", "polyval",
                                   "vander"),
    "autodiff.numpy._sets": ("intersect1d", "setdiff1d", "setxor1d", "union1d", "unique",
                             "unique_all", "unique_counts", "unique_inverse", "unique_values"),
    "autodiff.numpy._sorting": ("partition", "sort", "sort_complex"),
    "autodiff.numpy._statistics": ("corrcoef", "cov", "digitize", "histogram", "histogram2d",
                                   "histogram_bin_edges", "histogramdd", "median", "nanmedian",
                                   "nanpercentile", "nanquantile", "percentile", "quantile"),
    "autodiff.rules.linalg": ("roots",),  # numpy.roots: eigvals of a companion matrix
    "autodiff.rules.polynomial": ("convolve", "correlate"),
    "autodiff.rules.sets": ("isin",),
    "autodiff.rules.sorting": ("argpartition", "argsort", "lexsort", "searchsorted"),
    "autodiff.rules.statistics": ("bincount",),
}  # fmt: skip
_module_of = {name: module for module, names in _FIRST_USE.items() for name in names}
# The keys of numpy_overrides that are no NumPy function's name: ufunc methods (np.add.reduce,
# np.maximum.accumulate, which x.sum(), np.cumsum, ... may meet), and the index updates
# (x.at[i], x[i] = v), with the module that registers them.
_keyed: dict[object, str] = {
    **{(ufunc, "reduce"): "autodiff.numpy._reductions" for ufunc in (
        _np.add, _np.multiply, _np.maximum, _np.minimum, _np.logical_and, _np.logical_or)},
    **{(ufunc, "accumulate"): "autodiff.numpy._reductions" for ufunc in (
        _np.add, _np.multiply, _np.maximum, _np.minimum)},
    _overrides.INDEX_UPDATE: "autodiff.numpy._index_update",
    _overrides.SET_ITEM: "autodiff.numpy._index_update",
}  # fmt: skip

# The names autodiff defines: functions with rules, and the types and shorthands above.
_own = frozenset(
    [
        *_compositions_names,
        *_creation_primitives,
        *_elementwise_primitives,
        *_indexing_primitives,
        *_products_primitives,
        *_reductions_primitives,
        *_shape_primitives,
        *_SCALAR_NAMES,
        *_module_of,
        "ndarray",
    ]
)
# Everything else of NumPy's, as NumPy's own objects.
# anp's scalar types (float64, ...) are made when first read, by numpy/_types.py.
_made_when_read = {**_module_of, **dict.fromkeys(_SCALAR_NAMES, "autodiff.numpy._types")}
_borrowed, __getattr__ = _borrow(globals(), _np, own=_made_when_read)
__array_api_version__ = _np.__array_api_version__
_tracer.array_namespace = _sys.modules[__name__]  # what traced values' __array_namespace__ gives
__all__ = sorted(_own | set(_borrowed))


def _first_use_module(func: object) -> str | None:
    """The module loaded at first use that holds the rule of NumPy's ``func``, if any:
    ``anp.fft`` and ``anp.linalg`` for numpy.fft's and numpy.linalg's functions; for
    ``np.sort``, ``np.median``, ``np.mean``, ..., the module of ``anp``'s function of that
    name; for a ufunc method or an index update, the module that registers it."""
    if isinstance(func, tuple) or func is _overrides.INDEX_UPDATE or func is _overrides.SET_ITEM:
        return _keyed.get(func)
    module, name = getattr(func, "__module__", None), getattr(func, "__name__", None)
    if module in ("numpy.fft", "numpy.linalg"):
        return f"autodiff.{module}"
    if name in _module_of and getattr(_np, name, None) is func:
        return _module_of[name]
    return None


def _load_rules(func: object) -> bool:
    """NumPy's function reaches its rule, when that loads at first use, the first time it
    meets a traced value (``core/overrides.py``'s ``lazy_rules``)."""
    module = _first_use_module(func)
    if module is not None:
        _load(module)  # (registers its rules)
    return module is not None


_overrides.lazy_rules.append(_load_rules)


def __dir__() -> list[str]:
    """The module's names with those loaded at first use (``_FIRST_USE``), for ``dir()``
    and tab completion."""
    return sorted(set(globals()) | set(__all__))
