"""Random programs for differential testing (``tests/test_random_programs.py``).

A *program* is a short straight-line composition of array functions: elementwise
unary and binary functions with broadcasting, operations with Python scalars,
reductions over random axes (with and without ``keepdims``), scans, shape
functions, static and integer-array indexing, in-place updates (``y += v``,
``y[i] = v``) and ``x.at[i].add/set``, ``matmul``, ``einsum``, ``tensordot``,
``where``, ``sort``, ``clip``, ``pad``, ``tile``, ...  Its inputs and constants
have random shapes.  Each step is written in one of three styles: ``anp.f(x)``,
``np.f(x)`` (NumPy's protocols hand the call to the tracer) or the
operator/method form (``x + y``, ``x.sum(axis=0)``, ``x[1:]``); some steps run
inside ``autodiff.checkpoint`` or as a ``custom_vjp``/``custom_jvp`` whose rule
is the step's own VJP/JVP.  The same program also runs with ``jax.numpy`` and
``torch``.

A *case* wraps the program in a stack of up to three transforms (``grad`` of the
program reduced to a scalar, ``vjp``, ``jvp``, ``linearize``, ``vmap`` with
random ``in_dims``/``out_dims``/``chunk_size`` and batch sizes 0 to 3,
``jacfwd``, ``jacrev``, ``hessian``), each of which is again a function of
arrays that returns one array, so they nest in any order.

Inputs stay where finite differences mean something: every value carries an
interval that contains it, and a function that needs a domain (``log``,
``sqrt``, a denominator, a non-integer power) is applied only to values whose
interval lies inside it; values stay within ``[-BOUND, BOUND]``.  Functions with
kinks or jumps (``abs``, ``maximum``, ``max``, ``sort``, ``clip``, ``where`` on a
comparison) report how far their inputs are from the kink, and input values
closer than ``MARGIN`` are drawn again (``Case.arguments``).

``check_case`` checks every layer of the stack: derivative transforms against
central finite differences of the layer below (with a Richardson error
estimate), ``vmap`` against a Python loop, float32 against float64;
``compare_with`` checks the whole stack against JAX or torch.func.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import operator
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import autodiff
import autodiff.numpy as anp
from autodiff.extend import Tracer

MAX_INPUTS = 3
MAX_STEPS = 6
MAX_INPUT_SIZE = 12  # elements of a program input
MAX_VALUE_SIZE = 24  # elements of any value inside a program
MAX_ARG_SIZE = 48  # elements of an argument of a transformed function
MAX_OUT_SIZE = 400  # elements of the output of a transformed function
BOUND = 50.0  # every value of a program stays within [-BOUND, BOUND]
MARGIN = 0.02  # how far inputs of kinks and jumps stay from them

DOMAINS = {"real": (-1.5, 1.5), "positive": (0.5, 2.0), "unit": (-1.0, 1.0)}
STYLES = ("anp", "np", "method")
WRAPS = ("", "", "", "", "checkpoint", "custom_vjp", "custom_jvp")
KINDS = ("grad", "vjp", "jvp", "linearize", "vmap", "jacfwd", "jacrev", "hessian")
FORWARD = ("jvp", "linearize", "jacfwd", "hessian")  # forward mode (outermost in hessian)
REVERSE = ("grad", "vjp", "jacrev", "hessian")  # reverse mode (innermost in hessian)


# ----------------------------------------------------------------------------
# Intervals


def _mul(a, b):
    p = [a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1]]
    return min(p), max(p)


def _recip(a):
    return 1.0 / a[1], 1.0 / a[0]


def _square(a):
    lo, hi = a
    if lo >= 0:
        return lo * lo, hi * hi
    if hi <= 0:
        return hi * hi, lo * lo
    return 0.0, max(lo * lo, hi * hi)


def _abs(a):
    lo, hi = a
    if lo >= 0:
        return a
    if hi <= 0:
        return -hi, -lo
    return 0.0, max(-lo, hi)


def _away_from_zero(n, by=0.25):
    return n.lo >= by or n.hi <= -by


def _positive(n, by=0.25):
    return n.lo >= by


def _magnitude(n):
    return max(abs(n.lo), abs(n.hi))


def _mono(fn):
    return lambda a: (float(fn(a[0])), float(fn(a[1])))


# ----------------------------------------------------------------------------
# Programs


@dataclass
class Node:
    op: str  # "input", "const" or a key of OPS
    args: tuple[int, ...]
    params: dict
    shape: tuple[int, ...]
    lo: float
    hi: float
    style: str = "anp"
    deps: frozenset = frozenset()  # the inputs it depends on
    wrap: str = ""  # autodiff only: run inside checkpoint, custom_vjp or custom_jvp


@dataclass
class Program:
    nodes: list[Node]
    inputs: list[int]  # the node of each argument, in order
    output: int

    @property
    def spec(self) -> Spec:
        shapes = tuple(self.nodes[i].shape for i in self.inputs)
        domains = tuple(DOMAINS[self.nodes[i].params["domain"]] for i in self.inputs)
        return Spec(shapes, domains, self.nodes[self.output].shape)

    def function(self, lib, dtype) -> Callable:
        """The program as a function of its inputs, written with ``lib``."""
        consts = {
            i: lib.const(n.params["value"], dtype)
            for i, n in enumerate(self.nodes)
            if n.op == "const"
        }

        def program(*xs):
            return self._run(lib, consts, xs, None)

        return program

    def margin(self, points) -> float:
        """The least distance from a kink over the given input points (plain NumPy)."""
        lib = NumpyLib(np)
        consts = {i: n.params["value"] for i, n in enumerate(self.nodes) if n.op == "const"}
        margins: list[float] = [np.inf]
        for xs in points:
            self._run(lib, consts, xs, margins)
        return min(margins)

    def _run(self, lib, consts, xs, margins):
        env: dict[int, Any] = {}
        for i, node in enumerate(self.nodes[: self.output + 1]):
            if node.op == "input":
                env[i] = xs[node.params["index"]]
            elif node.op == "const":
                env[i] = consts[i]
            else:
                op = OPS[node.op]
                args = [env[j] for j in node.args]
                params = {k: v for k, v in node.params.items() if k != "domain"}
                if margins is not None and op.margin is not None:
                    margins.append(float(op.margin(*args, **params)))
                style = lib.style(node.style)
                if node.wrap and getattr(lib, "autodiff", False):
                    env[i] = _wrapped(node, op, style, args, params)
                else:
                    env[i] = op.apply(style, *args, **params)
        return env[self.output]

    def source(self) -> str:
        lines = []
        for i, n in enumerate(self.nodes[: self.output + 1]):
            if n.op == "input":
                k = n.params["index"]
                lines.append(f"v{i} = x{k}  # input {k}: shape {n.shape}, {n.params['domain']}")
            elif n.op == "const":
                v = n.params["value"]
                what = repr(v) if np.ndim(v) == 0 else f"array of shape {np.shape(v)}"
                lines.append(f"v{i} = {what}  # constant, seed {n.params.get('seed')}")
            else:
                args = ", ".join(f"v{j}" for j in n.args)
                params = ", ".join(f"{k}={v!r}" for k, v in n.params.items())
                call = f"{n.op}({args}{', ' if params else ''}{params})"
                if n.wrap:
                    call = f"{n.wrap}({call})"
                lines.append(f"v{i} = {n.style}:{call}  # {n.shape} in [{n.lo:.3g}, {n.hi:.3g}]")
        lines.append(f"return v{self.output}")
        return "\n".join(lines)


def _wrapped(node, op, lib, args, params):
    """The step as a function of its computed operands (constants closed over),
    run through ``autodiff.checkpoint``, or as a ``custom_vjp`` whose rule is the
    function's own VJP, or a ``custom_jvp`` whose rule is its own JVP."""
    dynamic = [k for k, a in enumerate(args) if isinstance(a, Tracer)]
    if not dynamic:  # only plain arrays (finite differences): nothing to wrap
        return op.apply(lib, *args, **params)

    def fn(*values):
        full = list(args)
        for k, v in zip(dynamic, values, strict=True):
            full[k] = v
        return op.apply(lib, *full, **params)

    if node.wrap == "checkpoint":
        wrapped = autodiff.checkpoint(fn)
    elif node.wrap == "custom_vjp":
        wrapped = autodiff.custom_vjp(fn)
        wrapped.defvjp(lambda *a: (fn(*a), a), lambda res, ct: autodiff.vjp(fn, *res)[1](ct))
    else:
        wrapped = autodiff.custom_jvp(fn)
        wrapped.defjvp(lambda primals, tangents: autodiff.jvp(fn, primals, tangents))
    return wrapped(*(args[k] for k in dynamic))


class Builder:
    """Draws a program step by step; every value's interval and shape is known."""

    def __init__(self, draw):
        self.draw = draw
        self.nodes: list[Node] = []
        self.inputs: list[int] = []

    def add(self, op, args, params, shape, interval, style=None) -> bool:
        lo, hi = interval
        if not (math.isfinite(lo) and math.isfinite(hi)) or max(abs(lo), abs(hi)) > BOUND:
            return False
        if 0 in shape or math.prod(shape) > MAX_VALUE_SIZE:
            return False
        if style is None:
            style = self.draw(st.sampled_from(STYLES))
        wrap = self.draw(st.sampled_from(WRAPS))
        deps = frozenset().union(*(self.nodes[a].deps for a in args))
        node = Node(op, tuple(args), params, tuple(shape), float(lo), float(hi), style, deps, wrap)
        self.nodes.append(node)
        return True

    def new_input(self, shape, domain) -> int | None:
        if len(self.inputs) >= MAX_INPUTS or math.prod(shape) > MAX_INPUT_SIZE:
            return None
        lo, hi = DOMAINS[domain]
        params = {"index": len(self.inputs), "domain": domain}
        deps = frozenset([len(self.inputs)])
        self.nodes.append(Node("input", (), params, tuple(shape), lo, hi, "", deps))
        self.inputs.append(len(self.nodes) - 1)
        return len(self.nodes) - 1

    def new_const(self, shape, domain) -> int:
        seed = self.draw(st.integers(0, 2**16))
        lo, hi = DOMAINS[domain]
        value = np.random.default_rng(seed).uniform(lo, hi, shape)
        if shape == () and self.draw(st.booleans()):
            value = float(value)  # a Python float
        params = {"value": value, "seed": seed}
        self.nodes.append(Node("const", (), params, tuple(shape), lo, hi, ""))
        return len(self.nodes) - 1

    def new_mask(self, shape) -> int:
        seed = self.draw(st.integers(0, 2**16))
        value = np.random.default_rng(seed).random(shape) > 0.5
        self.nodes.append(Node("const", (), {"value": value, "seed": seed}, shape, 0, 1, ""))
        return len(self.nodes) - 1

    def pick(self, pred=None, domain=None) -> int | None:
        """A computed value (the most recent first, which is where shrinking goes);
        with none that satisfies ``pred``, a new input of ``domain``."""
        found = [
            i
            for i in range(len(self.nodes) - 1, -1, -1)
            if self.nodes[i].op != "const" and (pred is None or pred(self.nodes[i]))
        ]
        if found:  # mostly the most recent value, so that programs are chains
            if len(found) == 1 or self.draw(st.integers(0, 3)) < 3:
                return found[0]
            return self.draw(st.sampled_from(found[1:]))
        if domain is not None:
            return self.new_input(self.draw(shapes()), domain)
        return None

    def partner(
        self, fits, make_shape, pred=None, domain=None, exclude=None, new_inputs=True
    ) -> int | None:
        """A second operand: an existing value whose shape ``fits``, or a new input
        or constant of shape ``make_shape(draw)`` (in ``domain``, or a random one)."""
        found = [
            i
            for i in range(len(self.nodes) - 1, -1, -1)
            if i != exclude
            and not _is_mask(self.nodes[i])
            and fits(self.nodes[i].shape)
            and (pred is None or pred(self.nodes[i]))
        ]
        kinds = ["existing"] if found else []
        kinds += ["input"] if new_inputs and len(self.inputs) < MAX_INPUTS else []
        kinds += ["const"]
        kind = self.draw(st.sampled_from(kinds))
        if kind == "existing":
            return self.draw(st.sampled_from(found))
        shape = make_shape(self.draw)
        if shape is None:
            return None
        if domain is None:
            domain = self.draw(st.sampled_from(["real", "positive"]))
        if kind == "input":
            return self.new_input(shape, domain)
        return self.new_const(shape, domain)

    def program(self) -> Program:
        computed = [i for i, n in enumerate(self.nodes) if n.op not in ("input", "const")]
        return Program(self.nodes, self.inputs, computed[-1] if computed else self.inputs[0])


