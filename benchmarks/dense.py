"""The dense rows against JAX jit, with jit's default ``compile="auto"`` after its
background compilation: W2 (the MLP's gradient), W5 (its jvp), W3 (per-sample
gradients), W4 (a Hessian), two MLP training steps, and W6 (peak memory).

    python -m benchmarks.dense            # results-dense.md, 15 rounds
    python -m benchmarks.dense --quick    # 5 rounds

Each table runs hand-written NumPy, ``jit`` (compile="auto", called past ``HOT_CALLS``
and its kernels waited for: what a program using it for a few seconds runs), the replay
alone (``compile=False``) and JAX's ``jit``, interleaved round by round in one process
bound to one core, one thread each; ratios are of medians of the process's CPU time
(other jobs on a shared machine disturb it far less than the wall clock).  A subset of
``python -m benchmarks`` (which runs these with every peer, for over an hour), for the
rows issue 31 asks to re-measure with the LLVM tier.
"""

from __future__ import annotations

import os
import sys
import time

from benchmarks import __main__ as full  # (sets the thread counts and the core first)
from benchmarks import _harness as h
from benchmarks import compile_times
from benchmarks import workloads as w

OUT = full.OUT.with_name("results-dense.md")
REFERENCE = full.REFERENCE
KEEP = (w.AUTODIFF_JIT, w.REPLAY_JIT)


def _subset(systems: dict, reference: str, jax: str) -> dict:
    return {k: v for k, v in systems.items() if k in (reference, jax, *KEEP)}


def _training_steps() -> list[tuple[str, str, dict]]:
    """C2's MLP step (8 -> 32 -> 1, batch 64) and the same step on W3's network
    (784 -> 128 -> 10, batch 256): the new parameters after one step of gradient descent."""
    import numpy as np

    import autodiff
    import autodiff.numpy as anp

    out = []
    small = compile_times._mlp_args()
    big_params, xs, ys = w.small_mlp_data()
    for tag, title, (params, x, y) in [
        ("step 8-32-1", "MLP training step (8 -> 32 -> 1, batch 64)", small),
        ("step 784-128-10", "MLP training step (784 -> 128 -> 10, batch 256)",
         (big_params, xs, ys)),
    ]:  # fmt: skip

        def reference(params=params, x=x, y=y):
            w1, b1, w2, b2 = params
            hid = np.tanh(x @ w1 + b1)
            d = (hid @ w2 + b2 - y) * (2.0 / y.size)
            dz = (d @ w2.T) * (1 - hid * hid)
            grads = (x.T @ dz, dz.sum(0), hid.T @ d, d.sum(0))
            return tuple(p - 0.1 * g for p, g in zip(params, grads))

        step = compile_times.mlp_step(anp, autodiff.grad)
        ours = w.settled(autodiff.jit(step), params, x, y)
        replay = autodiff.jit(step, compile=False)
        systems = {REFERENCE: reference, w.AUTODIFF_JIT: lambda s=ours, a=(params, x, y): s(*a),
                   w.REPLAY_JIT: lambda s=replay, a=(params, x, y): s(*a)}  # fmt: skip
        if w.HAVE["jax"]:
            jstep = w.jax.jit(compile_times.mlp_step(w.jnp, w.jax.grad))
            jargs = (tuple(map(w.jnp.asarray, params)), w.jnp.asarray(x), w.jnp.asarray(y))
            systems["JAX (jit)"] = lambda g=jstep, a=jargs: g(*a)
        out.append((tag, title, systems))
    return out


def report(rounds: int) -> tuple[list[str], list[tuple]]:
    lines: list[str] = []
    targets: list[tuple] = []
    ref3 = "reference (NumPy by hand, batched)"
    jax3 = "JAX vmap(grad) (jit)"
    tables = [
        ("W2", "large MLP gradient (X 512x1024, W1 1024x1024, W2 1024x256)",
         _subset(w.w2_systems(), REFERENCE, "JAX (jit)"), REFERENCE, "JAX (jit)", 1),
        ("W5", "forward mode: jvp of the W2 loss along a random tangent",
         _subset(w.w5_systems(), REFERENCE, "JAX (jit)"), REFERENCE, "JAX (jit)", 1),
        ("W3", "per-sample gradients (784-128-10 tanh MLP, MSE, batch 256)",
         _subset(w.w3_systems(), ref3, jax3), ref3, jax3, 1),
        ("W4", "hessian of sum(tanh(A x)**2), n = 64",
         _subset(w.w4_systems(), REFERENCE, "JAX (jit)"), REFERENCE, "JAX (jit)", 20),
        *((tag, title, systems, REFERENCE, "JAX (jit)", 20 if "8-32" in tag else 1)
          for tag, title, systems in _training_steps()),
    ]  # fmt: skip
    for name, title, systems, ref, jax, inner in tables:
        rows = h.interleave(systems, ref, rounds=rounds, inner=inner, rtol=1e-9,
                            clock=time.process_time)  # fmt: skip
        by = {r.system: r.median for r in rows}
        lines += [f"## {name}: {title}", "", *h.table(rows, ref, "ms", 1e3), ""]
        if jax in by:
            ratio = by[w.AUTODIFF_JIT] / by[jax]
            lines += [f"jit (compile='auto', settled) x JAX jit: {ratio:.2f}; the replay x JAX "
                      f"jit: {by[w.REPLAY_JIT] / by[jax]:.2f}.", ""]  # fmt: skip
            targets.append((f"{name} jit", "x JAX jit ≤ 1 (where XLA fuses)", ratio,
                            "reached" if ratio <= 1.0 else "**missed**"))  # fmt: skip
    lines += full.memory_section(targets)
    return lines, targets


def main() -> None:
    h.standalone("Benchmarks: the dense rows against JAX jit (LLVM tier, compile='auto')",
                 "python -m benchmarks.dense" + (" --quick" if "--quick" in sys.argv else ""),
                 report, OUT, "; times are the process's CPU time")  # fmt: skip


if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    main()
