"""The documentation site builds in strict mode, and documents what the package exports.

The build is the README's command into a temporary folder: ``-W`` makes a broken
link, an unknown reference, a public name without a docstring (docs/_ext/autodiff_api.py)
or a page that fails to render an error.  Then the HTML is read: every name in the
``__all__`` of every documented module has an entry, and every notebook page shows the
figures its committed outputs hold.
"""

import importlib
import json
import pathlib
import re
import subprocess
import sys
import time

import pytest

pytest.importorskip("sphinx", reason="the docs extra is not installed")
pytest.importorskip("myst_nb", reason="the docs extra is not installed")
pytest.importorskip("furo", reason="the docs extra is not installed")
pytest.importorskip("latex2mathml", reason="the docs extra is not installed")

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import autodiff_api as api  # noqa: E402  (docs/_ext: the site's own extension)

BUILD = ["-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-c", "docs", "."]
ENTRY = re.compile(r'<dt class="sig sig-object py[^"]*" id="([^"]+)"')
TARGET = re.compile(r'id="([^"]+)"')
FIGURE = re.compile(r'<img [^>]*src="([^"]+\.(?:png|svg))"')


STATUS = {}  # git status before and after the build


def _work_tree_status():
    return subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    status = _work_tree_status()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *BUILD, str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    print(f"site built in {time.perf_counter() - start:.1f} s")
    assert done.returncode == 0, f"the site does not build:\n{done.stderr[-6000:]}"
    STATUS.update(before=status, after=_work_tree_status())
    return out


def test_the_build_writes_nothing_outside_its_folder(site):
    # myst-nb's figures go with the build's own files (docs/conf.py), not beside the
    # output folder: for the README's "... . site" that is the work tree's root.
    assert not (site.parent / "jupyter_execute").exists()
    assert any((site / ".doctrees" / "jupyter_execute").iterdir())
    assert STATUS["after"] == STATUS["before"], "the build changed git status"


def test_formulas_are_mathml_with_no_script(site):
    page = (site / "notebooks" / "03_jacobians_hessians_newton.html").read_text()
    assert page.count("<math ") >= 20 and "\\mathbb" not in page
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', page)
    assert not [s for s in scripts if "mathjax" in s.lower() or "://" in s], scripts


def test_namedtuple_fields_are_documented(site):
    html = (site / "docs" / "api" / "autodiff.html").read_text()
    assert "Alias for field number" not in html
    assert "The row of each stored value" in html  # SparseMatrix.row


def test_the_notebooks_are_numbered_as_their_files(site):
    # The sidebar shows each notebook's title: "03 · Jacobians, ..." for 03_....ipynb.
    index = (site / "docs" / "index.html").read_text()
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        title = re.search(rf'href="../notebooks/{path.stem}.html">([^<]+)<', index)
        assert title and title[1].startswith(f"{path.stem[:2]} · "), (path.name, title)


def test_no_markdown_link_is_shown_as_code(site):
    # `[text](path)` inside backquotes renders as code, not as a link.
    pages = [p for p in site.rglob("*.html") if "_static" not in p.parts]
    shown = [(p.name, m) for p in pages
             for m in re.findall(r'<span class="pre">[^<]*\]\([^<)]*\.(?:md|ipynb|html)\)?',
                                 p.read_text())]  # fmt: skip
    assert not shown, shown


def test_readme_gives_the_build_command():
    readme = (ROOT / "README.md").read_text()
    assert "python -m sphinx " + " ".join(BUILD[2:]) + " site" in readme


def _documented_modules():
    """Every autodiff module reachable through the public modules' __all__."""
    seen, todo = set(), ["autodiff", "autodiff.extend", "autodiff.testing", "autodiff.scipy"]
    while todo:
        modname = todo.pop()
        if modname in seen:
            continue
        seen.add(modname)
        for _, obj in api.public_names(modname):
            if getattr(obj, "__name__", "").startswith("autodiff.") and hasattr(obj, "__all__"):
                todo.append(obj.__name__)
    return seen


def test_every_public_module_has_a_page():
    missing = _documented_modules() - set(api.MODULES)
    assert not missing, f"add docs/api/<module>.rst and MODULES entries for {missing}"
    assert set(api.MODULES) <= _documented_modules()
    index = (ROOT / "docs" / "api" / "index.md").read_text()
    for modname in api.MODULES:
        page = ROOT / "docs" / "api" / f"{modname}.rst"
        assert page.read_text().strip() == f".. autodiff-api:: {modname}", page
        assert f"\n{modname}\n" in index, f"docs/api/index.md does not list {modname}"


def test_every_public_name_has_an_entry(site):
    pages = {m: (site / "docs" / "api" / f"{m}.html").read_text() for m in api.MODULES}
    every_target = set().union(*(TARGET.findall(html) for html in pages.values()))
    count = 0
    for modname in api.MODULES:
        entries = set(ENTRY.findall(pages[modname]))
        for name, obj in api.public_names(modname):
            own_module = getattr(obj, "__name__", "").startswith("autodiff.") and hasattr(
                obj, "__all__"
            )
            if own_module:  # a submodule: its page
                assert f"module-{obj.__name__}" in every_target, obj.__name__
            else:
                assert f"{modname}.{name}" in entries, f"{modname}.{name} has no entry"
            count += 1
    print(f"{count} public names")
    assert count > 600


def test_entries_show_signatures_examples_and_rules(site):
    html = (site / "docs" / "api" / "autodiff.html").read_text()
    grad = html[html.index('id="autodiff.grad"') :][:6000]
    assert "argnums" in grad and "&gt;&gt;&gt;" in grad  # the signature and the example
    anp = (site / "docs" / "api" / "autodiff.numpy.html").read_text()
    sin = anp[anp.index('id="autodiff.numpy.sin"') :][:4000]
    assert "Rules" in sin and "VJP, JVP, batching" in sin
    loadtxt = re.sub("<[^>]+>", "", anp[anp.index('id="autodiff.numpy.loadtxt"') :])[:400]
    assert "NumPy\u2019s own numpy.loadtxt" in loadtxt, loadtxt


def test_inline_code_links_to_the_entries(site):
    html = (site / "docs" / "architecture.html").read_text()
    assert 'href="api/autodiff.html#autodiff.vmap"' in html
    assert 'href="api/autodiff.extend.html#autodiff.extend.Primitive"' in html


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.stem)
def test_notebook_page_shows_its_figures(site, path):
    outputs = [o for c in json.loads(path.read_text())["cells"] for o in c.get("outputs", [])]
    figures = sum(
        any(k in o.get("data", {}) for k in ("image/png", "image/svg+xml")) for o in outputs
    )
    page = site / "notebooks" / f"{path.stem}.html"
    shown = [src for src in FIGURE.findall(page.read_text()) if "_images/" in src]
    assert len(shown) >= figures, f"{page.name} shows {len(shown)} of {figures} figures"
    for src in shown:
        assert (page.parent / src).resolve().stat().st_size > 1000, src


def test_a_public_name_without_a_docstring_is_found():
    def undocumented(x):
        return x

    class Thing:
        """A thing."""

    assert api.documentation(undocumented, "undocumented") is None
    assert api.documentation(Thing(), "thing") is None  # not ours, no docstring of its own
    assert api.documentation(Thing, "Thing") == "A thing."
    stats = importlib.import_module("autodiff.scipy.stats")  # instances with docstrings
    assert api.documentation(stats.norm, "norm").startswith("The normal distribution")