def _is_mask(node):
    return node.op == "const" and np.asarray(node.params["value"]).dtype == bool


@st.composite
def shapes(draw, max_size=MAX_INPUT_SIZE, max_ndim=3):
    ndim = draw(st.integers(0, max_ndim))
    dims: list[int] = []
    for _ in range(ndim):
        room = max_size // max(1, math.prod(dims))
        dims.append(draw(st.integers(1, max(1, min(3, room)))))
    return tuple(dims)


def _broadcast(*shapes_):
    try:
        shape = np.broadcast_shapes(*shapes_)
    except ValueError:
        return None
    return shape if math.prod(shape) <= MAX_VALUE_SIZE else None


def _broadcast_partner(shape):
    """A shape that broadcasts against ``shape``: trailing dims equal or 1 (or
    growing a 1 of ``shape``), fewer leading dims or one more."""

    def make(draw):
        nd = len(shape)
        rank = draw(st.integers(max(0, nd - 2), nd + 1))
        out = []
        for k in range(1, rank + 1):
            if k <= nd:
                d = shape[-k]
                choices = [d, 1] if d > 1 else [1, 2, 3]
            else:
                choices = [1, 2]
            out.append(draw(st.sampled_from(choices)))
        result = tuple(reversed(out))
        return result if _broadcast(shape, result) is not None else None

    return make


# ----------------------------------------------------------------------------
# Array libraries


class NumpyLib:
    """``autodiff.numpy``, ``numpy`` or ``jax.numpy``: one namespace, every style."""

    def __init__(self, ns, *, methods=False, const=None, autodiff=False):
        self.ns = ns
        self.methods = methods
        self._const = const
        self.autodiff = autodiff  # steps may be wrapped (checkpoint, custom_vjp, ...)

    def _methods(self, x):
        return self.methods and not isinstance(x, float)  # a Python float has none

    def style(self, style):
        if self.ns is np or self.ns is anp:
            return STYLE_LIBS[style]
        return self

    def const(self, value, dtype):
        if isinstance(value, float):
            return value
        value = value if value.dtype == bool else value.astype(dtype)
        return self._const(value) if self._const else value

    def unary(self, name, x):
        if self.methods and name == "negative":
            return -x
        if self.methods and name == "abs":
            return abs(x)
        return getattr(self.ns, name)(x)

    def binary(self, name, x, y):
        if self.methods and name in PY_OPS:
            return PY_OPS[name](x, y)
        return getattr(self.ns, name)(x, y)

    def scalar(self, name, x, c, left):
        x, y = (c, x) if left else (x, c)
        if self.methods:
            return PY_OPS[name](x, y)
        return getattr(self.ns, name)(x, y)

    def reduce(self, name, x, axis, keepdims):
        if self._methods(x):
            return getattr(x, name)(axis=axis, keepdims=keepdims)
        return getattr(self.ns, name)(x, axis=axis, keepdims=keepdims)

    def cumsum(self, x, axis):
        return x.cumsum(axis=axis) if self._methods(x) else self.ns.cumsum(x, axis=axis)

    def reshape(self, x, shape):
        return x.reshape(shape) if self._methods(x) else self.ns.reshape(x, shape)

    def transpose(self, x, axes):
        if self._methods(x):
            return x.T if axes is None else x.transpose(axes)
        return self.ns.transpose(x, axes)

    def expand_dims(self, x, axis):
        return self.ns.expand_dims(x, axis)

    def squeeze(self, x, axis):
        return x.squeeze(axis) if self._methods(x) else self.ns.squeeze(x, axis)

    def swapaxes(self, x, a, b):
        return x.swapaxes(a, b) if self._methods(x) else self.ns.swapaxes(x, a, b)

    def moveaxis(self, x, a, b):
        return self.ns.moveaxis(x, a, b)

    def broadcast_to(self, x, shape):
        return self.ns.broadcast_to(x, shape)

    def flip(self, x, axis):
        return self.ns.flip(x, axis)

    def concatenate(self, x, y, axis):
        return self.ns.concatenate([x, y], axis=axis)

    def stack(self, x, y, axis):
        return self.ns.stack([x, y], axis=axis)

    def getitem(self, x, index):
        if self.ns is anp and not self.methods:
            return anp.getitem(x, index)
        return x[index]

    def matmul(self, x, y):
        return x @ y if self._methods(x) else self.ns.matmul(x, y)

    def where(self, cond, x, y):
        return self.ns.where(cond, x, y)

    def greater(self, x, t):
        return x > t if self._methods(x) else self.ns.greater(x, t)

    def einsum(self, spec, x, y):
        return self.ns.einsum(spec, x, y)

    def tensordot(self, x, y, axes):
        return self.ns.tensordot(x, y, axes)

    def clip(self, x, lo, hi):
        return x.clip(lo, hi) if self._methods(x) else self.ns.clip(x, lo, hi)

    def sort(self, x, axis):
        return self.ns.sort(x, axis=axis)

    def roll(self, x, shift, axis):
        return self.ns.roll(x, shift, axis=axis)

    def pad(self, x, widths):
        return self.ns.pad(x, widths)

    def tile(self, x, reps):
        return self.ns.tile(x, reps)

    def take(self, x, index, axis):
        return x.take(index, axis=axis) if self._methods(x) else self.ns.take(x, index, axis=axis)

    def diagonal(self, x, offset, a, b):
        if self._methods(x):
            return x.diagonal(offset, a, b)
        return self.ns.diagonal(x, offset, a, b)

    def cumprod(self, x, axis):
        return x.cumprod(axis=axis) if self._methods(x) else self.ns.cumprod(x, axis=axis)

    def linalg(self, fn, m, b, k):
        la = self.ns.linalg
        if fn == "slogdet":
            return la.slogdet(m)[1]
        if fn == "eigvalsh":
            return la.eigh(m)[0]
        if fn == "norm":
            return la.norm(m, axis=(-2, -1))
        if fn == "matrix_power":
            return la.matrix_power(m, k)
        return getattr(la, fn)(m) if b is None else la.solve(m, b)

    def inplace(self, x, v, index, mode):
        if self.ns is not np and self.ns is not anp:  # jax.numpy: functional updates
            return x + v if mode == "iadd" else x.at[index].set(v)
        y = x + 0.0  # a new array (or tracer) to update
        if mode == "iadd":
            y += v
        else:
            y[index] = v
        return y

    def scatter(self, x, index, v, axis, mode):
        where = (slice(None),) * axis + (index,)
        if self.ns is np or self.ns is anp:
            return getattr(anp.at(x)[where], mode)(v)
        return getattr(x.at[where], mode)(v)  # jax.numpy


PY_OPS = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "divide": operator.truediv,
    "power": operator.pow,
}

AUTODIFF = NumpyLib(anp, autodiff=True)
STYLE_LIBS = {
    "anp": NumpyLib(anp),
    "np": NumpyLib(np),
    "method": NumpyLib(np, methods=True),
}


