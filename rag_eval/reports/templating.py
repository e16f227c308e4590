"""The one jinja2 set-up every report uses: the package's templates, strict about undefined names.

Markdown documents (``report.md``, ``summary.md``, ``load.md``) are not autoescaped (user text goes
through :func:`rag_eval.reports.markdown.md_text` explicitly) and keep their trailing newline; the
HTML report is autoescaped.

>>> env = environment(html=False, filters={"twice": lambda s: s * 2})
>>> env.from_string("{{ 'ab' | twice }}").render()
'abab'
>>> environment(html=True, filters={}).from_string("{{ x }}").render(x="<b>")
'&lt;b&gt;'
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jinja2


def environment(*, html: bool, filters: Mapping[str, Callable[..., Any]]) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("rag_eval.reports", "templates"),
        autoescape=html,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=not html,
    )
    env.filters.update(filters)
    return env
