"""Numerical checkers for derivatives and batching.

``check_grads`` compares forward and reverse mode against central finite
differences (in inner-product form, so it costs a few evaluations whatever
the size) and against each other, recursively to the given order.
``check_vmap`` compares ``vmap`` against a Python loop.  ``check_primitive``
checks one primitive's own rules, element by element, on small samples.  All
raise ``AssertionError`` with the offending numbers.

>>> import numpy as np
>>> import autodiff.numpy as anp
>>> from autodiff.testing import check_grads, check_primitive, check_vmap
>>> check_grads(np.sin, (np.array([0.1, 0.2]),), order=2)
>>> check_vmap(lambda x: x.sum(), 0, (np.ones((3, 2)),))
>>> check_primitive(anp.sin.primitive, (np.array([0.1, 0.2]),)).checks_run
['forward', 'VJP', 'JVP', 'VJP vs JVP', 'second order', 'batching', 'Taylor']
"""

from autodiff.core.loading import on_first_use
from autodiff.testing.checkers import check_grads, check_vmap

__all__ = ["check_grads", "check_vmap", "check_primitive", "PrimitiveReport"]

# check_primitive (with Taylor mode, which it checks) loads when first named: autograd's
# check_grads, which programs call, needs only checkers.py.
_FIRST_USE = {name: ("autodiff.testing.primitive_checks", name)
              for name in ("check_primitive", "PrimitiveReport")}  # fmt: skip
__getattr__, __dir__ = on_first_use(globals(), _FIRST_USE)