class TorchLib:
    def __init__(self):
        import torch

        self.torch = torch

    def style(self, style):
        return self

    def const(self, value, dtype):
        if isinstance(value, float):
            return value
        return self.torch.as_tensor(value if value.dtype == bool else value.astype(dtype))

    def unary(self, name, x):
        return getattr(self.torch, name)(x)

    def _tensors(self, *xs):
        like = next(x for x in xs if isinstance(x, self.torch.Tensor))
        return [
            x if isinstance(x, self.torch.Tensor) else self.torch.tensor(x, dtype=like.dtype)
            for x in xs
        ]

    def binary(self, name, x, y):
        if name in PY_OPS:
            return PY_OPS[name](x, y)
        return getattr(self.torch, name)(*self._tensors(x, y))

    def scalar(self, name, x, c, left):
        return PY_OPS[name](c, x) if left else PY_OPS[name](x, c)

    def reduce(self, name, x, axis, keepdims):
        torch = self.torch
        if x.ndim == 0:
            return x  # sum, mean, max, min and prod of one number (never var)
        if axis is None:
            axes = tuple(range(x.ndim))
        else:
            axes = tuple(a % x.ndim for a in (axis if isinstance(axis, tuple) else (axis,)))
        if name == "prod":
            for a in sorted(axes, reverse=True):
                x = torch.prod(x, dim=a, keepdim=keepdims)
            return x
        if name == "var":
            return torch.var(x, dim=axes, correction=0, keepdim=keepdims)
        fn = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax, "min": torch.amin}[name]
        return fn(x, dim=axes, keepdim=keepdims)

    def cumsum(self, x, axis):
        return self.torch.cumsum(x, dim=axis)

    def reshape(self, x, shape):
        return self.torch.reshape(x, shape)

    def transpose(self, x, axes):
        return x.permute(*(reversed(range(x.ndim)) if axes is None else axes))

    def expand_dims(self, x, axis):
        return self.torch.unsqueeze(x, axis)

    def squeeze(self, x, axis):
        return self.torch.squeeze(x, axis)

    def swapaxes(self, x, a, b):
        return self.torch.swapaxes(x, a, b)

    def moveaxis(self, x, a, b):
        return self.torch.movedim(x, a, b)

    def broadcast_to(self, x, shape):
        return self.torch.broadcast_to(x, shape)

    def flip(self, x, axis):
        return self.torch.flip(x, (axis,))

    def concatenate(self, x, y, axis):
        return self.torch.cat(self._tensors(x, y), dim=axis)

    def stack(self, x, y, axis):
        return self.torch.stack(self._tensors(x, y), dim=axis)

    def getitem(self, x, index):
        index = tuple(self.torch.as_tensor(i) if isinstance(i, np.ndarray) else i for i in index)
        return x[index]

    def matmul(self, x, y):
        return self.torch.matmul(x, y)

    def where(self, cond, x, y):
        return self.torch.where(cond, *self._tensors(x, y))

    def greater(self, x, t):
        return x > t

    def einsum(self, spec, x, y):
        return self.torch.einsum(spec, *self._tensors(x, y))

    def tensordot(self, x, y, axes):
        return self.torch.tensordot(*self._tensors(x, y), dims=axes)

    def clip(self, x, lo, hi):
        return self.torch.clamp(x, lo, hi)

    def sort(self, x, axis):
        return self.torch.sort(x, dim=axis).values

    def roll(self, x, shift, axis):
        return self.torch.roll(x, shift, axis)

    def pad(self, x, widths):
        flat = [w for pair in reversed(widths) for w in pair]
        return self.torch.nn.functional.pad(x, flat)

    def tile(self, x, reps):
        return self.torch.tile(x, reps)

    def take(self, x, index, axis):
        return self.torch.index_select(x, axis, self.torch.as_tensor(index % x.shape[axis]))

    def diagonal(self, x, offset, a, b):
        return self.torch.diagonal(x, offset, a, b)

    def cumprod(self, x, axis):
        return self.torch.cumprod(x, dim=axis)

    def linalg(self, fn, m, b, k):
        la = self.torch.linalg
        if fn == "slogdet":
            return la.slogdet(m).logabsdet
        if fn == "eigvalsh":
            return la.eigvalsh(m)
        if fn == "norm":
            return la.norm(m, dim=(-2, -1))
        if fn == "matrix_power":
            return la.matrix_power(m, k)
        return getattr(la, fn)(m) if b is None else la.solve(m, b)

    def inplace(self, x, v, index, mode):
        # Out of place: torch.func.vmap cannot write a batched value into an unbatched
        # tensor.  The flat positions come from NumPy's indexing of the positions.
        if mode == "iadd":
            return x + v
        where = np.arange(math.prod(x.shape)).reshape(tuple(x.shape))[index]
        (v,) = self._tensors(v, x)[:1]
        v = self.torch.broadcast_to(v, where.shape).reshape(-1)
        flat = self.torch.index_copy(x.reshape(-1), 0, self.torch.as_tensor(where.ravel()), v)
        return flat.reshape(x.shape)

    def scatter(self, x, index, v, axis, mode):
        index = self.torch.as_tensor(index % x.shape[axis])
        (v,) = self._tensors(v, x)[:1]
        shape = list(x.shape)
        shape[axis] = len(index)
        v = self.torch.broadcast_to(v, shape)
        if mode == "add":
            return self.torch.index_add(x, axis, index, v)
        return self.torch.index_copy(x, axis, index, v)


def jax_lib():
    import jax.numpy as jnp

    return NumpyLib(jnp, const=jnp.asarray)


# ----------------------------------------------------------------------------
# Operations: how to draw one step, how to run it, and its distance from a kink


@dataclass
class Op:
    gen: Callable[[Builder], bool]
    apply: Callable
    margin: Callable | None = None


OPS: dict[str, Op] = {}

UNARY = {
    # name: (domain requirement on the operand's interval, output interval)
    "sin": (None, lambda a: (-1.0, 1.0)),
    "cos": (None, lambda a: (-1.0, 1.0)),
    "tanh": (None, _mono(np.tanh)),
    "arctan": (None, _mono(np.arctan)),
    "exp": (lambda n: n.hi <= 3, _mono(np.exp)),
    "expm1": (lambda n: n.hi <= 3, _mono(np.expm1)),
    "log": (lambda n: n.lo >= 0.2, _mono(np.log)),
    "log1p": (lambda n: n.lo >= -0.7, _mono(np.log1p)),
    "sqrt": (lambda n: n.lo >= 0.2, _mono(np.sqrt)),
    "square": (lambda n: _magnitude(n) <= 7, _square),
    "negative": (None, lambda a: (-a[1], -a[0])),
    "reciprocal": (_away_from_zero, _recip),
    "abs": (None, _abs),
    "sinh": (lambda n: _magnitude(n) <= 3, _mono(np.sinh)),
    "cosh": (lambda n: _magnitude(n) <= 3, lambda a: (1.0, float(np.cosh(_magnitude_of(a))))),
}


def _magnitude_of(a):
    return max(abs(a[0]), abs(a[1]))


def _unary(name):
    need, out = UNARY[name]

    def gen(b):
        i = b.pick(need, domain="positive" if need is not None else None)
        if i is None:
            return False
        n = b.nodes[i]
        return b.add(name, (i,), {}, n.shape, out((n.lo, n.hi)))

    return gen


for _name in UNARY:
    OPS[_name] = Op(_unary(_name), lambda L, x, _n=_name: L.unary(_n, x))
OPS["abs"].margin = lambda x: np.min(np.abs(x), initial=np.inf)

SCALARS = [0.5, 1.5, 2.0, -0.5, -1.5, -2.0, 0.3, -0.7, 1.0, 3.0]
EXPONENTS = [2.0, 3.0, -1.0, 0.5, -0.5, 1.5, 2, 3, -1]  # Python ints too


def _gen_scalar(b):
    name = b.draw(st.sampled_from(["add", "subtract", "multiply", "divide", "power"]))
    left = b.draw(st.booleans())
    if name == "power" and not left:
        c = b.draw(st.sampled_from(EXPONENTS))
        if c == 2.0:
            need, out = (lambda n: _magnitude(n) <= 7), _square
        elif c == 3.0:
            need, out = (lambda n: _magnitude(n) <= 3.5), _mono(lambda t: t**3)
        elif c == -1.0:
            need, out = _away_from_zero, _recip
        else:
            need, out = _positive, _mono(lambda t: t**c)
    elif name == "power":  # c ** x
        c = b.draw(st.sampled_from([0.5, 1.5, 2.0, 3.0]))
        need = lambda n: _magnitude(n) * abs(math.log(c)) <= 3
        out = lambda a: tuple(sorted(math.exp(t * math.log(c)) for t in a))
    elif name == "divide" and left:  # c / x
        c = b.draw(st.sampled_from(SCALARS))
        need, out = _away_from_zero, lambda a: _mul((c, c), _recip(a))
    else:
        c = b.draw(st.sampled_from(SCALARS))
        need = None
        out = {
            "add": lambda a: (a[0] + c, a[1] + c),
            "subtract": lambda a: (c - a[1], c - a[0]) if left else (a[0] - c, a[1] - c),
            "multiply": lambda a: _mul(a, (c, c)),
            "divide": lambda a: _mul(a, (1 / c, 1 / c)),
        }[name]
    i = b.pick(need, domain="positive" if need is not None else None)
    if i is None:
        return False
    n = b.nodes[i]
    params = {"name": name, "c": c, "left": left}
    return b.add("scalar", (i,), params, n.shape, out((n.lo, n.hi)))


OPS["scalar"] = Op(_gen_scalar, lambda L, x, name, c, left: L.scalar(name, x, c, left))

BINARY = {
    # name: (requirement on the first operand, on the second, output interval)
    "add": (None, None, lambda a, b: (a[0] + b[0], a[1] + b[1])),
    "subtract": (None, None, lambda a, b: (a[0] - b[1], a[1] - b[0])),
    "multiply": (None, None, _mul),
    "divide": (None, _away_from_zero, lambda a, b: _mul(a, _recip(b))),
    "maximum": (None, None, lambda a, b: (max(a[0], b[0]), max(a[1], b[1]))),
    "minimum": (None, None, lambda a, b: (min(a[0], b[0]), min(a[1], b[1]))),
    "power": (
        _positive,
        lambda n: _magnitude(n) <= 3,
        lambda a, b: tuple(map(math.exp, _mul((math.log(a[0]), math.log(a[1])), b))),
    ),
}


def _binary(name):
    need_a, need_b, out = BINARY[name]
    kink = name in ("maximum", "minimum")

    def gen(b):
        swap = b.draw(st.booleans())
        need_x, need_y = (need_b, need_a) if swap else (need_a, need_b)
        i = b.pick(need_x, domain="positive" if need_x is not None else None)
        if i is None:
            return False
        x = b.nodes[i]
        j = b.partner(
            lambda s: _broadcast(x.shape, s) is not None,
            _broadcast_partner(x.shape),
            need_y,
            "positive" if need_y is not None else None,
            exclude=i if kink else None,
        )
        if j is None:
            return False
        y = b.nodes[j]
        first, second = (y, x) if swap else (x, y)
        shape = _broadcast(x.shape, y.shape)
        if shape is None:
            return False
        args = (j, i) if swap else (i, j)
        return b.add(name, args, {}, shape, out((first.lo, first.hi), (second.lo, second.hi)))

    return gen


for _name in BINARY:
    OPS[_name] = Op(_binary(_name), lambda L, x, y, _n=_name: L.binary(_n, x, y))
for _name in ("maximum", "minimum"):
    OPS[_name].margin = lambda x, y: np.min(np.abs(np.subtract(x, y)), initial=np.inf)


def _draw_axes(b, nd):
    """None, an int or a tuple of axes (each maybe negative)."""
    if nd == 0:
        return None
    kind = b.draw(st.sampled_from(["int", "tuple", "all"]))
    if kind == "all":
        return None
    if kind == "int":
        a = b.draw(st.integers(0, nd - 1))
        return a - nd if b.draw(st.booleans()) else a
    axes = b.draw(st.lists(st.integers(0, nd - 1), min_size=1, max_size=nd, unique=True))
    return tuple(a - nd if b.draw(st.booleans()) else a for a in axes)


def _reduced(shape, axis, keepdims):
    nd = len(shape)
    axes = range(nd) if axis is None else [a % nd for a in np.atleast_1d(axis)]
    count = math.prod(shape[a] for a in axes)
    if keepdims:
        out = tuple(1 if k in axes else d for k, d in enumerate(shape))
    else:
        out = tuple(d for k, d in enumerate(shape) if k not in axes)
    return out, count


