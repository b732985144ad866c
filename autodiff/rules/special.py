"""scipy.special functions (``autodiff.scipy.special``).  Needs SciPy."""

from __future__ import annotations

__all__: list[str] = []
