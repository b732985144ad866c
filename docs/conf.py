"""Sphinx configuration of the documentation site.

Build it from the repository root (the README's command):

    python -m sphinx -W --keep-going -q -c docs . site

The source directory is the repository root, so the README, docs/, the notebooks and
the folders' READMEs are pages under their own paths and the links between them, which
GitHub follows too, resolve as they are.  ``-W`` makes every warning an error: a broken
link, an unknown cross-reference, a public name without a docstring (docs/_ext/
autodiff_api.py) or a page that fails to render fails the build (tests/test_docs.py).

Why Sphinx: autodoc imports the package and documents the live objects, which is what
autodiff's public API is (functions made by helpers, namespaces whose ``__all__`` is
computed from NumPy's at import time), and it renders the docstrings' reStructuredText
and doctest examples as they are written; MyST reads the Markdown guides and myst-nb the
notebooks with their stored outputs; Furo is the theme.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).parent / "_ext"))

project = "autodiff"
author = "the autodiff authors"
copyright = "the autodiff authors"

root_doc = "docs/index"
include_patterns = ["README.md", "docs/**", "notebooks/*.ipynb", "autodiff/*/README.md",
                    "benchmarks/results*.md"]  # fmt: skip
# Pruned while Sphinx walks the tree (the include patterns only filter files).
exclude_patterns = [".*", "**/.*", "site", "build", "dist", "tests", "**/__pycache__",
                    "docs/_ext", "docs/_root"]  # fmt: skip

extensions = ["sphinx.ext.autodoc", "myst_nb", "autodiff_api", "mathml"]
# Formulas become MathML when the site is built (docs/_ext/mathml.py): they render
# offline, with no script.
html_math_renderer = "mathml"

# The notebooks are executed by tests/test_notebooks.py and committed with their
# outputs: the site shows those outputs and runs nothing.
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_preserve_defaults = True
add_module_names = False
# Hundreds of functions on one page: list them in its table, not in the sidebar.
toc_object_entries = False

html_theme = "furo"
html_title = "autodiff"
html_extra_path = ["_root"]  # index.html at the site's root, pointing to docs/index.html
html_show_sourcelink = False
html_copy_source = False


def _outputs_in_the_build(app):
    """myst-nb writes the notebooks' figures into ``jupyter_execute/`` beside the output
    folder: the repository root for the README's ``... . site``, an untracked folder in
    the work tree.  Keep them with Sphinx's other build files, inside the output folder
    (tests/test_docs.py checks that a build leaves ``git status`` as it was)."""
    build = pathlib.Path(app.doctreedir)
    app.env.mystnb_config = app.env.mystnb_config.copy(
        output_folder=str(build / "jupyter_execute"),
        execution_cache_path=str(build / "jupyter_cache"),
    )


def setup(app):
    app.connect("builder-inited", _outputs_in_the_build, priority=900)  # after myst-nb's
