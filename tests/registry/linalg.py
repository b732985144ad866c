"""Registry records: numpy.linalg (``anp.linalg``)."""

from __future__ import annotations

OPS: list = []
