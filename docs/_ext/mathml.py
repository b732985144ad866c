"""Formulas as MathML, written when the site is built: they render offline.

Sphinx's default renders ``$...$`` in the browser with MathJax fetched from a CDN, so an
offline reader (a clone, a laptop on a train) sees raw LaTeX.  Here each formula is
converted once, at build time, by ``latex2mathml`` (pure Python, a ``docs`` and ``test``
dependency) into MathML, which every current browser renders natively: no script, no
network, nothing vendored.  (Shipping MathJax would add megabytes of JavaScript to the
repository or a package of them; KaTeX's pre-rendering needs Node; ``imgmath`` needs a
LaTeX installation.)  A formula ``latex2mathml`` cannot convert is a warning, which the
build's ``-W`` turns into a failure.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from latex2mathml.converter import convert
from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


def _mathml(self: Any, node: nodes.Element, display: str) -> str:
    latex = node.astext()
    try:
        return convert(latex, display=display)
    except Exception as e:  # latex2mathml raises its own exception classes
        logger.warning(f"cannot write ${latex}$ as MathML: {e}", location=node)
        return self.encode(latex)


def visit_math(self: Any, node: nodes.Element) -> None:
    self.body.append(f'<span class="math">{_mathml(self, node, "inline")}</span>')
    raise nodes.SkipNode


def visit_math_block(self: Any, node: nodes.Element) -> None:
    self.body.append(self.starttag(node, "div", CLASS="math"))
    self.body.append(_mathml(self, node, "block"))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_math_block, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
