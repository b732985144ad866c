"""``autodiff.scipy``: differentiable, batchable counterparts of SciPy functions.

``autodiff.scipy.special``, ``.linalg``, ``.signal``, ``.stats``, ``.integrate``,
``.optimize``, ``.sparse`` and ``.sparse.linalg`` need SciPy (``pip install
'autodiff[scipy]'``); each is imported on its own (``import autodiff.scipy.linalg``).
"""

__all__ = ["integrate", "linalg", "optimize", "signal", "sparse", "special", "stats"]
