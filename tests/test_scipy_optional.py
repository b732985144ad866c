"""SciPy is optional: autodiff works without it, and importing any of
``autodiff.scipy``'s modules then says to install the ``scipy`` extra."""

import importlib
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


MODULES = ["special", "linalg", "signal", "stats", "integrate"]


def _run(code):
    """``code`` run in a fresh interpreter importing this checkout; it must succeed."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("module", MODULES)
def test_import_error_names_the_scipy_extra(monkeypatch, module):
    for name in [m for m in sys.modules if m == "scipy" or m.startswith("scipy.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "scipy", None)  # `import scipy...` now fails
    monkeypatch.delitem(sys.modules, f"autodiff.scipy.{module}", raising=False)
    with pytest.raises(ImportError, match=rf"autodiff\.scipy\.{module} needs SciPy.*"
                                          r"pip install 'autodiff\[scipy\]'"):  # fmt: skip
        importlib.import_module(f"autodiff.scipy.{module}")


@pytest.mark.parametrize("module", MODULES)
def test_each_module_is_an_attribute_of_autodiff_scipy_imported_when_first_read(module):
    # JAX's spelling: `import jax.scipy as jsp; jsp.special.erf` (no import of the module)
    code = (
        "import sys, autodiff.scipy as asp\n"
        f"assert 'autodiff.scipy.{module}' not in sys.modules\n"
        f"assert asp.{module} is sys.modules['autodiff.scipy.{module}']\n"
        "try:\n"
        "    asp.nothing\n"
        "except AttributeError as e:\n"
        "    print(e)\n"
    )
    result = _run(code)
    assert "has no attribute 'nothing'" in result.stdout


def test_autodiff_imports_without_scipy():
    """In a fresh interpreter: autodiff.numpy works; each autodiff.scipy module explains."""
    code = (
        "import sys; sys.modules['scipy'] = None\n"
        "import numpy as np, autodiff, autodiff.numpy as anp\n"
        "assert float(autodiff.grad(anp.sin)(0.0)) == 1.0\n"
        f"for module in {MODULES!r}:\n"
        "    try:\n"
        "        __import__('autodiff.scipy.' + module)\n"
        "    except ImportError as e:\n"
        "        print(e)\n"
    )
    result = _run(code)
    assert result.stdout.count("pip install 'autodiff[scipy]'") == len(MODULES)
