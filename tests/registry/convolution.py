"""Registry records: the convolution family (``autodiff.lax``), checked against JAX's
``lax`` (float64) for their forward values."""

from __future__ import annotations

import numpy as np

from tests.registry import OpInfo, Sample
from tests.registry.domains import cplx, real


def s(*args, label="", **kwargs):
    return Sample(tuple(args), kwargs, label)


def _jax(name: str):
    """``jax.lax.<name>`` in float64 with the highest precision, as a NumPy function."""

    def reference(*args, **kwargs):
        from tests.crosscheck import jax

        lax = jax().lax
        if name.startswith("conv"):
            kwargs = {**kwargs, "precision": lax.Precision.HIGHEST}
        if name.startswith("reduce_window_"):
            kind = name.removeprefix("reduce_window_")
            init = {"sum": 0.0, "max": -np.inf, "min": np.inf}[kind]
            op = {"sum": lax.add, "max": lax.max, "min": lax.min}[kind]
            return np.asarray(lax.reduce_window(args[0], init, op, *args[1:], **kwargs))
        if name == "reduce_window":
            op = {np.add: lax.add, np.maximum: lax.max, np.minimum: lax.min}[kwargs["computation"]]
            kwargs = {**kwargs, "computation": op}
        return np.asarray(getattr(lax, name)(*args, **kwargs))

    return reference


def op(name: str, samples: list) -> OpInfo:
    return OpInfo(f"lax.{name}", samples, numpy_name=None, reference=_jax(name))


CONV = [
    s(real(2, 3, 7), real(4, 3, 3), window_strides=(1,), padding="VALID", label="1-d"),
    s(real(2, 2, 6, 5), real(3, 2, 2, 3), window_strides=(2, 1), padding="SAME",
      rhs_dilation=(1, 2), label="2-d,strides,SAME,rhs dilation"),
    s(real(1, 4, 5, 2), real(2, 3, 2, 3), window_strides=(1, 2), padding=((1, -1), (2, 0)),
      lhs_dilation=(2, 1), dimension_numbers=("NHWC", "HWIO", "NHWC"),
      label="NHWC,lhs dilation,negative pad"),
    s(real(2, 5, 4, 3), real(3, 2, 3, 2), window_strides=(1, 1), padding="SAME_LOWER",
      dimension_numbers=("NHWC", "HWIO", "NCHW"), label="layouts differ"),
    s(real(2, 4, 6), real(6, 2, 3), window_strides=(1,), padding=((1, 1),),
      feature_group_count=2, label="feature groups"),
    s(real(2, 3, 6), real(3, 1, 2), window_strides=(2,), padding="VALID",
      feature_group_count=3, label="depthwise"),
    s(real(4, 3, 5), real(4, 3, 2), window_strides=(1,), padding=((0, 1),),
      batch_group_count=2, label="batch groups"),
    s(real(1, 2, 4, 3, 3), real(2, 2, 2, 2, 2), window_strides=(1, 2, 1), padding="SAME",
      label="3-d"),
    s(cplx(1, 2, 5), cplx(2, 2, 2), window_strides=(1,), padding=((1, 0),), label="complex"),
]  # fmt: skip

WINDOW = [
    s(real(6, 7), window_dimensions=(2, 3), window_strides=(2, 1), label="2-d,strides"),
    s(real(2, 5, 6, 3), window_dimensions=(1, 2, 2, 1), window_strides=(1, 2, 2, 1),
      padding="SAME", label="NHWC pooling,SAME"),
    s(real(5, 4), window_dimensions=(3, 2), window_strides=(1, 1),
      padding=((1, 2), (0, -1)), base_dilation=(2, 1), window_dilation=(1, 2),
      label="dilations,negative pad"),
    s(real(3, 4), window_dimensions=(3, 4), label="one window"),
]  # fmt: skip

OPS = [
    op("conv_general_dilated", CONV),
    op("reduce_window_sum", WINDOW),
    op("reduce_window_max", WINDOW),
    op("reduce_window_min", WINDOW),
    op("reduce_window", [
        s(real(6, 5), init_value=0.0, computation=np.add, window_dimensions=(2, 2),
          window_strides=(1, 2), padding="SAME", label="sum"),
        s(real(6, 5), init_value=-np.inf, computation=np.maximum, window_dimensions=(3, 1),
          window_strides=(2, 1), padding="VALID", label="max"),
        s(real(6, 5), init_value=0.5, computation=np.maximum, window_dimensions=(2, 2),
          window_strides=(1, 1), padding="SAME", label="max,init inside"),
        s(real(7), init_value=1.5, computation=np.add, window_dimensions=(3,),
          window_strides=(2,), padding="SAME", label="sum,init added"),
    ]),
    op("conv", [s(real(2, 3, 6, 5), real(4, 3, 3, 2), window_strides=(1, 2), padding="SAME")]),
    op("conv_with_general_padding", [
        s(real(1, 2, 7), real(3, 2, 3), window_strides=(2,), padding=((2, 1),),
          lhs_dilation=(2,), rhs_dilation=(1,))]),
    op("conv_transpose", [
        s(real(2, 5, 4, 3), real(3, 2, 3, 4), strides=(2, 1), padding="SAME", label="SAME"),
        s(real(1, 4, 2), real(3, 3, 2), strides=(2,), padding="VALID", transpose_kernel=True,
          label="VALID,transpose_kernel"),
        s(real(1, 6, 2), real(3, 2, 2), strides=(2,), padding=((1, 0),),
          use_consistent_padding=True, label="pairs,consistent"),
    ]),
]  # fmt: skip
