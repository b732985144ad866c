"""The code stays ruff-clean, ruff-formatted and mypy-clean (the tools come
with the ``test`` extra, so CI enforces this)."""

import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _run(*command):
    exe = shutil.which(command[0]) or shutil.which(
        command[0], path=str(pathlib.Path(sys.executable).parent)
    )
    if exe is None:
        pytest.skip(f"{command[0]} is not installed (pip install -e '.[test]')")
    return subprocess.run(
        [exe, *command[1:]], cwd=ROOT, capture_output=True, text=True, check=False
    )


def test_ruff_check():
    result = _run("ruff", "check", "autodiff", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format():
    result = _run("ruff", "format", "--check", "autodiff", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy():
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
