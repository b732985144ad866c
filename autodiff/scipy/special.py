"""``autodiff.scipy.special``: like ``scipy.special``, differentiable and batchable.

The functions are declared, with their rules, in ``autodiff/rules/special.py``.
"""

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.special")

import scipy.special as _reference  # noqa: E402

from autodiff.core.numpy_args import wrap_namespace as _wrap_namespace  # noqa: E402
from autodiff.rules.special import *  # noqa: E402, F403
from autodiff.rules.special import __all__ as __all__  # noqa: E402

_wrap_namespace(globals(), _reference)  # lists and tuples as SciPy takes them
