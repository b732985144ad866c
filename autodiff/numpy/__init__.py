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
from autodiff.numpy import linalg as linalg
from autodiff.numpy._apply import *  # noqa: F403
from autodiff.numpy._apply import __all__ as _apply
from autodiff.numpy._borrow import borrow as _borrow
from autodiff.numpy._creation import *  # noqa: F403
from autodiff.numpy._creation import __all__ as _creation_names
from autodiff.numpy._dtypes import *  # noqa: F403
from autodiff.numpy._dtypes import __all__ as _dtypes_names
from autodiff.numpy._elementwise import *  # noqa: F403
from autodiff.numpy._elementwise import __all__ as _elementwise_names
from autodiff.numpy._index_tricks import c_ as c_
from autodiff.numpy._index_tricks import r_ as r_
from autodiff.numpy._index_update import *  # noqa: F403
from autodiff.numpy._index_update import __all__ as _index_update_names
from autodiff.numpy._indexing import *  # noqa: F403
from autodiff.numpy._indexing import __all__ as _indexing_names
from autodiff.numpy._polynomial import *  # noqa: F403
from autodiff.numpy._polynomial import __all__ as _polynomial_names
from autodiff.numpy._products import *  # noqa: F403
from autodiff.numpy._products import __all__ as _products_names
from autodiff.numpy._reductions import *  # noqa: F403
from autodiff.numpy._reductions import __all__ as _reductions_names
from autodiff.numpy._sets import *  # noqa: F403
from autodiff.numpy._sets import __all__ as _sets_names
from autodiff.numpy._shape import *  # noqa: F403
from autodiff.numpy._shape import __all__ as _shape_names
from autodiff.numpy._sorting import *  # noqa: F403
from autodiff.numpy._sorting import __all__ as _sorting_names
from autodiff.numpy._statistics import *  # noqa: F403
from autodiff.numpy._statistics import __all__ as _statistics_names
from autodiff.numpy._types import SCALAR_TYPES as _SCALAR_TYPES
from autodiff.numpy._types import ndarray as ndarray
from autodiff.rules.compositions import *  # noqa: F403
from autodiff.rules.compositions import __all__ as _compositions_names
from autodiff.rules.creation import *  # noqa: F403
from autodiff.rules.creation import __all__ as _creation_primitives
from autodiff.rules.elementwise import *  # noqa: F403
from autodiff.rules.elementwise import __all__ as _elementwise_primitives
from autodiff.rules.indexing import *  # noqa: F403
from autodiff.rules.indexing import __all__ as _indexing_primitives
from autodiff.rules.linalg import roots as roots  # numpy.roots: eigvals of a companion matrix
from autodiff.rules.polynomial import *  # noqa: F403
from autodiff.rules.polynomial import __all__ as _polynomial_primitives
from autodiff.rules.products import *  # noqa: F403
from autodiff.rules.products import __all__ as _products_primitives
from autodiff.rules.reductions import *  # noqa: F403
from autodiff.rules.reductions import __all__ as _reductions_primitives
from autodiff.rules.sets import *  # noqa: F403
from autodiff.rules.sets import __all__ as _sets_primitives
from autodiff.rules.shape import *  # noqa: F403
from autodiff.rules.shape import __all__ as _shape_primitives
from autodiff.rules.sorting import *  # noqa: F403
from autodiff.rules.sorting import __all__ as _sorting_primitives
from autodiff.rules.statistics import *  # noqa: F403
from autodiff.rules.statistics import __all__ as _statistics_primitives

globals().update(_SCALAR_TYPES)

# The names autodiff defines: functions with rules, and the types and shorthands above.
_own = frozenset(
    [
        *_apply,
        *_creation_names,
        *_dtypes_names,
        *_elementwise_names,
        *_index_update_names,
        *_indexing_names,
        *_polynomial_names,
        *_products_names,
        *_reductions_names,
        *_sets_names,
        *_shape_names,
        *_sorting_names,
        *_statistics_names,
        *_compositions_names,
        *_creation_primitives,
        *_elementwise_primitives,
        *_indexing_primitives,
        *_polynomial_primitives,
        *_products_primitives,
        *_reductions_primitives,
        *_sets_primitives,
        *_shape_primitives,
        *_sorting_primitives,
        *_statistics_primitives,
        *_SCALAR_TYPES,
        "c_",
        "fft",
        "linalg",
        "ndarray",
        "r_",
        "random",
        "roots",
    ]
)
# Everything else of NumPy's, as NumPy's own objects.  anp.random and anp.fft load at
# first use, as NumPy loads its own: random needs numpy.random (and with it secrets,
# hashlib, ...), fft builds its primitives' rules; a program that uses neither never
# pays for them (numpy.fft's functions on a traced value load them: rules/__init__.py).
_borrowed, __getattr__ = _borrow(globals(), _np, own=frozenset({"fft", "random"}))
__array_api_version__ = _np.__array_api_version__
_tracer.array_namespace = _sys.modules[__name__]  # what traced values' __array_namespace__ gives
__all__ = sorted(_own | set(_borrowed))


def _fft_rules(func: object) -> bool:
    """numpy.fft's functions reach their rules (``rules/fft.py``, and the compositions of
    ``fft.py`` here) the first time one of them meets a traced value, as ``anp.fft``
    loads when first named (``core/overrides.py``'s ``lazy_rules``)."""
    if getattr(func, "__module__", None) != "numpy.fft":
        return False
    from autodiff.numpy import fft  # noqa: F401  (registers them)

    return True


_overrides.lazy_rules.append(_fft_rules)


def __dir__() -> list[str]:
    """The module's names with those loaded at first use (``fft``,
    ``random``), for ``dir()`` and
    tab completion."""
    return sorted(set(globals()) | set(__all__))
