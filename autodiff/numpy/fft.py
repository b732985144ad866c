"""``autodiff.numpy.fft``: like ``numpy.fft``, differentiable and batchable.

The functions are declared, with their rules, in ``autodiff/rules/fft.py``.
"""

from autodiff.rules.fft import *  # noqa: F403
from autodiff.rules.fft import __all__ as __all__