def _reduction(name):
    def gen(b):
        i = b.pick((lambda n: len(n.shape) > 0) if name == "var" else None)
        if i is None:
            return False
        x = b.nodes[i]
        axis = _draw_axes(b, len(x.shape))
        keepdims = b.draw(st.booleans())
        shape, n = _reduced(x.shape, axis, keepdims)
        a = (x.lo, x.hi)
        if name == "sum":
            interval = (n * a[0], n * a[1])
        elif name == "prod":
            interval = a
            for _ in range(n - 1):
                interval = _mul(interval, a)
        elif name == "var":
            interval = (0.0, (a[1] - a[0]) ** 2 / 4)
        else:
            interval = a
        return b.add(name, (i,), {"axis": axis, "keepdims": keepdims}, shape, interval)

    return gen


def _top_gap(x, axis, keepdims, smallest):
    """The least gap between the largest two (smallest two) reduced elements."""
    x = np.asarray(x)
    nd = x.ndim
    axes = list(range(nd)) if axis is None else [a % nd for a in np.atleast_1d(axis)]
    rest = [a for a in range(nd) if a not in axes]
    flat = np.transpose(x, rest + axes).reshape(-1, math.prod(x.shape[a] for a in axes))
    if flat.shape[1] < 2:
        return np.inf
    s = np.sort(flat, axis=1)
    gap = s[:, 1] - s[:, 0] if smallest else s[:, -1] - s[:, -2]
    return np.min(gap)


for _name in ("sum", "mean", "max", "min", "prod", "var"):
    OPS[_name] = Op(
        _reduction(_name),
        lambda L, x, axis, keepdims, _n=_name: L.reduce(_n, x, axis, keepdims),
    )
OPS["max"].margin = lambda x, axis, keepdims: _top_gap(x, axis, keepdims, False)
OPS["min"].margin = lambda x, axis, keepdims: _top_gap(x, axis, keepdims, True)


def _pick_with_axis(b):
    """A value with at least one axis and one of its axes (maybe negative), or None."""
    i = b.pick(lambda n: len(n.shape) >= 1)
    if i is None:
        return None
    nd = len(b.nodes[i].shape)
    return i, b.nodes[i], b.draw(st.integers(-nd, nd - 1))


def _gen_cumsum(b):
    picked = _pick_with_axis(b)
    if picked is None:
        return False
    i, x, axis = picked
    n = x.shape[axis]
    interval = (min(x.lo, n * x.lo), max(x.hi, n * x.hi))
    return b.add("cumsum", (i,), {"axis": axis}, x.shape, interval)


OPS["cumsum"] = Op(_gen_cumsum, lambda L, x, axis: L.cumsum(x, axis))


def _divisors(n):
    return [d for d in range(1, n + 1) if n % d == 0]


def _gen_reshape(b):
    i = b.pick()
    x = b.nodes[i]
    size = math.prod(x.shape)
    nd = b.draw(st.integers(0 if size == 1 else 1, 3))
    dims = []
    left = size
    for _ in range(max(0, nd - 1)):
        d = b.draw(st.sampled_from(_divisors(left)))
        dims.append(d)
        left //= d
    if nd:
        dims.append(left)
    shape = tuple(dims)
    param = shape
    if nd and b.draw(st.booleans()):
        k = b.draw(st.integers(0, nd - 1))
        param = (*shape[:k], -1, *shape[k + 1 :])
    return b.add("reshape", (i,), {"shape": param}, shape, (x.lo, x.hi))


def _gen_transpose(b):
    i = b.pick(lambda n: len(n.shape) >= 2)
    if i is None:
        return False
    x = b.nodes[i]
    nd = len(x.shape)
    axes = tuple(b.draw(st.permutations(range(nd))))
    if axes == tuple(reversed(range(nd))) and b.draw(st.booleans()):
        axes = None
    shape = x.shape[::-1] if axes is None else tuple(x.shape[a] for a in axes)
    return b.add("transpose", (i,), {"axes": axes}, shape, (x.lo, x.hi))


def _gen_expand_dims(b):
    i = b.pick(lambda n: len(n.shape) < 4)
    if i is None:
        return False
    x = b.nodes[i]
    nd = len(x.shape)
    axis = b.draw(st.integers(-(nd + 1), nd))
    shape = list(x.shape)
    shape.insert(axis % (nd + 1), 1)
    return b.add("expand_dims", (i,), {"axis": axis}, tuple(shape), (x.lo, x.hi))


def _gen_squeeze(b):
    i = b.pick(lambda n: 1 in n.shape)
    if i is None:
        return False
    x = b.nodes[i]
    nd = len(x.shape)
    axis = b.draw(st.sampled_from([k for k, d in enumerate(x.shape) if d == 1]))
    shape = x.shape[:axis] + x.shape[axis + 1 :]
    if b.draw(st.booleans()):
        axis -= nd
    return b.add("squeeze", (i,), {"axis": axis}, shape, (x.lo, x.hi))


def _gen_swapaxes(b):
    i = b.pick(lambda n: len(n.shape) >= 2)
    if i is None:
        return False
    x = b.nodes[i]
    nd = len(x.shape)
    a1, a2 = b.draw(st.integers(-nd, nd - 1)), b.draw(st.integers(-nd, nd - 1))
    shape = list(x.shape)
    shape[a1], shape[a2] = shape[a2], shape[a1]
    return b.add("swapaxes", (i,), {"a": a1, "b": a2}, tuple(shape), (x.lo, x.hi))


def _gen_moveaxis(b):
    i = b.pick(lambda n: len(n.shape) >= 1)
    if i is None:
        return False
    x = b.nodes[i]
    nd = len(x.shape)
    src, dst = b.draw(st.integers(-nd, nd - 1)), b.draw(st.integers(-nd, nd - 1))
    shape = np.moveaxis(np.zeros(x.shape), src, dst).shape
    return b.add("moveaxis", (i,), {"a": src, "b": dst}, shape, (x.lo, x.hi))


def _gen_broadcast_to(b):
    i = b.pick(lambda n: len(n.shape) < 3)
    if i is None:
        return False
    x = b.nodes[i]
    lead = b.draw(st.lists(st.integers(1, 3), max_size=1))
    dims = [b.draw(st.integers(1, 3)) if d == 1 else d for d in x.shape]
    shape = (*lead, *dims)
    return b.add("broadcast_to", (i,), {"shape": shape}, shape, (x.lo, x.hi))


def _gen_flip(b):
    picked = _pick_with_axis(b)
    if picked is None:
        return False
    i, x, axis = picked
    return b.add("flip", (i,), {"axis": axis}, x.shape, (x.lo, x.hi))


def _gen_join(name):
    def gen(b):
        i = b.pick(lambda n: len(n.shape) >= (1 if name == "concatenate" else 0))
        if i is None:
            return False
        x = b.nodes[i]
        nd = len(x.shape)
        if name == "concatenate":
            axis = b.draw(st.integers(-nd, nd - 1))
            k = axis % nd

            def fits(s):
                return len(s) == nd and all(s[d] == x.shape[d] for d in range(nd) if d != k)

            def make(draw):
                return (*x.shape[:k], draw(st.integers(1, 3)), *x.shape[k + 1 :])
        else:
            axis = b.draw(st.integers(-(nd + 1), nd))
            fits = lambda s: s == x.shape
            make = lambda draw: x.shape
        j = b.partner(fits, make)
        if j is None:
            return False
        y = b.nodes[j]
        args = (j, i) if b.draw(st.booleans()) else (i, j)
        shapes_ = [b.nodes[a].shape for a in args]
        join = np.concatenate if name == "concatenate" else np.stack
        shape = join([np.zeros(s) for s in shapes_], axis=axis).shape
        interval = (min(x.lo, y.lo), max(x.hi, y.hi))
        return b.add(name, args, {"axis": axis}, shape, interval)

    return gen


OPS["reshape"] = Op(_gen_reshape, lambda L, x, shape: L.reshape(x, shape))
OPS["transpose"] = Op(_gen_transpose, lambda L, x, axes: L.transpose(x, axes))
OPS["expand_dims"] = Op(_gen_expand_dims, lambda L, x, axis: L.expand_dims(x, axis))
OPS["squeeze"] = Op(_gen_squeeze, lambda L, x, axis: L.squeeze(x, axis))
OPS["swapaxes"] = Op(_gen_swapaxes, lambda L, x, a, b: L.swapaxes(x, a, b))
OPS["moveaxis"] = Op(_gen_moveaxis, lambda L, x, a, b: L.moveaxis(x, a, b))
OPS["broadcast_to"] = Op(_gen_broadcast_to, lambda L, x, shape: L.broadcast_to(x, shape))
OPS["flip"] = Op(_gen_flip, lambda L, x, axis: L.flip(x, axis))
OPS["concatenate"] = Op(_gen_join("concatenate"), lambda L, x, y, axis: L.concatenate(x, y, axis))
OPS["stack"] = Op(_gen_join("stack"), lambda L, x, y, axis: L.stack(x, y, axis))


def _draw_index(b, shape, distinct=False, newaxis=True):
    """Static basic indexing (slices with positive steps, integers, None,
    Ellipsis), or one integer array (with repeats unless ``distinct``) among them."""
    nd = len(shape)
    count = b.draw(st.integers(1, nd))
    trailing = count < nd and b.draw(st.booleans())
    dims = shape[nd - count :] if trailing else shape[:count]
    gather = b.draw(st.booleans())
    gather_at = b.draw(st.integers(0, count - 1)) if gather else -1
    parts: list[Any] = []
    for k, n in enumerate(dims):
        if k == gather_at:
            if distinct:
                idx = b.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
                idx = [j - n if b.draw(st.booleans()) else j for j in idx]
            else:
                idx = b.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4))
            parts.append(np.array(idx))
            continue
        kind = b.draw(st.sampled_from(["slice", "int", "full"]))
        if kind == "int":
            parts.append(b.draw(st.integers(-n, n - 1)))
        elif kind == "full":
            parts.append(slice(None))
        else:
            start = b.draw(st.one_of(st.none(), st.integers(-n, n - 1)))
            stop = b.draw(st.one_of(st.none(), st.integers(-n, n)))
            step = b.draw(st.sampled_from([None, 1, 2]))
            parts.append(slice(start, stop, step))
    if newaxis and not gather and b.draw(st.booleans()):
        parts.insert(b.draw(st.integers(0, len(parts))), None)
    if trailing:
        parts.insert(0, Ellipsis)
    return tuple(parts)


def _gen_getitem(b):
    i = b.pick(lambda n: len(n.shape) >= 1)
    if i is None:
        return False
    x = b.nodes[i]
    index = _draw_index(b, x.shape)
    shape = np.zeros(x.shape)[index].shape
    return b.add("getitem", (i,), {"index": index}, shape, (x.lo, x.hi))


