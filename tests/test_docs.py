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

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "docs" / "_ext"))
import autodiff_api as api  # noqa: E402  (docs/_ext: the site's own extension)

BUILD = ["-m", "sphinx", "-E", "-W", "--keep-going", "-q", "-c", "docs", "."]
ENTRY = re.compile(r'<dt class="sig sig-object py[^"]*" id="([^"]+)"')
TARGET = re.compile(r'id="([^"]+)"')
FIGURE = re.compile(r'<img [^>]*src="([^"]+\.(?:png|svg))"')


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
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
    return out


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
