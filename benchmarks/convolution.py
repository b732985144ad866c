"""Convolution: ``anp.convolve`` against NumPy's own, and ``autodiff.lax``'s convolution
family against JAX's on small convolutional networks.

    python -m benchmarks.convolution [--repeats 7] [--rounds 15] [--networks-only]
        [--compile-times]

1-D: for a few (signal, kernel) lengths, medians over repeats of: ``np.convolve`` (the
floor); ``grad`` of ``sum(convolve(a, v, "same") ** 2)`` in both operands (forward,
tape and the two transposed correlations); ``vmap`` over 8 signals with one kernel
against 8 calls of ``np.convolve`` (a Python loop, for reference: the batched rule
runs NumPy's kernel once on the signals laid end to end).  HIPS autograd has no VJP
for ``numpy.convolve``, so there is no peer here.

Networks (``lax.conv_general_dilated`` and ``lax.reduce_window``): the gradient of a
classifier's loss in its parameters, forward and backward, against JAX's ``jit`` of the
same program (XLA's CPU convolutions) in the same process, interleaved, one thread each:
an MNIST-sized 2-D CNN (two 3x3 convolutions with ReLU and 2x2 max pooling, NHWC; the
program the implementation was tuned on), a 1-D temporal network written afterwards
and not tuned on (dilated and strided convolutions, a depthwise one, average pooling, NCW),
and a CIFAR-sized 2-D network written after the compiled lowerings were (NCHW, a
depthwise strided convolution, a 1x1 one, overlapping 3x3 max pooling, global average
pooling).  Each is timed eagerly, under ``jit`` replayed as NumPy calls
(``compile=False``), under ``jit`` compiled (``compile=True``: the convolutions and
pooling inside the kernels), and under JAX's ``jit``; CPU time per step, medians over
interleaved rounds.  ``--compile-times`` adds the time to compiled code with an empty
kernel cache next to JAX's ``jit(...).lower(...).compile()``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ["XLA_FLAGS"] = "--xla_cpu_multi_thread_eigen=false"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
if hasattr(os, "sched_setaffinity"):  # XLA ignores the thread variables: one core for all
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})

import numpy as np

import autodiff
import autodiff.numpy as anp
from autodiff import grad, lax, vmap
from benchmarks import _harness as h

SIZES = [(100_000, 50), (2_000, 2_000), (1_000, 10)]


def _median_ms(f, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def _row(n: int, m: int, repeats: int, rng: np.random.Generator) -> list[float]:
    a, v, batch = rng.normal(size=n), rng.normal(size=m), rng.normal(size=(8, n))
    loss = grad(lambda a, v: anp.sum(anp.convolve(a, v, "same") ** 2), argnums=(0, 1))
    batched = vmap(lambda a: anp.convolve(a, v, "same"))
    return [
        _median_ms(lambda: np.convolve(a, v, "same"), repeats),
        _median_ms(lambda: loss(a, v), repeats),
        _median_ms(lambda: batched(batch), repeats),
        _median_ms(lambda: [np.convolve(row, v, "same") for row in batch], repeats),
    ]


NHWC = ("NHWC", "HWIO", "NHWC")


def _xent(np_, logits, labels):
    logits = logits - np_.max(logits, axis=1, keepdims=True)
    logz = np_.log(np_.sum(np_.exp(logits), axis=1, keepdims=True))
    return -np_.mean(np_.sum((logits - logz) * labels, axis=1))


def cnn_loss(L, np_, params, images, labels):
    """MNIST-sized: conv 3x3x16, ReLU, max pool 2x2, conv 3x3x32, ReLU, max pool, dense."""
    (w1, b1), (w2, b2), (w3, b3) = params
    x = np_.maximum(L.conv_general_dilated(images, w1, (1, 1), "SAME",
                                           dimension_numbers=NHWC) + b1, 0.0)  # fmt: skip
    x = L.reduce_window(x, -np.inf, L.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    x = np_.maximum(L.conv_general_dilated(x, w2, (1, 1), "SAME",
                                           dimension_numbers=NHWC) + b2, 0.0)  # fmt: skip
    x = L.reduce_window(x, -np.inf, L.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return _xent(np_, np_.reshape(x, (x.shape[0], -1)) @ w3 + b3, labels)


def cnn_data(rng, batch=32):
    params = ((rng.normal(0, 0.3, (3, 3, 1, 16)), np.zeros(16)),
              (rng.normal(0, 0.1, (3, 3, 16, 32)), np.zeros(32)),
              (rng.normal(0, 0.01, (7 * 7 * 32, 10)), np.zeros(10)))  # fmt: skip
    images = rng.normal(size=(batch, 28, 28, 1))
    return params, images, np.eye(10)[rng.integers(0, 10, batch)]


def tcn_loss(L, np_, params, signals, labels):
    """1-D, NCW: a strided conv, a dilated (atrous) one, a depthwise one, tanh, average
    pooling, a 1x1 conv as the classifier."""
    w1, w2, w3, w4 = params
    x = np_.tanh(L.conv_general_dilated(signals, w1, (2,), "SAME"))
    x = np_.tanh(L.conv_general_dilated(x, w2, (1,), [(4, 0)], rhs_dilation=(2,)))
    x = np_.tanh(L.conv_general_dilated(x, w3, (1,), "SAME", feature_group_count=24))
    x = L.reduce_window(x, 0.0, L.add, (1, 1, 4), (1, 1, 4), "VALID") / 4
    logits = np_.mean(L.conv_general_dilated(x, w4, (1,), "VALID"), axis=2)
    return _xent(np_, logits, labels)


def tcn_data(rng, batch=16):
    params = (rng.normal(0, 0.3, (24, 3, 5)), rng.normal(0, 0.1, (24, 24, 3)),
              rng.normal(0, 0.3, (24, 1, 7)), rng.normal(0, 0.1, (6, 24, 1)))  # fmt: skip
    return params, rng.normal(size=(batch, 3, 256)), np.eye(6)[rng.integers(0, 6, batch)]


def cifar_loss(L, np_, params, images, labels):
    """CIFAR-sized, NCHW (written after the lowerings, not tuned on): conv 3x3x16 SAME,
    ReLU, depthwise 3x3 stride 2, ReLU, conv 1x1x32, ReLU, max pool 3x3 stride 2 SAME,
    global average pool, dense."""
    w1, w2, w3, (w4, b4) = params
    x = np_.maximum(L.conv_general_dilated(images, w1, (1, 1), "SAME"), 0.0)
    x = np_.maximum(L.conv_general_dilated(x, w2, (2, 2), "SAME", feature_group_count=16), 0.0)
    x = np_.maximum(L.conv_general_dilated(x, w3, (1, 1), "VALID"), 0.0)
    x = L.reduce_window(x, -np.inf, L.max, (1, 1, 3, 3), (1, 1, 2, 2), "SAME")
    x = L.reduce_window(x, 0.0, L.add, (1, 1, 8, 8), (1, 1, 8, 8), "VALID") / 64
    return _xent(np_, np_.reshape(x, (x.shape[0], -1)) @ w4 + b4, labels)


def cifar_data(rng, batch=16):
    params = (rng.normal(0, 0.3, (16, 3, 3, 3)), rng.normal(0, 0.3, (16, 1, 3, 3)),
              rng.normal(0, 0.3, (32, 16, 1, 1)),
              (rng.normal(0, 0.1, (32, 10)), np.zeros(10)))  # fmt: skip
    return params, rng.normal(size=(batch, 3, 32, 32)), np.eye(10)[rng.integers(0, 10, batch)]


def network_systems(loss, data) -> dict:
    params, x, y = data
    systems = {
        "autodiff": lambda: grad(lambda p: loss(lax, anp, p, x, y))(params),
    }
    step = grad(lambda p, x, y: loss(lax, anp, p, x, y))
    replayed = autodiff.jit(step, compile=False)
    systems["autodiff, jit (replay)"] = lambda: replayed(params, x, y)
    jitted = autodiff.jit(step, compile=True)
    systems["autodiff, jit (compiled)"] = lambda: jitted(params, x, y)
    try:
        import jax
    except ImportError:
        return systems
    jax.config.update("jax_enable_x64", True)
    theirs = jax.jit(jax.grad(lambda p, x, y: loss(jax.lax, jax.numpy, p, x, y)))
    systems["JAX (jit)"] = lambda: theirs(params, x, y)
    return systems


NETWORKS = [
    ("2-D CNN, batch 32 of 28x28x1 (tuned on)", cnn_loss, cnn_data),
    ("1-D temporal network, batch 16 of 3x256 (fresh)", tcn_loss, tcn_data),
    ("2-D CIFAR-sized network, batch 16 of 3x32x32 (fresh, after the lowerings)", cifar_loss,
     cifar_data),
]  # fmt: skip


def networks(rounds: int) -> list[str]:
    """Each network's step: CPU time per call, medians over interleaved rounds."""
    lines = []
    for seed, (title, loss, data) in enumerate(NETWORKS):
        systems = network_systems(loss, data(np.random.default_rng(seed)))
        reference = "JAX (jit)" if "JAX (jit)" in systems else "autodiff"
        rows = h.interleave(systems, reference, rounds=rounds, rtol=1e-8,
                            clock=time.process_time)  # fmt: skip
        lines += [f"### {title}", "", *h.table(rows, reference, "ms (CPU)", 1e3), ""]
    return lines


