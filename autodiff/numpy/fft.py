"""``autodiff.numpy.fft``: like ``numpy.fft``, differentiable and batchable.

Every public name of ``numpy.fft`` exists; those without rules are NumPy's own.

The functions are declared, with their rules, in ``autodiff/rules/fft.py``.
"""

import numpy as _np

from autodiff.numpy._borrow import borrow as _borrow
from autodiff.rules.fft import *  # noqa: F403
from autodiff.rules.fft import __all__ as _own_names

# The rest of numpy.fft, as NumPy's own objects (see autodiff/numpy/_borrow.py).
_borrowed, __getattr__ = _borrow(globals(), _np.fft)
_own = frozenset(_own_names)
__all__ = sorted(_own | set(_borrowed))
