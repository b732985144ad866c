"""numpy.linalg: solvers, decompositions and norms (``anp.linalg``)."""

from __future__ import annotations

__all__: list[str] = []
