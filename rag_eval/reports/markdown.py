"""The Markdown report of one run (``DIR/report.md``), rendered with jinja2.

The rows of its evidence-identity table are registry measures (:mod:`rag_eval.metrics.registry`):
their labels and decimals are the registry's.

>>> config = {"duplicate_rate": 0.05, "cap_compliance": 1.0, "n_cap_violations": 0, "cap_compliance_true": 0.5,
...           "n_true_cap_violations": 3, "content_duplicates": {"by_key_kind": {"vector": 2}},
...           "payload": {"chunks_delivered_mean": 4.5}}
>>> [r for r in identity_rows({"configs": {"a": config}}, ["a"]) if r[1] != ["–"]]  # doctest: +NORMALIZE_WHITESPACE
[('duplicate rate (evidence key)', ['5.0%']), ('content duplicates by key kind: chunk', ['0']),
 ('content duplicates by key kind: vector', ['2']), ('content duplicates by key kind: rank', ['0']),
 ('cap compliance (stored doc ids)', ['100.0% (0 violations)']),
 ('cap compliance (true documents)', ['50.0% (3 violations)']), ('chunks delivered per query', ['4.50'])]
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jinja2

from rag_eval.metrics.perquery import KIND_LABELS
from rag_eval.metrics.registry import IDENTITY_TABLE, LATENCY_STAGES
from rag_eval.reports.display import budget_note, flatten_config, fmt, lead_first, lead_of, measure
from rag_eval.reports.existing import resolution_rows
from rag_eval.reports.gatetext import chip_text
from rag_eval.reports.tables import verdict
from rag_eval.reports.templating import environment
from rag_eval.reports.traffic import figure_rows
from rag_eval.reports.verdict_words import LEGEND, rule_words

KEY_KINDS = tuple(str(kind) for kind in KIND_LABELS)
_AFTER = IDENTITY_TABLE.index("content_duplicate_rate_same_text") + 1  # then the content duplicates by key kind
IDENTITY_MEASURES = (
    *IDENTITY_TABLE[:_AFTER],
    *(f"content_duplicates:key_kind:{kind}" for kind in KEY_KINDS),
    *IDENTITY_TABLE[_AFTER:],
    "payload:chars_p50",
    "payload:chars_p95",
    "payload:chunks_delivered_mean",
)
_COUNTED = {"cap_compliance": "n_cap_violations", "cap_compliance_true": "n_true_cap_violations"}


def _env() -> jinja2.Environment:
    filters: dict[str, Callable[..., Any]] = {
        "num": _num, "pct": _pct, "md": md_text, "label": _label, "chip_text": chip_text,
    }  # fmt: skip
    return environment(html=False, filters=filters)


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


def _label(name: str) -> str:
    return measure(name).label


def identity_rows(summary: Mapping[str, Any], names: Sequence[str]) -> list[tuple[str, list[str]]]:
    """(label, value per config) of the evidence-identity table: a breakdown count a config lacks is 0,
    a cap compliance carries its count of violations."""
    flats = {n: flatten_config(summary["configs"][n]) for n in names}
    rows = []
    for name in IDENTITY_MEASURES:
        m = measure(name)
        default = 0 if name.startswith("content_duplicates:") else None
        values = [fmt(m, flats[n].get(name, default), grouping=False) for n in names]
        if name in _COUNTED:
            values = [f"{v} ({flats[n].get(_COUNTED[name])} violations)" for v, n in zip(values, names, strict=True)]
        rows.append((m.label, values))
    return rows


def render_markdown(
    summary: dict[str, Any], manifest: dict[str, Any], compare: Mapping[str, Any] | None = None
) -> str:
    """``report.md``: the verdict first (the gates of ``compare``, the comparison document, when given), then
    the configs, the measures and the provenance."""
    template = _env().get_template("report.md.j2")
    names = list(summary["configs"])
    return template.render(
        summary=summary,
        manifest=manifest,
        compare=compare,
        exit_code=compare.get("exit_code") if compare else None,
        verdict=verdict(summary, compare),
        legend=LEGEND,
        rule=rule_words(compare) if compare else "",
        names=names,
        identity=identity_rows(summary, names),
        stages=LATENCY_STAGES,
        collection_rows=resolution_rows(summary["resolution"]) if summary.get("resolution") else None,
        traffic_rows=figure_rows(summary) if summary.get("traffic") else None,
        budget=budget_note(summary),
        standard=lead_first(list(summary["configs"][names[0]].get("chunk") or {}), lead_of(manifest)),
    )
