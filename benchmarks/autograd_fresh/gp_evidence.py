"""A short program in the style of autograd's examples, written for issue 30's timing (a
fresh program, written in the thirteenth session before it was measured): a Gaussian
process's three hyperparameters (length scale, signal and noise variance, as logs)
fitted by gradient ascent on the log evidence (``value_and_grad``; each step a
``slogdet`` and a linear solve), after the inputs are standardised with ``mean`` and
``std``; then the posterior mean's slope at a few points by ``elementwise_grad``.

    python -m benchmarks.start_up --examples <autograd>/examples --only gp_evidence.py
"""

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import elementwise_grad, value_and_grad


def kernel(params, a, b):
    log_length, log_signal = params[0], params[1]
    scaled = (a[:, None] - b[None, :]) / np.exp(log_length)
    return np.exp(log_signal) * np.exp(-0.5 * scaled**2)


def log_evidence(params, x, y):
    cov = kernel(params, x, x) + (np.exp(params[2]) + 1e-6) * np.eye(len(x))
    _, logdet = np.linalg.slogdet(cov)
    alpha = np.linalg.solve(cov, y)
    return -0.5 * (np.dot(y, alpha) + logdet + len(x) * np.log(2 * np.pi))


if __name__ == "__main__":
    rs = npr.RandomState(11)
    raw = rs.uniform(0.0, 8.0, 30)
    x = (raw - np.mean(raw)) / np.std(raw)
    y = np.sin(2.0 * x) + 0.3 * x + 0.1 * rs.randn(30)

    params = np.array([0.0, 0.0, -2.0])
    objective = value_and_grad(lambda p: log_evidence(p, x, y))
    for step in range(40):
        value, g = objective(params)
        params = params + 0.02 * g
        if step % 10 == 0:
            print(f"step {step}: log evidence {value:.6f}, |grad| {np.linalg.norm(g):.3e}")

    cov = kernel(params, x, x) + (np.exp(params[2]) + 1e-6) * np.eye(len(x))
    weights = np.linalg.solve(cov, y)
    posterior_mean = lambda t: np.dot(kernel(params, t, x), weights)
    points = np.linspace(-1.5, 1.5, 5)
    print("hyperparameters", np.round(np.exp(params), 5))
    print("posterior slopes", np.round(elementwise_grad(posterior_mean)(points), 5))
