"""``autodiff.compat.autograd``: programs written for HIPS autograd run unchanged.

Our own short programs of the kinds autograd's examples are (not the examples: fetched
code stays out of the repository), each run as ``python -m autodiff.compat.autograd
program.py`` in a fresh interpreter (the import hook changes ``sys.modules``), each
checking its own numbers against closed forms and finite differences."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from autodiff.compat import autograd as ag

PROGRAMS = {
    "operators": """
        import autograd.numpy as np
        from autograd import (grad, value_and_grad, elementwise_grad as egrad, jacobian,
                              hessian, hessian_vector_product, make_vjp, grad_named)
        x = np.linspace(-1.0, 1.0, 5)
        t = np.tanh(x)
        assert np.allclose(egrad(np.tanh)(x), 1 - t**2)
        assert np.allclose(egrad(egrad(np.tanh))(x), -2 * t * (1 - t**2))
        f = lambda x, y: np.sum(np.sin(x) * y ** 2)
        v, g = value_and_grad(f, 1)(x, x)
        assert np.isclose(v, f(x, x)) and np.allclose(g, 2 * np.sin(x) * x)
        assert np.allclose(jacobian(np.sin)(x), np.diag(np.cos(x)))
        h = hessian(lambda z: np.sum(z ** 3))(x)
        assert np.allclose(h, np.diag(6 * x))
        assert np.allclose(hessian_vector_product(lambda z: np.sum(z ** 3))(x, x), 6 * x * x)
        vjp, ans = make_vjp(np.sin)(x)
        assert np.allclose(vjp(np.ones(5)), np.cos(x))
        assert np.allclose(grad_named(f, "y")(x, x), 2 * np.sin(x) * x)
        print("ok")
    """,
    "logistic regression with adam": """
        import autograd.numpy as np
        import autograd.numpy.random as npr
        from autograd import grad
        from autograd.misc.flatten import flatten
        from autograd.misc.optimizers import adam
        from autograd.scipy.special import logsumexp
        from autograd.test_util import check_grads
        rs = npr.RandomState(0)
        X, w_true = rs.randn(50, 3), np.array([1.0, -2.0, 0.5])
        y = (X @ w_true > 0).astype(float)
        def loss(params, i):
            logits = X @ params["w"] + params["b"]
            return np.mean(logsumexp(np.stack([np.zeros(50), logits]), axis=0) - y * logits)
        check_grads(lambda w: loss({"w": w, "b": 0.1}, 0), modes=["rev"])(rs.randn(3))
        flat, unflatten = flatten({"w": np.zeros(3), "b": 0.0})
        assert flat.shape == (4,)
        params = adam(grad(loss), {"w": np.zeros(3), "b": 0.0}, num_iters=200, step_size=0.1)
        assert loss(params, 0) < 0.2 * loss({"w": np.zeros(3), "b": 0.0}, 0), loss(params, 0)
        print("ok")
    """,
    "a primitive of one's own": """
        import autograd.numpy as np
        from autograd import grad
        from autograd.extend import primitive, defvjp
        from autograd.test_util import check_grads
        @primitive
        def logsumexp(x):
            m = np.max(x)
            return m + np.log(np.sum(np.exp(x - m)))
        defvjp(logsumexp, lambda ans, x: lambda g: g * np.exp(x - ans))
        x = np.array([0.5, -1.0, 2.0])
        assert np.allclose(grad(logsumexp)(x), np.exp(x) / np.sum(np.exp(x)))
        check_grads(lambda x: logsumexp(np.sin(x)), modes=["rev", "fwd"])(x)
        print("ok")
    """,
    "fixed point": """
        import autograd.numpy as np
        from autograd import grad
        from autograd.misc.fixed_points import fixed_point
        def sqrt(a):  # Newton's iteration for the square root
            return fixed_point(lambda a: lambda x: 0.5 * (x + a / x), a, 1.0,
                               lambda x, y: abs(x - y), 1e-12)
        assert np.isclose(sqrt(2.0), np.sqrt(2.0))
        assert np.isclose(grad(sqrt)(2.0), 0.5 / np.sqrt(2.0))
        print("ok")
    """,
    "a convolutional layer and pooling": """
        import autograd.numpy as np
        import autograd.numpy.random as npr
        import autograd.scipy.signal
        from autograd import grad
        convolve = autograd.scipy.signal.convolve
        rs = npr.RandomState(1)
        images, kernels = rs.randn(4, 2, 8, 8), rs.randn(2, 3, 3, 3)
        def net(k):
            conv = convolve(images, k, axes=([2, 3], [2, 3]), dot_axes=([1], [0]), mode="valid")
            pooled = np.max(conv.reshape(4, 3, 3, 2, 3, 2), axis=(3, 5))
            return np.sum(np.tanh(pooled) ** 2)
        g = grad(net)(kernels)
        e = np.zeros_like(kernels); e[1, 2, 0, 1] = 1e-6
        assert np.isclose(g[1, 2, 0, 1], (net(kernels + e) - net(kernels - e)) / 2e-6, rtol=1e-5)
        print("ok")
    """,
    "an ODE's gradient": """
        import autograd.numpy as np
        from autograd import grad
        from autograd.builtins import tuple
        from autograd.scipy.integrate import odeint
        def final(k):
            return odeint(lambda y, t, k: -k * y, 2.0, np.array([0.0, 1.0]), tuple((k,)))[-1, 0]
        assert np.isclose(grad(final)(0.7), -2.0 * np.exp(-0.7), rtol=1e-6)
        print("ok")
    """,
}


def test_autograd_programs_run_unchanged(tmp_path):
    """Each program in a file of its own, run by a driver that the command line runs with
    the import hook installed (one interpreter for all: starting one costs seconds)."""
    for i, source in enumerate(PROGRAMS.values()):
        (tmp_path / f"program{i}.py").write_text(textwrap.dedent(source))
    driver = tmp_path / "driver.py"
    driver.write_text(
        textwrap.dedent(f"""
        import runpy
        for i in range({len(PROGRAMS)}):
            runpy.run_path(r"{tmp_path}/program%d.py" % i, run_name="__main__")
    """)
    )
    result = subprocess.run([sys.executable, "-m", "autodiff.compat.autograd", str(driver)],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["ok"] * len(PROGRAMS)


def test_the_names_in_process_and_the_help():
    x = np.array([0.3, -0.2])
    np.testing.assert_allclose(ag.grad(lambda a, b: np.sum(a * b**2), 1)(x, x), 2 * x * x)
    np.testing.assert_allclose(ag.deriv(np.sin)(0.3), np.cos(0.3))
    g, aux = ag.grad_and_aux(lambda x: (np.sum(x**2), "aux"))(x)
    np.testing.assert_allclose(g, 2 * x)
    assert aux == "aux"
    with pytest.raises(TypeError, match="real scalar-output"):
        ag.grad(np.sin)(x)
    result = subprocess.run([sys.executable, "-m", "autodiff.compat.autograd", "--help"],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0 and "program.py" in result.stdout
    missing = subprocess.run([sys.executable, "-c", "import autodiff.compat.autograd as s; "
                              "s.install(); import autograd.tracer"],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
    assert "ModuleNotFoundError" in missing.stderr  # autograd's internals have no counterpart


def test_the_command_loads_the_names_once_and_passes_the_programs_exit_on(tmp_path):
    # `python -m` runs this module's file as __main__; the program's `import autograd`
    # must find the module the command installed, not run the file a second time.
    program = tmp_path / "program.py"
    program.write_text(
        "import sys, autograd, autodiff.compat.autograd as names\n"
        "assert autograd is names and names.__name__ == 'autodiff.compat.autograd'\n"
        "finders = [type(f) for f in sys.meta_path if type(f).__name__ == '_Finder']\n"
        "assert finders == [names._Finder], finders\n"
        "assert sys.argv[1:] == ['a', 'b'], sys.argv\n"
        "sys.exit(3)\n"
    )
    result = subprocess.run([sys.executable, "-m", "autodiff.compat.autograd", str(program),
                             "a", "b"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 3, result.stderr[-2000:]
    program.write_text("raise KeyError('from the program')\n")
    result = subprocess.run([sys.executable, "-m", "autodiff.compat.autograd", str(program)],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 1 and "KeyError: 'from the program'" in result.stderr


def test_hessian_vector_product_is_the_hessian_times_the_tensor_either_way():
    # A real tensor shaped like the argument takes the JVP of the gradient (forward over
    # reverse); anything else autograd's gradient of grad . tensor.  Both against the
    # Hessian by hand: f(x, y) = sum(y * sin(x)**2) + (x . y)**2 / 2 in x.
    rng = np.random.default_rng(4)
    x, y, v = rng.standard_normal(4), rng.standard_normal(4), rng.standard_normal(4)

    def f(x, y, scale=1.0):
        return scale * (np.sum(y * np.sin(x) ** 2) + np.dot(x, y) ** 2 / 2)

    hess = np.diag(2 * y * np.cos(2 * x)) + np.outer(y, y)
    hvp = ag.hessian_vector_product(f)
    np.testing.assert_allclose(hvp(x, y, v), hess @ v, rtol=1e-12)
    np.testing.assert_allclose(hvp(x, y, v, scale=3.0), 3 * hess @ v, rtol=1e-12)
    np.testing.assert_allclose(hvp(x, y, np.arange(4)), hess @ np.arange(4.0), rtol=1e-12)
    # in y the Hessian is x x^T
    np.testing.assert_allclose(ag.hessian_vector_product(f, 1)(x, y, v), np.outer(x, x) @ v,
                               rtol=1e-12)  # fmt: skip
    # a matrix argument and a tensor of its shape (hessian_tensor_product)
    a, t = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    g = lambda a: np.sum(np.exp(a) * a)  # its Hessian: diag((2 + a) exp(a))
    np.testing.assert_allclose(ag.hessian_tensor_product(g)(a, t), (2 + a) * np.exp(a) * t,
                               rtol=1e-12)  # fmt: skip
    with pytest.raises(TypeError, match="scalar"):  # a row's shape: autograd's way, and error
        ag.hessian_tensor_product(g)(a, t[0])
