"""``autodiff.numpy`` (imported as ``anp``): NumPy-style functions that accept
traced values and are differentiable and batchable.

Every function here is declared, with its rules, in one block of
``autodiff/rules/``; the same functions run when plain ``numpy`` functions,
operators or ndarray methods meet a traced value.

>>> import numpy as np
>>> import autodiff, autodiff.numpy as anp
>>> float(autodiff.grad(lambda x: anp.sum(anp.sin(x) ** 2))(np.array(0.5)))
0.8414709848078965
"""

from autodiff.numpy import fft as fft
from autodiff.numpy import linalg as linalg
from autodiff.numpy import random as random
from autodiff.rules.creation import *  # noqa: F403
from autodiff.rules.creation import __all__ as _creation
from autodiff.rules.elementwise import *  # noqa: F403
from autodiff.rules.elementwise import __all__ as _elementwise
from autodiff.rules.indexing import *  # noqa: F403
from autodiff.rules.indexing import __all__ as _indexing
from autodiff.rules.products import *  # noqa: F403
from autodiff.rules.products import __all__ as _products
from autodiff.rules.reductions import *  # noqa: F403
from autodiff.rules.reductions import __all__ as _reductions
from autodiff.rules.shape import *  # noqa: F403
from autodiff.rules.shape import __all__ as _shape
from autodiff.rules.sorting import *  # noqa: F403
from autodiff.rules.sorting import __all__ as _sorting

__all__ = sorted(
    [
        *_creation,
        *_elementwise,
        *_indexing,
        *_products,
        *_reductions,
        *_shape,
        *_sorting,
        "fft",
        "linalg",
        "random",
    ]
)
