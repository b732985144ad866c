"""Primitive families: each module declares its primitives, one block each
(implementation and every rule), and the public functions that bind them, which
``autodiff.numpy`` re-exports; ``compositions`` holds the few compositions the rules
call.  See ``README.md`` in this folder."""

import sys as _sys

import numpy as _np

from autodiff.core import overrides as _overrides
from autodiff.rules import (  # noqa: F401  (importing registers the primitives)
    compositions,
    creation,
    elementwise,
    fft,
    indexing,
    linalg,
    polynomial,
    products,
    reductions,
    sets,
    shape,
    sorting,
    statistics,
)


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