def _gen_inplace(b):
    """``y = x + 0.0`` then ``y += v`` or ``y[index] = v``: in-place updates of a
    traced value.  ``v`` depends on no input that ``x`` does not (a traced value
    cannot be written into a plain array)."""
    i = b.pick(lambda n: len(n.shape) >= 1)
    if i is None:
        return False
    x = b.nodes[i]
    mode = b.draw(st.sampled_from(["iadd", "setitem"]))
    index = () if mode == "iadd" else _draw_index(b, x.shape, distinct=True, newaxis=False)
    target = np.zeros(x.shape)[index].shape
    if 0 in target:
        return False
    j = b.partner(
        lambda s: _broadcast(s, target) == target,
        lambda draw: target[draw(st.integers(0, len(target))) :],
        lambda n: n.deps <= x.deps,
        exclude=None,
        new_inputs=False,
    )
    if j is None:
        return False
    v = b.nodes[j]
    add = mode == "iadd"
    interval = (x.lo + v.lo, x.hi + v.hi) if add else (min(x.lo, v.lo), max(x.hi, v.hi))
    return b.add("inplace", (i, j), {"index": index, "mode": mode}, x.shape, interval)


OPS["getitem"] = Op(_gen_getitem, lambda L, x, index: L.getitem(x, index))
OPS["inplace"] = Op(_gen_inplace, lambda L, x, v, index, mode: L.inplace(x, v, index, mode))


def _matmul_shape(a, c):
    try:
        shape = np.matmul(np.zeros(a), np.zeros(c)).shape
    except ValueError:
        return None
    return shape if math.prod(shape) <= MAX_VALUE_SIZE else None


def _gen_matmul(b):
    i = b.pick(lambda n: len(n.shape) >= 1)
    if i is None:
        return False
    x = b.nodes[i]
    left = b.draw(st.booleans())  # the partner on the left: partner @ x
    nd = len(x.shape)
    k = x.shape[0 if nd == 1 else -2] if left else x.shape[-1]

    def make(draw):
        rank = draw(st.integers(1, 3))
        m = draw(st.integers(1, 3))
        shape = [(k,), (m, k) if left else (k, m), (draw(st.integers(1, 2)), m, k)][rank - 1]
        if rank == 3 and not left:
            shape = (shape[0], k, m)
        return shape

    def fits(s):
        return (_matmul_shape(s, x.shape) if left else _matmul_shape(x.shape, s)) is not None

    j = b.partner(fits, make)
    if j is None:
        return False
    y = b.nodes[j]
    args = (j, i) if left else (i, j)
    shape = _matmul_shape(b.nodes[args[0]].shape, b.nodes[args[1]].shape)
    if shape is None:
        return False
    lo, hi = _mul((x.lo, x.hi), (y.lo, y.hi))
    return b.add("matmul", args, {}, shape, (k * lo, k * hi))


OPS["matmul"] = Op(_gen_matmul, lambda L, x, y: L.matmul(x, y))


def _gen_where(b):
    """where(mask, x, y) with a constant mask, or where(c > t, x, y) with c a
    computed value (a jump where c crosses t: kept MARGIN away)."""
    i = b.pick()
    x = b.nodes[i]
    j = b.partner(lambda s: _broadcast(x.shape, s) is not None, _broadcast_partner(x.shape))
    if j is None:
        return False
    y = b.nodes[j]
    xy = _broadcast(x.shape, y.shape)
    if xy is None:
        return False
    compare = b.draw(st.booleans())
    if compare:
        c = b.pick()
        cond = b.nodes[c]
        frac = b.draw(st.integers(1, 9)) / 10
        t = round(cond.lo + frac * (cond.hi - cond.lo), 3)
        params = {"t": t}
    else:
        mask_shape = _broadcast_partner(xy)(b.draw)
        if mask_shape is None:
            return False
        c = b.new_mask(mask_shape)
        cond = b.nodes[c]
        params = {}
    shape = _broadcast(cond.shape, xy)
    if shape is None:
        return False
    args = (c, j, i) if b.draw(st.booleans()) else (c, i, j)
    interval = (min(x.lo, y.lo), max(x.hi, y.hi))
    return b.add("where", args, params, shape, interval)


def _apply_where(L, c, x, y, t=None):
    return L.where(c if t is None else L.greater(c, t), x, y)


def _where_margin(c, x, y, t=None):
    return np.inf if t is None else np.min(np.abs(np.subtract(c, t)), initial=np.inf)


OPS["where"] = Op(_gen_where, _apply_where, _where_margin)


def _gen_einsum(b):
    """Two operands with shared and own letters; the output keeps a random subset
    of the letters in a random order (the others are summed)."""
    i = b.pick()
    x = b.nodes[i]
    letters = "abcdefg"
    xs = letters[: len(x.shape)]
    sizes = dict(zip(xs, x.shape, strict=True))
    rank = b.draw(st.integers(0, 3))
    ys = ""
    fresh = iter(letters[len(xs) :])
    for _ in range(rank):
        shared = [c for c in xs if c not in ys]
        if shared and b.draw(st.booleans()):
            ys += b.draw(st.sampled_from(shared))
        else:
            c = next(fresh)
            sizes[c] = b.draw(st.integers(1, 3))
            ys += c
    every = list(dict.fromkeys(xs + ys))
    out = b.draw(st.permutations(every))[: b.draw(st.integers(0, len(every)))]
    spec = f"{xs},{ys}->{''.join(out)}"
    shape_y = tuple(sizes[c] for c in ys)
    j = b.partner(lambda s: s == shape_y, lambda draw: shape_y)
    if j is None:
        return False
    y = b.nodes[j]
    count = math.prod(sizes[c] for c in every if c not in out)
    lo, hi = _mul((x.lo, x.hi), (y.lo, y.hi))
    shape = tuple(sizes[c] for c in out)
    return b.add("einsum", (i, j), {"spec": spec}, shape, (count * lo, count * hi))


def _gen_tensordot(b):
    i = b.pick()
    x = b.nodes[i]
    k = b.draw(st.integers(0, min(2, len(x.shape))))
    contracted = x.shape[len(x.shape) - k :]
    extra = b.draw(shapes(max_size=6, max_ndim=2))

    def fits(s):
        return s[:k] == contracted and len(s) >= k

    j = b.partner(fits, lambda draw: contracted + extra)
    if j is None:
        return False
    y = b.nodes[j]
    shape = x.shape[: len(x.shape) - k] + y.shape[k:]
    count = math.prod(contracted)
    lo, hi = _mul((x.lo, x.hi), (y.lo, y.hi))
    return b.add("tensordot", (i, j), {"axes": k}, shape, (count * lo, count * hi))


def _gen_clip(b):
    i = b.pick()
    x = b.nodes[i]
    width = x.hi - x.lo
    lo = round(x.lo + width * b.draw(st.integers(0, 4)) / 10, 3)
    hi = round(x.hi - width * b.draw(st.integers(0, 4)) / 10, 3)
    return b.add("clip", (i,), {"lo": lo, "hi": hi}, x.shape, (lo, hi))


def _axis_op(name, interval=lambda n, x: (x.lo, x.hi)):
    def gen(b):
        picked = _pick_with_axis(b)
        if picked is None:
            return False
        i, x, axis = picked
        params = {"axis": axis}
        if name == "roll":
            params["shift"] = b.draw(st.integers(-3, 3))
        return b.add(name, (i,), params, x.shape, interval(x.shape[axis], x))

    return gen


def _cumprod_interval(n, x):
    interval, out = (x.lo, x.hi), (x.lo, x.hi)
    for _ in range(n - 1):
        interval = _mul(interval, (x.lo, x.hi))
        out = (min(out[0], interval[0]), max(out[1], interval[1]))
    return out


def _sort_margin(x, axis):
    s = np.sort(np.asarray(x), axis=axis)
    return np.min(np.diff(s, axis=axis), initial=np.inf)


def _gen_pad(b):
    i = b.pick(lambda n: len(n.shape) >= 1)
    if i is None:
        return False
    x = b.nodes[i]
    widths = tuple(
        (b.draw(st.integers(0, 1)), b.draw(st.integers(0, 2))) for _ in range(len(x.shape))
    )
    shape = tuple(d + lo + hi for d, (lo, hi) in zip(x.shape, widths, strict=True))
    return b.add("pad", (i,), {"widths": widths}, shape, (min(x.lo, 0.0), max(x.hi, 0.0)))


def _gen_tile(b):
    i = b.pick()
    x = b.nodes[i]
    reps = tuple(b.draw(st.lists(st.integers(1, 2), min_size=1, max_size=len(x.shape) + 1)))
    shape = np.tile(np.zeros(x.shape), reps).shape
    return b.add("tile", (i,), {"reps": reps}, shape, (x.lo, x.hi))


def _gen_take(b):
    picked = _pick_with_axis(b)
    if picked is None:
        return False
    i, x, axis = picked
    n = x.shape[axis]
    index = np.array(b.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4)))
    shape = np.take(np.zeros(x.shape), index, axis=axis).shape
    return b.add("take", (i,), {"index": index, "axis": axis}, shape, (x.lo, x.hi))


def _gen_diagonal(b):
    i = b.pick(lambda n: len(n.shape) >= 2)
    if i is None:
        return False
    x = b.nodes[i]
    nd = len(x.shape)
    a = b.draw(st.integers(-nd, nd - 1))
    c = b.draw(st.sampled_from([k for k in range(-nd, nd) if k % nd != a % nd]))
    offset = b.draw(st.integers(-1, 1))
    shape = np.diagonal(np.zeros(x.shape), offset, a, c).shape
    return b.add("diagonal", (i,), {"offset": offset, "a": a, "b": c}, shape, (x.lo, x.hi))


def _gen_scatter(b):
    """x.at[:, ..., index].add(v) (repeats allowed) or .set(v) (distinct indices)."""
    i = b.pick(lambda n: len(n.shape) >= 1)
    if i is None:
        return False
    x = b.nodes[i]
    nd = len(x.shape)
    axis = b.draw(st.integers(0, nd - 1))
    n = x.shape[axis]
    mode = b.draw(st.sampled_from(["add", "set"]))
    if mode == "add":
        index = b.draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=4))
    else:
        index = b.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
        index = [k - n if b.draw(st.booleans()) else k for k in index]
    target = (*x.shape[:axis], len(index), *x.shape[axis + 1 :])
    j = b.partner(
        lambda s: _broadcast(s, target) == target,
        lambda draw: target[draw(st.integers(0, len(target))) :],
    )
    if j is None:
        return False
    v = b.nodes[j]
    if mode == "add":
        reps = max(index.count(k) + index.count(k - n) for k in range(n))
        lo, hi = x.lo + reps * min(v.lo, 0.0), x.hi + reps * max(v.hi, 0.0)
    else:
        lo, hi = min(x.lo, v.lo), max(x.hi, v.hi)
    params = {"index": np.array(index), "axis": axis, "mode": mode}
    return b.add("scatter", (i, j), params, x.shape, (lo, hi))


