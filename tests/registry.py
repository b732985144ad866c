"""The registry of primitive samples: one record per public function.

Each ``Sample`` is a function of positional array arguments (static
parameters baked in), sample arguments drawn from a named input domain,
and which arguments are differentiable.  ``tests/test_primitives.py`` runs
every sample through every transform; adding a primitive means adding its
samples here.

Domains keep samples away from kinks and domain edges (finite differences
are meaningless there); behaviour *at* kinks is pinned separately in
``test_primitives.py::test_subgradient_conventions``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

import autodiff.numpy as anp

_rng = np.random.default_rng(1234)


# --- input domains -------------------------------------------------------------------


def real(*shape):
    return _rng.standard_normal(shape)


def positive(*shape):
    return _rng.uniform(0.5, 2.0, shape)


def away_from_zero(*shape):
    return _rng.choice([-1.0, 1.0], shape) * _rng.uniform(0.5, 2.0, shape)


def distinct(*shape):
    """No ties anywhere (max/min/maximum are smooth there)."""
    n = int(np.prod(shape))
    return (_rng.permutation(n) * 0.37 + _rng.uniform(0, 0.1)).reshape(shape) - n * 0.18


def ints(high, *shape):
    return _rng.integers(0, high, shape)


def mask(*shape):
    return _rng.random(shape) > 0.5


@dataclass
class Sample:
    name: str
    fn: Callable
    args: tuple
    diff: tuple[int, ...] | None = None  # differentiable positions; None: all float args
    differentiable: bool = True
    tags: set = field(default_factory=set)

    def __post_init__(self):
        if self.diff is None:
            self.diff = tuple(i for i, a in enumerate(self.args) if np.asarray(a).dtype.kind == "f")
        if not self.differentiable:
            self.diff = ()

    @property
    def id(self):
        return self.name


SAMPLES: list[Sample] = []


def sample(name, fn, *args, **kw):
    SAMPLES.append(Sample(name, fn, tuple(args), **kw))


# --- elementwise ----------------------------------------------------------------------
for op in ["add", "subtract", "multiply"]:
    f = getattr(anp, op)
    sample(f"{op}[same]", f, real(3, 4), real(3, 4))
    sample(f"{op}[bcast]", f, real(2, 1, 3), real(4, 3))
    sample(f"{op}[scalar]", f, real(), real(3))
sample("divide", anp.divide, real(3, 4), away_from_zero(4))
sample("divide[bcast]", anp.divide, real(), away_from_zero(2, 3))
sample("power", anp.power, positive(3, 2), real(3, 2))
sample("power[bcast]", anp.power, positive(4), real(2, 1))
sample("power[int exponent]", lambda x: anp.power(x, 3), real(4))
sample("power[square]", lambda x: x**2, real(2, 3))
sample("remainder", anp.remainder, positive(5) * 3, positive(5))
sample("negative", anp.negative, real(3, 2))
sample("positive", anp.positive, real(3))
sample("square", anp.square, real(2, 3))
sample("sqrt", anp.sqrt, positive(2, 3))
sample("exp", anp.exp, real(2, 3))
sample("log", anp.log, positive(2, 3))
sample("sin", anp.sin, real(2, 3))
sample("cos", anp.cos, real(2, 3))
sample("tanh", anp.tanh, real(2, 3))
sample("abs", anp.abs, away_from_zero(2, 3))
sample("maximum", anp.maximum, distinct(3, 4), distinct(4) + 0.05)
sample("minimum", anp.minimum, distinct(3, 4), distinct(3, 1) + 0.05)
sample("where", anp.where, mask(3, 4), real(3, 4), real(4))
sample("where[bcast]", anp.where, mask(4), real(2, 4), real())
sample("astype[float32->float64]", lambda x: anp.astype(x, np.float64), real(3).astype(np.float32))
sample("floor_divide", anp.floor_divide, positive(3, 2) * 4, positive(2), differentiable=False)
for op in ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]:
    sample(
        op,
        getattr(anp, op),
        ints(3, 3, 4).astype(float),
        ints(3, 4).astype(float),
        differentiable=False,
    )
sample("sign", anp.sign, away_from_zero(5), differentiable=False)
sample("stop_gradient", anp.stop_gradient, real(3), differentiable=False)
sample("astype[int]", lambda x: anp.astype(x, np.int64), real(3) * 4, differentiable=False)
sample("zeros_like", anp.zeros_like, real(2, 3), differentiable=False)
sample("ones_like", anp.ones_like, real(2, 3), differentiable=False)

# --- reductions -----------------------------------------------------------------------
for axis in [None, 0, -1, (0, 2)]:
    for keepdims in [False, True]:
        tag = f"axis={axis},keepdims={keepdims}"
        sample(
            f"sum[{tag}]", lambda x, a=axis, k=keepdims: anp.sum(x, a, keepdims=k), real(2, 3, 4)
        )
        sample(
            f"max[{tag}]",
            lambda x, a=axis, k=keepdims: anp.max(x, a, keepdims=k),
            distinct(2, 3, 4),
        )
sample("mean", anp.mean, real(3, 4))
sample("mean[axis=1]", lambda x: anp.mean(x, axis=1), real(3, 4))
sample("min[axis=0]", lambda x: anp.min(x, axis=0), distinct(3, 4))
sample("min", anp.min, distinct(5))
sample("sum[0-d]", anp.sum, real())
sample("argmax", anp.argmax, distinct(3, 4), differentiable=False)
sample("argmax[axis=1]", lambda x: anp.argmax(x, axis=1), distinct(3, 4), differentiable=False)
sample(
    "argmax[axis=0,keepdims]",
    lambda x: anp.argmax(x, axis=0, keepdims=True),
    distinct(3, 4),
    differentiable=False,
)
sample("argmin[axis=-1]", lambda x: anp.argmin(x, axis=-1), distinct(3, 4), differentiable=False)

# --- shape ----------------------------------------------------------------------------
sample("reshape", lambda x: anp.reshape(x, (4, -1)), real(2, 3, 4))
sample("ravel", anp.ravel, real(2, 3))
sample("transpose", anp.transpose, real(2, 3, 4))
sample("transpose[axes]", lambda x: anp.transpose(x, (1, 2, 0)), real(2, 3, 4))
sample("moveaxis", lambda x: anp.moveaxis(x, 0, -1), real(2, 3, 4))
sample("swapaxes", lambda x: anp.swapaxes(x, 0, 2), real(2, 3, 4))
sample("broadcast_to", lambda x: anp.broadcast_to(x, (2, 3, 4)), real(3, 1))
sample("expand_dims", lambda x: anp.expand_dims(x, 1), real(2, 3))
sample("expand_dims[tuple]", lambda x: anp.expand_dims(x, (0, -1)), real(2, 3))
sample("squeeze", anp.squeeze, real(2, 1, 3, 1))
sample("squeeze[axis]", lambda x: anp.squeeze(x, axis=-1), real(2, 1, 3, 1))
sample("concatenate", lambda *xs: anp.concatenate(xs), real(2, 3), real(1, 3), real(4, 3))
sample("concatenate[axis=-1]", lambda *xs: anp.concatenate(xs, axis=-1), real(2, 3), real(2, 1))
sample("stack", lambda *xs: anp.stack(xs), real(2, 3), real(2, 3))
sample("stack[axis=2]", lambda *xs: anp.stack(xs, axis=2), real(2, 3), real(2, 3), real(2, 3))

# --- indexing -------------------------------------------------------------------------
for label, index in [
    ("int", 1),
    ("negative int", -1),
    ("slice", slice(1, 3)),
    ("step", slice(None, None, 2)),
    ("reverse", slice(None, None, -1)),
    ("ellipsis", (Ellipsis, 1)),
    ("newaxis", (None, slice(None), 0)),
    ("int,slice", (1, slice(0, 2))),
    ("array", np.array([2, 0, 2])),
    ("array,2d", np.array([[0, 1], [3, 3]])),
    (":,array", (slice(None), np.array([1, 0]))),
    ("array,:,array (split)", (np.array([0, 1]), slice(None), np.array([2, 0]))),
    ("int,array (adjacent)", (1, np.array([0, 2]))),
    ("int,:,array (split)", (0, slice(None), np.array([1, 1]))),
    ("mask", np.array([True, False, True, True])),
]:
    sample(f"getitem[{label}]", lambda x, i=index: x[i], real(4, 3, 3))
# Index arrays as arguments, so vmap batches them.  anp.getitem rather than x[i]:
# when x is a plain ndarray (in_dims None), NumPy would convert a traced index
# itself instead of handing the operation to autodiff.
sample("getitem[batched index]", lambda x, i: anp.getitem(x, i), real(5, 2), ints(5, 3))
sample(
    "getitem[:, batched index]",
    lambda x, i: anp.getitem(x, (slice(None), i)),
    real(2, 5, 3),
    ints(5, 4),
)
sample(
    "getitem[a, :, b]",
    lambda x, i, j: anp.getitem(x, (i, slice(None), j)),
    real(4, 2, 3),
    ints(4, 2),
    ints(3, 2),
)
sample(
    "getitem[:, a, b]",
    lambda x, i, j: anp.getitem(x, (slice(None), i, j)),
    real(2, 4, 3),
    ints(4, 2),
    ints(3, 2),
)
sample(
    "getitem[1:, int, a]",
    lambda x, i: anp.getitem(x, (slice(1, None), 0, i)),
    real(3, 2, 4),
    ints(4, 5),
)

# --- linear algebra -------------------------------------------------------------------
for label, (sa, sb) in {
    "vec@vec": ((3,), (3,)),
    "vec@mat": ((3,), (3, 4)),
    "mat@vec": ((4, 3), (3,)),
    "mat@mat": ((2, 3), (3, 4)),
    "stack@mat": ((5, 2, 3), (3, 4)),
    "mat@stack": ((2, 3), (5, 3, 4)),
    "stack@stack bcast": ((5, 1, 2, 3), (4, 3, 2)),
    "vec@stack": ((3,), (5, 3, 4)),
    "stack@vec": ((5, 4, 3), (3,)),
}.items():
    sample(f"matmul[{label}]", anp.matmul, real(*sa), real(*sb))
sample("dot[vec]", anp.dot, real(3), real(3))
sample("dot[mat]", anp.dot, real(2, 3), real(3, 4))
sample("dot[N-d]", anp.dot, real(2, 3), real(4, 3, 2))
sample("dot[scalar]", anp.dot, real(), real(3))
sample("@[operator]", lambda a, b: a @ b, real(2, 3), real(3))

# --- composites that exercise several rules together ----------------------------------
sample("clip", lambda x: anp.clip(x, -0.5, 0.5), distinct(6) / 3 + 0.011)
sample("clip[method]", lambda x: x.clip(None, 0.2), distinct(6) / 3 + 0.011)
sample("mlp", lambda w, x: anp.tanh(x @ w).sum(), real(3, 2), real(4, 3))
sample(
    "softmax-ish", lambda x: anp.exp(x - anp.max(x, axis=-1, keepdims=True)).sum(-1), distinct(3, 4)
)
