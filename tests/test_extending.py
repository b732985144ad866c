"""``docs/extending.md``'s primitive, run: the text between its ``<!-- doctest -->``
markers is a doctest (the rules, a sparsity rule, a lowering and what ``jit`` compiles of
it); the rest of the page is checked by ``tests/test_user_transform.py``."""

import doctest
import pathlib

import pytest

from autodiff.compiler.stages import default_backend

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.skipif(not default_backend().available(), reason=default_backend().why_not())
def test_the_primitive_of_the_extending_guide_runs_as_shown():
    text = (ROOT / "docs" / "extending.md").read_text()
    start, end = text.index("<!-- doctest -->"), text.index("<!-- /doctest -->")
    line = text[:start].count("\n")
    test = doctest.DocTestParser().get_doctest(text[start:end], {}, "extending.md",
                                               "docs/extending.md", line)  # fmt: skip
    assert len(test.examples) >= 15
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=report.append)
    assert runner.failures == 0, "".join(report)
