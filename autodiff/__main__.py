"""``python -m autodiff``: a short tour of the transforms, with real numbers.

The examples are those of the torch.func ``grad`` and ``vjp`` documentation,
written for autodiff; each line shows the result and the value it must equal.
"""

from __future__ import annotations

import time

import numpy as np

import autodiff.numpy as anp
from autodiff import grad, jvp, no_grad, vjp, vmap


def _show(label: str, got, want) -> None:
    got, want = np.asarray(got), np.asarray(want)
    ok = got.shape == want.shape and np.allclose(got, want)
    if got.ndim >= 2:
        text = f"shape {got.shape}, max |error| {np.max(np.abs(got - want)):.1e}"
    else:
        text = np.array2string(got, precision=4, suppress_small=True)
    print(f"  {'ok' if ok else 'MISMATCH':>8}  {label:<44} {text}")
    if not ok:
        raise SystemExit(f"tour: {label!r} does not match the expected value")


def main() -> None:
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

    print(f"\ntour finished in {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
