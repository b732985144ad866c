"""Loading the package: two costs a program would pay at every start, for nothing.

``import autodiff`` declares some 300 primitives and makes ~30,000 objects that live as
long as the process. Short programs notice its import (autograd's example programs run
in well under a second), so while the package loads its own modules (at ``import
autodiff``, and those it loads at first use, ``jit`` or ``anp.linalg``: :func:`load`):

* **the rules are not checked as they register.** Those checks (``core/rule_forms.py``)
  exist to tell a user at once that a rule of theirs takes the wrong arguments; the
  package's own rules are the same at every start, so the test suite checks them
  (``tests/test_project.py`` loads every module with ``AUTODIFF_CHECK_OWN_RULES=1``).
  They were ~8 M instructions, a quarter of what the package's import cost beyond
  autograd's. A user's primitives are checked.
* **the cyclic collector is paused.** Each 700 new objects start a collection that
  finds nothing to free: ~2 ms of a ~23 ms import. It runs again, as it was, however
  the import ends.

>>> import gc
>>> with loading_package():
...     gc.isenabled(), checks_rules()
(False, False)
>>> checks_rules()
True
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = ["checks_rules", "load", "loading_package", "on_first_use", "unchecked_rules"]

_OWN_RULES = contextvars.ContextVar("autodiff_loading_own_rules", default=False)


def checks_rules() -> bool:
    """Whether a rule registered now is checked: always, but for the package's own while
    it loads (unless the environment sets ``AUTODIFF_CHECK_OWN_RULES``)."""
    return not _OWN_RULES.get()


@contextlib.contextmanager
def loading_package() -> Iterator[None]:
    """The package's own modules load inside: their rules unchecked, the collector off
    (and on after it if it was on before)."""
    token = _OWN_RULES.set(not os.environ.get("AUTODIFF_CHECK_OWN_RULES"))
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        _OWN_RULES.reset(token)


class unchecked_rules:  # (a context manager: named as the functions that are one)
    """Rules the package makes as a program runs register inside unchecked, as its own do
    while it loads: a ``custom_vjp`` call's primitive, whose rules are of the package's
    forms (checking them cost a third of making them, at every call).  A class, not a
    generator: ``contextlib``'s machinery cost more than the rest of it."""

    __slots__ = ("_token",)

    def __enter__(self) -> None:
        self._token = _OWN_RULES.set(True)

    def __exit__(self, *exc: object) -> None:
        _OWN_RULES.reset(self._token)


def load(name: str) -> Any:
    """``importlib.import_module(name)`` for a module of the package loaded at first use
    (``jit``, ``anp.linalg``, ...), inside :func:`loading_package`."""
    with loading_package():
        return importlib.import_module(name)


def on_first_use(
    namespace: dict[str, Any], names: Mapping[str, tuple[str, str | None]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's ``__getattr__`` and ``__dir__`` for ``names`` it loads when first read:
    ``name -> (module, its attribute, or None for the module itself)``.  The value then
    becomes a plain attribute of ``namespace`` (the package's ``globals()``)."""

    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        module, attribute = names[name]
        value = load(module)
        namespace[name] = value = value if attribute is None else getattr(value, attribute)
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
