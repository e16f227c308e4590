"""What a reader sees of a collection built elsewhere: ``rag-eval inspect`` and the resolution report.

Plain data in, lines of text (or label/value rows) out; the console prints them, the Markdown and HTML
reports lay them out. User text (field names, sample values) is returned as written: whoever prints it
escapes it for its medium.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rag_eval.search.milvus.existing import CollectionInfo
from rag_eval.search.milvus.suggest import Suggestion

SAMPLE_CHARS = 80  # characters of a sample value shown


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return text if len(text) <= SAMPLE_CHARS else f"{text[: SAMPLE_CHARS - 1]}… ({len(text):,} characters)"


def inspect_lines(
    info: CollectionInfo,
    *,
    shown_uri: str,
    backend: str,
    samples: Sequence[Mapping[str, Any]] | None,
    suggestion: Suggestion | None,
    load_default: bool,
) -> list[str]:
    """``rag-eval inspect``: the schema, the index, rows and load state, a few rows, a suggested table.

    ``samples`` and ``suggestion`` are None when the collection is not loaded (a query needs it loaded).
    """
    lines = [f"collection {info.name} at {shown_uri} ({backend})"]
    if suggestion is not None:
        lines.append(f"  looks like: {suggestion.looks_like}")
    rows = "unknown" if info.rows < 0 else f"{info.rows:,}"
    parts = ", ".join(info.partitions)
    lines.append(f"  rows: {rows}; load state: {info.load_state or 'unknown'}; partitions: {parts}")
    lines.append("  fields:")
    width = max((len(f.name) for f in info.fields), default=4)
    for f in info.fields:
        notes = []
        if f.primary:
            notes.append("primary key" + (" (auto id)" if f.auto_id else ""))
        if "dim" in f.params:
            notes.append(f"dim {f.params['dim']}")
        elif "max_length" in f.params:
            notes.append(f"max length {f.params['max_length']}")
        if f.nullable:
            notes.append("nullable")
        index = info.index_of(f.name)
        if index is not None:
            params = f" {json.dumps(dict(index.params), default=str)}" if index.params else ""
            notes.append(f"index {index.index_type}, metric {index.metric}{params}")
        lines.append(f"    {f.name:<{width}}  {f.type}" + (f"  ({'; '.join(notes)})" if notes else ""))
    lines.append(f"  dynamic fields: {'on' if info.dynamic else 'off'}")
    if info.functions:
        lines.append(f"  functions: {', '.join(info.functions)}")
    if samples is None:
        lines.append("  not loaded: sample rows and a suggested table need it loaded (--load; loading changes no data)")
        return lines
    lines.append(f"  sample rows ({len(samples)}):")
    for row in samples:
        lines.append("    " + "  ".join(f"{k}={_short(v)}" for k, v in row.items()))
    if suggestion is not None:
        lines.append("  suggested [collection] table (check it, and the notes):")
        lines.extend("    " + line for line in suggestion.toml(info.name, load=load_default).splitlines())
        lines.extend(f"  note: {note}" for note in suggestion.notes)
    return lines


HOW_LABELS = {
    "offsets": "by their stored offsets",
    "exact": "exactly",
    "normalised": "case and whitespace folded",
    "fuzzy": "fuzzily",
    "unresolved": "not at all",
}


def drift_text(report: Mapping[str, Any]) -> str | None:
    """How the labels moved since the collection's previous resolution (a re-ingest), or None.

    >>> drift_text({"label_drift": {"added": 3, "removed": 1, "queries_changed": 2, "labels_before": 40,
    ...                             "labels_after": 42}})
    '3 added, 1 removed; 2 queries changed (40 -> 42 labels)'
    """
    drift = report.get("label_drift")
    if not drift:
        return None
    return (f"{drift['added']:,} added, {drift['removed']:,} removed; {drift['queries_changed']:,} queries changed "
            f"({drift['labels_before']:,} -> {drift['labels_after']:,} labels)")  # fmt: skip


def resolution_rows(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The resolution report as (label in words, value) rows, for report.md and report.html."""
    rows_read = int(report.get("rows", 0))
    located = report.get("located", {})
    out = [
        ("collection", f"{report.get('collection')} (fingerprint {report.get('fingerprint')})"),
        ("rows read (labelled documents, and rows without a doc id)", f"{rows_read:,}"),
    ]
    for how, label in HOW_LABELS.items():
        out.append((f"rows located {label}", f"{int(located.get(how, 0)):,}"))
    share = float(report.get("unresolved_share") or 0.0)
    out.append(("rows not located (share; allowed)", f"{share:.1%}; {float(report.get('max_unresolved', 0)):.1%}"))
    found, labelled = report.get("labelled_documents_found", 0), report.get("labelled_documents", 0)
    missing = report.get("labelled_documents_missing") or []
    shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10:,} more" if len(missing) > 10 else "")
    out.append(("labelled documents found in the collection", f"{found:,} of {labelled:,}"))
    if missing:
        out.append(("labelled documents missing", shown))
    lost, spans = report.get("evidence_spans_uncovered", 0), report.get("evidence_spans", 0)
    out.append(("evidence spans no row covers (relevant, never retrievable)", f"{lost:,} of {spans:,}"))
    out.append(("rows copying another row's text and place", f"{int(report.get('rows_copying_another', 0)):,}"))
    out.append(("rows found in another document than their stored doc id",
                f"{int(report.get('rows_in_another_document', 0)):,}"))  # fmt: skip
    out.append(("rows whose text is in several places (placed by the rule)",
                f"{int(report.get('rows_placed_by_guess', 0)):,}"))  # fmt: skip
    out.append(("rows whose stored offsets disagree with their text",
                f"{int(report.get('rows_with_offsets_that_disagree', 0)):,}"))  # fmt: skip
    fit = report.get("embedder_fit")
    if fit and not fit.get("checked", True):
        out.append(("the embedder's self-retrieval (the fit check)", f"not checked: {fit['why']}"))
    elif fit:
        out.append(("the embedder's self-retrieval (sampled rows among their own first hits; refused under)",
                    f"{fit['rows_found_themselves']:,} of {fit['rows_sampled']:,} in the first {fit['k']} "
                    f"({fit['self_retrieval_rate']:.0%}; {fit['fit_min']:.0%}) with {fit['model_id']}"))  # fmt: skip
    moved = drift_text(report)
    if moved is not None:
        out.append(("labels moved since the previous resolution (a re-ingest)", moved))
    elif report.get("from_cache"):
        out.append(("labels", "read back: the collection is unchanged since they were resolved"))
    return out
