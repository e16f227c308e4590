"""The label-free measures of a query log's queries: every measure that needs no label, and how each
config's payload differs from the baseline config's on the same query.

A query log's rows (``origin`` ``traffic``) are measured apart from a data set's, so adding a log never moves
a labelled measure; each measure that needs no label is measured on them again under the name
``traffic:<name>`` (:data:`rag_eval.metrics.registry.TRAFFIC`). Beside those, per query and config, against the
baseline config's payload on the same query (:mod:`rag_eval.traffic.overlap`, docs/traffic.md):

``traffic:changed``        1.0 when the delivered chunk list differs (the agent payload changed)
``traffic:jaccard``        Jaccard of the delivered chunk sets
``traffic:rbo``            rank-biased overlap of the delivered lists (p = 0.9, extrapolated)
``traffic:top_changed``    1.0 when the first delivered chunk differs
``traffic:empty``          1.0 when nothing was delivered
``traffic:multi_doc``      1.0 when two or more distinct chunks of one document were delivered
``traffic:requests``       how often the query occurs in the log; ``traffic:changed_requests`` the same where
                           the payload changed (a rate of the two weighs queries by their requests)

Chunks are compared by their evidence key as the row that carried them had it (``member_keys``): a legacy
block is compared chunk by chunk, so a merged block and the chunks it merged are comparable.

>>> rows = pd.DataFrame({"query_id": ["t1", "t1"], "config": ["base", "cand"], "origin": ["traffic"] * 2,
...     "occurrences": [3, 3], "member_keys": [["a#chunk-0", "a#chunk-1"], ["a#chunk-1"]],
...     "member_chunks": [["a#chunk-0", "a#chunk-1"], ["a#chunk-1"]]})
>>> v = overlap_values(rows, [{"name": "base", "baseline": True}, {"name": "cand"}])
>>> v[["config", "traffic:changed", "traffic:jaccard", "traffic:multi_doc", "traffic:changed_requests"]].values.tolist()
[['base', 0.0, 1.0, 1.0, 0.0], ['cand', 1.0, 0.5, 0.0, 3.0]]
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from rag_eval.metrics import perquery
from rag_eval.metrics.measures import SCALAR_COLUMNS, SUMMARY_COLUMNS, Rows, of_origin, query_values, summarize
from rag_eval.metrics.perquery import UNKNOWN_PREFIX, doc_of
from rag_eval.rundir.rows import TRAFFIC
from rag_eval.traffic.overlap import overlap_frame

PREFIX = "traffic:"
KEYS = ("query_id", "config", "judged")
OVERLAP_COLUMNS = ("query_id", "config", "occurrences", "member_keys", "member_chunks")
OVERLAP = ("changed", "jaccard", "rbo", "top_changed")
RBO_BINS = tuple(
    round(0.1 * i, 1) for i in range(11)
)  # the RBO histogram's edges: [0, 0.1), ..., [0.9, 1.0], 1.0 apart
# what a traffic summary keeps of a config's summary: the measures that need no label
SUMMARY_KEYS = (
    "queries", "duplicate_rate", "content_duplicate_rate", "content_duplicate_rate_copies",
    "content_duplicate_rate_same_text", "raw_duplicate_rate", "raw_content_duplicate_rate", "evidence_guard_1to1",
    "cap_checked", "cap_compliance", "n_cap_violations", "cap_compliance_true", "n_true_cap_violations",
    "max_chunks_per_document", "return_n_compliance", "payload", "latency_us", "qps_serial",
)  # fmt: skip

Source = Callable[[Sequence[str]], Rows]  # the run's rows, only the columns named, read again at each call


def baseline_of(configs: Sequence[Mapping[str, Any]]) -> str:
    """The config every other is compared with: the one marked baseline, else the first."""
    names = [str(c["name"]) for c in configs]
    return next((str(c["name"]) for c in configs if c.get("baseline")), names[0] if names else "")


def multi_chunk_document(chunks: Sequence[str]) -> bool:
    """Whether two or more distinct chunks of one document were delivered (a chunk no document is known for
    is its own document).

    >>> multi_chunk_document(["a#chunk-0", "b#chunk-0", "a#chunk-3"]), multi_chunk_document(["a#chunk-0"] * 2)
    (True, False)
    >>> multi_chunk_document(["unknown:1", "unknown:2"])
    False
    """
    docs = Counter(c if c.startswith(UNKNOWN_PREFIX) else doc_of(c) for c in set(chunks))
    return any(n >= 2 for n in docs.values())


def _traffic_batches(rows: Rows) -> Iterator[pa.Table]:
    return of_origin(rows, TRAFFIC, OVERLAP_COLUMNS)


def overlap_values(rows: Rows, configs: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per (query log query, config), in the rows' order: the overlap with the baseline config's
    payload on the same query (NaN where the baseline has no row for it) and the columns of the module's
    table."""
    ids: list[str] = []
    names: list[str] = []
    keys: list[list[str]] = []
    occurrences: list[float] = []
    multi: list[float] = []
    for batch in _traffic_batches(rows):
        ids += batch.column("query_id").to_pylist()
        names += batch.column("config").to_pylist()
        keys += [k or [] for k in batch.column("member_keys").to_pylist()]
        if "occurrences" in batch.column_names:
            occurrences += [float(n) if n is not None else 1.0 for n in batch.column("occurrences").to_pylist()]
        else:
            occurrences += [1.0] * batch.num_rows
        multi += [float(multi_chunk_document(c or [])) for c in batch.column("member_chunks").to_pylist()]
    baseline = baseline_of(configs)
    base_of = {q: k for q, c, k in zip(ids, names, keys, strict=True) if c == baseline}
    found = np.array([q in base_of for q in ids], dtype=bool)
    measured = overlap_frame([base_of.get(q, []) for q in ids], keys)
    counts = np.asarray(occurrences, dtype=float)
    frame = pd.DataFrame({"query_id": ids, "config": names})
    for name in OVERLAP:
        frame[PREFIX + name] = np.where(found, np.asarray(measured[name], dtype=float), np.nan)
    frame[PREFIX + "empty"] = np.array([0.0 if k else 1.0 for k in keys])
    frame[PREFIX + "multi_doc"] = np.asarray(multi, dtype=float)
    frame[PREFIX + "requests"] = counts
    frame[PREFIX + "changed_requests"] = counts * frame[PREFIX + "changed"].to_numpy()
    return frame


