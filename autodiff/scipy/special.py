"""``autodiff.scipy.special``: like ``scipy.special``, differentiable and batchable.

The functions are declared, with their rules, in ``autodiff/rules/special.py``.
"""

try:
    import scipy.special  # noqa: F401
except ImportError as error:  # SciPy is an optional dependency
    raise ImportError(
        "autodiff.scipy.special needs SciPy, which is not installed: "
        "pip install 'autodiff[scipy]' (or pip install scipy)"
    ) from error

from autodiff.rules.special import *  # noqa: F403
from autodiff.rules.special import __all__ as __all__
