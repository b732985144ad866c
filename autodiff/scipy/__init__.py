"""``autodiff.scipy``: differentiable, batchable counterparts of SciPy functions.

``autodiff.scipy.special``, ``.linalg``, ``.signal``, ``.stats`` and ``.integrate``
need SciPy (``pip install 'autodiff[scipy]'``); each is imported on its own
(``import autodiff.scipy.linalg``).
"""

__all__ = ["integrate", "linalg", "signal", "special", "stats"]