IDENTICAL = {"changed": 0.0, "jaccard": 1.0, "rbo": 1.0, "top_changed": 0.0}  # a payload against itself


def payloads_of(rows: Rows, config: str) -> dict[str, list[str]]:
    """The delivered chunk list of every query log query under ``config``, by query id."""
    out: dict[str, list[str]] = {}
    for batch in _traffic_batches(rows):
        mine = [i for i, c in enumerate(batch.column("config").to_pylist()) if c == config]
        ids, keys = batch.column("query_id").to_pylist(), batch.column("member_keys").to_pylist()
        out.update({ids[i]: keys[i] or [] for i in mine})
    return out


def against_payloads(
    baseline: pd.DataFrame, candidate: pd.DataFrame, payloads: tuple[Mapping[str, list[str]], Mapping[str, list[str]]]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two sides' per-query values (indexed by query id) with the overlap columns measured between these two
    payloads (``payloads``: the baseline side's and the candidate side's, by query id) instead of against each
    run's own baseline config: a comparison with another run's config (a nightly against the accepted night)
    says how many payloads changed since then. The baseline side reads as a payload against itself."""
    base_keys, cand_keys = payloads
    ids = [str(q) for q in candidate.index]
    known = np.array([q in base_keys and q in cand_keys for q in ids], dtype=bool)
    measured = overlap_frame([base_keys.get(q, []) for q in ids], [cand_keys.get(q, []) for q in ids])
    cand, base = candidate.copy(), baseline.copy()
    for name in OVERLAP:
        cand[PREFIX + name] = np.where(known, np.asarray(measured[name], dtype=float), np.nan)
        base[PREFIX + name] = np.where(known, IDENTICAL[name], np.nan)
    requests = cand[PREFIX + "requests"].to_numpy(dtype=float) if PREFIX + "requests" in cand else np.ones(len(ids))
    cand[PREFIX + "changed_requests"] = requests * cand[PREFIX + "changed"].to_numpy(dtype=float)
    base[PREFIX + "changed_requests"] = np.where(known, 0.0, np.nan)
    base[PREFIX + "requests"] = np.where(known, requests, np.nan)
    return base, cand


def traffic_values(source: Source, *, configs: Sequence[Mapping[str, Any]], cutoffs: Sequence[int]) -> pd.DataFrame:
    """Every per-query value a comparison pairs on, for the query log's queries: the values of
    :func:`~rag_eval.metrics.measures.query_values` under ``traffic:`` names, and :func:`overlap_values`."""
    wanted = (*perquery.COLUMNS, *SCALAR_COLUMNS, "origin")
    values = query_values(source(wanted), configs=configs, cutoffs=cutoffs, origin=TRAFFIC)
    values = values.rename(columns={c: PREFIX + c for c in values.columns if c not in KEYS})
    overlap = overlap_values(source((*OVERLAP_COLUMNS, "origin")), configs)
    return values.merge(overlap, on=["query_id", "config"], how="left")


def traffic_summary(summary: Mapping[str, Any], overlap: pd.DataFrame) -> dict[str, Any]:
    """A config's traffic summary: the label-free part of its summary over the query log's queries, and the
    means of its overlap with the baseline (``overlap``: its rows of :func:`overlap_values`)."""
    out: dict[str, Any] = {key: summary[key] for key in SUMMARY_KEYS if key in summary}
    requests = float(overlap[PREFIX + "requests"].sum())
    out.update(
        {
            "payload_changed": _mean(overlap[PREFIX + "changed"]),
            "requests_changed": float(overlap[PREFIX + "changed_requests"].sum()) / requests if requests else math.nan,
            "jaccard": _mean(overlap[PREFIX + "jaccard"]),
            "rbo": _mean(overlap[PREFIX + "rbo"]),
            "top_changed": _mean(overlap[PREFIX + "top_changed"]),
            "empty_payloads": _mean(overlap[PREFIX + "empty"]),
            "multi_chunk_payloads": _mean(overlap[PREFIX + "multi_doc"]),
            "requests": int(requests),
            "rbo_bins": rbo_histogram(overlap[PREFIX + "rbo"].to_numpy(dtype=float)),
        }
    )
    return out


def rbo_histogram(values: np.ndarray[Any, Any]) -> list[int]:
    """How many queries have their RBO in each tenth, [0, 0.1) to [0.9, 1.0), then exactly 1.0 (identical
    payloads) apart; NaN (no baseline row) is not counted.

    >>> rbo_histogram(np.array([0.0, 0.05, 0.95, 1.0, 1.0, np.nan]))
    [2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]
    """
    defined = values[~np.isnan(values)]
    identical = int((defined >= 1.0).sum())
    tenths = np.minimum((defined[defined < 1.0] * 10).astype(int), 9)
    return [*np.bincount(tenths, minlength=10).tolist(), identical]


def _mean(values: pd.Series) -> float:
    defined = values.dropna()
    return float(defined.mean()) if len(defined) else math.nan


def summarize_traffic(
    source: Source, *, configs: Sequence[Mapping[str, Any]], cutoffs: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """Every config's traffic summary (:func:`traffic_summary`), from the run's rows read twice."""
    measured, _ = summarize(source(SUMMARY_COLUMNS), configs=configs, cutoffs=cutoffs, origin=TRAFFIC)
    overlap = overlap_values(source((*OVERLAP_COLUMNS, "origin")), configs)
    by_config = {name: part for name, part in overlap.groupby("config", sort=False)}
    empty = overlap.iloc[0:0]
    return {name: traffic_summary(s, by_config.get(name, empty)) for name, s in measured.items()}