LINALG = {
    # name: output interval for M = I + s x with |s x| <= 1 / (2 n) elementwise, so
    # that M's eigenvalues (singular values) lie in [0.5, 1.5] and |inv(M)| <= 2
    "inv": lambda n: (-2.0, 2.0),
    "det": lambda n: (0.5**n, 1.5**n),
    "slogdet": lambda n: (n * math.log(0.5), n * math.log(1.5)),
    "solve": None,
    "cholesky": lambda n: (-1.25, 1.25),
    "eigvalsh": lambda n: (0.5, 1.5),
    "norm": lambda n: (0.5, 1.5 * n),
    "matrix_power": None,
}


def _gen_linalg(b):
    """A linear-algebra function of ``M = I + s x`` (``x`` square, ``s`` small enough
    that ``M`` is well conditioned; symmetrised for cholesky and eigvalsh)."""
    fn = b.draw(st.sampled_from(list(LINALG)))
    square = lambda n: len(n.shape) in (2, 3) and n.shape[-1] == n.shape[-2] and _magnitude(n)
    i = b.pick(square)
    if i is None:
        n = b.draw(st.integers(1, 3))
        i = b.new_input(b.draw(st.sampled_from([(n, n), (2, n, n)])), "real")
        if i is None:
            return False
    x = b.nodes[i]
    n = x.shape[-1]
    scale = 1 / (2 * n * _magnitude(x))
    batch = x.shape[:-2]
    params = {"fn": fn, "scale": scale, "k": None}
    b.nodes.append(Node("const", (), {"value": np.eye(n), "seed": "eye"}, (n, n), 0.0, 1.0, ""))
    args = (i, len(b.nodes) - 1)
    if fn == "solve":
        shape_b = (*batch, n, b.draw(st.integers(1, 3)))
        j = b.partner(lambda s: s[:-1] == (*batch, n) and len(s) == len(shape_b), lambda d: shape_b)
        if j is None:
            return False
        args, v = (*args, j), b.nodes[j]
        shape, interval = v.shape, (-2 * _magnitude(v), 2 * _magnitude(v))
    elif fn == "matrix_power":
        k = b.draw(st.sampled_from([2, 3, -1, -2, 0]))
        params["k"] = k
        bound = 1.5**k if k >= 0 else 2.0**-k  # |M| <= 1.5, |inv(M)| <= 2
        shape, interval = x.shape, (-bound, bound)
    else:
        interval = LINALG[fn](n)
        out = {"det": batch, "slogdet": batch, "norm": batch, "eigvalsh": (*batch, n)}
        shape = out.get(fn, x.shape)
    return b.add("linalg", args, params, shape, interval)


def _apply_linalg(L, x, eye, *rest, fn, scale, k):
    if fn in ("cholesky", "eigvalsh"):
        x = (x + L.swapaxes(x, -1, -2)) * 0.5
    m = eye + x * scale
    return L.linalg(fn, m, rest[0] if rest else None, k)


def _eigen_gap(x, eye, *rest, fn, scale, k):
    if fn != "eigvalsh":
        return np.inf
    x = np.asarray(x)
    w = np.linalg.eigvalsh((x + np.swapaxes(x, -1, -2)) * (0.5 * scale))
    return np.min(np.diff(w, axis=-1), initial=np.inf)


OPS["linalg"] = Op(_gen_linalg, _apply_linalg, _eigen_gap)
OPS["einsum"] = Op(_gen_einsum, lambda L, x, y, spec: L.einsum(spec, x, y))
OPS["tensordot"] = Op(_gen_tensordot, lambda L, x, y, axes: L.tensordot(x, y, axes))
OPS["clip"] = Op(
    _gen_clip,
    lambda L, x, lo, hi: L.clip(x, lo, hi),
    lambda x, lo, hi: np.min(np.minimum(np.abs(x - lo), np.abs(x - hi)), initial=np.inf),
)
OPS["sort"] = Op(_axis_op("sort"), lambda L, x, axis: L.sort(x, axis), _sort_margin)
OPS["roll"] = Op(_axis_op("roll"), lambda L, x, axis, shift: L.roll(x, shift, axis))
OPS["cumprod"] = Op(_axis_op("cumprod", _cumprod_interval), lambda L, x, axis: L.cumprod(x, axis))
OPS["pad"] = Op(_gen_pad, lambda L, x, widths: L.pad(x, widths))
OPS["tile"] = Op(_gen_tile, lambda L, x, reps: L.tile(x, reps))
OPS["take"] = Op(_gen_take, lambda L, x, index, axis: L.take(x, index, axis))
OPS["diagonal"] = Op(_gen_diagonal, lambda L, x, offset, a, b: L.diagonal(x, offset, a, b))
OPS["scatter"] = Op(
    _gen_scatter, lambda L, x, v, index, axis, mode: L.scatter(x, index, v, axis, mode)
)

OP_NAMES = [*OPS, "linalg", "linalg"]  # eight functions behind "linalg"


def draw_program(draw, max_steps=MAX_STEPS) -> Program:
    b = Builder(draw)
    b.new_input(draw(shapes()), draw(st.sampled_from(["real", "positive"])))
    for _ in range(draw(st.integers(1, max_steps))):
        for _attempt in range(4):
            if OPS[draw(st.sampled_from(OP_NAMES))].gen(b):
                break
    return b.program()


# ----------------------------------------------------------------------------
# Transform stacks


@dataclass(frozen=True)
class Spec:
    """What a (transformed) function takes and returns."""

    shapes: tuple[tuple[int, ...], ...]
    domains: tuple[tuple[float, float], ...]
    out: tuple[int, ...]


class AutodiffTransforms:
    name = "autodiff"
    grad = staticmethod(lambda f, i: autodiff.grad(f, argnums=i))
    vjp = staticmethod(autodiff.vjp)
    jvp = staticmethod(lambda f, p, t: autodiff.jvp(f, tuple(p), tuple(t)))
    vmap = staticmethod(
        lambda f, i, o, chunk=None: autodiff.vmap(f, in_dims=i, out_dims=o, chunk_size=chunk)
    )
    linearize = staticmethod(autodiff.linearize)
    jacfwd = staticmethod(lambda f, i: autodiff.jacfwd(f, argnums=i))
    jacrev = staticmethod(lambda f, i, chunk=None: autodiff.jacrev(f, argnums=i, chunk_size=chunk))
    hessian = staticmethod(lambda f, i: autodiff.hessian(f, argnums=i))
    sum = staticmethod(anp.sum)
    asarray = staticmethod(lambda a: a)
    numpy = staticmethod(np.asarray)
    compile = staticmethod(lambda f, case: f)

    @staticmethod
    def context():
        return contextlib.nullcontext()


class JaxTransforms:
    name = "jax"

    def __init__(self):
        import jax
        import jax.numpy as jnp

        self.jax = jax
        self.grad = lambda f, i: jax.grad(f, argnums=i)
        self.vjp = jax.vjp
        self.jvp = lambda f, p, t: jax.jvp(f, tuple(p), tuple(t))
        self.vmap = lambda f, i, o, chunk=None: jax.vmap(f, in_axes=i, out_axes=o)
        self.linearize = jax.linearize
        self.jacfwd = lambda f, i: jax.jacfwd(f, argnums=i)
        self.jacrev = lambda f, i, chunk=None: jax.jacrev(f, argnums=i)
        self.hessian = lambda f, i: jax.hessian(f, argnums=i)
        self.sum = jnp.sum
        self.asarray = jnp.asarray
        self.numpy = np.asarray

    def compile(self, f, case):
        """jax.jit, far faster than op by op for nested derivatives, except where
        XLA compiles the program wrongly and it runs op by op: the VJP of a cumsum
        followed by indexing (jax 0.10.2 on CPU: jit(vjp(lambda t: cumsum(t,
        axis=1)[:, 1])) at t of shape (1, 3) gives [[1, 1, 1]] where the eager VJP
        gives [[1, 1, 0]]; found as vjp(jvp(diagonal(cumsum(x, axis=1), offset=1)))."""
        reverse = any(layer.kind in REVERSE for layer in case.layers)
        if reverse and "cumsum" in {n.op for n in case.program.nodes}:
            return f
        return self.jax.jit(f)

    def context(self):
        return self.jax.enable_x64(True)


class TorchTransforms:
    name = "torch"

    def __init__(self):
        import torch
        import torch.func as tf

        with warnings.catch_warnings():  # (torch 2.14's own jvp decompositions call the
            warnings.simplefilter("ignore", FutureWarning)  # torch.jit.script it deprecates)
            with contextlib.suppress(ImportError):
                importlib.import_module("torch._decomp.decompositions_for_jvp")

        self.grad = lambda f, i: tf.grad(f, argnums=i)
        self.vjp = tf.vjp
        self.jvp = lambda f, p, t: tf.jvp(f, tuple(p), tuple(t))
        # torch.func.vmap(out_dims=k != 0) fails, or returns garbage, when the output
        # does not depend on the batched inputs (torch 2.13): out_dims=0 and a move.
        self.vmap = lambda f, i, o, chunk=None: (
            lambda *a: torch.movedim(tf.vmap(f, in_dims=i)(*a), 0, o)
        )
        # torch.func.linearize traces with make_fx and does not nest under the other
        # transforms; a jvp at the same point is the same linear map.
        self.linearize = lambda f, *p: (f(*p), lambda *t: tf.jvp(f, p, t)[1])
        self.jacfwd = lambda f, i: tf.jacfwd(f, argnums=i)
        self.jacrev = lambda f, i, chunk=None: tf.jacrev(f, argnums=i)
        self.compile = lambda f, case: f
        self.hessian = lambda f, i: tf.hessian(f, argnums=i)
        self.sum = torch.sum
        self.asarray = lambda a: torch.as_tensor(np.asarray(a))  # Python floats: float64
        # clone: numpy() refuses a ZeroTensor, and numpy(force=True) crashes (torch 2.13)
        self.numpy = lambda t: t.detach().clone().numpy()

    @staticmethod
    def avoid(case):
        """Programs where torch differs from NumPy by convention or by a bug:

        * an index that mixes an integer with an array: NumPy (and JAX) treat the
          integer as an advanced index too, so with a slice between them the
          broadcast axes go first (``x[0, :, [0]]``); torch treats it as basic;
        * torch.func's higher derivatives of prod and cumprod are NaN where a factor
          is exactly 0 (torch 2.13: grad(hessian(f)) with f = prod(cat([sin(x),
          zeros(1)])), vjp of jvp of cumprod(var(x, axis=0)) with x of shape (1, 1));
          pad and var over one element make exact zeros;
        * vmap over no examples: many torch.func batching rules fail on an empty
          batch (select(), reshape with -1, var warns);
        * derivatives of forward-mode derivatives of linear algebra are wrong
          (torch 2.13: jacrev(jacfwd(slogdet)) and jacfwd(jacfwd(slogdet)) are 0,
          jacfwd(jacfwd(solve)) differs from hessian(solve), jacrev(jvp(det)) of a
          1x1 matrix is not 0), and so are third derivatives of det in every mode
          (NaN or wrong: jacrev(jacrev(jacrev(det))) is NaN)."""
        kinds = [layer.kind for layer in case.layers]  # innermost first
        if any(layer.kind == "vmap" and layer.size == 0 for layer in case.layers):
            return True
        ops = {n.op for n in case.program.nodes}
        forward = [k for k, kind in enumerate(kinds) if kind in FORWARD]
        order = sum({"vmap": 0, "hessian": 2}.get(kind, 1) for kind in kinds)
        if "linalg" in ops and (
            order >= 3 or (forward and any(kind != "vmap" for kind in kinds[forward[0] + 1 :]))
        ):
            return True
        for n in case.program.nodes:
            index = n.params.get("index") if n.op in ("getitem", "inplace") else None
            kinds = {type(i) for i in index} if index is not None else set()
            if np.ndarray in kinds and int in kinds:
                return True
        return bool(ops & {"pad", "var"}) and bool(ops & {"prod", "cumprod"})

    @contextlib.contextmanager
    def context(self):
        with warnings.catch_warnings():
            # torch.func's own use of a deprecated torch API (not a numerical warning)
            warnings.filterwarnings(
                "ignore", "`torch.jit.script` is deprecated", DeprecationWarning
            )
            yield


