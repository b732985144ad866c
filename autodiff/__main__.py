"""``python -m autodiff``: a short tour of the transforms, with real numbers.

The examples are those of the torch.func ``grad`` and ``vjp`` documentation,
written for autodiff; each line shows the result and the value it must equal.
``python -m autodiff --help`` says what it shows and its options.
"""

from __future__ import annotations

import argparse
import statistics
import textwrap
import time

import numpy as np

import autodiff.numpy as anp
from autodiff import (
    explain,
    grad,
    hessian,
    jit,
    jvp,
    make_graph,
    no_grad,
    scan,
    vjp,
    vmap,
    while_loop,
)
from autodiff.extend import Primitive
from autodiff.testing import check_primitive


def _show(label: str, got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    ok = got.shape == want.shape and np.allclose(got, want)
    if got.ndim >= 2:
        text = f"shape {got.shape}, max |error| {np.max(np.abs(got - want)):.1e}"
    else:
        text = np.array2string(got, precision=4, suppress_small=True)
    print(f"  {'ok' if ok else 'MISMATCH':>8}  {label:<44} {text}"[:WIDTH])
    if not ok:
        raise SystemExit(f"tour: {label!r} does not match the expected value")


WIDTH = 100  # columns: the tour fits a terminal of this width

_WHERE_NEXT = """\
where to go next (in the repository; README.md shows how to build the site):
  README.md                        every transform in one table, with a one-line example
  notebooks/01_quickstart.ipynb    the first of ten executed notebooks (notebooks/)
  docs/guide.md                    autodiff.numpy, jit and its contract, control flow, ...
  docs/errors.md                   each error, and what to write instead
  docs/differences.md              what differs from torch.func, JAX and HIPS autograd
  help(autodiff.grad)              every public function's docstring, with an example"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m autodiff",
        description=(
            "A tour of autodiff's transforms on plain NumPy code: grad, per-sample "
            "gradients with vmap(grad), vjp, jvp, Hessians, control flow, jit, a primitive "
            "of your own and explain. Each line computes a value and checks it against "
            "the one it must equal (a hand-derived formula or a Python loop)."
        ),
        epilog="The README and docs/ say where to go from there.",
    )
    parser.add_argument(
        "--no-timing",
        action="store_true",
        help="skip the two timed comparisons (vmap against a loop, jit against eager)",
    )
    timing = not parser.parse_args(argv).no_timing
    start = time.perf_counter()
    rng = np.random.default_rng(0)
    x = 0.5
    print("autodiff: composable grad / vjp / jvp / vmap for NumPy code\n")

    print("grad")
    _show("grad(np.sin)(0.5) == cos(0.5)", grad(np.sin)(x), np.cos(x))
    _show("grad(grad(np.sin))(0.5) == -sin(0.5)", grad(grad(np.sin))(x), -np.sin(x))

    print("\nper-sample gradients: vmap(grad(loss), in_dims=(None, 0, 0))")

    def model(weights, feature_vec):
        return np.maximum(feature_vec @ weights, 0.0)  # relu(x . w), plain NumPy

    def compute_loss(weights, example, target):
        return np.mean((model(weights, example) - target) ** 2)

    weights, examples, targets = rng.normal(size=5), rng.normal(size=(3, 5)), rng.normal(size=3)
    per_example = vmap(grad(compute_loss), in_dims=(None, 0, 0))(weights, examples, targets)
    loop = np.stack([grad(compute_loss)(weights, e, t) for e, t in zip(examples, targets)])
    _show("equal to a Python loop of grad", per_example, loop)
    if timing:
        _speedup(rng)

    print("\ngrad with has_aux=True and argnums=(0, 1)")

    def my_loss(y, y_pred):
        per_sample = (0.5 * y_pred - y) ** 2
        return per_sample.mean(), (y_pred, per_sample)

    y, y_pred = rng.random(4), rng.random(4)
    (_g_y, g_pred), _ = grad(my_loss, argnums=(0, 1), has_aux=True)(y, y_pred)
    _show("d loss / d y_pred", g_pred, (0.5 * y_pred - y) / 4)

    print("\nvjp")
    v = rng.normal(size=5)
    _, vjp_fn = vjp(lambda t: (np.sin(t), np.cos(t)), v)
    _show(
        "vjp of (sin, cos) with ones: cos - sin",
        vjp_fn((np.ones(5), np.ones(5)))[0],
        np.cos(v) - np.sin(v),
    )
    _, vjp_fn = vjp(lambda t: {"first": np.sin(t), "second": np.cos(t)}, v)
    _show(
        "same with a dict output",
        vjp_fn({"first": np.ones(5), "second": np.ones(5)})[0],
        np.cos(v) - np.sin(v),
    )
    a, b, ct = rng.normal(size=(5, 4)), rng.normal(size=(4, 5)), rng.normal(size=(5, 5))
    _, vjp_fn = vjp(np.matmul, a, b)
    _show("vjp of matmul, first partial: ct @ b.T", vjp_fn(ct)[0], ct @ b.T)
    jac = vmap(vjp_fn)(np.eye(25).reshape(25, 5, 5))[1]
    _show(
        "vmap(vjp_fn)(basis): Jacobian wrt b",
        jac,
        np.einsum("ik,jl->ijkl", a, np.eye(5)).reshape(25, 4, 5),
    )

    print("\njvp, and composing forward over reverse")
    f = lambda t: anp.sum(anp.sin(t) * t)
    direction = np.array([1.0, -2.0, 0.5])
    point = np.array([0.3, -0.7, 1.1])
    hvp = jvp(grad(f), (point,), (direction,))[1]
    _show(
        "jvp(grad(f)) = Hessian-vector product",
        hvp,
        (2 * np.cos(point) - point * np.sin(point)) * direction,
    )

    print("\nlevels keep nested transforms apart (no perturbation confusion)")
    _show(
        "grad(x * grad(y -> x * y)(1))(3) == 6",
        grad(lambda s: s * grad(lambda t: s * t)(1.0))(3.0),
        6.0,
    )
    _show(
        "grad(x * grad(y -> x + y)(1))(1) == 1",
        grad(lambda s: s * grad(lambda t: s + t)(1.0))(1.0),
        1.0,
    )

    print("\nno_grad inside a function is respected; outside a transform it is not")

    def f_no_grad(t):
        with no_grad():
            c = t**2
        return t - c

    _show("grad(x - no_grad(x**2))(2) == 1", grad(f_no_grad)(2.0), 1.0)
    with no_grad():
        _show("same, called inside no_grad()", grad(f_no_grad)(2.0), 1.0)

    print("\nhessian = jacfwd(jacrev(f)), for f(x) = sum(tanh(A x)**2)")
    a, point = rng.normal(size=(4, 3)), rng.normal(size=3)
    t = np.tanh(a @ point)
    by_hand = a.T @ np.diag(2 * (1 - t**2) * (1 - 3 * t**2)) @ a
    _show(
        "equal to the hand-derived Hessian",
        hessian(lambda v: anp.sum(anp.tanh(a @ v) ** 2))(point),
        by_hand,
    )

    print("\ncontrol flow under vmap and grad: each example runs until it converges")

    def newton_sqrt(c):
        return while_loop(lambda t: abs(t * t - c) > 1e-12, lambda t: (t + c / t) / 2, c)

    squares = np.array([2.0, 9.0, 1e4])
    _show("vmap(while_loop) of Newton for sqrt", vmap(newton_sqrt)(squares), np.sqrt(squares))
    _show("vmap(grad(...)) through the iterations", vmap(grad(newton_sqrt))(squares),
          0.5 / np.sqrt(squares))  # fmt: skip
    steps, w = rng.normal(size=6), 0.9
    step = lambda h, s, w: (h * w + s, h * w + s)
    total = lambda w: scan(lambda h, s: step(h, s, w), 0.0, steps, checkpoint=True)[1].sum()
    by_hand = sum((t - k) * steps[k] * w ** (t - k - 1) for t in range(6) for k in range(t))
    _show("grad of scan(checkpoint=True): h <- w h + x", grad(total)(w), by_hand)

    print("\na primitive of your own, checked by check_primitive")
    softplus_p = Primitive(
        "softplus",
        lambda v: np.logaddexp(0.0, v),  # stable log(1 + exp(v))
        vjp=[lambda ct, ans, v: ct * expit(v)],
        batch=lambda args, dims: (softplus_p.bind(*args), dims[0]),
    )
    print(textwrap.indent(str(check_primitive(softplus_p, (rng.normal(size=4),))), "    "))

    print("\njit: staged once per input signature, then replayed as straight-line NumPy")
    loss = lambda w, v: anp.sum(anp.tanh(v @ w) ** 2)
    weights, inputs = rng.normal(size=3), rng.normal(size=(2, 3))
    fast = jit(grad(loss), compile=False)  # (compile=True: LLVM kernels, on the 2nd call)
    _show("jit(grad(loss))(w, x) == grad(loss)(w, x)", fast(weights, inputs),
          grad(loss)(weights, inputs))  # fmt: skip
    print("    the program it replays, print(make_graph(grad(loss))(w, x)), begins:")
    graph = str(make_graph(grad(loss))(weights, inputs)).splitlines()
    print(textwrap.indent("\n".join([*graph[:5], "..."]), "      "))
    if timing:
        _jit_speedup(loss, fast, weights, inputs)

    print("\nexplain: every primitive call of vmap(grad(loss)), and who handled it")
    small = explain(vmap(grad(lambda w, v: anp.sum(anp.sin(v @ w))), in_dims=(None, 0)))
    table = str(small(rng.normal(size=3), rng.normal(size=(5, 3)))).splitlines()
    cut = table[1].index("shapes")  # the last column: print(explanation) shows it too
    print("\n".join("    " + line[:cut].rstrip() for line in table))

    print(f"\ntour finished in {time.perf_counter() - start:.2f} s\n")
    print(_WHERE_NEXT)


def expit(v):
    """The logistic sigmoid, written with operators so it is differentiable too."""
    return 1 / (1 + anp.exp(-v))


def _median_time(run, repeats: int) -> float:
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def _jit_speedup(loss, fast, w, v) -> None:
    """jit(grad(loss)) against grad(loss), per call, once jit has staged it."""
    eager = _median_time(lambda: grad(loss)(w, v), 50)
    staged = _median_time(lambda: fast(w, v), 50)
    print(
        f"  {'timed':>8}  grad {eager * 1e6:.0f} us, jit(grad) {staged * 1e6:.0f} us a call "
        f"({eager / staged:.0f}x faster, median of 50)"
    )


def _speedup(rng) -> None:
    """vmap(grad) against a Python loop of grad, for a small MLP and 256 examples."""
    w1, w2 = rng.normal(size=(16, 32)) / 4, rng.normal(size=(32, 1)) / 6
    xs, ys = rng.normal(size=(256, 16)), rng.normal(size=(256, 1))

    def loss(params, x, y):
        h = anp.tanh(x @ params[0])
        return anp.mean((h @ params[1] - y) ** 2)

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    loop = lambda: [grad(loss)((w1, w2), x, y) for x, y in zip(xs, ys)]
    times = {
        "vmap(grad)": _median_time(lambda: per_example((w1, w2), xs, ys), 5),
        "loop": _median_time(loop, 5),
    }
    ratio = times["loop"] / times["vmap(grad)"]
    print(
        f"  {'timed':>8}  256 examples, 16->32->1 MLP: vmap {times['vmap(grad)'] * 1e3:.1f} ms, "
        f"loop {times['loop'] * 1e3:.0f} ms ({ratio:.0f}x faster, median of 5)"
    )


if __name__ == "__main__":
    main()
