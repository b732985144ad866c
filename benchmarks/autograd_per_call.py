"""Per call, autograd against autodiff: the functions an autograd example program
minimizes, timed apart from its start-up and plotting.

    python -m benchmarks.autograd_per_call --examples <autograd>/examples [--rounds 5]
    python -m benchmarks.autograd_per_call --workload primitive [--rounds 5]

``--workload primitive``: a gradient through a user's ``@primitive`` with ``defvjp``, as
define_gradient.py takes it (its ``logsumexp``, the program the work was tuned on), and
a softplus regression's written for this measurement (a primitive with a keyword, called
twice per loss with different settings).

For ``gmm.py`` (a Gaussian mixture fitted by SciPy's Newton-CG): its objective (the
negative log-likelihood of 300 pinwheel points under 10 two-dimensional components,
each ``multivariate_normal.logpdf``), its gradient and its Hessian-vector product, built
as its ``__main__`` builds them (``flatten_func``, ``grad``,
``hessian_vector_product``), at its initial parameters.  Each system runs in a fresh
process (``python -c`` with autograd installed, the same code under
``autodiff.compat.autograd``), the two interleaved in a new random order each round;
a process reports the median CPU time (``time.process_time``) of each function over
``--calls`` calls after one warm-up call.  The figures are medians over rounds and the
ratio autodiff / autograd; the processes' values are checked to agree to 1e-9.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys

from benchmarks._harness import child_environment

HERE = pathlib.Path(__file__).resolve().parent

GMM = """
import json, statistics, sys, time
sys.modules["matplotlib.pyplot"] = type(sys)("matplotlib.pyplot")  # gmm.py imports it
import numpy
from data import make_pinwheel
from autograd import grad, hessian_vector_product
from autograd.misc.flatten import flatten_func
import gmm

params = gmm.init_gmm_params(num_components=10, D=2, scale=0.1)
data = make_pinwheel(radial_std=0.3, tangential_std=0.05, num_classes=3, num_per_class=100,
                     rate=0.4)
objective = lambda p: -gmm.gmm_log_likelihood(p, data)
flat, unflatten, x = flatten_func(objective, params)
v = numpy.random.default_rng(0).normal(size=numpy.shape(x))
funcs = {"objective": lambda: flat(x), "gradient": lambda: grad(flat)(x),
         "hvp": lambda: hessian_vector_product(flat)(x, v)}
"""


PRIMITIVE = """
import json, statistics, sys, time
import numpy
import autograd.numpy as np
from autograd import grad
from autograd.extend import defvjp, primitive

@primitive
def logsumexp(x):  # define_gradient.py's (the program the work was tuned on)
    max_x = np.max(x)
    return max_x + np.log(np.sum(np.exp(x - max_x)))

def logsumexp_vjp(ans, x):
    x_shape = x.shape
    return lambda g: np.full(x_shape, g) * np.exp(x - np.full(x_shape, ans))

defvjp(logsumexp, logsumexp_vjp)

@primitive
def softplus(x, sharpness=1.0):  # written for this measurement: a keyword, two calls
    return np.logaddexp(0.0, sharpness * x) / sharpness

defvjp(softplus, lambda ans, x, sharpness=1.0: lambda g: g / (1.0 + np.exp(-sharpness * x)))

def example_func(y):
    return np.sum(logsumexp(y**2))

def regression(params, inputs, targets):
    w, b = params[:-1], params[-1]
    z = np.dot(inputs, w) + b
    pred = softplus(z) + 0.1 * softplus(z, sharpness=3.0)
    return np.mean((pred - targets) ** 2) + 1e-3 * np.sum(w**2)

rs = numpy.random.RandomState(0)
y, inputs, targets, params = rs.randn(10), rs.randn(60, 4), rs.rand(60), rs.randn(5)
funcs = {"define_gradient": lambda: grad(example_func)(y),
         "softplus (fresh)": lambda: grad(regression)(params, inputs, targets)}
"""

# Each function's median CPU time over CALLS timings of REPEAT calls, after a warm-up call.
TIMED = """
out = {}
for name, f in funcs.items():
    value = f()
    times = []
    for _ in range(CALLS):
        t = time.process_time()
        for _ in range(REPEAT):
            f()
        times.append((time.process_time() - t) / REPEAT)
    out[name] = [statistics.median(times), numpy.asarray(value, dtype=float).ravel().tolist()]
print("RESULT", json.dumps(out))
"""
WORKLOADS = {"gmm": (GMM, 1), "primitive": (PRIMITIVE, 20)}


def run(system: str, examples: pathlib.Path, calls: int, workload: str = "gmm") -> dict:
    env = child_environment(MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(examples), str(HERE.parent)])
    setup, repeat = WORKLOADS[workload]
    code = (setup + TIMED).replace("CALLS", str(calls)).replace("REPEAT", str(repeat))
    if system == "autodiff":
        code = "import autodiff.compat.autograd as _a\n_a.install()\n" + code
    done = subprocess.run([sys.executable, "-c", code], cwd=examples, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    if done.returncode or not line:
        raise RuntimeError(f"{system}: {done.stderr.strip()[-2000:]}")
    return json.loads(line[0][len("RESULT ") :])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=pathlib.Path, default=HERE,
                        help="autograd's examples/ (HIPS/autograd's), for gmm")  # fmt: skip
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="gmm")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    times: dict = {"autograd": [], "autodiff": []}
    values: dict = {}
    for s in times:  # warm-up: the modules byte-compiled (see child_environment)
        values[s] = run(s, args.examples.resolve(), 1, args.workload)
    for _ in range(args.rounds):
        for s in random.sample(list(times), 2):
            times[s].append(run(s, args.examples.resolve(), args.calls, args.workload))
    print(f"{args.workload}, per call, CPU ms (median of {args.rounds} processes, "
          f"{args.calls} calls each; load average {load}):")  # fmt: skip
    for name in values["autograd"]:
        a, b = values["autograd"][name][1], values["autodiff"][name][1]
        worst = max(abs(p - q) / max(1.0, abs(p)) for p, q in zip(a, b))
        ag = statistics.median(r[name][0] for r in times["autograd"]) * 1e3
        ad = statistics.median(r[name][0] for r in times["autodiff"]) * 1e3
        print(f"  {name:16s} autograd {ag:7.3f}  autodiff {ad:7.3f}  ratio {ad / ag:.2f}  "
              f"(values agree to {worst:.1e})")  # fmt: skip
        if worst > 1e-9:
            raise SystemExit(f"{name}: the two systems disagree ({worst:.1e})")


if __name__ == "__main__":
    main()
