"""Registry records: arrays created from other arrays."""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import real

OPS = [
    OpInfo("zeros_like", [Sample((real(2, 3),))], differentiable=False),
    OpInfo("ones_like", [Sample((real(2, 3),))], differentiable=False),
]
OPS += [
    OpInfo(
        "full_like",
        [Sample((real(2, 3),), {"fill_value": 2.5}, label="constant")],
        differentiable=False,
    ),
    OpInfo(
        "full_like",
        [Sample((real(2, 3), real()), label="traced fill")],
        call=lambda lib, a, v: lib.full_like(a, v),
        numpy_dispatch=(0,),
    ),
    # NumPy leaves the entries unspecified; autodiff documents zeros.
    OpInfo(
        "empty_like",
        [Sample((real(2, 3),))],
        differentiable=False,
        numpy_name=None,
        reference=np.zeros_like,
    ),
]
