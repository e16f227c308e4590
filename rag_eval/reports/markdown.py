"""The Markdown report of one run (``DIR/report.md``), rendered with jinja2."""

from __future__ import annotations

import re
from typing import Any

import jinja2

from rag_eval.reports.templating import environment


def _env() -> jinja2.Environment:
    return environment(html=False, filters={"num": _num, "pct": _pct, "md": md_text})


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|<>~])")


def md_text(value: Any) -> str:
    r"""User text (names, paths, descriptions) as literal Markdown text: every character Markdown or HTML
    would read as syntax is escaped, line breaks become spaces (a table row stays one row).

    >>> print(md_text("a|b <script>x</script> *y*"))
    a\|b \<script\>x\</script\> \*y\*
    """
    text = " ".join(str(value).split())
    return _MD_SPECIAL.sub(r"\\\1", text)


def _num(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: Any) -> str:
    return "–" if value is None else f"{value:.1%}"


def render_markdown(summary: dict[str, Any], manifest: dict[str, Any]) -> str:
    template = _env().get_template("report.md.j2")
    return template.render(summary=summary, manifest=manifest, names=list(summary["configs"]))
