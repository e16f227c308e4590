"""The per-query drill-down of the HTML report: which queries, their table rows, their details.

A query is ``improved``, ``degraded`` or ``unchanged`` for a candidate by the relevant chunks it delivered
against the baseline; past ``max_queries`` the most changed and the worst queries are kept; each relevant
chunk not delivered carries the stage that lost it and what took its place. The rules: docs/harness.md, "The
HTML report".

>>> stage_note("cap", n_hits=20)
'dropped by the per-document cap; kept from the same document:'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from rag_eval.metrics.measures import doc_of
from rag_eval.reports.display import loss_label, loss_order
from rag_eval.reports.rundata import ReportData

DEFAULT_MAX_QUERIES = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class QueryRow:
    """One line of the drill-down table (rendered without JavaScript)."""

    qid: str
    text: str
    judged: bool
    relevant: int
    delivered: tuple[int, ...]  # per config
    status: tuple[str, ...]  # per config ("" for the baseline)
    lost: tuple[tuple[str, ...], ...]  # per config: loss stages, pipeline order, distinct
    reasons: tuple[str, ...]  # why it was kept when the drill-down is cut: changed | worst | ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Drilldown:
    rows: tuple[QueryRow, ...]
    total: int
    max_queries: int
    stages: tuple[str, ...]
    data: dict[str, Any]  # the details, as JSON for the page's script

    @property
    def cut(self) -> bool:
        return len(self.rows) < self.total


def stage_note(stage: str, *, n_hits: int) -> str:
    if stage == "not_in_collection":
        return "evidence no row of the collection holds: it could not be retrieved by any config"
    if stage == "not_retrieved":
        return f"not among the {n_hits} hits of this config; the weakest hit that made it:"
    if stage == "dedup":
        return "dropped as a duplicate evidence key; kept under that key:"
    if stage == "cap":
        return "dropped by the per-document cap; kept from the same document:"
    if stage == "return_n":
        return "cut by return-n; the last block that made it:"
    if stage.startswith("projector"):
        return f"cut by the projector's {stage.removeprefix('projector_') or ''} budget".replace("  ", " ")
    return f"lost at stage {stage}"


def _took(stage: str, chunk: str, row: Mapping[str, Any]) -> list[str]:
    hits = list(row["hit_chunks"])
    members = list(row["member_chunks"])
    if stage == "not_retrieved":
        return hits[-1:]
    if stage == "dedup":
        keys = list(row["hit_keys"])
        mine = [keys[i] for i, c in enumerate(hits) if c == chunk]
        return [hits[keys.index(mine[0])]] if mine else []
    if stage == "cap":
        doc = doc_of(chunk)
        return [c for c, d in zip(members, row["member_doc_ids"], strict=True) if d == doc]
    if stage == "return_n" and len(row["member_block"]):
        last = max(row["member_block"])
        return [c for c, b in zip(members, row["member_block"], strict=True) if b == last]
    return []


def _highlights(chunks: set[str], spans: list[tuple[str, int, int]], texts: Mapping[str, Any]) -> dict[str, Any]:
    """Evidence spans inside each chunk, as offsets into the chunk's text."""
    out: dict[str, list[list[int]]] = {}
    for chunk in sorted(chunks):
        t = texts.get(chunk)
        if t is None:
            continue
        for doc, s, e in spans:
            if doc == t.doc_id and s < t.end and e > t.start:
                out.setdefault(chunk, []).append([max(s, t.start) - t.start, min(e, t.end) - t.start])
    return out


