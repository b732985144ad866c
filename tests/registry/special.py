"""Registry records: scipy.special (``autodiff.scipy.special``)."""

from __future__ import annotations

OPS: list = []
