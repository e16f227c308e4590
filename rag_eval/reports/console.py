"""The run's measures as the console prints them: a row per measure, a column per config.

Labels and decimals are the registry's (:mod:`rag_eval.metrics.registry`); a value the summary
lacks prints as ``-``. The CLI puts the rows into a rich table.

>>> summary = {"cutoffs": [5], "configs": {"a": {"duplicate_rate": 0.05, "cap_checked": 3,
...            "cap_checked_source": "production", "chunk": {"nDCG@5": 0.5}, "latency_us": {"search": {"p50": 1500.0}},
...            "stage_losses": {"cap": 2}}}}
>>> [row for row in summary_table(summary) if row[1] != ["-"]]  # doctest: +NORMALIZE_WHITESPACE
[('duplicate rate (evidence key)', ['5.0%']), ('cap checked against', ['3 (production)']),
 ('chunk nDCG@5', ['0.500']), ('search latency p50', ['1.50 ms']), ('relevant chunks lost: cap', ['2'])]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_eval.metrics.registry import READING_ORDER
from rag_eval.reports.display import flatten_config, fmt, measure

__all__ = ["MEASURES", "console_measures", "summary_table"]

MEASURES = (
    "same_doc_multi_chunk_recall",
    "same_doc_multi_chunk_recall_cap_aware",
    "same_doc_pairs",
    "duplicate_rate",
    "content_duplicate_rate",
    "content_duplicate_rate_copies",
    "content_duplicate_rate_same_text",
    "raw_duplicate_rate",
    "raw_content_duplicate_rate",
    "evidence_guard_1to1",
    "cap_checked",
    "cap_compliance",
    "cap_compliance_true",
    "return_n_compliance",
)  # then the standard measures at one cutoff, payload size, search and post-process latency, losses


def console_measures(k: int) -> list[str]:
    """The measures of the console table, in order, with the standard ones at cutoff ``k``.

    >>> console_measures(5)[len(MEASURES):]  # doctest: +NORMALIZE_WHITESPACE
    ['chunk:nDCG@5', 'chunk:R@5', 'chunk:P@5', 'chunk:RR', 'chunk:Success@5', 'doc:nDCG@5', 'payload:chars_p50',
     'payload:chars_p95', 'latency:search:p50', 'latency:search:p95', 'latency:postprocess:p50']
    """
    standard = [f"chunk:{family}" if family == "RR" else f"chunk:{family}@{k}" for family in READING_ORDER]
    return [
        *MEASURES,
        *standard,
        f"doc:nDCG@{k}",
        "payload:chars_p50",
        "payload:chars_p95",
        "latency:search:p50",
        "latency:search:p95",
        "latency:postprocess:p50",
    ]


def _cap_label(cfg: Mapping[str, Any]) -> str:
    cap = cfg.get("cap_checked")
    if cap is None:
        return "none"
    return str(cap) if cfg.get("cap_checked_source") == "config" else f"{cap} (production)"


def summary_table(summary: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """(measure label, value per config) for printing: the measures of :func:`console_measures` at
    cutoff 5 (else the run's last), then the relevant chunks lost at each stage."""
    configs: Mapping[str, Mapping[str, Any]] = summary["configs"]
    names: Sequence[str] = list(configs)
    cutoffs = summary["cutoffs"]
    flats = {n: flatten_config(configs[n]) for n in names}
    rows: list[tuple[str, list[str]]] = []
    for name in console_measures(5 if 5 in cutoffs else cutoffs[-1]):
        m = measure(name)
        if name == "cap_checked":  # where the cap came from says as much as the cap
            values = [_cap_label(configs[n]) for n in names]
        else:
            values = [fmt(m, flats[n].get(name), none="-", grouping=False) for n in names]
        rows.append((m.label, values))
    for stage in sorted({s for n in names for s in configs[n].get("stage_losses", {})}):
        counts = [str(configs[n].get("stage_losses", {}).get(stage, 0)) for n in names]
        rows.append((measure(f"lost:{stage}").label, counts))
    return rows
