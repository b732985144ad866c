"""The workloads W1-W5, each written once per system (float64 throughout).

A system is left out when its package is not installed.  The reference is
hand-written NumPy: the forward pass and the analytic derivative.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import numpy as np

import autodiff
import autodiff.numpy as anp

AUTODIFF_JIT = "autodiff, jit"  # the row of autodiff.jit of the same transform (as it comes)
REPLAY_JIT = "autodiff, jit(compile=False)"  # the replay alone: NumPy calls, no kernels
COMPILED_JIT = "autodiff, jit(compile=True)"  # kernels compiled with the replay


def settled(jitted: Any, *args: Any) -> Any:
    """``jitted`` (compile="auto", the default) called past ``HOT_CALLS``, its background
    compilation finished: what a program that calls it often runs."""
    from autodiff.compiler import background, tiers

    for _ in range(tiers.HOT_CALLS + 1):
        jitted(*args)
    background.wait_for_background()
    return jitted


def installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


HAVE = {name: installed(name) for name in ("autograd", "jax", "torch")}
if HAVE["jax"]:
    import jax
    import jax.numpy as jnp

    jax.config.update("jax_enable_x64", True)
if HAVE["torch"]:
    import torch
    import torch.func

    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
if HAVE["autograd"]:
    import autograd
    import autograd.numpy as agnp


def _t(x: Any) -> Any:
    return torch.as_tensor(x) if not isinstance(x, (tuple, list)) else type(x)(map(_t, x))


# --- W1: per-op overhead -------------------------------------------------------------------------

N_OPS = 200


def chain(lib: Any, x: Any) -> Any:
    for _ in range(N_OPS // 4):
        x = lib.sin(x)
        x = x * 1.01
        x = lib.tanh(x)
        x = x + 0.1
    return x


def _chain_reference_grad(x: np.ndarray) -> np.ndarray:
    saved = []
    for _ in range(N_OPS // 4):
        saved.append(x)
        x = np.sin(x)
        x = x * 1.01
        x = np.tanh(x)
        saved.append(x)
        x = x + 0.1
    g = np.ones_like(x)
    for i in range(N_OPS // 4 - 1, -1, -1):
        before_sin, after_tanh = saved[2 * i], saved[2 * i + 1]
        g = g * (1 - after_tanh * after_tanh) * 1.01 * np.cos(before_sin)
    return g


def w1_grad_systems() -> dict[str, Callable[[], Any]]:
    x = np.linspace(0.1, 0.8, 8)
    loss = autodiff.grad(lambda v: anp.sum(chain(anp, v)))
    ours = autodiff.jit(loss, compile=False)
    compiled = autodiff.jit(loss, compile=True)
    compiled(x), compiled(x)  # staged, then compiled: not timed
    systems: dict[str, Callable[[], Any]] = {
        "reference (NumPy by hand)": lambda: _chain_reference_grad(x),
        "autodiff": lambda: autodiff.grad(lambda v: anp.sum(chain(anp, v)))(x),
        AUTODIFF_JIT: lambda: ours(x),
        COMPILED_JIT: lambda: compiled(x),
    }
    if HAVE["autograd"]:
        g = autograd.grad(lambda v: agnp.sum(chain(agnp, v)))
        systems["HIPS autograd"] = lambda: g(x)
    if HAVE["torch"]:
        xt = torch.as_tensor(x)
        tg = torch.func.grad(lambda v: torch.sum(chain(torch, v)))
        systems["torch.func"] = lambda: tg(xt)

        def tape():
            v = xt.clone().requires_grad_(True)
            torch.sum(chain(torch, v)).backward()
            return v.grad

        systems["torch (tape autograd)"] = tape
    if HAVE["jax"]:
        xj = jnp.asarray(x)
        f = lambda v: jnp.sum(chain(jnp, v))
        systems["JAX (eager)"] = lambda: jax.grad(f)(xj)
        jitted = jax.jit(jax.grad(f))
        systems["JAX (jit)"] = lambda: jitted(xj)
    return systems


def w1_plain_systems() -> dict[str, Callable[[], Any]]:
    x = np.linspace(0.1, 0.8, 8)
    ours = autodiff.jit(lambda v: chain(anp, v), compile=False)
    compiled = autodiff.jit(lambda v: chain(anp, v), compile=True)
    compiled(x), compiled(x)  # staged, then compiled: not timed
    systems = {
        "NumPy": lambda: chain(np, x),
        "autodiff (anp on ndarrays)": lambda: chain(anp, x),
        AUTODIFF_JIT: lambda: ours(x),
        COMPILED_JIT: lambda: compiled(x),
    }
    if HAVE["autograd"]:
        systems["HIPS autograd (autograd.numpy)"] = lambda: chain(agnp, x)
    return systems


# --- W2 and W5: a large MLP's loss ---------------------------------------------------------------


def mlp_data(seed: int = 0) -> tuple:
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((512, 1024)), rng.standard_normal((512, 256))
    params = (
        rng.standard_normal((1024, 1024)) / 32,
        rng.standard_normal(1024) / 10,
        rng.standard_normal((1024, 256)) / 32,
        rng.standard_normal(256) / 10,
    )
    return X, Y, params


def mlp_loss(lib: Any, params: tuple, X: Any, Y: Any) -> Any:
    W1, b1, W2, b2 = params
    return lib.mean((lib.tanh(X @ W1 + b1) @ W2 + b2 - Y) ** 2)


def mlp_reference_grad(params: tuple, X: np.ndarray, Y: np.ndarray) -> tuple:
    W1, b1, W2, b2 = params
    h = np.tanh(X @ W1 + b1)
    d = (h @ W2 + b2 - Y) * (2.0 / Y.size)
    dz = (d @ W2.T) * (1 - h * h)
    return (X.T @ dz, dz.sum(0), h.T @ d, d.sum(0))


def mlp_reference_jvp(params: tuple, tangents: tuple, X: np.ndarray, Y: np.ndarray) -> Any:
    (W1, b1, W2, b2), (dW1, db1, dW2, db2) = params, tangents
    h = np.tanh(X @ W1 + b1)
    dh = (1 - h * h) * (X @ dW1 + db1)
    diff = h @ W2 + b2 - Y
    ddiff = dh @ W2 + h @ dW2 + db2
    return np.mean(diff * diff), 2.0 * np.mean(diff * ddiff)


def w2_systems() -> dict[str, Callable[[], Any]]:
    X, Y, params = mlp_data()
    loss = autodiff.grad(lambda p: mlp_loss(anp, p, X, Y))
    ours = settled(autodiff.jit(loss), params)
    replay = autodiff.jit(loss, compile=False)
    systems: dict[str, Callable[[], Any]] = {
        "reference (NumPy by hand)": lambda: mlp_reference_grad(params, X, Y),
        "autodiff": lambda: autodiff.grad(lambda p: mlp_loss(anp, p, X, Y))(params),
        AUTODIFF_JIT: lambda: ours(params),
        REPLAY_JIT: lambda: replay(params),
    }
    if HAVE["autograd"]:
        g = autograd.grad(lambda p: mlp_loss(agnp, p, X, Y))
        systems["HIPS autograd"] = lambda: g(params)
    if HAVE["torch"]:
        Xt, Yt, pt = _t(X), _t(Y), _t(params)
        tg = torch.func.grad(lambda p: mlp_loss(torch, p, Xt, Yt))
        systems["torch.func"] = lambda: tg(pt)

        def tape():
            p = tuple(v.clone().requires_grad_(True) for v in pt)
            mlp_loss(torch, p, Xt, Yt).backward()
            return tuple(v.grad for v in p)

        systems["torch (tape autograd)"] = tape
    if HAVE["jax"]:
        Xj, Yj, pj = jnp.asarray(X), jnp.asarray(Y), tuple(map(jnp.asarray, params))
        f = lambda p: mlp_loss(jnp, p, Xj, Yj)
        systems["JAX (eager)"] = lambda: jax.grad(f)(pj)
        jitted = jax.jit(jax.grad(f))
        systems["JAX (jit)"] = lambda: jitted(pj)
    return systems


def w6_floor_mb() -> float:
    """The least memory any W2 gradient can peak at, above its inputs: the gradients
    themselves (they are the result) plus one (N, H) activation-sized array, the
    cotangent of the hidden layer, alive while the last matmul writes dW1."""
    X, _, params = mlp_data()
    hidden = X.shape[0] * params[0].shape[1] * X.itemsize
    return (sum(p.nbytes for p in params) + hidden) / 2**20


def w5_systems() -> dict[str, Callable[[], Any]]:
    X, Y, params = mlp_data()
    rng = np.random.default_rng(5)
    tangents = tuple(rng.standard_normal(p.shape) / 30 for p in params)
    f = lambda p: mlp_loss(anp, p, X, Y)
    ours = settled(autodiff.jit(lambda p, t: autodiff.jvp(f, (p,), (t,))), params, tangents)
    replay = autodiff.jit(lambda p, t: autodiff.jvp(f, (p,), (t,)), compile=False)
    systems: dict[str, Callable[[], Any]] = {
        "reference (NumPy by hand)": lambda: mlp_reference_jvp(params, tangents, X, Y),
        "autodiff": lambda: autodiff.jvp(f, (params,), (tangents,)),
        AUTODIFF_JIT: lambda: ours(params, tangents),
        REPLAY_JIT: lambda: replay(params, tangents),
    }
    if HAVE["torch"]:
        Xt, Yt, pt, tt = _t(X), _t(Y), _t(params), _t(tangents)
        systems["torch.func"] = lambda: torch.func.jvp(
            lambda p: mlp_loss(torch, p, Xt, Yt), (pt,), (tt,)
        )
    if HAVE["jax"]:
        Xj, Yj = jnp.asarray(X), jnp.asarray(Y)
        pj, tj = tuple(map(jnp.asarray, params)), tuple(map(jnp.asarray, tangents))
        fj = lambda p: mlp_loss(jnp, p, Xj, Yj)
        systems["JAX (eager)"] = lambda: jax.jvp(fj, (pj,), (tj,))
        jitted = jax.jit(lambda p, t: jax.jvp(fj, (p,), (t,)))
        systems["JAX (jit)"] = lambda: jitted(pj, tj)
    return systems


# --- W3: per-sample gradients --------------------------------------------------------------------


def small_mlp_data(batch: int = 256, seed: int = 3) -> tuple:
    rng = np.random.default_rng(seed)
    params = (
        rng.standard_normal((784, 128)) / 28,
        rng.standard_normal(128) / 10,
        rng.standard_normal((128, 10)) / 11,
        rng.standard_normal(10) / 10,
    )
    return params, rng.standard_normal((batch, 784)), rng.standard_normal((batch, 10))


def example_loss(lib: Any, params: tuple, x: Any, y: Any) -> Any:
    W1, b1, W2, b2 = params
    return lib.mean((lib.tanh(x @ W1 + b1) @ W2 + b2 - y) ** 2)


def per_sample_reference(params: tuple, xs: np.ndarray, ys: np.ndarray) -> tuple:
    W1, b1, W2, b2 = params
    h = np.tanh(xs @ W1 + b1)
    d = (h @ W2 + b2 - ys) * (2.0 / ys.shape[1])
    dz = (d @ W2.T) * (1 - h * h)
    return (xs[:, :, None] * dz[:, None, :], dz, h[:, :, None] * d[:, None, :], d)


def w3_systems() -> dict[str, Callable[[], Any]]:
    params, xs, ys = small_mlp_data()
    loss = lambda p, x, y: example_loss(anp, p, x, y)
    per_example = autodiff.vmap(autodiff.grad(loss), in_dims=(None, 0, 0))
    one = autodiff.grad(loss)

    def loop():
        grads = [one(params, x, y) for x, y in zip(xs, ys)]
        return tuple(np.stack(g) for g in zip(*grads))

    def numpy_loop():  # the floor of any loop: the same NumPy work, example by example
        grads = [per_sample_reference(params, x[None], y[None]) for x, y in zip(xs, ys)]
        return tuple(np.concatenate(g) for g in zip(*grads))

    ours = settled(autodiff.jit(per_example), params, xs, ys)
    replay = autodiff.jit(per_example, compile=False)
    systems: dict[str, Callable[[], Any]] = {
        "reference (NumPy by hand, batched)": lambda: per_sample_reference(params, xs, ys),
        "autodiff vmap(grad)": lambda: per_example(params, xs, ys),
        AUTODIFF_JIT: lambda: ours(params, xs, ys),
        REPLAY_JIT: lambda: replay(params, xs, ys),
        "autodiff loop of grad": loop,
        "NumPy by hand, loop over examples": numpy_loop,
    }
    if HAVE["torch"]:
        pt, xt, yt = _t(params), _t(xs), _t(ys)
        tf = torch.func.vmap(
            torch.func.grad(lambda p, x, y: example_loss(torch, p, x, y)), in_dims=(None, 0, 0)
        )
        systems["torch.func vmap(grad)"] = lambda: tf(pt, xt, yt)
    if HAVE["jax"]:
        pj, xj, yj = tuple(map(jnp.asarray, params)), jnp.asarray(xs), jnp.asarray(ys)
        jf = jax.vmap(jax.grad(lambda p, x, y: example_loss(jnp, p, x, y)), in_axes=(None, 0, 0))
        systems["JAX vmap(grad) (eager)"] = lambda: jf(pj, xj, yj)
        jitted = jax.jit(jf)
        systems["JAX vmap(grad) (jit)"] = lambda: jitted(pj, xj, yj)
    return systems


# --- W4: a Hessian -------------------------------------------------------------------------------


def w4_systems() -> dict[str, Callable[[], Any]]:
    rng = np.random.default_rng(4)
    A, x = rng.standard_normal((64, 64)) / 8, rng.standard_normal(64)

    def reference():
        t = np.tanh(A @ x)
        return (A.T * (2 * (1 - t * t) * (1 - 3 * t * t))) @ A

    f = lambda v: anp.sum(anp.tanh(A @ v) ** 2)
    ours = settled(autodiff.jit(autodiff.hessian(f)), x)
    replay = autodiff.jit(autodiff.hessian(f), compile=False)
    systems: dict[str, Callable[[], Any]] = {
        "reference (NumPy by hand)": reference,
        "autodiff": lambda: autodiff.hessian(f)(x),
        AUTODIFF_JIT: lambda: ours(x),
        REPLAY_JIT: lambda: replay(x),
    }
    if HAVE["autograd"]:
        h = autograd.hessian(lambda v: agnp.sum(agnp.tanh(agnp.dot(A, v)) ** 2))
        systems["HIPS autograd"] = lambda: h(x)
    if HAVE["torch"]:
        At, xt = torch.as_tensor(A), torch.as_tensor(x)
        th = torch.func.hessian(lambda v: torch.sum(torch.tanh(At @ v) ** 2))
        systems["torch.func"] = lambda: th(xt)
    if HAVE["jax"]:
        Aj, xj = jnp.asarray(A), jnp.asarray(x)
        fj = lambda v: jnp.sum(jnp.tanh(Aj @ v) ** 2)
        systems["JAX (eager)"] = lambda: jax.hessian(fj)(xj)
        jitted = jax.jit(jax.hessian(fj))
        systems["JAX (jit)"] = lambda: jitted(xj)
    return systems