def _select(stats: dict[str, tuple[int, float, int]], order: Sequence[str], limit: int) -> dict[str, str]:
    """qid -> reason kept: half the budget to the most changed, the rest to the worst."""
    if len(order) <= limit:
        return {q: "" for q in order}
    position = {q: i for i, q in enumerate(order)}
    changed = sorted((q for q in order if stats[q][0] > 0), key=lambda q: (-stats[q][0], position[q]))
    kept: dict[str, str] = {q: "changed" for q in changed[: limit // 2]}
    worst = sorted((q for q in order if stats[q][2] > 0), key=lambda q: (stats[q][1], -stats[q][2], position[q]))
    for q in worst:
        if len(kept) >= limit:
            break
        kept.setdefault(q, "worst")
    for q in changed + list(order):
        if len(kept) >= limit:
            break
        kept.setdefault(q, "changed" if q in changed else "")
    return {q: kept[q] for q in order if q in kept}


class _KeyIndex:
    """Chunk key -> its position in ``data["keys"]``, numbered as first asked for: each key is written once."""

    def __init__(self) -> None:
        self.keys: dict[str, int] = {}

    def __call__(self, chunk: str) -> int:
        return self.keys.setdefault(str(chunk), len(self.keys))


def build_drilldown(run: ReportData, *, max_queries: int = DEFAULT_MAX_QUERIES) -> Drilldown:
    """The drill-down of the queries :func:`_select` keeps. ``run.per_query`` needs query_id, config,
    query_index, relevant_chunks and delivered_relevant for every row; the other columns are read
    for the kept queries only, through ``run.rows_of`` when given (else ``per_query`` has them)."""
    per_query, names, baseline, texts, spans = run.per_query, run.names, run.baseline, run.texts, run.spans
    rows_of = run.rows_of
    if max_queries < 1:
        raise ValueError("max_queries must be >= 1")
    bi = list(names).index(baseline)
    order, stats = _query_stats(per_query, names, bi)
    kept = _select(stats, order, max_queries)
    full = rows_of(list(kept)) if rows_of is not None else per_query[per_query["query_id"].isin(list(kept))]
    by_query: dict[str, dict[str, dict[str, Any]]] = {}
    for raw in full.to_dict("records"):
        row = {str(k): v for k, v in raw.items()}
        by_query.setdefault(row["query_id"], {})[row["config"]] = row
    text_rows = {str(t.chunk): t for t in texts.itertuples(index=False)} if texts is not None else {}
    span_of: dict[str, list[tuple[str, int, int]]] = {}
    if spans is not None:
        for sp in spans.to_dict("records"):
            span_of.setdefault(str(sp["query_id"]), []).append((str(sp["doc_id"]), int(sp["start"]), int(sp["end"])))
    kid = _KeyIndex()
    stages: set[str] = set()
    page = _Page(names=tuple(names), bi=bi, kid=kid, stages=stages, text_rows=text_rows)
    table_rows: list[QueryRow] = []
    details: dict[str, Any] = {}
    for q, reason in kept.items():
        details[q], line = _query(q, reason, by_query[q], span_of.get(q, []), page)
        table_rows.append(line)
    key_list = list(kid.keys)
    data = {
        "configs": list(names),
        "baseline": bi,
        "keys": key_list,
        # per key: [doc id, title, text], or null when the run has no text for it
        "texts": [
            [str(text_rows[c].doc_id), str(text_rows[c].title), str(text_rows[c].text)] if c in text_rows else None
            for c in key_list
        ],
        "texts_missing": texts is None,
        "stage_labels": {s: loss_label(s) for s in stages},
        "stage_notes": {s: stage_note(s, n_hits=-1).replace("-1", "{hits}") for s in stages},
        "queries": details,
    }
    return Drilldown(
        rows=tuple(table_rows),
        total=len(order),
        max_queries=max_queries,
        stages=tuple(sorted(stages, key=lambda s: (loss_order(s), s))),
        data=data,
    )


def _query_stats(
    per_query: pd.DataFrame, names: Sequence[str], bi: int
) -> tuple[list[str], dict[str, tuple[int, float, int]]]:
    """Every query in query order, and what :func:`_select` keeps them by: the largest change in relevant
    chunks delivered against the baseline (config ``bi``), the share delivered, the relevant chunks."""
    delivered_of: dict[str, dict[str, int]] = {}
    relevant_of: dict[str, int] = {}
    index: dict[str, int] = {}
    columns = [per_query[c].tolist() for c in ("query_id", "config", "query_index")]
    lengths = [per_query[c].map(len).tolist() for c in ("delivered_relevant", "relevant_chunks")]
    for q, config, position, got, rel in zip(*columns, *lengths, strict=True):
        delivered_of.setdefault(q, {})[config] = got
        relevant_of.setdefault(q, rel)
        index[q] = int(position)
    order = sorted(delivered_of, key=lambda q: (index[q], q))
    stats: dict[str, tuple[int, float, int]] = {}
    for q in order:
        got = [delivered_of[q].get(n, 0) for n in names]
        rel = relevant_of[q]
        change = max((abs(d - got[bi]) for d in got), default=0)
        share = sum(got) / (rel * len(names)) if rel else 1.0
        stats[q] = (change, share, rel)
    return order, stats


@dataclass(frozen=True, slots=True, kw_only=True)
class _Page:
    """What every kept query of one drill-down shares: the configs (the baseline's position ``bi``), the chunk
    keys' numbering, the loss stages met so far (gathered), the chunks' texts."""

    names: tuple[str, ...]
    bi: int
    kid: _KeyIndex
    stages: set[str]
    text_rows: Mapping[str, Any]


def _query(
    q: str, reason: str, rows: Mapping[str, Mapping[str, Any]], spans: list[tuple[str, int, int]], page: _Page
) -> tuple[dict[str, Any], QueryRow]:
    """One kept query: its details for the page's script and its line of the table."""
    names, bi, kid, stages, text_rows = page.names, page.bi, page.kid, page.stages, page.text_rows
    any_row = next(iter(rows.values()))
    relevant = [str(c) for c in any_row["relevant_chunks"]]
    delivered = tuple(len(rows[n]["delivered_relevant"]) if n in rows else 0 for n in names)
    status = tuple(
        "" if i == bi else ("improved" if d > delivered[bi] else "degraded" if d < delivered[bi] else "unchanged")
        for i, d in enumerate(delivered)
    )
    per_cfg: list[dict[str, Any] | None] = []
    lost_per_cfg: list[tuple[str, ...]] = []
    q_chunks: set[str] = set(relevant)
    for n in names:
        cfg_row = rows.get(n)
        detail = _config_detail(cfg_row, kid, q_chunks, stages) if cfg_row is not None else None
        per_cfg.append(detail)
        lost_per_cfg.append(tuple(sorted({s for _, s, _ in detail["lost"]}, key=loss_order)) if detail else ())
    details = {
        "text": str(any_row["query_text"]),
        "rel": [kid(c) for c in relevant],
        "hl": {kid(c): r for c, r in _highlights(q_chunks, spans, text_rows).items()},
        "cfg": per_cfg,
    }
    row = QueryRow(
        qid=q,
        text=str(any_row["query_text"]),
        judged=bool(any_row["judged"]),
        relevant=len(relevant),
        delivered=delivered,
        status=status,
        lost=tuple(lost_per_cfg),
        reasons=(reason,) if reason else (),
    )
    return details, row


def _config_detail(row: Mapping[str, Any], kid: _KeyIndex, q_chunks: set[str], stages: set[str]) -> dict[str, Any]:
    """What one config delivered for a query (its blocks and their members) and lost (each relevant chunk's
    stage and what took its place); the chunks shown go to ``q_chunks``, the stages to ``stages``."""
    blocks = []
    for rank, key, doc, score, chars in zip(
        row["returned_ranks"], row["returned_keys"], row["returned_doc_ids"], row["returned_scores"],
        row["returned_chars"], strict=True,
    ):  # fmt: skip
        members: list[Any] = []
        for c, k, b in zip(row["member_chunks"], row["member_keys"], row["member_block"], strict=True):
            if b == rank:
                q_chunks.add(str(c))
                # the row's own key only where it differs from the true chunk (legacy rows, copies)
                members.append(kid(c) if k == c else [kid(c), str(k)])
        blocks.append([str(key), str(doc), round(float(score), 4), int(rank), int(chars), members])
    lost: list[tuple[int, str, list[int]]] = []
    for chunk, stage in zip(row["lost_chunks"], row["lost_stages"], strict=True):
        took = _took(str(stage), str(chunk), row)
        q_chunks.update(took)
        lost.append((kid(chunk), str(stage), [kid(c) for c in took]))
        stages.add(str(stage))
    return {"blocks": blocks, "lost": lost, "hits": int(row["n_hits"])}
