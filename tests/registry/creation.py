"""Registry records: arrays created from other arrays."""

from __future__ import annotations

from tests.registry import OpInfo, Sample
from tests.registry.domains import real

OPS = [
    OpInfo("zeros_like", [Sample((real(2, 3),))], differentiable=False),
    OpInfo("ones_like", [Sample((real(2, 3),))], differentiable=False),
]
