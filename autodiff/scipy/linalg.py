"""``autodiff.scipy.linalg``: like ``scipy.linalg``, differentiable and batchable.

The functions are declared, with their rules, in ``autodiff/rules/scipy_linalg.py``.
The rest of ``scipy.linalg`` has no rules here: ``anp.linalg`` has ``solve``,
``inv``, ``det``, ``eigh``, ``svd``, ``qr``, ``pinv`` with NumPy's signatures.
"""

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.linalg")

import scipy.linalg as _reference  # noqa: E402

from autodiff.core.numpy_args import wrap_namespace as _wrap_namespace  # noqa: E402
from autodiff.rules.scipy_linalg import *  # noqa: E402, F403
from autodiff.rules.scipy_linalg import __all__ as __all__  # noqa: E402

_wrap_namespace(globals(), _reference)  # lists and tuples as SciPy takes them
