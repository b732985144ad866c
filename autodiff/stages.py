"""``autodiff.stages``: a jitted function's compiler stages, to look at and to run.

``jit`` stages a function once per signature and takes it through the compiler's
pipeline (``autodiff/compiler/stages.py``): trace, optimise, replay as NumPy calls or
lower the regions that compile, compile, cache.  ``jit(f).trace(*args)`` gives the
first stage, after JAX's ``jit(f).trace(x).lower().compile()``:

- :class:`Traced`: the graph as staged (``.graph``, ``.as_text()``); ``.lower()`` goes on;
- :class:`Lowered`: the optimised graph a call runs, the regions of it that compile
  (:class:`LoweredRegion`: equations and kernel source) and the equations that stay
  NumPy calls (``.numpy_calls``); ``.as_text()`` marks each equation's place,
  ``.cost_analysis()`` counts calls and memory traffic; ``.compile()`` goes on;
- :class:`Compiled`: a callable (the traced call's arguments in, the function's results
  out), with ``compile_time`` and the code it runs (``.as_text()``).

>>> import numpy as np, autodiff, autodiff.numpy as anp
>>> f = autodiff.jit(lambda x: anp.cumsum(anp.sin(x) * 2.0) * x)
>>> x = np.linspace(0.0, 1.0, 5)
>>> lowered = f.trace(x).lower()
>>> [region.primitives for region in lowered.regions]  # one kernel: sin and multiply fused
[['sin', 'multiply']]
>>> [eqn.prim.name for eqn in lowered.numpy_calls]  # a lone multiply is not worth a kernel
['cumsum', 'multiply']
>>> compiled = lowered.compile()
>>> bool(np.allclose(compiled(x), f(x))), compiled.compile_time > 0
(True, True)
"""

from autodiff.compiler.backend import LoweredRegion
from autodiff.compiler.stages import Compiled, Lowered, Traced

__all__ = ["Compiled", "Lowered", "LoweredRegion", "Traced"]
