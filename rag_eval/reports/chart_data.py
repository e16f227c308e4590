"""What the charts show, taken from the run: intervals, sweeps, stage losses, the trend.

The interval of each config's same-document multi-chunk recall is a 95% percentile bootstrap
over queries (``scipy.stats.bootstrap``, 2,000 resamples, fixed seed): the pairs of one query
are resampled together, since they share a retrieval. It describes one config; whether two
configs differ is the comparison's business (``compare.json``). It is scipy's bootstrap, not the
comparison's (:mod:`rag_eval.compare.bootstrap`): that one computes intervals of paired differences between
two configs on shared units, while this is the level of one config, shown and never gated.

>>> frame = pd.DataFrame({"config": ["a", "a"], "relevant_chunks": [["d#chunk-0", "d#chunk-1"]] * 2,
...                       "delivered_relevant": [["d#chunk-0"], ["d#chunk-0", "d#chunk-1"]]})
>>> recall_interval(frame)[0]
0.75
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from rag_eval.metrics.measures import same_doc_pairs_of_row
from rag_eval.metrics.registry import CHART_MEASURE
from rag_eval.reports import charts
from rag_eval.reports.display import Measure, flatten_config, measure
from rag_eval.reports.loadtest import curve_chart
from rag_eval.reports.rundata import TIME_COLUMNS, ReportData

SWEEP_KEYS = {
    "rag.max-chunks-per-document": "max chunks per document (cap)",
    "rag.retrieve-k": "retrieve-k",
    "rag.return-n": "return-n",
}
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240611


def recall_interval(rows: pd.DataFrame) -> tuple[float, float, float]:
    """(recall, low, high) of same-document multi-chunk recall over ``rows`` (one config)."""
    sums, counts = [], []
    for raw in rows.to_dict("records"):
        pairs = same_doc_pairs_of_row({str(k): v for k, v in raw.items()}, None)
        if pairs:
            sums.append(sum(p[3] for p in pairs))
            counts.append(len(pairs))
    if not counts:
        return math.nan, math.nan, math.nan
    s, c = np.asarray(sums, dtype=float), np.asarray(counts, dtype=float)
    value = float(s.sum() / c.sum())
    if len(counts) < 2 or np.all(s / c == s[0] / c[0]):
        return value, value, value

    def ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return np.asarray(a.sum(axis=axis) / b.sum(axis=axis))

    res = stats.bootstrap(
        (s, c),
        ratio,
        paired=True,
        vectorized=True,
        n_resamples=BOOTSTRAP_RESAMPLES,
        confidence_level=0.95,
        method="percentile",
        rng=np.random.default_rng(BOOTSTRAP_SEED),
        batch=None if len(s) <= 1000 else max(1, 2_000_000 // len(s)),  # bounded memory at 100,000 queries
    )
    return value, float(res.confidence_interval.low), float(res.confidence_interval.high)


def recall_chart(data: ReportData) -> str | None:
    values, lows, highs = [], [], []
    for name in data.names:
        v, lo, hi = recall_interval(data.per_query[data.per_query["config"] == name])
        values.append(v)
        lows.append(lo)
        highs.append(hi)
    return charts.bar_with_intervals(
        list(zip(data.names, values, lows, highs, strict=True)),
        title="95% bootstrap interval over queries (grey: the baseline)",
        xlabel="share of the relevant chunks delivered, per (query, document) pair with >= 2 relevant chunks",
        highlight=data.baseline,
    )


def sweep_family(configs: Sequence[Mapping[str, Any]]) -> tuple[str, list[Mapping[str, Any]]] | None:
    """(key, configs in order) when the D1-D5 configs of one search mode differ in exactly one
    of cap, retrieve-k or return-n (and nothing else)."""
    evidence = [c for c in configs if c.get("pipeline") == "evidence"]
    if len(evidence) < 2 or len({c.get("mode") for c in evidence}) != 1:
        return None
    props = [dict(c.get("rag") or {}) for c in evidence]
    keys = {k for p in props for k in p}
    varying = [k for k in keys if len({p.get(k) for p in props}) > 1]
    if len(varying) != 1 or varying[0] not in SWEEP_KEYS:
        return None
    key = varying[0]
    try:
        ordered_configs = sorted(evidence, key=lambda c: float(dict(c["rag"])[key]))
    except (KeyError, ValueError):
        return None
    if len({dict(c["rag"])[key] for c in ordered_configs}) != len(ordered_configs):
        return None
    return key, ordered_configs


def sweep_chart(data: ReportData) -> str | None:
    family = sweep_family(data.manifest.get("configs") or [])
    if family is None:
        return None
    key, configs = family
    cutoffs = data.summary.get("cutoffs") or [5]
    k = 5 if 5 in cutoffs else cutoffs[-1]
    measures = {m: measure(m).label for m in ("same_doc_multi_chunk_recall", f"chunk:R@{k}", f"chunk:nDCG@{k}")}
    flats = {n: flatten_config(c) for n, c in data.summary["configs"].items()}
    xs = [float(dict(c["rag"])[key]) for c in configs]
    series = {
        label: [charts.as_float(flats.get(str(c["name"]), {}).get(m)) for c in configs] for m, label in measures.items()
    }
    names_in = {str(c["name"]) for c in configs}
    reference = None
    if data.baseline not in names_in and data.baseline in flats:
        reference = {label: charts.as_float(flats[data.baseline].get(m)) for m, label in measures.items()}
    return charts.sweep(SWEEP_KEYS[key], xs, series, reference=reference, reference_name=data.baseline)


def waterfall_chart(data: ReportData) -> str | None:
    pq = data.per_query
    relevant = {n: int(pq.loc[pq["config"] == n, "relevant_chunks"].map(len).sum()) for n in data.names}
    losses = {n: dict(data.summary["configs"][n].get("stage_losses") or {}) for n in data.names}
    return charts.waterfall(data.names, relevant, losses)


def delivered_check(data: ReportData) -> list[str]:
    """Configs whose relevant - losses != delivered (a sign the run's files disagree)."""
    pq = data.per_query
    bad = []
    for n in data.names:
        rows = pq[pq["config"] == n]
        rel = int(rows["relevant_chunks"].map(len).sum())
        got = int(rows["delivered_relevant"].map(len).sum())
        lost = sum(int(v) for v in (data.summary["configs"][n].get("stage_losses") or {}).values())
        if rel - lost != got:
            bad.append(n)
    return bad


def trend_chart(data: ReportData) -> str | None:
    if data.history is None:
        return None
    time_column = next(c for c in TIME_COLUMNS if c in data.history.columns)
    names = ("same_doc_multi_chunk_recall", "duplicate_rate", "chunk:nDCG@5", "latency:postprocess:p95")
    measures = [(name, _axis_label(measure(name))) for name in names]
    return charts.history_chart(data.history, time_column, measures)


def _axis_label(m: Measure) -> str:
    """A chart's name of a measure: its label, with the unit of a timing (drawn in microseconds)."""
    return f"{m.label} (µs)" if m.unit == "us" else m.label


def _title(name: str) -> str:
    label = measure(name).label
    return label[:1].upper() + label[1:]


def all_charts(data: ReportData) -> list[tuple[str, str]]:
    """(title, svg) of every chart the run has data for, in reading order."""
    out = []
    for title, make in (
        (_title(CHART_MEASURE), recall_chart),
        ("Sweep", sweep_chart),
        ("Where relevant chunks were lost", waterfall_chart),
        ("Latency per stage", lambda d: charts.latency(d.per_query, d.names)),
        ("Nightly trend", trend_chart),
        ("Latency under load", lambda d: curve_chart(d.load) if d.load is not None else None),
    ):
        svg = make(data)
        if svg:
            out.append((title, svg))
    return out
