"""A short program in the style of autograd's examples, written for issue 30's timing (a
fresh program, written in the fifteenth session before it was measured): a softmax
classifier of three classes on two-dimensional points, trained by momentum descent on
the mean cross-entropy with an L2 penalty (``grad``; each step a matrix product, a
``logsumexp`` and a gather of the true classes' scores); then its gradient checked by
``check_grads`` and the accuracy printed.

    python -m benchmarks.start_up --examples <autograd>/examples --only softmax_classifier.py
"""

import autograd.numpy as np
import autograd.numpy.random as npr
from autograd import grad
from autograd.scipy.special import logsumexp
from autograd.test_util import check_grads


def scores(weights, x):
    return np.dot(x, weights[:-1]) + weights[-1]


def loss(weights, x, labels, penalty=1e-2):
    s = scores(weights, x)
    picked = s[np.arange(len(labels)), labels]
    return np.mean(logsumexp(s, axis=1) - picked) + penalty * np.sum(weights[:-1] ** 2)


if __name__ == "__main__":
    rs = npr.RandomState(5)
    centres = np.array([[0.0, 2.0], [-1.7, -1.0], [1.7, -1.0]])
    labels = rs.randint(0, 3, size=90)
    x = centres[labels] + 0.8 * rs.randn(90, 2)

    weights = 0.01 * rs.randn(3, 3)
    velocity = np.zeros_like(weights)
    loss_grad = grad(loss)
    for step in range(60):
        velocity = 0.9 * velocity - 0.5 * loss_grad(weights, x, labels)
        weights = weights + velocity
        if step % 20 == 0:
            print(f"step {step:2d}  loss {loss(weights, x, labels):.6f}")

    check_grads(loss, modes=["rev"])(weights, x, labels)
    accuracy = np.mean(np.argmax(scores(weights, x), axis=1) == labels)
    print(f"accuracy {accuracy:.3f}")
