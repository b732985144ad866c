"""Importing the package: the cyclic garbage collector paused while it loads.

``import autodiff`` makes ~30,000 objects (primitives, rules, the ``autodiff.numpy``
functions) that live as long as the process. Each 700 of them start a collection that
finds nothing to free; together they are ~2 ms of a ~25 ms import, which autograd's
short example programs notice. So the package loads with the collector paused, and it
runs again, as it was, however the import ends.

>>> import gc
>>> with paused_collection():
...     gc.isenabled()
False
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused_collection"]


@contextlib.contextmanager
def paused_collection() -> Iterator[None]:
    """The collector off inside; on after it if it was on before."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
