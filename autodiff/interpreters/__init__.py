"""The interpreters: one per transform (reverse mode with its tape, forward mode,
batching, staging, explain), and the transposition that derives a missing VJP or JVP
rule (see README.md).

Importing this package installs that derivation on the core (``transpose.py``): any
import of an interpreter module runs this file first, so a primitive given only a
JVP rule (or only a VJP rule) has both wherever reverse or forward mode can run.
``transpose.py`` itself loads at the first derivation: the package's own primitives
have both rules, so a program of them never needs it.
"""

from autodiff.core.loading import load
from autodiff.core.primitive import transposition


def _derivation(how: str):
    return lambda rule: getattr(load("autodiff.interpreters.transpose"), how)(rule)


transposition.update({how: _derivation(how) for how in ("vjp_from_jvp", "jvp_from_vjp")})
