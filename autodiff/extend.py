"""``autodiff.extend``: the API the library uses for its own primitives and
transforms, for yours.

Declare a primitive with its NumPy implementation and any subset of rules
(a missing JVP or VJP is derived from the other by transposition; a missing
batching rule becomes a loop with a warning; a missing Taylor rule is derived
from the JVP rule, also with a warning: ``linear_taylor``, ``multilinear_taylor``
and ``jvp_taylor`` declare the common ones), or use the elementwise helpers,
exactly as ``autodiff/rules/`` does:

>>> import numpy as np, autodiff, autodiff.numpy as anp
>>> from autodiff.extend import Primitive
>>> cube_p = Primitive("cube", lambda x: x**3, vjp=[lambda ct, ans, x: ct * 3 * x**2])
>>> float(autodiff.grad(cube_p.bind)(2.0))
12.0

A primitive's other rules are declared the same way, in its block: a shape rule for
staging (``def_shape``, returning a ``ShapedArray``), a sparsity rule for sparsity
detection (``def_sparsity``, returning a ``Sparsity`` of ``Gather``, ``Groups``,
``Edges`` or ``ALL`` reads; ``moves(impl)`` makes one for a function that only moves
elements) and a lowering for ``jit``'s compiling tier (``def_lowering``: an
``Elementwise`` scalar function, a ``Reduction``, a ``View``, a ``Gufunc``, or an
``Emitter`` writing statements, which raises ``NotLowered`` for what it cannot
express); ``docs/extending.md`` gives a primitive all of them, with the contract an
``Emitter`` keeps.

Write a transform by subclassing ``Interpreter`` and ``Tracer`` and
registering its methods of the dispatch points ``lift`` and ``process``,
``@process.register(MyInterpreter, Primitive)`` (``@dispatch`` on functions
named ``lift``/``process`` does the same; see ``docs/extending.md``, which also
says how a transform sees inside control flow, ``ControlFlowPrimitive``).  Check a
primitive's rules with ``autodiff.testing.check_primitive``.
"""

from autodiff.control.common import ControlFlowPrimitive
from autodiff.core.arrays import ndim_of, normalize_axes, shape_of
from autodiff.core.graph import ShapedArray
from autodiff.core.index_sets import ALL, Edges, Gather, Groups, Sparsity
from autodiff.core.lowering import Elementwise, Emitter, Gufunc, NotLowered, Reduction, View
from autodiff.core.overrides import register_numpy
from autodiff.core.primitive import Primitive, dispatch, lift, process
from autodiff.core.rule_forms import jvp_taylor, linear_taylor, multilinear_taylor
from autodiff.core.stack import (
    Interpreter,
    check_live,
    current_interpreters,
    live_again,
    new_interpreter,
    owned,
)
from autodiff.core.tracer import Tracer
from autodiff.debug.rule_checks import debug_rules
from autodiff.rules._helpers import (
    bring_to_front,
    broadcasting,
    implements,
    move_to_front,
    to_front_padded,
    unary,
    unbroadcast,
)
from autodiff.rules._sparsity import moves, numbered, shape_of_operand
from autodiff.transforms.custom import custom_jvp, custom_vjp

__all__ = [
    "ALL",
    "ControlFlowPrimitive",
    "Edges",
    "Elementwise",
    "Emitter",
    "Gufunc",
    "Gather",
    "Groups",
    "Interpreter",
    "NotLowered",
    "Reduction",
    "Primitive",
    "ShapedArray",
    "Sparsity",
    "Tracer",
    "View",
    "bring_to_front",
    "broadcasting",
    "check_live",
    "current_interpreters",
    "custom_jvp",
    "custom_vjp",
    "debug_rules",
    "dispatch",
    "implements",
    "jvp_taylor",
    "lift",
    "linear_taylor",
    "live_again",
    "move_to_front",
    "moves",
    "multilinear_taylor",
    "ndim_of",
    "new_interpreter",
    "normalize_axes",
    "numbered",
    "owned",
    "process",
    "register_numpy",
    "shape_of",
    "shape_of_operand",
    "to_front_padded",
    "unary",
    "unbroadcast",
]