def compile_times() -> list[str]:
    """Seconds from a traced step to compiled code, each network, an empty kernel cache
    (a fresh folder), against JAX's ``jit(...).lower(...).compile()``."""
    import tempfile

    lines = ["| network | autodiff: lower + compile (s) | JAX: lower + compile (s) |",
             "|---|---|---|"]  # fmt: skip
    os.environ["AUTODIFF_CACHE_DIR"] = tempfile.mkdtemp(prefix="autodiff-bench-")
    for seed, (title, loss, data) in enumerate(NETWORKS):
        params, x, y = data(np.random.default_rng(seed))
        step = grad(lambda p, x, y, loss=loss: loss(lax, anp, p, x, y))
        traced = autodiff.jit(step).trace(params, x, y)
        start = time.perf_counter()
        traced.lower().compile()
        ours = time.perf_counter() - start
        theirs = float("nan")
        try:
            import jax

            jax.config.update("jax_enable_x64", True)
            g = jax.grad(lambda p, x, y, loss=loss: loss(jax.lax, jax.numpy, p, x, y))
            start = time.perf_counter()
            jax.jit(g).lower(params, x, y).compile()
            theirs = time.perf_counter() - start
        except ImportError:
            pass
        lines.append(f"| {title} | {ours:.2f} | {theirs:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--networks-only", action="store_true")
    parser.add_argument("--compile-times", action="store_true")
    args = parser.parse_args()
    if args.networks_only:
        print("\n".join(networks(args.rounds)))
        if args.compile_times:
            print("\n".join(compile_times()))
        return
    rng = np.random.default_rng(0)
    print("| n | m | np.convolve | grad (a and v) | vmap over 8 | 8 np.convolve calls |")
    print("|---|---|---|---|---|---|")
    for n, m in SIZES:
        times = _row(n, m, args.repeats, rng)
        print(f"| {n} | {m} | " + " | ".join(f"{t:.2f} ms" for t in times) + " |")
    print()
    print("\n".join(networks(args.rounds)))
    if args.compile_times:
        print("\n".join(compile_times()))


if __name__ == "__main__":
    main()
