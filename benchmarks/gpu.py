"""autodiff on a GPU: the same transforms over CuPy arrays, next to hand-written CuPy (the
reference), torch.func on CUDA and JAX on the GPU (when installed).

    python -m benchmarks.gpu                  # on a CUDA machine with CuPy
    python -m benchmarks.gpu --xp numpy       # the same code on NumPy, small sizes (a CPU check)
    python -m benchmarks.gpu --out DIR        # where results-gpu.md goes (default: $OUT, else
                                              # the benchmarks folder)

Workloads, in float32:

* W1-GPU: W1's 200-op elementwise chain on a length-8 vector, forward, under ``autodiff.jit``
  (the replay calls the same NumPy functions, which NumPy's protocols hand to CuPy)
  against the same chain written with CuPy by hand: per-op overhead, target ≤ 1.1x;
* W3-GPU: per-sample gradients of W3's 784-128-10 tanh MLP (``benchmarks/workloads.py``)
  at batch 4096: ``vmap(grad(loss), in_dims=(None, 0, 0))``;
* W2-GPU: the gradient of W2's MLP loss (X 512x1024, W1 1024x1024, W2 1024x256).

The discipline is the CPU benchmarks' (``benchmarks/_harness.py``): every system's result
is checked against the reference first, then all run interleaved round by round, and the
report gives medians, min-max and ratios to the reference's median.  GPU work is
asynchronous, so every system is timed until its result exists (a stream synchronisation
for CuPy and torch, ``block_until_ready`` for JAX).  TF32 is off everywhere, so float32
results agree to float32 rounding.
"""

from __future__ import annotations

import os

# JAX would otherwise take 75% of the GPU's memory when imported (by workloads).
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import argparse
import datetime
import pathlib
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

import autodiff
import autodiff.numpy as anp
from benchmarks import _harness as h
from benchmarks import workloads as w

DTYPE = np.float32


def _mlp_data(n: int, d_in: int, d_hidden: int, d_out: int, seed: int = 0) -> tuple:
    """W2's data and parameters, at any size (W2 itself: 512, 1024, 1024, 256)."""
    rng = np.random.default_rng(seed)
    X, Y = rng.standard_normal((n, d_in)), rng.standard_normal((n, d_out))
    params = (
        rng.standard_normal((d_in, d_hidden)) / np.sqrt(d_in),
        rng.standard_normal(d_hidden) / 10,
        rng.standard_normal((d_hidden, d_out)) / np.sqrt(d_hidden),
        rng.standard_normal(d_out) / 10,
    )
    return X, Y, params


class Backend:
    """The array module the systems run on, and how to wait for its results."""

    def __init__(self, name: str) -> None:
        self.name = name
        if name == "cupy":
            import cupy

            self.xp = cupy
            self.label = "CuPy"
            device = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"]
            self.device = device.decode() if isinstance(device, bytes) else str(device)
        else:
            self.xp = np
            self.label = "NumPy"
            self.device = "CPU (NumPy stands in for CuPy: a check of the code, not a timing)"
        self.torch_device = "cuda" if name == "cupy" else "cpu"

    def put(self, tree: Any) -> Any:
        if isinstance(tree, tuple):
            return tuple(self.put(t) for t in tree)
        return self.xp.asarray(np.asarray(tree, dtype=DTYPE))

    def settled(self, run: Callable[[], Any]) -> Callable[[], Any]:
        if self.xp is np:
            return run
        stream = self.xp.cuda.get_current_stream()

        def synchronised():
            out = run()
            stream.synchronize()
            return out

        return synchronised


def _torch_ready(backend: Backend) -> bool:
    if not w.HAVE["torch"]:
        return False
    import torch

    return backend.torch_device == "cpu" or torch.cuda.is_available()


def _torch(backend: Backend, tree: Any) -> Any:
    import torch

    if isinstance(tree, tuple):
        return tuple(_torch(backend, t) for t in tree)
    return torch.as_tensor(np.asarray(tree, dtype=DTYPE), device=backend.torch_device)


def _torch_settled(backend: Backend, run: Callable[[], Any]) -> Callable[[], Any]:
    import torch

    if backend.torch_device == "cpu":
        return run

    def synchronised():
        out = run()
        torch.cuda.synchronize()
        return out

    return synchronised


