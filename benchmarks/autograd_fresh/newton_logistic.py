"""A short program in the style of autograd's examples, written for issue 30's timing (a
fresh program, written in the twelfth session before it was measured): an L2-regularised
logistic regression fitted by Newton's method (``grad`` and ``hessian``, each step a
linear solve), then the predicted probability's sensitivity to each input feature by
``elementwise_grad``, and the fit's log-likelihood by ``value_and_grad``.

    python -m benchmarks.start_up --examples <autograd>/examples --only newton_logistic.py
"""

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import elementwise_grad, grad, hessian, value_and_grad


def sigmoid(z):
    return 0.5 * (np.tanh(0.5 * z) + 1.0)


def negative_log_likelihood(w, features, labels, penalty=0.1):
    logits = np.dot(features, w)
    log_p = -np.logaddexp(0.0, -logits)
    log_not_p = -np.logaddexp(0.0, logits)
    return -np.sum(labels * log_p + (1 - labels) * log_not_p) + penalty * np.dot(w, w)


if __name__ == "__main__":
    rs = npr.RandomState(7)
    features = np.hstack([rs.randn(80, 3), np.ones((80, 1))])
    true_w = np.array([1.5, -2.0, 0.5, 0.25])
    labels = (rs.rand(80) < sigmoid(np.dot(features, true_w))).astype(float)

    objective = lambda w: negative_log_likelihood(w, features, labels)
    gradient, curvature = grad(objective), hessian(objective)
    w = np.zeros(4)
    for step in range(6):
        w = w - np.linalg.solve(curvature(w), gradient(w))
        print(f"step {step}: loss {objective(w):.6f}, |grad| {np.linalg.norm(gradient(w)):.2e}")

    slopes = elementwise_grad(lambda x: sigmoid(np.dot(x, w)))(features[:3])
    print("feature sensitivities", np.round(slopes, 4))
    value, g = value_and_grad(objective)(w)
    print("final", round(float(value), 6), np.round(g, 8))
