"""``autodiff.numpy.random``: random draws that know about ``vmap``'s randomness modes.

(Being written: normal, uniform, bernoulli.)
"""

__all__: list[str] = []
