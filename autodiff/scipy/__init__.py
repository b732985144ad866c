"""``autodiff.scipy``: differentiable, batchable counterparts of SciPy functions.

``autodiff.scipy.special``, ``.linalg``, ``.signal``, ``.stats``, ``.integrate``,
``.optimize``, ``.sparse`` and ``.sparse.linalg`` need SciPy (``pip install
'autodiff[scipy]'``); each is imported when first used, by ``import
autodiff.scipy.linalg`` or as an attribute (``autodiff.scipy.special.erf``, as
``jax.scipy.special.erf``), so that ``import autodiff`` does not import SciPy.
"""

import importlib
from typing import Any

__all__ = ["integrate", "linalg", "optimize", "signal", "sparse", "special", "stats"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
