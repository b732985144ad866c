"""``autodiff.scipy``: differentiable, batchable counterparts of SciPy functions.

``autodiff.scipy.special`` needs SciPy (``pip install 'autodiff[scipy]'``).
"""

__all__ = ["special"]
