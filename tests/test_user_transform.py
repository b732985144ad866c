"""A transform written outside the package, as docs/extending.md teaches: count_flops
counts primitive calls and estimates FLOPs, and composes with vmap and grad.

The code between the two ``listing`` markers is the complete listing in
docs/extending.md; a test checks that the two stay the same.
"""

import math
import pathlib
import re
from collections import Counter
from typing import Any, NamedTuple

import numpy as np
import optree

from autodiff import grad, vmap
from autodiff.extend import (
    Interpreter,
    Primitive,
    Tracer,
    lift,
    new_interpreter,
    owned,
    process,
)
from autodiff.interpreters.explain import explain

ROOT = pathlib.Path(__file__).resolve().parents[1]

# --- listing: docs/extending.md ---
FREE = {"broadcast_to", "expand_dims", "ones_like", "reshape", "squeeze", "transpose", "zeros_like"}
REDUCTIONS = {"max", "min", "prod", "sum"}


class CountInterpreter(Interpreter):
    __slots__ = ("calls", "flops")
    transform = "count_flops"


class CountTensor(Tracer):
    __slots__ = ("value",)

    def __init__(self, interp, value):
        self._interp, self.value = interp, value

    @property
    def _inner(self):  # the lower-level value: shape, dtype, concrete value come from it
        return self.value


def size(x):
    return math.prod(getattr(x, "shape", ()))


def estimate_flops(prim, values, out):
    if prim.name == "matmul":  # 2*m*n*k: k = the length of the contracted axis
        return 2 * size(out) * values[0].shape[-1]
    if prim.name in FREE:  # moves or creates values: no arithmetic
        return 0
    if prim.name in REDUCTIONS:  # about one operation per input element
        return size(values[0])
    return sum(map(size, out)) if prim.multiple_results else size(out)  # elementwise


@lift.register(CountInterpreter, object)
def lift_to_count(interp, x):
    return CountTensor(interp, x)  # a constant, or a value of an outer transform


@process.register(CountInterpreter, Primitive)
def count_call(interp, prim, args, params):
    values = [arg.value for arg in args]  # every arg is a CountTensor of interp (lifted)
    out = prim.bind(*values, **params)  # peels this level: NumPy, or the next transform
    interp.calls[prim.name] += 1
    interp.flops += estimate_flops(prim, values, out)
    if prim.multiple_results:
        return tuple(CountTensor(interp, o) for o in out)
    return CountTensor(interp, out)


class Counts(NamedTuple):
    result: Any  # func's output
    calls: Counter  # primitive name -> number of calls
    flops: int


def count_flops(func):
    """``count_flops(func)(*args)``: run func, counting the primitive calls it makes."""

    def counted(*args, **kwargs):
        interp = CountInterpreter()
        interp.calls, interp.flops = Counter(), 0
        with new_interpreter(interp):
            wrap = lambda x: CountTensor(interp, x) if hasattr(x, "shape") else x
            out = func(*optree.tree_map(wrap, args), **kwargs)
            mine = lambda x: owned(interp, x) is not None  # ours, and not leaked
            out = optree.tree_map(lambda x: x.value if mine(x) else x, out)
        return Counts(out, interp.calls, interp.flops)

    return counted


# --- end of listing ---


def loss(w, x, y):
    return np.mean((np.tanh(x @ w) - y) ** 2)


rng = np.random.default_rng(1)
W, XS, YS = rng.normal(size=(3, 2)), rng.normal(size=(4, 3)), rng.normal(size=(4, 2))
per_example_grads = vmap(grad(loss), in_dims=(None, 0, 0))


