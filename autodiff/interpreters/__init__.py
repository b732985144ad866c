"""The interpreters: one per transform (reverse mode with its tape, forward mode,
batching, staging, explain), and the transposition that derives a missing VJP or JVP
rule (see README.md).

Importing this package installs that derivation on the core (``transpose.py``): any
import of an interpreter module runs this file first, so a primitive given only a
JVP rule (or only a VJP rule) has both wherever reverse or forward mode can run.
"""

from autodiff.interpreters import transpose  # noqa: F401  (installs the derivations)
