"""``autodiff.lax``: the names of ``jax.lax`` that JAX programs reach for, so that they port
by changing an import (``from autodiff import lax``).

The convolution family, differentiable and batchable to every order:
``conv_general_dilated`` (N-d: strides, padding, input and kernel dilation, layouts,
feature and batch groups), ``conv``, ``conv_with_general_padding``, ``conv_transpose``,
``reduce_window`` (sum, max and min pooling), and the shape helpers ``padtype_to_pads``,
``conv_dimension_numbers``, ``conv_general_shape_tuple``, ``conv_transpose_shape_tuple``,
``reduce_window_shape_tuple``.  Their rules are in ``autodiff/rules/convolution.py``.

Products and slices: ``dot``, ``dot_general``, ``dynamic_slice``,
``dynamic_slice_in_dim``, ``dynamic_index_in_dim`` (the start may be traced).

Control flow and derivatives, the functions ``autodiff`` itself exports: ``cond``,
``switch``, ``while_loop``, ``fori_loop``, ``scan``, ``stop_gradient``,
``custom_root``, ``custom_linear_solve``; and ``add``, ``max``, ``min`` (``reduce_window``'s
computations, elementwise), ``Precision`` (accepted by ``precision=``, which changes
nothing on NumPy).

>>> import numpy as np
>>> from autodiff import grad, lax
>>> image, kernel = np.ones((1, 1, 4, 4)), np.ones((1, 1, 3, 3))
>>> lax.conv(image, kernel, (1, 1), "SAME")[0, 0]
array([[4., 6., 6., 4.],
       [6., 9., 9., 6.],
       [6., 9., 9., 6.],
       [4., 6., 6., 4.]])
>>> pool = lambda x: lax.reduce_window(x, -np.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
>>> grad(lambda x: pool(x).sum())(np.arange(16.0).reshape(1, 1, 4, 4))[0, 0]
array([[0., 0., 0., 0.],
       [0., 1., 0., 1.],
       [0., 0., 0., 0.],
       [0., 1., 0., 1.]])
"""

from autodiff.control.cond import cond, switch
from autodiff.control.fori_loop import fori_loop
from autodiff.control.scan import scan
from autodiff.control.while_loop import while_loop
from autodiff.core.precision import Precision
from autodiff.interpreters.reverse import stop_gradient
from autodiff.lax.convolution import (
    conv,
    conv_general_shape_tuple,
    conv_shape_tuple,
    conv_transpose,
    conv_transpose_shape_tuple,
    conv_with_general_padding,
    reduce_window,
    reduce_window_shape_tuple,
)
from autodiff.lax.products import dot, dot_general
from autodiff.lax.slicing import dynamic_index_in_dim, dynamic_slice, dynamic_slice_in_dim
from autodiff.rules.convolution import (
    ConvDimensionNumbers,
    conv_dimension_numbers,
    conv_general_dilated,
    conv_general_permutations,
    padtype_to_pads,
    reduce_window_max,
    reduce_window_min,
    reduce_window_sum,
)
from autodiff.rules.elementwise import add
from autodiff.rules.elementwise import maximum as max
from autodiff.rules.elementwise import minimum as min
from autodiff.transforms.solvers import custom_linear_solve, custom_root

__all__ = [
    "ConvDimensionNumbers",
    "Precision",
    "add",
    "cond",
    "dot",
    "dot_general",
    "dynamic_index_in_dim",
    "dynamic_slice",
    "dynamic_slice_in_dim",
    "conv",
    "conv_dimension_numbers",
    "conv_general_dilated",
    "conv_general_permutations",
    "conv_general_shape_tuple",
    "conv_shape_tuple",
    "conv_transpose",
    "conv_transpose_shape_tuple",
    "conv_with_general_padding",
    "custom_linear_solve",
    "custom_root",
    "fori_loop",
    "max",
    "min",
    "padtype_to_pads",
    "reduce_window",
    "reduce_window_max",
    "reduce_window_min",
    "reduce_window_shape_tuple",
    "reduce_window_sum",
    "scan",
    "stop_gradient",
    "switch",
    "while_loop",
]
