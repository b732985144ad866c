"""Primitive families: each module declares its primitives, one block each
(implementation and every rule), and the public functions that bind them, which
``autodiff.numpy`` re-exports; ``compositions`` holds the few compositions the rules
call.  See ``README.md`` in this folder.

``import autodiff`` imports the families every program uses, below.  The rest load at
first use: linear algebra, sorting, sets, polynomials and statistics (``ON_FIRST_USE``:
through ``autodiff.numpy``'s names, or NumPy's functions meeting a traced value, see
``autodiff/numpy/__init__.py``), ``fft`` (with ``anp.fft``), and SciPy's (below, and
``autodiff.scipy``)."""

import sys as _sys

import numpy as _np

from autodiff.core import overrides as _overrides
from autodiff.rules import (  # noqa: F401  (importing registers the primitives)
    compositions,
    creation,
    elementwise,
    indexing,
    products,
    reductions,
    shape,
)

# The families imported at first use by autodiff.numpy (its _FIRST_USE table), with
# their compositions there a fifth of the package's own import time, which a short grad
# program never needs.  A walk over every primitive imports them first.
ON_FIRST_USE = ("linalg", "polynomial", "sets", "sorting", "statistics")


def _scipy_special_rules(func: object) -> bool:
    """scipy.special's ufuncs reach their rules (``special.py``) the first time one of
    them meets a traced value (``scipy.special.erf(x)``): SciPy is imported by the code
    that calls it, not by ``import autodiff`` (it takes longer than the whole package).
    ``scipy_linalg`` and ``signal``, whose SciPy functions cannot meet a traced value,
    are imported with ``autodiff.scipy.linalg`` and ``.signal``."""
    if "scipy.special" not in _sys.modules or not isinstance(func, _np.ufunc):
        return False
    from autodiff.rules import special  # noqa: F401  (registers them)

    return True


_overrides.lazy_rules.append(_scipy_special_rules)
