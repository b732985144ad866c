"""``autodiff.numpy.linalg``: like ``numpy.linalg``, differentiable and batchable.

The functions are declared, with their rules, in ``autodiff/rules/linalg.py``.
"""

from autodiff.rules.linalg import *  # noqa: F403
from autodiff.rules.linalg import __all__ as __all__
