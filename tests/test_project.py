"""The project's promises about itself: the README's commands, the tour, the
public API's docstrings, and a docs/architecture.md that links every folder's README."""

import gc
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import autodiff
import autodiff.numpy as anp

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _readme_command(marker):
    lines = (ROOT / "README.md").read_text().splitlines()
    return lines[lines.index(marker) + 1]


def test_ci_runs_the_readme_test_command():
    command = _readme_command("# 2. install and run the whole test suite")
    assert "pytest" in command and '".[test]"' in command and "venv" in command
    ci = (ROOT / ".ci" / "run").read_text()
    # .ci/run reads the command from the README instead of keeping a copy of it.
    assert "# 2\\. install and run the whole test suite" in ci and 'eval "$cmd"' in ci


def test_readme_demo_command_runs_the_tour():
    command = _readme_command("# 1. install and take the tour")
    assert command.endswith("python -m autodiff")


def test_each_readme_command_starts_from_a_fresh_environment():
    # --clear empties .venv first: the second command does not inherit the first's install.
    for marker in ("# 1. install and take the tour", "# 2. install and run the whole test suite"):
        command = _readme_command(marker)
        assert command.startswith("python3 -m venv --clear .venv && "), command


def test_tour_runs_in_under_30_seconds():
    result = subprocess.run(
        [sys.executable, "-m", "autodiff"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "MISMATCH" not in result.stdout
    assert "tour finished" in result.stdout
    lines = result.stdout.splitlines()
    wide = [line for line in lines if len(line) > 100]
    assert not wide, f"the tour is wider than 100 columns: {wide}"
    assert "\njit: " in result.stdout and "jit(grad(loss))(w, x) == grad(loss)(w, x)" in (
        result.stdout
    )
    # it ends saying where to go next, naming pages that exist
    end = result.stdout[result.stdout.index("where to go next") :].splitlines()[1:]
    assert len(end) >= 4
    for line in end:
        target = line.split()[0]
        assert target.startswith("help(") or (ROOT / target).exists(), line


def test_tour_help_prints_help_and_runs_nothing():
    result = subprocess.run(
        [sys.executable, "-m", "autodiff", "--help"],
        capture_output=True, text=True, timeout=30, cwd=ROOT, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: python -m autodiff")
    assert "--no-timing" in result.stdout and "tour finished" not in result.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "autodiff", "--bogus"],
        capture_output=True, text=True, timeout=30, cwd=ROOT, check=False,
    )  # fmt: skip
    assert bad.returncode == 2 and "unrecognized arguments: --bogus" in bad.stderr


def test_public_api_is_explicit_and_documented_with_examples():
    assert sorted(autodiff.__all__) == sorted(set(autodiff.__all__))
    for name in autodiff.__all__:
        obj = getattr(autodiff, name)
        assert obj.__doc__, f"autodiff.{name} has no docstring"
        if callable(obj):
            assert ">>>" in obj.__doc__, f"autodiff.{name}'s docstring has no example"


def test_every_anp_function_is_documented():
    for name in anp._own:  # the borrowed rest are NumPy's own objects, with NumPy's docs
        assert getattr(anp, name).__doc__, f"anp.{name} has no docstring"


def test_architecture_doc_links_every_folder_readme():
    # each folder's README names its modules (tests/test_layers.py)
    doc = (ROOT / "docs" / "architecture.md").read_text()
    readmes = sorted(
        p.relative_to(ROOT).as_posix() for p in (ROOT / "autodiff").glob("*/README.md")
    )
    missing = [r for r in readmes if f"../{r}" not in doc]
    assert not missing, f"docs/architecture.md does not link {missing}"


def test_rules_readme_block_style_matches_the_code():
    # The README's example signatures are the ones Primitive accepts.
    text = (ROOT / "autodiff" / "rules" / "README.md").read_text()
    assert re.search(r"vjp_i\(ct, ans, \*primals, \*\*params\)", text)
    assert "def_vjp" in (ROOT / "autodiff" / "core/primitive.py").read_text()


def test_the_package_loads_with_the_collector_paused_and_leaves_it_as_it_was():
    # core/loading.py: `import autodiff` makes ~30,000 objects; unpaused, ~25 collections
    # would run while it does (one per 700 allocations). Paused: the few before and after.
    code = (
        "import gc, sys\n"
        "runs = []\n"
        "gc.callbacks.append(lambda phase, info: runs.append(phase))\n"
        "None if sys.argv[1] == 'on' else gc.disable()\n"
        "import autodiff\n"
        "assert gc.isenabled() == (sys.argv[1] == 'on'), gc.isenabled()\n"
        "print(runs.count('start'))\n"
    )
    for state in ("on", "off"):
        out = subprocess.run([sys.executable, "-c", code, state], capture_output=True,
                             text=True, check=True, timeout=60).stdout  # fmt: skip
        assert int(out) <= 5, f"{out.strip()} collections while autodiff loaded"
    from autodiff.core.loading import checks_rules, loading_package

    assert gc.isenabled() and checks_rules()
    seen = []

    def failing_import():
        with loading_package():
            seen.append((gc.isenabled(), checks_rules()))
            raise ImportError("an import that fails")

    with pytest.raises(ImportError):
        failing_import()
    assert seen == [(False, False)] and gc.isenabled() and checks_rules()


def test_what_the_package_makes_as_it_loads_starts_in_the_oldest_generation():
    # core/loading.py: the package's objects live as long as the process; left young, the
    # program's next young collections would traverse them twice for nothing.
    from autodiff.core.loading import loading_package

    def generation_of(obj) -> int:
        return next(g for g in range(3) if any(o is obj for o in gc.get_objects(generation=g)))

    before = gc.get_count()
    with loading_package():
        made = [[]]
        assert generation_of(made) == 0
    assert generation_of(made) == 2 and gc.get_count()[0] <= before[0] + 1
    # a collector the program froze stays frozen: its objects are not the package's to move
    gc.freeze()
    try:
        with loading_package():
            young = [[]]
        assert gc.get_freeze_count() > 0 and generation_of(young) == 0
    finally:
        gc.unfreeze()


def test_the_packages_own_rules_pass_the_checks_a_users_rules_get():
    # core/loading.py: the package's rules are not checked as it loads (the same rules at
    # every start); here every module loads with the checks on, as a user's rules would.
    code = (
        "import importlib, pkgutil, autodiff\n"
        "from autodiff.core import rule_forms\n"
        "names = [m.name for m in pkgutil.walk_packages(autodiff.__path__, 'autodiff.')]\n"
        "for name in names:\n"
        "    if not name.endswith('__main__'):\n"
        "        importlib.import_module(name)\n"
        "print(len(names))\n"
    )
    env = {**os.environ, "AUTODIFF_CHECK_OWN_RULES": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout) > 150  # every module of the package, rules families included
    # ... and the switch does switch: the checks run while the package loads with it,
    # not without it
    count = (
        "import sys\n"
        "calls = []\n"
        "sys.setprofile(lambda frame, event, arg: calls.append(1) if event == 'call' and "
        "frame.f_code.co_name == 'check_arity' else None)\n"
        "import autodiff\n"
        "sys.setprofile(None)\n"
        "print(len(calls))\n"
    )
    for environment, checked in ((env, True), (os.environ, False)):
        run = subprocess.run([sys.executable, "-c", count], env=environment,
                             capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
        assert (int(run.stdout) > 100) == checked, run.stdout


def test_import_autodiff_leaves_the_heavy_modules_for_first_use():
    # SciPy, numba, plum (with beartype), Dask, matplotlib: imported where first used
    # (benchmarks/import_time.py measures the import against NumPy's and JAX's).
    code = (
        "import sys, autodiff, autodiff.numpy, autodiff.extend, autodiff.testing\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    heavy = {"scipy", "numba", "llvmlite", "plum", "beartype", "dask", "distributed",
             "matplotlib", "networkx", "jax", "torch", "sympy"}  # fmt: skip
    assert not heavy & set(loaded), f"import autodiff imports {sorted(heavy & set(loaded))}"
    # ... and each arrives when used
    code = (
        "import sys, numpy as np, autodiff, scipy.special as sp\n"
        "g = autodiff.grad(sp.erf)(0.5)\n"  # scipy.special's rules, registered on first use
        "assert abs(g - 2 / np.pi**0.5 * np.exp(-0.25)) < 1e-12\n"
        # a plain resolution needs no plum; asking plum (its Function's methods) imports it
        "assert 'plum' not in sys.modules\n"
        "from autodiff.core.primitive import process; process.methods\n"
        "assert 'plum' in sys.modules\n"
        "import autodiff.scipy.linalg; assert 'scipy.linalg' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# The primitive families autodiff.numpy loads at first use (its _FIRST_USE table), with
# their compositions there.
FAMILIES_AT_FIRST_USE = ("autodiff.rules.linalg", "autodiff.numpy.linalg",
                         "autodiff.rules.sorting", "autodiff.numpy._sorting",
                         "autodiff.rules.sets", "autodiff.numpy._sets",
                         "autodiff.rules.polynomial", "autodiff.numpy._polynomial",
                         "autodiff.rules.statistics", "autodiff.numpy._statistics")  # fmt: skip


def test_a_plain_grad_program_leaves_the_compiler_and_control_flow_for_first_use():
    # autograd's and JAX's short programs (import, grad, a few NumPy calls) never reach jit,
    # control flow, the transforms built on grad and jvp, or a graph drawing:
    # autodiff/__init__.py's _LAZY names, compat's check_grads and core/graph.py's drawing
    # import them on first use (docs/architecture.md, "Layers").
    deferred = ("autodiff.compiler.jit", "autodiff.compiler.stages", "autodiff.compiler.llvm",
                "autodiff.compiler.backend", "autodiff.control", "autodiff.lax", "autodiff.stages",
                "autodiff.transforms.solvers", "autodiff.transforms.jacobians",
                "autodiff.transforms.differential", "autodiff.transforms.sparsity",
                "autodiff.interpreters.explain", "autodiff.interpreters.taylor",
                "autodiff.transforms.checkpoint", "autodiff.transforms.custom",
                "autodiff.rules.convolution", "autodiff.testing", "shutil",
                "subprocess", "autodiff.numpy.random", "autodiff.numpy._draws",
                "autodiff.numpy.fft", "autodiff.rules.fft", "autodiff.interpreters.staging",
                "numpy.random", "secrets", "hashlib", "autodiff.numpy._apply",
                "autodiff.debug.callbacks", *FAMILIES_AT_FIRST_USE,
                # the support only Taylor mode, sparsity detection and staging need: rule
                # kits their rules import at first call (core/loading.py), the graph
                "autodiff.rules._taylor", "autodiff.rules._sparsity", "autodiff.core.index_sets",
                "autodiff.core.graph",
                # the checks that debug_nans() and debug_rules() switch on, the derivation
                # of a rule a primitive lacks (the package's have both), JAX's precisions
                "autodiff.debug.nans", "autodiff.debug.rule_checks",
                "autodiff.interpreters.transpose", "autodiff.core.precision")  # fmt: skip
    code = (
        "import sys, autodiff, autodiff.numpy as anp\n"
        "from autodiff.compat import autograd\n"
        "from autodiff import grad, vmap, jvp\n"
        "assert abs(grad(lambda x: anp.sum(anp.tanh(x)))(anp.ones(3))[0] - 0.41997434) < 1e-8\n"
        "vmap(grad(lambda x: anp.sum(anp.sin(x) ** 2)))(anp.ones((2, 3)))\n"
        "autograd.grad(lambda x: anp.sum(x ** 2))(anp.ones(2))\n"
        "autograd.hessian(lambda x: anp.sum(x ** 3))(anp.ones(2))\n"
        "print(' '.join(sorted(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    early = sorted(m for m in loaded if m.startswith(deferred))
    assert early == [], f"a plain grad program imports {early}"
    # ... and each name arrives, the same object as its module's, when first used
    code = (
        "import sys, numpy as np, autodiff, autodiff.numpy as anp\n"
        # anp.random: listed, and loaded (with np.random) when named, as NumPy does its own
        "assert 'random' in dir(anp) and 'random' in anp.__all__\n"
        "assert 'numpy.random' not in sys.modules and 'autodiff.numpy.random' not in sys.modules\n"
        "from autodiff.numpy import random\n"
        "assert random is anp.random is sys.modules['autodiff.numpy.random']\n"
        "assert anp.random.normal(np.random.default_rng(0), (2,)).shape == (2,)\n"
        "assert anp.random.default_rng is np.random.default_rng\n"
        # anp.fft too; numpy.fft's functions on a traced value load its rules
        "assert 'fft' in dir(anp) and 'autodiff.rules.fft' not in sys.modules\n"
        "g = autodiff.grad(lambda x: np.fft.fft(x).real.sum())(np.ones(4))\n"
        "assert list(g) == [4.0, 0.0, 0.0, 0.0] and anp.fft is sys.modules['autodiff.numpy.fft']\n"
        "import autodiff.debug.nans as dn, autodiff.debug.rule_checks as dr\n"
        "assert autodiff.debug_nans is dn.debug_nans and autodiff.debug_rules is dr.debug_rules\n"
        "from autodiff import jit, cond\n"
        "import autodiff.compiler.jit as j, autodiff.control.cond as c\n"
        "assert jit is j.jit and cond is c.cond and autodiff.make_graph is j.make_graph\n"
        "assert autodiff.lax is sys.modules['autodiff.lax'] and 'scan' in dir(autodiff)\n"
        "assert float(jit(lambda x: x * 2.0)(np.float64(3.0))) == 6.0\n"
        "assert float(cond(True, lambda x: x + 1.0, lambda x: x - 1.0, 1.0)) == 2.0\n"
        "try:\n    autodiff.no_such_name\nexcept AttributeError as e:\n"
        "    assert 'no_such_name' in str(e)\nelse:\n    raise SystemExit('no error')\n"
        "from autodiff import *\n"
        "assert switch is autodiff.switch and custom_root is autodiff.custom_root\n"
        "import autodiff.transforms.jacobians as jac\n"
        "assert hessian is jac.hessian and SparseMatrix is autodiff.SparseMatrix\n"
        "import autodiff.interpreters.taylor as tay, autodiff.transforms.custom as cus\n"
        "assert jet is tay.jet and custom_vjp is cus.custom_vjp\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# Each family's first use, in the order that finds each one not yet loaded (sets,
# statistics and polynomials sort; polynomials also solve): the module it must load,
# and a line of code that uses it and checks the value.
_FIRST_USES = {
    "by anp's names": [
        (
            "autodiff.numpy._sorting",
            "assert list(anp.sort(np.array([3.0, 1.0, 2.0]))) == [1, 2, 3]",
        ),
        ("autodiff.numpy._sets", "assert list(anp.unique(np.array([3, 1, 3, 2]))) == [1, 2, 3]"),
        (
            "autodiff.numpy._statistics",
            "assert list(grad(anp.median)(np.array([3.0, 1.0, 2.0]))) == [0, 0, 1]",
        ),
        (
            "autodiff.numpy.linalg",
            "assert np.allclose(anp.linalg.inv(A), [[0.6, -0.2], [-0.4, 0.8]])",
        ),
        (
            "autodiff.numpy._polynomial",  # d/dx (x^2 + 2x + 3) at 2
            "assert float(grad(anp.polyval, 1)(np.array([1.0, 2.0, 3.0]), 2.0)) == 6.0",
        ),
    ],
    "by NumPy's functions on traced values": [
        (
            "autodiff.rules.sorting",  # x[1] < x[2] < x[0]: the weights reach them in that order
            "assert list(grad(lambda x: np.sum(np.sort(x) * w))(np.array([3.0, 1.0, 2.0]))) "
            "== [100, 1, 10]",
        ),
        (
            "autodiff.numpy._sets",
            "assert list(grad(lambda x: np.sum(np.unique(x) * w))(np.array([3.0, 1.0, 2.0]))) "
            "== [100, 1, 10]",
        ),
        (
            "autodiff.numpy._statistics",
            "assert list(grad(np.median)(np.array([3.0, 1.0, 2.0]))) == [0, 0, 1]",
        ),
        (
            "autodiff.numpy.linalg",  # d det(A) / dA = det(A) inv(A)^T
            "assert np.allclose(grad(np.linalg.det)(A), 2.5 * np.linalg.inv(A).T)",
        ),
        (
            "autodiff.numpy._polynomial",  # d/dp (p0 x^2 + p1 x + p2) at x = 2
            "assert list(grad(np.polyval)(np.array([1.0, 2.0, 3.0]), 2.0)) == [4, 2, 1]",
        ),
    ],
    "in an error message's suggestion": [  # a list holding a traced value: NumPy converts it
        (
            "autodiff.numpy._statistics",
            "assert 'write anp.median(' in message(lambda x: np.median([x, 2 * x]))",
        ),
    ],
    "under vmap": [
        (
            "autodiff.rules.sorting",
            "assert (vmap(lambda x: x.argsort())(X) == np.argsort(X, axis=1)).all()",
        ),
        (
            "autodiff.rules.sets",
            "assert (vmap(lambda x: np.isin(x, [1.0, 2.5]))(X) == np.isin(X, [1.0, 2.5])).all()",
        ),
        ("autodiff.numpy._statistics", "assert list(vmap(np.median)(X)) == [2.0, 1.5]"),
        (
            "autodiff.numpy.linalg",
            "assert np.allclose(vmap(np.linalg.det)(np.stack([A, 2 * A])), [2.5, 10.0])",
        ),
        (
            "autodiff.numpy._polynomial",
            "assert list(vmap(lambda p: np.polyval(p, 2.0))(X)) == [16.0, 8.5]",
        ),
    ],
}


def test_linear_algebra_sorting_sets_polynomials_and_statistics_load_at_first_use():
    # ... by anp's names (listed before: dir(), __all__), by NumPy's own functions meeting
    # a traced value, and under vmap; each in a fresh process.  A NumPy function with no
    # rule still raises.
    setup = (
        "import sys, numpy as np, autodiff.numpy as anp\n"
        "from autodiff import grad, vmap\n"
        "A = np.array([[2.0, 0.5], [1.0, 1.5]])\n"
        "X = np.array([[3.0, 1.0, 2.0], [0.5, 2.5, 1.5]])\n"
        "w = np.array([1.0, 10.0, 100.0])\n"
        "def message(f):\n    try:\n        grad(f)(1.0)\n    except Exception as e:\n"
        "        return str(e)\n"
        "assert {'sort', 'unique', 'median', 'linalg', 'polyval', 'roots'} <= set(dir(anp))\n"
        "assert {'sort', 'unique', 'median', 'linalg', 'polyval', 'roots'} <= set(anp.__all__)\n"
    )
    _run_first_uses(setup, _FIRST_USES)


def _run_first_uses(setup: str, ways: dict) -> None:
    """Each way of first use in a fresh process after ``setup``: each module absent before
    its line, present after it; a NumPy function with no rule still raises."""
    for way, uses in ways.items():
        code = setup
        for module, line in uses:
            code += f"assert {module!r} not in sys.modules, '{module} loaded before its use'\n"
            code += f"{line}\nassert {module!r} in sys.modules, '{module} not loaded'\n"
        code += "assert 'trim_zeros has no autodiff rule' in message(np.trim_zeros)\n"
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
            check=False,
        )  # fmt: skip
        assert result.returncode == 0, f"{way}:\n{result.stderr}"


def test_an_autograd_program_leaves_vmap_and_the_callbacks_for_first_use():
    # autograd has no vmap: its programs never reach the batching interpreter, the
    # functions built on it (anp.vectorize, ...) or the callbacks; each arrives when named.
    # A program that draws its data with autograd.numpy.random loads neither vmap's nor
    # jit's interpreter: a draw needs them only under a transform (numpy/_draws.py).
    # Nor does it convert a traced value: the messages and checks of a conversion
    # (core/conversions.py, core/last_word.py) load at the first one.
    later = ("autodiff.interpreters.batching", "autodiff.interpreters.staging",
             "autodiff.numpy._apply", "autodiff.debug.callbacks", "autodiff.core.conversions",
             "autodiff.core.last_word")  # fmt: skip
    code = (
        "import sys\n"
        "from autodiff.compat import autograd\n"
        "autograd.install()\n"
        "import autograd.numpy as np\n"
        "from autograd import grad, elementwise_grad\n"
        "import autograd.numpy.random as npr\n"
        "npr.seed(0); data = npr.randn(3); rs = npr.RandomState(1); more = rs.randn(2)\n"
        "assert data.shape == (3,) and more.shape == (2,)\n"
        "g = grad(lambda x: np.sum(np.tanh(x)))(np.zeros(3))\n"
        "e = elementwise_grad(lambda x: np.sin(x) ** 2)(np.linspace(0.0, 1.0, 3))\n"
        "assert list(g) == [1.0, 1.0, 1.0] and np.allclose(e, np.sin(2 * np.linspace(0, 1, 3)))\n"
        # define_gradient.py's way: a primitive with its VJP, then check_grads
        "from autograd.extend import primitive, defvjp\n"
        "from autograd.test_util import check_grads\n"
        "cube = primitive(lambda x: x ** 3)\n"
        "defvjp(cube, lambda ans, x: lambda g: 3 * g * x ** 2)\n"
        "assert list(grad(lambda x: np.sum(cube(x)))(np.ones(2))) == [3.0, 3.0]\n"
        "check_grads(lambda x: np.sum(cube(x)), modes=['rev'])(np.ones(2))\n"
        f"assert not [m for m in {later!r} if m in sys.modules], sys.modules.keys()\n"
        # anp's scalar types are made when first read (numpy/_types.py)
        "assert 'float64' not in vars(sys.modules['autodiff.numpy'])\n"
        "import numpy, autodiff, autodiff.numpy as anp\n"
        "assert 'float64' in dir(anp) and anp.double is anp.float64 is anp.float64\n"
        "assert anp.float64(2) == 2.0 and isinstance(numpy.float64(1), anp.float64)\n"
        "assert 'vmap' in dir(autodiff) and 'vectorize' in anp.__all__\n"
        "from autodiff import vmap\n"
        "assert vmap is sys.modules['autodiff.interpreters.batching'].vmap\n"
        "assert list(vmap(lambda x: x * 2.0)(numpy.ones(2))) == [2.0, 2.0]\n"
        # a draw under vmap follows its randomness, the interpreters loaded then
        "rng = numpy.random.default_rng(0)\n"
        "draw = lambda x: anp.random.normal(rng, (2,)) + x\n"
        "d = vmap(draw, randomness='different')(numpy.zeros(3))\n"
        "assert d.shape == (3, 2) and len({tuple(r) for r in d}) == 3\n"
        "assert anp.vectorize is sys.modules['autodiff.numpy._apply'].vectorize\n"
        "assert list(autodiff.grad(lambda x: np.sum(anp.vectorize(np.sin)(x)))(numpy.zeros(2)))"
        " == [1.0, 1.0]\n"
        "assert 'autodiff.debug.callbacks' not in sys.modules\n"
        "autodiff.debug.print('x = {}', 1.0)\n"
        "assert autodiff.pure_callback is sys.modules['autodiff.debug.callbacks'].pure_callback\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "x = 1.0\n"


# anp's NumPy-level compositions, loaded at first use too (autodiff/numpy/__init__.py's
# _FIRST_USE): none of them is imported by import autodiff or by a plain grad program.
COMPOSITIONS_AT_FIRST_USE = ("autodiff.numpy._creation", "autodiff.numpy._dtypes",
                             "autodiff.numpy._elementwise", "autodiff.numpy._index_tricks",
                             "autodiff.numpy._index_update", "autodiff.numpy._indexing",
                             "autodiff.numpy._products", "autodiff.numpy._reductions",
                             "autodiff.numpy._shape")  # fmt: skip


def test_import_and_a_plain_grad_program_leave_anps_compositions_for_first_use():
    code = (
        "import sys, numpy as np, autodiff\n"
        f"lazy = {COMPOSITIONS_AT_FIRST_USE!r}\n"
        "assert [m for m in lazy if m in sys.modules] == [], 'import autodiff'\n"
        "import autodiff.numpy as anp\n"
        "x = np.array([0.5, 1.0, -2.0])\n"  # d/dx sum(sin(x)^2) = 2 sin(x) cos(x) = sin(2x)
        "g = autodiff.grad(lambda x: anp.sum(anp.sin(x) ** 2))(x)\n"
        "assert np.allclose(g, np.sin(2 * x), rtol=1e-14, atol=0)\n"
        "assert [m for m in lazy if m in sys.modules] == [], 'a plain grad program'\n"
        # every name is still listed, and a star import gives them all
        "names = {'array', 'zeros', 'mean', 'dot', 'diag', 'nonzero', 'at', 'r_', 'c_',\n"
        "         'result_type', 'allclose', 'block', 'trapezoid'}\n"
        "assert names <= set(dir(anp)) and names <= set(anp.__all__)\n"
        "assert [m for m in lazy if m in sys.modules] == [], 'dir(anp)'\n"
        "namespace = {}\n"
        "exec('from autodiff.numpy import *', namespace)\n"
        "assert namespace['mean'] is anp.mean is sys.modules['autodiff.numpy._reductions'].mean\n"
        "assert namespace['r_'] is sys.modules['autodiff.numpy._index_tricks'].r_\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


# Each module's first use, in an order that finds each one not yet loaded (_shape imports
# _index_update; _indexing imports both; _index_tricks imports _creation): the module it
# must load, and a line of code that uses it and checks the value by a hand formula.
# x = [3, 1, 2], w = [1, 10, 100].
_COMPOSITIONS_FIRST_USES = {
    "by anp's names": [
        ("autodiff.numpy._creation", "assert list(anp.linspace(0.0, 1.0, 3)) == [0, 0.5, 1]"),
        ("autodiff.numpy._index_tricks", "assert list(anp.r_[x, 7.0]) == [3, 1, 2, 7]"),
        ("autodiff.numpy._dtypes", "assert anp.result_type(x, np.float32) == np.float64"),
        ("autodiff.numpy._elementwise", "assert anp.allclose(x, x + 1e-12)"),
        ("autodiff.numpy._index_update", "assert list(anp.at(x)[1].set(5.0)) == [3, 5, 2]"),
        ("autodiff.numpy._shape", "assert anp.diag(x)[1, 1] == 1 and anp.diag(x).sum() == 6"),
        ("autodiff.numpy._indexing", "assert list(anp.flatnonzero(x - 1)) == [0, 2]"),
        ("autodiff.numpy._products", "assert float(anp.dot(x, w)) == 213"),
        ("autodiff.numpy._reductions", "assert float(grad(anp.mean)(x)[0]) == 1 / 3"),
    ],
    "by NumPy's functions on traced values": [
        (
            "autodiff.numpy._creation",  # sum(linspace(0, t, 5)) = 2.5 t
            "assert float(grad(lambda t: np.sum(np.linspace(0.0, t, 5)))(2.0)) == 2.5",
        ),
        ("autodiff.numpy._dtypes", "assert float(grad(lambda t: t**2 * np.isreal(t))(3.0)) == 6"),
        ("autodiff.numpy._elementwise", "assert float(grad(lambda t: np.modf(t)[0])(2.5)) == 1"),
        (
            "autodiff.numpy._index_update",  # y = [3 x1, x1, x2]: sum(y w) = 13 x1 + 100 x2
            "assert list(grad(lambda x: np.sum(setitem(x * 1.0, 0, 3 * x[1]) * w))(x)) "
            "== [0, 13, 100]",
        ),
        (
            "autodiff.numpy._shape",  # w0 (x1 - x0) + w1 (x2 - x1)
            "assert list(grad(lambda x: np.sum(np.diff(x) * w[:2]))(x)) == [-1, -9, 10]",
        ),
        (
            "autodiff.numpy._indexing",
            "assert list(grad(lambda x: np.sum(np.compress([1, 0, 1], x) * w[:2]))(x)) "
            "== [1, 0, 10]",
        ),
        (
            "autodiff.numpy._products",  # sum(outer(x, w)) = sum(x) sum(w)
            "assert list(grad(lambda x: np.sum(np.outer(x, w)))(x)) == [111, 111, 111]",
        ),
        (
            "autodiff.numpy._reductions",  # d var / dx = 2 (x - mean) / n
            "assert np.allclose(grad(np.var)(x), [2 / 3, -2 / 3, 0], rtol=1e-14, atol=1e-15)",
        ),
    ],
    "by ndarray methods and operators on traced values": [
        (
            "autodiff.numpy._elementwise",  # divmod(x, 2)[1] = x - 2 floor(x / 2)
            "assert list(grad(lambda x: np.sum(divmod(x, 2.0)[1] * w))(x)) == [1, 10, 100]",
        ),
        (
            "autodiff.numpy._index_update",  # x0 + 10 x0 x1 + 100 x2
            "assert list(grad(lambda x: np.sum(x.at[1].multiply(x[0]) * w))(x)) == [11, 30, 100]",
        ),
        (
            "autodiff.numpy._shape",  # trace(outer(x, x)) = sum(x^2)
            "assert list(grad(lambda x: (x * x[:, None]).trace())(x)) == [6, 2, 4]",
        ),
        ("autodiff.numpy._products", "assert list(grad(lambda x: x.dot(w))(x)) == [1, 10, 100]"),
        (
            "autodiff.numpy._reductions",
            "assert np.allclose(grad(lambda x: x.var())(x), [2 / 3, -2 / 3, 0], rtol=1e-14, "
            "atol=1e-15)",
        ),
    ],
    "by a ufunc method on traced values": [
        (
            "autodiff.numpy._reductions",  # maximum.accumulate([3, 1, 2]) = [x0, x0, x0]
            "assert list(grad(lambda x: np.sum(np.maximum.accumulate(x) * w))(x)) == [111, 0, 0]",
        ),
    ],
    "in an error message's suggestion": [
        (
            "autodiff.numpy._reductions",
            "assert 'write anp.mean(' in message(lambda t: np.mean([t, 2 * t]))",
        ),
    ],
    "under vmap": [
        (
            "autodiff.numpy._creation",
            "assert vmap(lambda t: np.linspace(0.0, t, 3))(x).tolist() "
            "== [[0, 1.5, 3], [0, 0.5, 1], [0, 1, 2]]",
        ),
        (
            "autodiff.numpy._index_tricks",
            "assert vmap(lambda r: anp.r_[r, 7.0])(X).tolist() "
            "== [[3, 1, 2, 7], [0.5, 2.5, 1.5, 7]]",
        ),
        ("autodiff.numpy._dtypes", "assert (vmap(lambda r: r * np.isreal(r))(X) == X).all()"),
        (
            "autodiff.numpy._elementwise",
            "assert vmap(lambda r: np.modf(r)[0])(X).tolist() == [[0, 0, 0], [0.5, 0.5, 0.5]]",
        ),
        (
            "autodiff.numpy._index_update",
            "assert vmap(lambda r: r.at[0].set(9.0))(X).tolist() == [[9, 1, 2], [9, 2.5, 1.5]]",
        ),
        (
            "autodiff.numpy._shape",
            "assert (vmap(np.diag)(X) == np.stack([np.diag(X[0]), np.diag(X[1])])).all()",
        ),
        (
            "autodiff.numpy._indexing",
            "assert vmap(lambda r: np.compress([1, 0, 1], r))(X).tolist() == [[3, 2], [0.5, 1.5]]",
        ),
        ("autodiff.numpy._products", "assert vmap(np.dot)(X, X).tolist() == [14, 8.75]"),
        ("autodiff.numpy._reductions", "assert vmap(np.mean)(X).tolist() == [2, 1.5]"),
    ],
}


def test_anps_compositions_load_at_first_use():
    # ... by anp's names, by NumPy's own functions and by ndarray methods and operators
    # meeting a traced value under grad, in an error message, and under vmap; each way in a
    # fresh process, each module checked absent before its use.
    setup = (
        "import sys, numpy as np, autodiff.numpy as anp\n"
        "from autodiff import grad, vmap\n"
        "x = np.array([3.0, 1.0, 2.0])\n"
        "w = np.array([1.0, 10.0, 100.0])\n"
        "X = np.array([[3.0, 1.0, 2.0], [0.5, 2.5, 1.5]])\n"
        "def setitem(a, i, v):\n    a[i] = v\n    return a\n"
        "def message(f):\n    try:\n        grad(f)(1.0)\n    except Exception as e:\n"
        "        return str(e)\n"
    )
    _run_first_uses(setup, _COMPOSITIONS_FIRST_USES)


def test_autograds_primitives_and_hessian_leave_anps_shape_functions_for_first_use():
    # compat's hessian (a jacobian of grad) and the VJP rule of a custom_vjp differentiated
    # twice (autograd's @primitive under check_grads) read shapes of traced values without
    # np.shape, which would load numpy/_shape.py (with _index_update.py) for one question.
    code = (
        "import sys, numpy as np, autodiff, autodiff.numpy as anp\n"
        "from autodiff.compat import autograd\n"
        "x = np.array([3.0, 1.0, 2.0])\n"
        "H = autograd.hessian(lambda x: anp.sum(x**3))(x)\n"  # diag(6 x)
        "assert (H == np.diag(6 * x)).all()\n"
        "@autodiff.custom_vjp\n"
        "def cube(x):\n    return x * x * x\n"
        "cube.defvjp(lambda x: (x * x * x, x), lambda x, g: (g * 3.0 * x * x,))\n"
        "g2 = autodiff.grad(lambda x: anp.sum(autodiff.grad(lambda y: anp.sum(cube(y)))(x)))(x)\n"
        "assert (g2 == 6 * x).all()\n"  # d/dx sum(3 x^2) = 6 x
        "loaded = [m for m in ('autodiff.numpy._shape', 'autodiff.numpy._index_update')\n"
        "          if m in sys.modules]\n"
        "assert loaded == [], loaded\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def test_drawing_data_and_linear_algebra_leave_staging_and_sparsity_for_first_use():
    # autograd's programs draw their data and invert matrices (a GP's covariance, a fitted
    # model's curvature): the draws' and linalg's rules for staging (shape rules) and for
    # sparsity detection load with staging and sparsity detection, not before.
    code = (
        "import sys, numpy as np, autodiff, autodiff.numpy as anp\n"
        "rs = anp.random.RandomState(0)\n"
        "a = rs.randn(3, 3) @ rs.randn(3, 3).T + 3 * np.eye(3)\n"
        "x = anp.random.normal(np.random.default_rng(1), (3,)) + np.random.randn(3)\n"
        "f = lambda a: anp.sum(anp.linalg.solve(a, x)) + anp.linalg.slogdet(a)[1]\n"
        "g = autodiff.grad(f)(a)\n"
        # d sum(a^-1 x) = -(a^-T 1)(a^-1 x)^T, d log|det a| = a^-T
        "want = -np.outer(np.linalg.solve(a.T, np.ones(3)), np.linalg.solve(a, x))\n"
        "assert np.allclose(g, want + np.linalg.inv(a).T), g\n"
        "c = autodiff.grad(lambda a: anp.sum(anp.linalg.cholesky(a @ a.T)))(anp.linalg.inv(a))\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    loaded = set(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                check=True, timeout=60).stdout.split())  # fmt: skip
    assert "autodiff.rules.linalg" in loaded and "autodiff.numpy._draws" in loaded
    later = {"autodiff.core.graph", "autodiff.core.index_sets", "autodiff.rules._sparsity",
             "autodiff.interpreters.staging"}  # fmt: skip
    assert loaded & later == set()
    # ... where they work when staged and when sparsity is asked for
    sparsity = autodiff.jacobian_sparsity(anp.linalg.cholesky)(np.eye(3) * 2.0)
    assert np.array_equal(sparsity.toarray() != 0, _cholesky_pattern(3))
    staged = autodiff.jit(lambda a: anp.linalg.slogdet(a)[1] + anp.random.normal(size=()))
    assert np.isfinite(staged(np.eye(3) * 2.0))


def test_a_legacy_draw_outside_any_transform_is_numpys_call():
    # autograd's programs draw their data with npr.randn and friends before any transform:
    # NumPy's own call, with NumPy's stream, and the draws' primitives wait for a draw
    # that meets a transform (here vmap's "different", one draw per example, in order).
    code = (
        "import sys, numpy as np, autodiff, autodiff.numpy as anp\n"
        "np.random.seed(3)\n"
        "want = np.random.randn(2, 3), np.random.gamma(2.0, size=4)\n"
        "np.random.seed(3)\n"
        "got = anp.random.randn(2, 3), anp.random.gamma(2.0, size=4)\n"
        "assert all(np.array_equal(a, b) for a, b in zip(want, got))\n"
        "print('autodiff.numpy._draws' in sys.modules)\n"
        "np.random.seed(4)\n"
        "out = autodiff.vmap(lambda x: x + anp.random.randn(2), randomness='different')(\n"
        "    np.zeros((3, 2)))\n"
        "np.random.seed(4)\n"
        "assert np.array_equal(out, np.stack([np.random.randn(2) for _ in range(3)]))\n"
        "print('autodiff.numpy._draws' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=60)  # fmt: skip
    assert done.stdout.split() == ["False", "True"]


def _cholesky_pattern(n):
    """Which entries of a's lower triangle each entry of L's lower triangle reads (all of
    the triangle: see rules/linalg.py's cholesky sparsity), flattened row-major."""
    lower = np.tril(np.ones((n, n), bool)).ravel()
    return np.outer(lower, lower)
