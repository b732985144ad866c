"""Primitive families: each module declares its primitives, one block each
(implementation + VJP + JVP + batching rule), and the public functions that
``autodiff.numpy`` re-exports.  See ``README.md`` in this folder."""

import sys as _sys

import numpy as _np

from autodiff.core import tracer as _tracer
from autodiff.rules import (  # noqa: F401  (importing registers the primitives)
    creation,
    dtypes,
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


_tracer.lazy_rules.append(_scipy_special_rules)

# Shape rules for staging, for the primitives no elementwise helper declared.
from autodiff.rules import _shapes  # noqa: E402, F401
