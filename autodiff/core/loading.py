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
  the import ends, and what the import made starts in the oldest generation
  (``gc.freeze()`` then ``gc.unfreeze()``, which moves the young generations there
  without looking at them). Left young, the package's ~6,000 objects, which live as
  long as the process, would be traversed by the program's next young collections
  twice before reaching it: 2-6 M instructions of a short program (the objects a
  program made before it imported autodiff move with them; a collector frozen by the
  program is left as it is).

A third cost, byte code that only some transforms run: Taylor mode's rule kit
(``rules/_taylor.py``), sparsity detection's (``rules/_sparsity.py``, with
``core/index_sets.py``) and the staging graph (``core/graph.py``), ~127 KB of byte code
that a plain ``grad`` program never runs. The rule blocks loaded at ``import autodiff``
make their Taylor and sparsity rules from those kits' factories, one call per primitive
(``by_recurrence(exp, exp_like())``); a :class:`RuleKit` makes each such rule a
:class:`DeferredRule` instead, which imports the kit and builds the rule at its first call.

>>> import gc
>>> with loading_package():
...     made = [[]]
...     gc.isenabled(), checks_rules()
(False, False)
>>> checks_rules(), any(o is made for o in gc.get_objects(generation=2))
(True, True)
"""

from __future__ import annotations

import contextlib
import contextvars
import gc
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = [
    "DeferredRule",
    "RuleKit",
    "checks_rules",
    "load",
    "loading_package",
    "on_first_use",
    "resolved",
    "unchecked_rules",
]

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
            if not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
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
    (``jit``, ``anp.linalg``, ...), inside :func:`loading_package`.  A module already
    loaded is returned as it is: callers ask at every use, and the context costs more
    than the lookup."""
    module = sys.modules.get(name)
    if module is not None:
        return module
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


# --- rules made at their first call -------------------------------------------------------


class DeferredRule:
    """The rule ``module.name(*args, **kwargs)`` (``module.name`` itself where ``args`` is
    None), imported and made at its first call (or first attribute read), then cached:
    every call is forwarded to it, and so is every attribute read (collapsed Taylor mode
    reads a Taylor rule's ``elementwise``).  Arguments that are themselves deferred rules
    are made first, so a factory gets what it would have got at import time.  Calling one
    costs one more Python call than the rule itself: for Taylor and sparsity rules only,
    never for a JVP, VJP or batching rule, which ``grad`` and ``vmap`` call at every
    primitive.  :class:`RuleKit` writes them as the factories' own calls.

    >>> rule = DeferredRule("functools", "partial", (pow, 2))
    >>> rule
    DeferredRule('functools', 'partial', <built-in function pow>, 2)
    >>> rule(10), rule.args   # a call, and an attribute of the rule made
    (1024, (2,))
    """

    __slots__ = ("_args", "_kwargs", "_module", "_name", "_rule")

    def __init__(self, module: str, name: str, args: tuple | None = None,
                 kwargs: dict[str, Any] | None = None) -> None:  # fmt: skip
        self._module, self._name, self._args, self._kwargs = module, name, args, kwargs or {}
        self._rule: Callable | None = None

    def resolve(self) -> Callable:
        """The rule itself: made at the first call, the same object after."""
        rule = self._rule
        if rule is None:
            rule = getattr(importlib.import_module(self._module), self._name)
            if self._args is not None:
                args = [resolved(a) for a in self._args]
                rule = rule(*args, **{k: resolved(v) for k, v in self._kwargs.items()})
            self._rule = rule
        return rule

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return (self._rule or self.resolve())(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        # only for names the class lacks; a slot not yet set (while copying) is no rule's
        if name in DeferredRule.__slots__:
            raise AttributeError(name)
        return getattr(self.resolve(), name)

    def __repr__(self) -> str:
        args = [repr(a) for a in (self._module, self._name, *(self._args or ()))]
        args += [f"{k}={v!r}" for k, v in self._kwargs.items()]
        return f"DeferredRule({', '.join(args)})"


def resolved(rule: Any) -> Any:
    """``rule`` itself, or the rule a :class:`DeferredRule` stands for (made now): what
    the rule checks of ``core/rule_forms.py`` look at."""
    return rule.resolve() if isinstance(rule, DeferredRule) else rule


class RuleKit:
    """A module of rule factories that loads at its rules' first call: ``kit.factory(...)``
    is the rule ``module.factory(...)``, a :class:`DeferredRule`; ``kit.plain("name")``
    the module's function ``name`` itself (a rule, not a factory), deferred the same way.

    >>> kit = RuleKit("operator")
    >>> kit.itemgetter(0), kit.plain("neg")
    (DeferredRule('operator', 'itemgetter', 0), DeferredRule('operator', 'neg'))
    """

    __slots__ = ("_module",)

    def __init__(self, module: str) -> None:
        self._module = module

    def plain(self, name: str) -> DeferredRule:
        """The module's function ``name`` itself, imported at its first call."""
        return DeferredRule(self._module, name)

    def __getattr__(self, factory: str) -> Callable[..., DeferredRule]:
        if factory.startswith("_"):  # the kits' factories are public names
            raise AttributeError(factory)
        return lambda *args, **kwargs: DeferredRule(self._module, factory, args, kwargs)

    def __repr__(self) -> str:
        return f"RuleKit({self._module!r})"
