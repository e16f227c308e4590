"""The report's traffic section: how many payloads of a query log's queries change against the baseline
config and how much, the invariants on those queries, and the queries that moved most, both payloads side
by side.

Query texts can be personal data: with ``show_text = false`` in ``[traffic]`` a query is named by a hash of its
text in report.html and report.md (the run directory keeps the text the replay needs; docs/guarantees.md).

>>> shown_query("why is the replica behind", show=False)
'query #62e8f1e1f64f'
>>> shown_query("why is the replica behind", show=True)
'why is the replica behind'
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rag_eval.metrics.labelfree import PREFIX, RBO_BINS, baseline_of, overlap_values
from rag_eval.reports.rundata import ReportData
from rag_eval.rundir.reader import PER_QUERY, read_parquet
from rag_eval.rundir.rows import TRAFFIC

MOST_CHANGED = 10  # queries shown per candidate
EXCERPT = 160  # characters of a chunk's text shown beside its key
ROW_COLUMNS = ("query_id", "config", "origin", "query_text", "occurrences", "member_keys", "member_chunks")
# the figures of the section's table, in reading order: (summary key under "traffic", words, kind)
FIGURES: tuple[tuple[str, str, str], ...] = (
    ("payload_changed", "payloads changed (queries)", "share"),
    ("requests_changed", "payloads changed (requests)", "share"),
    ("rbo", "rank-biased overlap, mean", "score"),
    ("jaccard", "Jaccard, mean", "score"),
    ("top_changed", "top chunk changed", "share"),
    ("multi_chunk_payloads", "payloads with >= 2 chunks of one document", "share"),
    ("empty_payloads", "empty payloads", "share"),
    ("duplicate_rate", "duplicate rate (evidence key)", "share"),
    ("content_duplicate_rate", "duplicate rate (content)", "share"),
    ("cap_compliance", "cap compliance (stored doc ids)", "share"),
    ("return_n_compliance", "return-n compliance", "share"),
    ("evidence_guard_1to1", "chunk references 1:1 with an excerpt", "share"),
)


def shown_query(text: str, *, show: bool) -> str:
    """A query as the reports show it: its text, or a hash of it when texts are kept out."""
    return text if show else f"query #{hashlib.sha256(text.encode()).hexdigest()[:12]}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Payload:
    chunks: list[tuple[str, str]]  # (chunk key, the first characters of its text)


@dataclass(frozen=True, slots=True, kw_only=True)
class Moved:
    """One query that moved: as shown, how often it occurs, its overlap, and both payloads."""

    query: str
    occurrences: int
    rbo: float
    jaccard: float
    baseline: Payload
    candidate: Payload


@dataclass(frozen=True, slots=True, kw_only=True)
class TrafficSection:
    source: str  # the log's file name and format
    queries: int
    requests: int
    skipped: dict[str, int]
    show_text: bool
    baseline: str
    rows: list[tuple[str, list[str]]]  # (figure, a value per config)
    most_changed: dict[str, list[Moved]]  # candidate -> queries
    chart: str | None


def _fmt(value: Any, kind: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100 * float(value):.1f}%" if kind == "share" else f"{float(value):.3f}"


def traffic_section(data: ReportData, *, limit: int = MOST_CHANGED) -> TrafficSection | None:
    """The section of a run that replayed a query log (None for a run that did not)."""
    doc = data.summary.get("traffic")
    if not isinstance(doc, Mapping):
        return None
    names = data.names
    per_config = {n: data.summary["configs"][n].get("traffic") or {} for n in names}
    configs = data.manifest.get("configs") or [{"name": n, "baseline": n == data.baseline} for n in names]
    baseline = baseline_of(configs)
    show = bool(doc.get("show_text", True))
    return TrafficSection(
        source=f"{doc.get('file', '')} ({doc.get('format', '')})",
        queries=int(doc.get("queries", 0)),
        requests=int(doc.get("requests", 0)),
        skipped={str(k): int(v) for k, v in (doc.get("skipped") or {}).items() if v},
        show_text=show,
        baseline=baseline,
        rows=figure_rows(data.summary),
        most_changed=most_changed(data, configs, limit=limit, show=show),
        chart=rbo_chart({n: per_config[n].get("rbo_bins") or [] for n in names if n != baseline}),
    )


def figure_rows(summary: Mapping[str, Any]) -> list[tuple[str, list[str]]]:
    """The section's table: (figure, a value per config), from the summary alone (report.md shows it too)."""
    names = list(summary["configs"])
    per_config = {n: summary["configs"][n].get("traffic") or {} for n in names}
    rows = [(words, [_fmt(per_config[n].get(key), kind) for n in names]) for key, words, kind in FIGURES]
    rows.append(
        (
            "payload characters p50 / p95",
            [
                f"{_fmt_int(per_config[n].get('payload', {}).get('chars_p50'))} / "
                f"{_fmt_int(per_config[n].get('payload', {}).get('chars_p95'))}"
                for n in names
            ],
        )
    )
    rows.append(
        (
            "end to end latency p50",
            [f"{_fmt_int(per_config[n].get('latency_us', {}).get('e2e', {}).get('p50'))} µs" for n in names],
        )
    )
    return rows  # fmt: skip


