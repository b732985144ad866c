"""The registry of primitive samples: one ``OpInfo`` record per public function.

Each record names a public function (``"sin"``, ``"linalg.solve"``,
``"fft.rfft"``, ``"special.erf"``), says whether it is differentiable,
which NumPy/SciPy function a user would call instead on traced values, and
what computes its forward value independently (``reference``), and lists
samples: arguments drawn from a named input domain
(``tests/registry/domains.py``, which also redraws independent examples for
the vmap tests), static keyword arguments, and the differentiable argument
positions.

``tests/test_primitives.py`` runs every sample through every transform, with
``autodiff.numpy`` and with plain NumPy calls on traced values;
``tests/coverage.py`` turns the registry into ``docs/coverage.md``.  Adding a
function means adding its record to the family module here.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import autodiff.numpy as anp
from tests.registry.domains import Redraw, redraw_of

FAMILIES = [
    "creation",
    "elementwise",
    "reductions",
    "statistics",
    "shape",
    "indexing",
    "sorting",
    "sets",
    "products",
    "polynomial",
    "linalg",
    "fft",
    "special",
    # autodiff.lax (records named "lax.<function>")
    "convolution",
    # autodiff.scipy beyond special (records named "scipy.<module>.<function>")
    "scipy_linalg",
    "signal",
    "stats",
    "integrate",
    "sparse",
    "apply",
]


@dataclass(frozen=True)
class Sample:
    """Positional arguments are arrays (transforms batch and differentiate
    them); static parameters (axes, shapes, dtypes, bounds) are keywords.

    ``args`` are stored as plain arrays; ``redraws`` keeps, for each, how to
    draw another example from the same domain (``tests/registry/domains.py``):
    ``draw(rng)`` gives a whole new set of arguments, each drawn independently."""

    args: tuple
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""
    diff: tuple[int, ...] | None = None  # None: every floating-point argument
    rtol: float | None = None  # check_grads tolerance, for ill-conditioned samples
    redraws: tuple[Redraw, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self):
        redraws = self.redraws or tuple(redraw_of(a) for a in self.args)
        args = tuple(np.array(a) for a in self.args)  # plain arrays, not Drawn views
        bad = [a.dtype for a in args if a.dtype.kind not in "biufc"]
        assert not bad, f"sample {self.label!r}: non-array positional argument ({bad})"
        assert len(redraws) == len(args), f"sample {self.label!r}: one redraw per argument"
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "redraws", tuple(redraws))
        # Static keyword arrays (indices, bins) stay fixed: plain arrays, not Drawn ones.
        kwargs = {
            k: np.array(v) if isinstance(v, np.ndarray) else v for k, v in self.kwargs.items()
        }
        object.__setattr__(self, "kwargs", kwargs)

    def draw(self, rng: np.random.Generator, position: int) -> np.ndarray:
        """A fresh example of argument ``position``, with its shape and dtype."""
        arg = self.args[position]
        new = np.asarray(self.redraws[position](rng))
        assert new.shape == arg.shape, (self.label, position, new.shape, arg.shape)
        return new.astype(arg.dtype, copy=False)

    def diff_positions(self) -> tuple[int, ...]:
        if self.diff is not None:
            return self.diff
        return tuple(i for i, a in enumerate(self.args) if np.asarray(a).dtype.kind in "fc")


@dataclass
class OpInfo:
    """One public function and its samples.

    ``call(lib, *args, **kwargs)`` applies the function from ``lib`` (the
    ``autodiff.numpy`` module or the ``numpy`` module); by default it looks up
    ``name`` in ``lib`` (``numpy_name`` for NumPy, when it differs).
    ``numpy_name=None`` means there is no NumPy counterpart to call on traced
    values (SciPy converts them, or the spelling is autodiff's own).

    ``reference(*args, **kwargs)`` computes the forward value on plain arrays
    without autodiff: NumPy or SciPy, or a closed form.  It defaults to the
    NumPy call (``call`` with the ``numpy`` module, or ``numpy_name``) where
    there is one; records without one must give it.
    """

    name: str
    samples: list[Sample]
    differentiable: bool = True
    numpy_name: str | None = "="
    call: Callable | None = None
    keeps_float32: bool = True
    # Positions NumPy's __array_function__ dispatcher looks at (None: all).  With
    # plain arrays there, NumPy never asks a traced value in another position.
    numpy_dispatch: tuple[int, ...] | None = None
    reference: Callable | None = None
    kind: str = ""  # filled in: "primitive" or "composition"

    def function(self, lib: str) -> Callable:
        if self.call is not None:
            module = anp if lib == "anp" else np
            return lambda *args, **kwargs: self.call(module, *args, **kwargs)
        return resolve(self.name if lib == "anp" else self.numpy_name_resolved, lib)

    @property
    def numpy_name_resolved(self) -> str | None:
        return self.name if self.numpy_name == "=" else self.numpy_name

    @property
    def has_numpy(self) -> bool:
        return self.numpy_name_resolved is not None

    def bound(self, sample: Sample, lib: str = "anp") -> Callable:
        fn = self.function(lib)
        kwargs = dict(sample.kwargs)
        return lambda *args: fn(*args, **kwargs)

    def reference_for(self, sample: Sample) -> Callable | None:
        """The independent forward value of ``sample``'s function, or None."""
        kwargs = dict(sample.kwargs)
        if self.reference is not None:
            reference = self.reference
            return lambda *args: reference(*args, **kwargs)
        return self.bound(sample, "np") if self.has_numpy else None


def resolve(dotted: str, lib: str) -> Callable:
    """``"linalg.solve"`` in ``autodiff.numpy`` or ``numpy``; ``"special.erf"``
    in ``autodiff.scipy.special`` or ``scipy.special``; ``"scipy.stats.norm.logpdf"``
    in ``autodiff.scipy.stats`` or ``scipy.stats``."""
    if dotted.startswith("special."):
        dotted = f"scipy.{dotted}"
    if dotted.startswith("lax.") and lib == "anp":  # autodiff.lax: JAX's names, no NumPy's
        obj: Any = importlib.import_module("autodiff.lax")
        for part in dotted.removeprefix("lax.").split("."):
            obj = getattr(obj, part)
        return obj
    obj = anp if lib == "anp" else np
    if dotted.startswith("scipy."):
        _, module, dotted = dotted.split(".", 2)
        prefix = "autodiff.scipy" if lib == "anp" else "scipy"
        obj = importlib.import_module(f"{prefix}.{module}")
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


def _load() -> list[OpInfo]:
    ops = []
    for family in FAMILIES:
        module = importlib.import_module(f"tests.registry.{family}")
        ops += module.OPS
    for op in ops:
        try:
            fn = resolve(op.name, "anp")
        except AttributeError:  # at.set, add.reduce, ...: reached through other calls
            fn = None
        op.kind = "primitive" if hasattr(fn, "primitive") else "composition"
    return ops


OPS: list[OpInfo] = _load()

# (function name, test) -> reason.  Listed failures run with xfail(strict=True):
# one that starts passing fails the suite, so this list stays honest.
EXPECTED_FAILURES: dict[tuple[str, str], str] = {}