@dataclass
class Layer:
    kind: str
    arity: int  # of the function below
    argnum: int = 0
    subset: tuple[int, ...] = ()  # jvp: the primals with a tangent
    in_dims: tuple = ()
    out_dim: int = 0
    size: int = 0  # vmap's batch size
    weight: np.ndarray | None = None  # the output reduced to sum(out * weight) first
    weight_seed: int = 0
    chunk: int | None = None  # autodiff's chunk_size (vmap, jacrev)
    int_dims: bool = False  # vmap: in_dims given as one int for every argument
    out_shape: tuple = ()  # filled in by spec()

    def __str__(self):
        chunk = "" if self.chunk is None else f", chunk_size={self.chunk}"
        if self.kind == "vmap":
            dims = f"in_dims={self.in_dims}, out_dims={self.out_dim}"
            return f"vmap({dims}, size={self.size}{chunk})"
        if self.kind in ("jvp", "linearize"):
            return f"{self.kind}(tangents for {self.subset})"
        w = "" if self.weight is None else f", of sum(out * w{np.shape(self.weight)})"
        return f"{self.kind}(argnum={self.argnum}{w}{chunk})"

    def spec(self, inner: Spec) -> Spec:
        shapes_, domains, out = inner.shapes, inner.domains, inner.out
        a = shapes_[self.argnum]
        s = () if self.weight is not None else out
        if self.kind == "grad":
            return Spec(shapes_, domains, a)
        if self.kind == "vjp":
            return Spec((*shapes_, out), (*domains, DOMAINS["unit"]), a)
        if self.kind in ("jvp", "linearize"):
            tangents = tuple(shapes_[j] for j in self.subset)
            return Spec(shapes_ + tangents, domains + (DOMAINS["unit"],) * len(tangents), out)
        if self.kind in ("jacfwd", "jacrev"):
            return Spec(shapes_, domains, s + a)
        if self.kind == "hessian":
            return Spec(shapes_, domains, s + a + a)
        assert self.kind == "vmap"
        batched = tuple(
            sh if d is None else _insert(sh, d, self.size)
            for sh, d in zip(shapes_, self.in_dims, strict=True)
        )
        self.out_shape = _insert(out, self.out_dim, self.size)
        return Spec(batched, domains, self.out_shape)

    def _reduce(self, T, inner, dtype):
        if self.weight is None:
            return inner
        w = T.asarray(self.weight.astype(dtype))
        return lambda *xs: T.sum(inner(*xs) * w)

    def wrap(self, T, inner, dtype) -> Callable:
        """This transform of ``inner``, written with the transforms ``T``."""
        n, i = self.arity, self.argnum
        if self.kind == "grad":
            return T.grad(self._reduce(T, inner, dtype), i)
        if self.kind == "jacrev":
            return T.jacrev(self._reduce(T, inner, dtype), i, self.chunk)
        if self.kind in ("jacfwd", "hessian"):
            return getattr(T, self.kind)(self._reduce(T, inner, dtype), i)
        if self.kind == "vmap":
            in_dims = self.in_dims[0] if self.int_dims else self.in_dims
            return T.vmap(inner, in_dims, self.out_dim, self.chunk)
        if self.kind == "linearize":

            def linearize_layer(*args):
                _, jvp_fn = T.linearize(inner, *args[:n])
                return jvp_fn(*args[n:])

            return linearize_layer
        if self.kind == "vjp":

            def vjp_layer(*args):
                _, vjp_fn = T.vjp(inner, *args[:n])
                return vjp_fn(args[n])[i]

            return vjp_layer

        subset = self.subset

        def jvp_layer(*args):
            xs = args[:n]

            def part(*chosen):
                full = list(xs)
                for j, c in zip(subset, chosen, strict=True):
                    full[j] = c
                return inner(*full)

            return T.jvp(part, [xs[j] for j in subset], args[n:])[1]

        return jvp_layer

    def inner_points(self, args) -> list[tuple]:
        """The arguments at which this layer runs the function below."""
        if self.kind != "vmap":
            return [tuple(args[: self.arity])]
        return [self._slice(args, k) for k in range(self.size)]

    def _slice(self, args, k):
        return tuple(
            a if d is None else np.take(a, k, axis=d)
            for a, d in zip(args, self.in_dims, strict=True)
        )

    def check(self, inner, outer, args, rng):
        """Check ``outer(*args)`` against the function below (finite differences, a
        loop); returns the point at which to check the layer below."""
        got = np.asarray(outer(*args))
        n, i = self.arity, self.argnum
        xs = tuple(args[:n])
        if self.kind == "vmap":
            if self.size == 0:  # nothing to loop over, nor to check below
                _close(got, np.zeros(self.out_shape), "vmap over no examples")
                return None
            want = np.stack(
                [np.asarray(inner(*self._slice(args, k))) for k in range(self.size)],
                axis=self.out_dim,
            )
            _close(got, want, "vmap against a loop", rtol=1e-9)
            return self._slice(args, int(rng.integers(self.size)))
        if self.kind in ("jvp", "linearize"):
            vs = dict(zip(self.subset, args[n:], strict=True))
            direction = [vs.get(j, np.zeros_like(x)) for j, x in enumerate(xs)]
            num, err = _fd1(lambda t: inner(*_along(xs, direction, t)), xs)
            _close(got, num, f"{self.kind} against finite differences", err=err)
            out, tangent = autodiff.jvp(inner, xs, tuple(direction))
            _close(out, inner(*xs), "jvp's primal output", rtol=1e-12)
            _close(tangent, got, f"jvp with zero tangents against {self}", rtol=1e-12)
            if self.kind == "linearize":
                out, jvp_fn = autodiff.linearize(inner, *xs)
                _close(out, inner(*xs), "linearize's primal output", rtol=1e-12)
                again = jvp_fn(*(2.0 * d for d in direction))
                _close(again, 2.0 * got, "linearize's jvp_fn called again", rtol=1e-12)
            return xs
        if self.kind == "vjp":
            ct = args[n]
            out, vjp_fn = autodiff.vjp(inner, *xs)
            cts = vjp_fn(ct)
            _close(out, inner(*xs), "vjp's primal output", rtol=1e-12)
            _close(got, cts[i], "the vjp layer's output", rtol=0)
            assert len(cts) == n, f"vjp_fn returned {len(cts)} cotangents for {n} inputs"
            for c, x in zip(cts, xs, strict=True):
                assert np.shape(c) == np.shape(x), f"cotangent {np.shape(c)} for {np.shape(x)}"
            vs = [_direction(rng, x) for x in xs]
            lhs = sum(float(np.sum(c * v)) for c, v in zip(cts, vs, strict=True))
            scale = sum(float(np.sum(np.abs(c * v))) for c, v in zip(cts, vs, strict=True))
            num, err = _fd1(lambda t: np.sum(ct * np.asarray(inner(*_along(xs, vs, t)))), xs)
            _close(lhs, num, "<vjp(ct), v> against finite differences", err=err, scale=scale)
            return xs
        reduce = (lambda y: y) if self.weight is None else (lambda y: np.sum(y * self.weight))
        v = [np.zeros_like(x) for x in xs]
        v[i] = _direction(rng, xs[i])
        along = lambda t: reduce(np.asarray(inner(*_along(xs, v, t))))
        nd = np.ndim(xs[i])
        if self.kind == "grad":
            num, err = _fd1(along, xs)
            lhs, scale = np.sum(got * v[i]), np.sum(np.abs(got * v[i]))
            _close(lhs, num, "<grad, v> against finite differences", err=err, scale=scale)
        elif self.kind in ("jacfwd", "jacrev"):
            num, err = _fd1(along, xs)
            lhs = np.tensordot(got, v[i], nd)
            scale = np.tensordot(np.abs(got), np.abs(v[i]), nd)
            _close(lhs, num, f"{self.kind} . v against finite differences", err=err, scale=scale)
        else:
            w = [np.zeros_like(x) for x in xs]
            w[i] = _direction(rng, xs[i])
            both = lambda s, t: reduce(np.asarray(inner(*_along(_along(xs, v, s), w, t))))
            num, err = _fd2(both, xs)
            lhs = np.tensordot(np.tensordot(got, w[i], nd), v[i], nd)
            scale = np.tensordot(np.tensordot(np.abs(got), np.abs(w[i]), nd), np.abs(v[i]), nd)
            _close(lhs, num, "v . hessian . w against finite differences", err=err, scale=scale)
        return xs


def _insert(shape, dim, size):
    shape = list(shape)
    shape.insert(dim % (len(shape) + 1), size)
    return tuple(shape)


def _direction(rng, x):
    v = rng.standard_normal(np.shape(x))
    return v / max(1.0, float(np.max(np.abs(v), initial=0.0)))


def _along(xs, vs, t):
    return tuple(x + t * v for x, v in zip(xs, vs, strict=True))


EPS = float(np.finfo(np.float64).eps)


