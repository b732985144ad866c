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

import autodiff.numpy as anp
from autodiff import grad, jit, jvp, vmap
from autodiff.compat import autograd as ag
from autodiff.errors import TransformValueError

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
    "autograd's modules, each autodiff's own, loaded once": """
        import sys
        import autograd.numpy as np
        import autograd.numpy.random as npr
        import autograd.numpy.linalg, autograd.numpy.fft
        import autograd.scipy.stats.multivariate_normal as mvn
        import autograd.scipy.stats.norm
        from autograd.scipy.stats import norm, t
        from autograd.scipy.special import logsumexp, gammaln, expit
        from autograd.numpy.linalg import solve
        from autograd import grad
        import autodiff.numpy, autodiff.numpy.random, autodiff.scipy.stats
        # the path finder, asked first, found the packages' own files and loaded them again
        # under autograd's names (a second autodiff/numpy/random.py; scipy.stats a module)
        files = {}
        for name, module in list(sys.modules.items()):
            where = getattr(module, "__file__", None)
            if where and name.startswith(("autograd", "autodiff")):
                files.setdefault(where, set()).add(id(module))
        assert all(len(ids) == 1 for ids in files.values()), files
        assert npr.randn is autodiff.numpy.random.randn and np.sum is autodiff.numpy.sum
        # plain modules: the closure search behind grad passes over modules by exact type
        assert type(np) is type(npr) is type(mvn) is type(sys)
        assert np.random is npr and np.linalg.inv is autodiff.numpy.linalg.inv
        assert autograd.numpy.fft.fft is autodiff.numpy.fft.fft
        # and autodiff's own modules keep their specs (an alias's import does not rewrite them)
        assert autodiff.scipy.stats.__spec__.name == "autodiff.scipy.stats"
        assert autodiff.numpy.__spec__.name == "autodiff.numpy"
        assert norm.logpdf == autodiff.scipy.stats.norm.logpdf  # (norm: a module, as autograd's)
        cov = np.array([[2.0, 0.3], [0.3, 0.5]])
        x, mean = np.array([0.4, -1.2]), np.array([0.1, 0.2])
        d = x - mean
        want = -0.5 * (d @ np.linalg.solve(cov, d) + np.log(np.linalg.det(2 * np.pi * cov)))
        assert np.isclose(mvn.logpdf(x, mean, cov), want)
        assert np.allclose(grad(mvn.logpdf)(x, mean, cov), -np.linalg.solve(cov, d))
        assert np.isclose(grad(norm.logpdf)(0.7, 0.2, 1.5), -(0.7 - 0.2) / 1.5**2)
        assert np.isclose(logsumexp(np.array([0.0, np.log(3.0)])), np.log(4.0))
        assert np.isclose(gammaln(5.0), np.log(24.0)) and np.isclose(expit(0.0), 0.5)
        assert np.allclose(solve(cov, cov @ x), x)
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
        # the hook sits after the path finder: only autograd's submodules reach it
        "import importlib.machinery as m\n"
        "at = sys.meta_path.index(m.PathFinder) + 1\n"
        "assert sys.meta_path[at] is names._FINDER, sys.meta_path\n"
        "asked, find = [], names._Finder.find_spec\n"
        "names._Finder.find_spec = lambda *a: asked.append(a[1]) or find(*a)\n"
        "import colorsys, autograd.misc.optimizers\n"
        "assert asked == ['autograd.misc', 'autograd.misc.optimizers'], asked\n"
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


def test_the_command_runs_a_program_as_python_does_from_any_directory(tmp_path):
    # `python dir/program.py` puts dir/ first on sys.path (autograd's examples import their
    # neighbour data.py) and runs the file as __main__ (its classes pickle by that name).
    (tmp_path / "neighbour.py").write_text("VALUE = 7\n")
    (tmp_path / "program.py").write_text(
        '"""the docstring"""\n'
        "import pickle, sys, neighbour\n"
        "class Point:\n    pass\n"
        "assert pickle.loads(pickle.dumps(Point())).__class__.__module__ == '__main__'\n"
        "assert sys.modules['__main__'].__file__ == __file__ and __doc__ == 'the docstring'\n"
        "print(neighbour.VALUE, __name__)\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = subprocess.run([sys.executable, "-m", "autodiff.compat.autograd",
                             str(tmp_path / "program.py")], cwd=elsewhere,
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["7", "__main__"]


def test_the_command_runs_a_program_from_standard_input_as_python_does(tmp_path):
    # `python - args` reads the program from stdin, the working directory first on
    # sys.path, sys.argv[0] "-"; the program's autograd is autodiff's here too
    (tmp_path / "neighbour.py").write_text("VALUE = 3.0\n")
    program = (
        "import sys, neighbour\n"
        "import autograd.numpy as np, autodiff.numpy as anp\n"
        "from autograd import grad\n"
        "print(np.__name__, np.sum is anp.sum, sys.argv, __file__)\n"
        "print(grad(lambda x: neighbour.VALUE * x**2)(1.5))\n"
    )
    result = subprocess.run([sys.executable, "-m", "autodiff.compat.autograd", "-", "a"],
                            input=program, cwd=tmp_path, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines() == ["autograd.numpy True ['-', 'a'] <stdin>", "9.0"]


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


# --- autograd.extend: a user's @primitive -------------------------------------------------------


def _plain_cube():
    """A primitive whose body is plain NumPy (not differentiable by autodiff: it converts
    its argument), as autograd users write them around SciPy or C code."""

    @ag.primitive
    def cube(x):
        return np.power(np.asarray(x, dtype=float), 3)

    ag.defvjp(cube, lambda ans, x: lambda g: g * 3 * x**2)
    return cube


def test_a_primitive_is_one_at_every_order_as_in_autograd():
    # grad of grad: the primitive again one level down (its VJP maker differentiated for
    # the second derivative), never its body, which here could not be.
    cube, x = _plain_cube(), np.array([0.5, -1.5, 2.0])
    loss = lambda x: anp.sum(cube(x))
    np.testing.assert_allclose(ag.grad(loss)(x), 3 * x**2, rtol=1e-14)
    np.testing.assert_allclose(ag.elementwise_grad(ag.grad(loss))(x), 6 * x, rtol=1e-14)
    np.testing.assert_allclose(ag.hessian(loss)(x), np.diag(6 * x), rtol=1e-14)
    np.testing.assert_allclose(ag.grad(ag.grad(cube))(1.5), 9.0, rtol=1e-14)
    # forward mode: the VJP maker's transpose
    np.testing.assert_allclose(ag.make_jvp(cube)(x)(np.ones(3))[1], 3 * x**2, rtol=1e-14)
    np.testing.assert_allclose(jvp(cube, (x,), (x,))[1], 3 * x**3, rtol=1e-14)
    ag.check_grads(loss, modes=["rev", "fwd"], order=2)(x)


def test_a_primitive_under_vmap_jit_and_their_compositions():
    @ag.primitive
    def softplus(x, sharp=1.0):
        return anp.logaddexp(0.0, sharp * x) / sharp

    ag.defvjp(softplus, lambda ans, x, sharp=1.0: lambda g: g / (1 + anp.exp(-sharp * x)))
    rng = np.random.default_rng(7)
    w, xs = rng.standard_normal(3), rng.standard_normal((5, 3))
    loss = lambda w, x: anp.sum(softplus(w * x, sharp=2.0) * x)
    by_hand = lambda w, x: x * x / (1 + np.exp(-2.0 * w * x))
    want = np.stack([by_hand(w, x) for x in xs])
    np.testing.assert_allclose(vmap(grad(loss), in_dims=(None, 0))(w, xs), want, rtol=1e-13)
    np.testing.assert_allclose(vmap(grad(loss), in_dims=(None, 1))(w, xs.T), want, rtol=1e-13)
    np.testing.assert_allclose(grad(lambda w: anp.sum(vmap(loss, (None, 0))(w, xs)))(w),
                               want.sum(0), rtol=1e-13)  # fmt: skip
    np.testing.assert_allclose(jit(grad(loss))(w, xs[0]), want[0], rtol=1e-13)
    np.testing.assert_allclose(grad(jit(loss))(w, xs[1]), want[1], rtol=1e-13)


def test_a_primitive_with_several_outputs_gets_them_as_it_returned_them():
    @ag.primitive
    def polar(x, y):
        return np.hypot(x, y), np.arctan2(y, x)

    def polar_vjp_x(ans, x, y):
        r, _ = ans
        return lambda g: g[0] * x / r - g[1] * y / r**2

    def polar_vjp_y(ans, x, y):
        r, _ = ans
        return lambda g: g[0] * y / r + g[1] * x / r**2

    ag.defvjp(polar, polar_vjp_x, polar_vjp_y)
    x, y = np.array([1.0, -2.0]), np.array([0.5, 3.0])

    def loss(x, y):
        r, theta = polar(x, y)
        return anp.sum(2.0 * r + theta)

    r = np.hypot(x, y)
    g_x, g_y = grad(loss, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(g_x, 2 * x / r - y / r**2, rtol=1e-14)
    np.testing.assert_allclose(g_y, 2 * y / r + x / r**2, rtol=1e-14)
    only_r = grad(lambda x: anp.sum(polar(x, y)[0]))(x)  # the unused output's cotangent: zeros
    np.testing.assert_allclose(only_r, x / r, rtol=1e-14)


def test_a_primitive_whose_vjp_maker_returns_the_wrong_shape_says_so():
    @ag.primitive
    def total(x):
        return np.sum(x)

    ag.defvjp(total, lambda ans, x: lambda g: g)  # forgot to broadcast g to x's shape
    with pytest.raises(TransformValueError, match=r"'total'.*defvjp for argument 0.*shape \(\)"
                       r".*shape \(3,\)"):  # fmt: skip
        ag.grad(total)(np.ones(3))
    ag.defvjp(total, lambda ans, x: lambda g: g * np.ones_like(x))
    np.testing.assert_allclose(ag.grad(total)(np.ones(3)), np.ones(3))  # fixed, and it runs


def test_a_primitive_finds_a_traced_value_in_a_container_or_keyword():
    # A call runs the function itself only where no argument holds a traced value (the
    # check of plain types is the fast path); a list or keyword holding one is traced.
    from autodiff.compat.autograd_extend import _traced

    @ag.primitive
    def weighted(x, ws):
        return x * (ws[0] + ws[1])

    ag.defvjp(weighted, lambda ans, x, ws: lambda g: g * (ws[0] + ws[1]))
    seen = []

    def loss(w, x):
        seen.append((_traced((x, [w, 2.0]), {}), _traced((x,), {"ws": (w,)})))
        return anp.sum(weighted(x, [w, 2.0])) + anp.sum(weighted(x, ws=(2.0, w)))

    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(ag.grad(loss)(3.0, x), 2 * np.sum(x), rtol=1e-15)
    np.testing.assert_allclose(ag.grad(loss, 1)(3.0, x), 2 * (3.0 + 2.0) * np.ones(3))
    assert seen == [(True, True), (True, True)]
    assert not _traced((x, 1.0, 2, "s", None, True, 1j, np.float64(2)), {"q": 0.5})
