"""``autodiff.scipy.signal``: like ``scipy.signal``'s convolutions, differentiable and
batchable.

The functions are declared, with their rules, in ``autodiff/rules/signal.py``.
"""

from autodiff.scipy._require import require_scipy

require_scipy("autodiff.scipy.signal")

import scipy.signal as _reference  # noqa: E402

from autodiff.core.numpy_args import wrap_namespace as _wrap_namespace  # noqa: E402
from autodiff.rules.signal import *  # noqa: E402, F403
from autodiff.rules.signal import __all__ as __all__  # noqa: E402

_wrap_namespace(globals(), _reference)  # lists and tuples as SciPy takes them