def _jax_device(backend: Backend) -> Any:
    """JAX's GPU (its CPU in the NumPy check), or None."""
    if not w.HAVE["jax"]:
        return None
    import jax

    try:
        return jax.devices("gpu" if backend.name == "cupy" else "cpu")[0]
    except RuntimeError:  # no GPU backend in this jaxlib
        return None


def _jax(device: Any, tree: Any) -> Any:
    import jax

    if isinstance(tree, tuple):
        return tuple(_jax(device, t) for t in tree)
    return jax.device_put(np.asarray(tree, dtype=DTYPE), device)


def w3_systems(backend: Backend, batch: int) -> tuple[str, dict[str, Callable[[], Any]]]:
    params, xs, ys = w.small_mlp_data(batch=batch)
    reference = f"reference ({backend.label} by hand, batched)"
    p, x, y = backend.put(params), backend.put(xs), backend.put(ys)
    loss = lambda p, x, y: w.example_loss(anp, p, x, y)
    per_example = autodiff.vmap(autodiff.grad(loss), in_dims=(None, 0, 0))
    systems = {
        reference: backend.settled(lambda: w.per_sample_reference(p, x, y)),
        f"autodiff vmap(grad) on {backend.label}": backend.settled(lambda: per_example(p, x, y)),
    }
    if _torch_ready(backend):
        import torch.func

        pt, xt, yt = _torch(backend, params), _torch(backend, xs), _torch(backend, ys)
        tf = torch.func.vmap(
            torch.func.grad(lambda p, x, y: w.example_loss(torch, p, x, y)), in_dims=(None, 0, 0)
        )
        systems[f"torch.func vmap(grad) ({backend.torch_device})"] = _torch_settled(
            backend, lambda: tf(pt, xt, yt)
        )
    device = _jax_device(backend)
    if device is not None:
        import jax
        import jax.numpy as jnp

        pj, xj, yj = _jax(device, params), _jax(device, xs), _jax(device, ys)
        jf = jax.vmap(jax.grad(lambda p, x, y: w.example_loss(jnp, p, x, y)), in_axes=(None, 0, 0))
        systems[f"JAX vmap(grad) ({device.platform}, eager)"] = lambda: jf(pj, xj, yj)
        jitted = jax.jit(jf)
        systems[f"JAX vmap(grad) ({device.platform}, jit)"] = lambda: jitted(pj, xj, yj)
    return reference, systems


def w1_systems(backend: Backend) -> tuple[str, dict[str, Callable[[], Any]]]:
    """W1's 200-op chain on a length-8 vector: per-op overhead, where a GPU pays a kernel
    launch per op; autodiff's jit replays the same calls through NumPy's protocols."""
    xp = backend.xp
    x = backend.put(np.linspace(0.1, 0.8, 8))
    reference = f"reference ({backend.label} by hand)"
    jitted = autodiff.jit(lambda v: w.chain(anp, v))
    systems = {
        reference: backend.settled(lambda: w.chain(xp, x)),
        f"autodiff jit on {backend.label}": backend.settled(lambda: jitted(x)),
        f"autodiff eager (anp) on {backend.label}": backend.settled(lambda: w.chain(anp, x)),
    }
    return reference, systems


def w2_systems(backend: Backend, sizes: tuple) -> tuple[str, dict[str, Callable[[], Any]]]:
    X, Y, params = _mlp_data(*sizes)
    reference = f"reference ({backend.label} by hand)"
    Xb, Yb, pb = backend.put(X), backend.put(Y), backend.put(params)
    g = autodiff.grad(lambda p: w.mlp_loss(anp, p, Xb, Yb))
    systems = {
        reference: backend.settled(lambda: w.mlp_reference_grad(pb, Xb, Yb)),
        f"autodiff grad on {backend.label}": backend.settled(lambda: g(pb)),
    }
    if _torch_ready(backend):
        import torch.func

        Xt, Yt, pt = _torch(backend, X), _torch(backend, Y), _torch(backend, params)
        tg = torch.func.grad(lambda p: w.mlp_loss(torch, p, Xt, Yt))
        systems[f"torch.func grad ({backend.torch_device})"] = _torch_settled(
            backend, lambda: tg(pt)
        )
    device = _jax_device(backend)
    if device is not None:
        import jax
        import jax.numpy as jnp

        Xj, Yj, pj = _jax(device, X), _jax(device, Y), _jax(device, params)
        f = lambda p: w.mlp_loss(jnp, p, Xj, Yj)
        systems[f"JAX grad ({device.platform}, eager)"] = lambda: jax.grad(f)(pj)
        jitted = jax.jit(jax.grad(f))
        systems[f"JAX grad ({device.platform}, jit)"] = lambda: jitted(pj)
    return reference, systems