def test_counts_of_per_example_gradients_are_exact():
    # By hand, for w (3, 2), one example x (3,), y (2,), a batch of B = 4.  count_flops
    # is outermost, so it sees the batched (physical) arrays: every per-example (2,)
    # value is (4, 2), and elementwise FLOPs are 8 where one example's are 2.
    #   forward            t = tanh(x @ w); d = t - y; mean(d**2) = sum(d**2) / 2
    #     matmul           (4, 3) @ (3, 2) -> (4, 2)           2*8*3 = 48
    #     tanh, subtract, power                     (4, 2)      3 * 8 = 24
    #     sum              (4, 2) -> (4,): one per input                 8
    #     divide           (4,) / 2                                      4
    #   grad's seed        ones_like (4,)                                0
    #   backward, from the output to w (y and x need no cotangent)
    #     VJP of divide    g / 2                                         4
    #     VJP of sum       expand_dims (4, 1), broadcast_to (4, 2)       0
    #     VJP of power     g * (2.0 * d): multiply, multiply        2 * 8 = 16
    #     VJP of tanh      g * (1 - t*t): multiply, subtract, multiply
    #                                                           3 * 8 = 24
    #     VJP of matmul    x[:, None] @ g[None, :] per example: expand_dims,
    #                      transpose (x as a column), expand_dims (g as a row): 0
    #                      matmul (4, 3, 1) @ (4, 1, 2) -> (4, 3, 2)   2*24*1 = 48
    # Calls: 6 forward + 1 seed + 12 backward = 19; FLOPs: 84 + 92 = 176 (a 1-D
    # matmul has k = 3, the outer product of the backward pass k = 1).
    counts = count_flops(per_example_grads)(W, XS, YS)
    assert counts.calls == {
        "matmul": 2, "tanh": 1, "subtract": 2, "power": 1, "sum": 1, "divide": 2,
        "ones_like": 1, "expand_dims": 3, "broadcast_to": 1, "multiply": 4, "transpose": 1,
    }  # fmt: skip
    assert sum(counts.calls.values()) == 19
    assert counts.flops == 48 + 24 + 8 + 4 + 4 + 16 + 24 + 48 == 176


def test_counting_agrees_with_plain_evaluation():
    counts = count_flops(per_example_grads)(W, XS, YS)
    plain = per_example_grads(W, XS, YS)
    assert type(counts.result) is np.ndarray and counts.result.shape == (4, 3, 2)
    np.testing.assert_allclose(counts.result, plain, rtol=1e-13)
    # The gradient by hand: d/dw mean((tanh(x @ w) - y)**2) = x^T (2/2 (t - y) (1 - t^2)).
    t = np.tanh(XS @ W)
    by_hand = np.einsum("bi,bj->bij", XS, (t - YS) * (1 - t**2))
    np.testing.assert_allclose(counts.result, by_hand, rtol=1e-12)
    # Without transforms inside, the counts are of the plain forward pass.
    forward = count_flops(loss)(W, XS, YS)
    assert forward.result == loss(W, XS, YS)
    assert forward.calls == {
        "matmul": 1,
        "tanh": 1,
        "subtract": 1,
        "power": 1,
        "sum": 1,
        "divide": 1,
    }
    assert forward.flops == 2 * 8 * 3 + 3 * 8 + 8 + 1


def test_explain_sees_the_new_transform():
    ex = explain(count_flops(np.tanh))(np.zeros(3))
    assert [c.prim for c in ex.calls] == ["tanh"]
    assert [(s.transform, s.depth, s.rule) for s in ex.calls[0].stages] == [
        ("count_flops", 2, "process"),
        ("numpy", 0, "impl"),
    ]
    assert ex.result.calls == {"tanh": 1}


def test_the_listing_in_the_docs_is_this_code():
    doc = (ROOT / "docs" / "extending.md").read_text()
    listing = re.search(r"<!-- listing -->\n```python\n(.*?)```", doc, re.DOTALL).group(1)
    source = pathlib.Path(__file__).read_text()
    body = source.split("# --- listing: docs/extending.md ---\n")[1].split("\n\n# --- end")[0]
    imports, code = listing.split("\nFREE = ")
    assert "FREE = " + code.strip() == body.strip()
    for line in imports.splitlines():  # the listing's imports are among this module's
        assert line in source.splitlines(), line
    lines = len(listing.splitlines())
    assert f"{lines} lines" in doc and lines < 100
    namespace: dict = {}
    exec(compile(listing, "docs/extending.md", "exec"), namespace)  # it runs as printed
    assert namespace["count_flops"](per_example_grads)(W, XS, YS).flops == 176