def _fmt_int(value: Any) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{float(value):,.0f}"


def most_changed(
    data: ReportData, configs: Sequence[Mapping[str, Any]], *, limit: int, show: bool
) -> dict[str, list[Moved]]:
    """Per candidate, the ``limit`` queries whose payload moved most from the baseline's: lowest RBO first,
    then the most frequent, then by id (a total order)."""
    frame = read_parquet(data.dir / PER_QUERY, ROW_COLUMNS)
    if "origin" not in frame.columns:
        return {}
    frame = frame[frame["origin"] == TRAFFIC]
    if frame.empty:
        return {}
    over = overlap_values(frame, configs)
    frame = frame.reset_index(drop=True).join(over[[PREFIX + "rbo", PREFIX + "jaccard"]])
    texts = _texts(data)
    baseline = baseline_of(configs)
    base_rows = frame[frame["config"] == baseline].set_index("query_id")
    out: dict[str, list[Moved]] = {}
    for name in [str(c["name"]) for c in configs if str(c["name"]) != baseline]:
        mine = frame[(frame["config"] == name) & frame[PREFIX + "rbo"].notna()]
        mine = mine.assign(_order=-mine["occurrences"].fillna(1)).sort_values(
            [PREFIX + "rbo", "_order", "query_id"], kind="stable"
        )
        moved = mine[mine[PREFIX + "rbo"] < 1.0].head(limit)
        out[name] = [
            Moved(
                query=shown_query(str(r["query_text"]), show=show),
                occurrences=int(r["occurrences"]) if r["occurrences"] == r["occurrences"] else 1,
                rbo=float(r[PREFIX + "rbo"]),
                jaccard=float(r[PREFIX + "jaccard"]),
                baseline=_payload(base_rows.loc[r["query_id"]], texts),
                candidate=_payload(r, texts),
            )
            for _, r in moved.iterrows()
        ]
    return out


def _texts(data: ReportData) -> dict[str, str]:
    if data.texts is None or data.texts.empty:
        return {}
    return dict(zip(data.texts["chunk"].astype(str), data.texts["text"].astype(str), strict=True))


def _payload(row: Any, texts: Mapping[str, str]) -> Payload:
    keys = list(row["member_keys"] if row["member_keys"] is not None else [])
    chunks = list(row["member_chunks"] if row["member_chunks"] is not None else [])
    return Payload(chunks=[(k, _excerpt(texts.get(c, ""))) for k, c in zip(keys, chunks, strict=True)])


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT else flat[: EXCERPT - 1] + "…"


def rbo_chart(bins: Mapping[str, Sequence[int]]) -> str | None:
    """The distribution of RBO with the baseline, a bar per tenth and one for identical payloads, per
    candidate (queries in each)."""
    series = {name: list(b) for name, b in bins.items() if b and sum(b)}
    if not series:
        return None
    labels = [f"{lo:.1f}–{lo + 0.1:.1f}" for lo in RBO_BINS[:10]] + ["identical"]
    shares = {name: (np.asarray(b, dtype=float) / sum(b)).tolist() for name, b in series.items()}
    from rag_eval.reports import charts  # matplotlib: imported only when a chart is drawn

    return charts.grouped_bars(labels, shares, title="Rank-biased overlap with the baseline's payload",
                               ylabel="share of queries")  # fmt: skip
