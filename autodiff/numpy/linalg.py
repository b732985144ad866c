"""``autodiff.numpy.linalg``: like ``numpy.linalg``, differentiable and batchable.

Every public name of ``numpy.linalg`` exists; those without rules are NumPy's own.

The functions are declared, with their rules, in ``autodiff/rules/linalg.py``.
"""

import numpy as _np

from autodiff.numpy._borrow import borrow as _borrow
from autodiff.rules.linalg import *  # noqa: F403
from autodiff.rules.linalg import __all__ as _own_names

# The rest of numpy.linalg, as NumPy's own objects (see autodiff/numpy/_borrow.py).
_borrowed, __getattr__ = _borrow(globals(), _np.linalg)
_own = frozenset(_own_names)
__all__ = sorted(_own | set(_borrowed))
