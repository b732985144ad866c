"""Registry records: numpy.fft (``anp.fft``)."""

from __future__ import annotations

OPS: list = []