def _failing(systems: dict[str, Callable[[], Any]]) -> list[str]:
    """Drop the systems that raise (a peer's version, a missing GPU backend), and say so."""
    lines = []
    for name, run in list(systems.items()):
        try:
            run()
        except Exception as e:
            traceback.print_exc()
            del systems[name]
            lines += [f"- {name} did not run: {type(e).__name__}: {str(e)[:300]}", ""]
    return lines


def _versions(backend: Backend) -> list[str]:
    lines = [f"- device: {backend.device}"]
    if backend.name == "cupy":
        import cupy

        lines.append(
            f"- cupy {cupy.__version__}, CUDA runtime {cupy.cuda.runtime.runtimeGetVersion()}"
        )
    return lines


def main(argv: list[str] | None = None) -> pathlib.Path:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu", description=__doc__)
    parser.add_argument(
        "--xp",
        choices=("cupy", "numpy"),
        default="cupy",
        help="the array module (numpy: a CPU check at small sizes)",
    )
    parser.add_argument(
        "--out",
        default=os.environ.get("OUT") or str(pathlib.Path(__file__).parent),
        help="folder for results-gpu.md (default: $OUT, else benchmarks/)",
    )
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per workload")
    args = parser.parse_args(argv)  # fmt: skip
    small = args.xp == "numpy"
    rounds = args.rounds or (2 if small else 15)
    backend = Backend(args.xp)
    if w.HAVE["jax"]:  # float32 products in full float32, as CuPy and torch compute them
        import jax

        jax.config.update("jax_default_matmul_precision", "highest")
    if w.HAVE["torch"]:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    batch = 32 if small else 4096
    sizes = (16, 64, 32, 8) if small else (512, 1024, 1024, 256)
    started = time.perf_counter()
    report = [
        "# Benchmarks on a GPU",
        "",
        f"`python -m benchmarks.gpu{' --xp numpy' if small else ''}`, "
        f"{datetime.date.today().isoformat()}. float32 throughout. Every system runs in the "
        "same process, interleaved round by round, each timed until its result is on the "
        f"device (stream synchronisation; block_until_ready for JAX); medians (and min-max) "
        f"over {rounds} rounds; ratios are to the hand-written reference in the same rounds; "
        "every system's result is checked against the reference first. TF32 is off.",
        "",
        *_versions(backend),
        *[h.environment()[0].split("; one thread")[0]],  # the host (the CPU pinning is not ours)
        *h.environment()[1:],
        "",
    ]
    verdicts = []
    for title, (reference, systems), inner in [
        ("W1-GPU: the 200-op chain on a length-8 vector, forward, under jit",
         w1_systems(backend), 20),
        (f"W3-GPU: per-sample gradients (784-128-10 tanh MLP, MSE, batch {batch})",
         w3_systems(backend, batch), 5),
        (f"W2-GPU: MLP gradient (X {sizes[0]}x{sizes[1]}, W1 {sizes[1]}x{sizes[2]}, "
         f"W2 {sizes[2]}x{sizes[3]})", w2_systems(backend, sizes), 5),
    ]:  # fmt: skip
        failed = _failing(systems)
        info = tuple(name for name in systems if "jit" in name and "autodiff" not in name)
        rows = h.interleave(systems, reference, rounds=rounds, inner=inner, rtol=2e-4, info=info)
        report += [f"## {title}", "", *h.table(rows, reference, "ms", 1e3), "", *failed]
        if title.startswith("W1"):
            by = {r.system: r.median for r in rows}
            ratio = by[f"autodiff jit on {backend.label}"] / by[reference]
            verdict = "reached" if ratio <= 1.1 else "**missed**"
            verdicts.append(f"| W1-GPU | jit x {backend.label} by hand ≤ 1.1 | {ratio:.3g} | "
                            f"{verdict} |")  # fmt: skip
    report += ["## Targets", "", "| workload | target | measured | verdict |", "|---|---|---|---|",
               *verdicts, ""]  # fmt: skip
    report += [f"Run time: {time.perf_counter() - started:.0f} s.", ""]
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results-gpu.md"
    path.write_text("\n".join(report))
    print("\n".join(report))
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main(sys.argv[1:])
