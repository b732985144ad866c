"""JAX's ``precision=`` argument of products and convolutions, checked and accepted.

On a GPU or TPU JAX's precision trades speed for accuracy in float32 products; NumPy
computes in the operands' dtype, so here it changes nothing.  It is accepted so that
JAX code ports unchanged, and checked so that a misspelt one fails as it does in JAX.
"""

from __future__ import annotations

import enum
from typing import Any

__all__ = ["Precision", "check_precision"]


class Precision(enum.Enum):
    """Like jax.lax.Precision: ``DEFAULT``, ``HIGH``, ``HIGHEST`` (also spelt
    ``'default'``/``'fastest'``/``'bfloat16'``, ``'high'``/``'tensorfloat32'``/
    ``'bfloat16_3x'``, ``'highest'``/``'float32'``).  Accepted for JAX's sake; NumPy
    computes every product in its operands' dtype whatever the precision.

    >>> Precision("highest")
    Precision.HIGHEST
    """

    DEFAULT = 0
    HIGH = 1
    HIGHEST = 2

    @classmethod
    def _missing_(cls, value: object) -> Precision | None:
        return _STRINGS.get(value) if isinstance(value, str) else None

    def __repr__(self) -> str:
        return f"Precision.{self.name}"


_STRINGS = {"highest": Precision.HIGHEST, "float32": Precision.HIGHEST,
            "high": Precision.HIGH, "bfloat16_3x": Precision.HIGH,
            "tensorfloat32": Precision.HIGH, "default": Precision.DEFAULT,
            "bfloat16": Precision.DEFAULT, "fastest": Precision.DEFAULT}  # fmt: skip
# JAX's DotAlgorithmPreset names, which its precision= also takes
_ALGORITHMS = frozenset(
    [
        "DEFAULT",
        "ANY_F8_ANY_F8_F32",
        "ANY_F8_ANY_F8_F32_FAST_ACCUM",
        "ANY_F8_ANY_F8_ANY",
        "ANY_F8_ANY_F8_ANY_FAST_ACCUM",
        "F16_F16_F16",
        "F16_F16_F32",
        "BF16_BF16_BF16",
        "BF16_BF16_F32",
        "BF16_BF16_F32_X3",
        "BF16_BF16_F32_X6",
        "BF16_BF16_F32_X9",
        "TF32_TF32_F32",
        "TF32_TF32_F32_X3",
        "F32_F32_F32",
        "F64_F64_F64",
    ]
)


def _one(p: Any) -> bool:
    return isinstance(p, Precision) or (isinstance(p, str) and p in _STRINGS)


def check_precision(precision: Any, name: str) -> None:
    """Raise ``ValueError`` unless ``precision`` is what JAX's ``precision=`` takes: None,
    a ``Precision``, one of its strings, a pair of either, or a dot-algorithm preset name.

    >>> check_precision(("highest", Precision.HIGH), "dot")
    >>> check_precision("hihgest", "dot")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ValueError: dot(..., precision='hihgest'): precision must be None, a Precision (DEFAULT, ...
    """
    if (
        precision is None
        or _one(precision)
        or (isinstance(precision, str) and precision in _ALGORITHMS)
    ):
        return
    if isinstance(precision, (tuple, list)) and len(precision) == 2 and all(map(_one, precision)):
        return
    raise ValueError(
        f"{name}(..., precision={precision!r:.60}): precision must be None, a Precision "
        f"(DEFAULT, HIGH, HIGHEST), one of 'default', 'high', 'highest', 'fastest', "
        f"'bfloat16', 'bfloat16_3x', 'tensorfloat32', 'float32', a pair of these, or a dot "
        f"algorithm preset name such as 'F64_F64_F64'; on NumPy it changes nothing"
    )