def _fd1(fun, xs, h=1e-4):
    """The derivative at 0 of ``fun`` (array-valued) by central differences with
    Richardson extrapolation, and a bound on its error: the difference between
    the two step sizes (which exceeds the truncation error of the extrapolated
    value by far) plus round-off, of the function values and of the perturbed
    inputs ``xs + t v`` (which moves the output by about slope * eps * |x|)."""
    f = {t: np.asarray(fun(t), dtype=np.float64) for t in (h, -h, 2 * h, -2 * h)}
    d1 = (f[h] - f[-h]) / (2 * h)
    d2 = (f[2 * h] - f[-2 * h]) / (4 * h)
    size = max(float(np.max(np.abs(y), initial=0.0)) for y in f.values())
    slope = float(np.max(np.abs(d1), initial=0.0))
    return (4 * d1 - d2) / 3, np.abs(d1 - d2) + 64 * EPS * (size + _size(xs) * slope) / h


def _fd2(fun, xs, h=5e-4):
    """The mixed second derivative at (0, 0) of ``fun(s, t)``, as ``_fd1``."""

    def mixed(k):
        a = [np.asarray(fun(s * k, t * k), dtype=np.float64) for s, t in SIGNS]
        return (a[0] - a[1] - a[2] + a[3]) / (4 * k * k), a

    d1, a1 = mixed(h)
    d2, a2 = mixed(2 * h)
    size = max(float(np.max(np.abs(y), initial=0.0)) for y in a1 + a2)
    slope = float(np.max(np.abs(a1[0] - a1[3]), initial=0.0)) / (2 * h)
    noise = 64 * EPS * (size + _size(xs) * slope) / h**2
    return (4 * d1 - d2) / 3, np.abs(d1 - d2) + noise


def _size(xs):
    return max((float(np.max(np.abs(x), initial=0.0)) for x in xs), default=0.0)


SIGNS = [(1, 1), (1, -1), (-1, 1), (-1, -1)]


def _close(got, want, what, *, rtol=1e-6, err=0.0, scale=None, atol=1e-11):
    """|got - want| <= rtol * scale + err + atol elementwise; ``scale`` defaults to
    the largest magnitude of either (a normwise comparison)."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if scale is None:
        scale = max(np.max(np.abs(got), initial=0.0), np.max(np.abs(want), initial=0.0))
    tol = rtol * np.asarray(scale) + err + atol
    bad = ~(np.abs(got - want) <= tol)
    if np.any(bad):
        raise AssertionError(
            f"{what}: {int(np.sum(bad))} of {bad.size} elements differ, worst "
            f"|difference| = {np.max(np.abs(got - want)):.3g} (tolerance there "
            f"{np.broadcast_to(tol, bad.shape)[bad].min():.3g})\ngot:\n{got}\nexpected:\n{want}"
        )


# ----------------------------------------------------------------------------
# Cases


@dataclass
class Case:
    program: Program
    layers: list[Layer]
    seed: int
    float32: bool
    specs: list[Spec] = field(default_factory=list)
    python_floats: bool = False  # 0-d arguments passed as Python floats

    def __repr__(self):
        stack = "".join(f"{layer}(" for layer in reversed(self.layers))
        stack += "program" + ")" * len(self.layers)
        floats = ", Python floats" if self.python_floats else ""
        head = f"Case(seed={self.seed}, float32={self.float32}{floats}): {stack}"
        body = "\n".join("    " + line for line in self.program.source().splitlines())
        return f"{head}\n  program(*x):\n{body}"

    def _repr_pretty_(self, printer, cycle):  # how hypothesis prints a falsifying case
        printer.text(repr(self))

    def functions(self, T, lib, dtype) -> list[Callable]:
        fns = [self.program.function(lib, dtype)]
        for layer in self.layers:
            fns.append(layer.wrap(T, fns[-1], dtype))
        return fns

    def base_points(self, args) -> list[tuple]:
        points = [tuple(args)]
        for layer in reversed(self.layers):
            points = [p for a in points for p in layer.inner_points(a)]
        return points

    def arguments(self, tries=20) -> tuple:
        """Random arguments of the whole stack, MARGIN away from every kink."""
        rng = np.random.default_rng(self.seed)
        top = self.specs[-1]
        for _ in range(tries):
            args = tuple(
                np.asarray(rng.uniform(lo, hi, shape))
                for shape, (lo, hi) in zip(top.shapes, top.domains, strict=True)
            )
            if self.program.margin(self.base_points(args)) > MARGIN:
                if self.python_floats:
                    args = tuple(float(a) if a.ndim == 0 else a for a in args)
                return args
        assume(False)
        raise AssertionError("unreachable")


def _draw_layer(draw, kind, spec: Spec, arity: int) -> Layer | None:
    sizes = [math.prod(s) for s in spec.shapes]
    out_size = math.prod(spec.out)
    if kind == "vmap":
        size = draw(st.sampled_from([1, 2, 3, 0]))
        if out_size * size > MAX_OUT_SIZE:
            return None
        dims = []
        for shape, n in zip(spec.shapes, sizes, strict=True):
            nd = len(shape)
            if n * size > MAX_ARG_SIZE:
                dims.append(None)
            else:
                dims.append(draw(st.one_of(st.none(), st.integers(-(nd + 1), nd))))
        if all(d is None for d in dims):
            fits = [k for k, n in enumerate(sizes) if n * size <= MAX_ARG_SIZE]
            if not fits:
                return None
            k = draw(st.sampled_from(fits))
            dims[k] = draw(st.sampled_from([0, -1]))
        m = len(spec.out)
        out_dim = draw(st.integers(-(m + 1), m))
        chunk = draw(st.sampled_from([None, None, 1, 2]))
        layer = Layer("vmap", arity, in_dims=tuple(dims), out_dim=out_dim, size=size, chunk=chunk)
        layer.int_dims = len(set(dims)) == 1 and draw(st.booleans())
        return layer
    if kind == "jvp":
        subset = draw(st.lists(st.integers(0, arity - 1), min_size=1, max_size=arity, unique=True))
        return Layer("jvp", arity, subset=tuple(sorted(subset)))
    if kind == "linearize":
        return Layer("linearize", arity, subset=tuple(range(arity)))
    limit = {"hessian": 8, "jacfwd": 16, "jacrev": 16}.get(kind, MAX_ARG_SIZE)
    candidates = [k for k, n in enumerate(sizes) if n <= limit]
    if not candidates or (kind == "vjp" and out_size > MAX_ARG_SIZE):
        return None
    argnum = draw(st.sampled_from(candidates))
    layer = Layer(kind, arity, argnum=argnum)
    if kind == "jacrev":
        layer.chunk = draw(st.sampled_from([None, None, 1, 2]))
    a = sizes[argnum]
    grows = {"jacfwd": a, "jacrev": a, "hessian": a * a}.get(kind, 1)
    reduce = kind == "grad" and (spec.out != () or draw(st.booleans()))
    reduce = reduce or (kind in ("jacfwd", "jacrev", "hessian") and spec.out != ())
    reduce = reduce and (kind == "grad" or out_size * grows > MAX_OUT_SIZE or draw(st.booleans()))
    if reduce:
        layer.weight_seed = draw(st.integers(0, 2**16))
        layer.weight = np.random.default_rng(layer.weight_seed).uniform(-1, 1, spec.out)
    return layer


@st.composite
def cases(draw, top: str, max_depth: int = 3) -> Case:
    """A random program under a random stack of transforms whose outermost is ``top``
    (``"forward"``: no transform)."""
    program = draw_program(draw)
    specs = [program.spec]
    layers: list[Layer] = []
    depth = 0 if top == "forward" else draw(st.sampled_from([1, 2, 2, 3, 3, 3][: 2 * max_depth]))
    for level in range(depth):
        if level == depth - 1:
            kinds = [top]
        else:
            first = draw(st.sampled_from(KINDS))
            kinds = [first, *(k for k in KINDS if k != first)]
        for kind in kinds:
            layer = _draw_layer(draw, kind, specs[-1], len(specs[-1].shapes))
            if layer is not None:
                break
        assume(layer is not None)
        layers.append(layer)
        specs.append(layer.spec(specs[-1]))
    seed = draw(st.integers(0, 2**32 - 1))
    python_floats = any(s == () for s in specs[-1].shapes) and draw(st.booleans())
    return Case(program, layers, seed, draw(st.booleans()), specs, python_floats)


# ----------------------------------------------------------------------------
# Checks


def check_case(case: Case) -> None:
    """Every layer against finite differences or a loop, shapes against the
    specs, and float32 (when drawn) against float64."""
    args = case.arguments()
    fns = case.functions(AutodiffTransforms, AUTODIFF, np.float64)
    out = np.asarray(fns[-1](*args))
    assert out.shape == case.specs[-1].out, f"output shape {out.shape}, {case.specs[-1].out}"
    assert out.dtype == np.float64, f"output dtype {out.dtype}"
    rng = np.random.default_rng(case.seed + 1)
    point = args
    for k in range(len(case.layers) - 1, -1, -1):
        point = case.layers[k].check(fns[k], fns[k + 1], point, rng)
        if point is None:
            break
    if case.float32:
        fns32 = case.functions(AutodiffTransforms, AUTODIFF, np.float32)
        args32 = tuple(
            np.float32(a) if isinstance(a, float) else a.astype(np.float32) for a in args
        )
        out32 = np.asarray(fns32[-1](*args32))
        # NumPy itself promotes some float32 programs (einsum, tensordot and stack
        # make a Python float operand a float64 array); autodiff follows NumPy.
        points = case.base_points(args32)  # none under vmap over no examples
        plain = case.program.function(NumpyLib(np), np.float32)(*points[0]) if points else None
        if plain is not None and np.asarray(plain).dtype == np.float32:
            assert out32.dtype == np.float32, f"float32 program gave {out32.dtype}"
        want = np.asarray(fns[-1](*(a.astype(np.float64) for a in args32)))
        _close(out32, want, "float32 against float64", rtol=2e-3, atol=1e-5)


def compare_with(case: Case, T, lib, rtol=1e-8) -> None:
    """The whole stack against the same stack in JAX or torch.func."""
    assume(not getattr(T, "avoid", lambda case: False)(case))
    args = case.arguments()
    ours = np.asarray(case.functions(AutodiffTransforms, AUTODIFF, np.float64)[-1](*args))
    with T.context():
        theirs_fn = T.compile(case.functions(T, lib, np.float64)[-1], case)
        theirs = T.numpy(theirs_fn(*(T.asarray(a) for a in args)))
    assert ours.shape == theirs.shape, f"shape {ours.shape}, {T.name} gives {theirs.shape}"
    _close(ours, theirs, f"autodiff against {T.name}", rtol=rtol)
