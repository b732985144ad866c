"""A short program in the style of autograd's examples, written for issue 30's timing (a
fresh program, written in the eleventh session before it was measured): a damped
oscillation fitted by Gauss-Newton steps with autograd's jacobian, the fit's parameters
packed with flatten, the fitted curve's slope by elementwise_grad, the loss's value and
gradient at the end by value_and_grad.

    python -m benchmarks.start_up --examples <autograd>/examples --only gauss_newton.py
"""

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import elementwise_grad, jacobian, value_and_grad
from autograd.misc import flatten


def curve(params, t):
    return params["amplitude"] * np.exp(-params["decay"] * t) * np.cos(params["frequency"] * t)


if __name__ == "__main__":
    rs = npr.RandomState(7)
    t = np.linspace(0.0, 6.0, 80)
    truth = {"amplitude": 2.0, "decay": 0.4, "frequency": 2.5}
    observed = curve(truth, t) + 0.05 * rs.randn(t.size)

    start = {"amplitude": 1.5, "decay": 0.3, "frequency": 2.4}
    flat, unflatten = flatten(start)

    def residuals(flat_params):
        return curve(unflatten(flat_params), t) - observed

    for _step in range(8):
        r = residuals(flat)
        jac = jacobian(residuals)(flat)
        flat = flat - np.linalg.solve(np.dot(jac.T, jac), np.dot(jac.T, r))

    fitted = unflatten(flat)
    print("fitted", {k: round(float(v), 3) for k, v in sorted(fitted.items())})
    slope = elementwise_grad(lambda s: curve(fitted, s))(t)
    print("slope at 0, 1, 2:", np.round(slope[[0, 13, 27]], 3))
    loss, gradient = value_and_grad(lambda p: 0.5 * np.sum(residuals(p) ** 2))(flat)
    print(f"loss {loss:.5f}, gradient norm {np.linalg.norm(gradient):.2e}")
