"""Per-query measures and their aggregation, read from the per-query table only.

Standard measures (trec_eval semantics, relevance grade >= 1 is relevant), at chunk
level over the delivered chunks in payload order and at document level over the
delivered documents in order of first delivery:

``P@k``        relevant in the first k / k
``R@k``        relevant in the first k / relevant
``nDCG@k``     graded gains, log2(rank + 1) discount, ideal from the qrels
``RR``         1 / rank of the first relevant
``Success@k``  1 when a relevant item is in the first k

Only judged queries (at least one relevant item) count for these; a judged query with an
empty payload scores 0. The project's own measures are documented in docs/measures.md.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.core.identity import key_kind


def first_occurrences(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def doc_of(chunk_key: str) -> str:
    return chunk_key.rsplit("#chunk-", 1)[0]


def chunk_ranking(row: Mapping[str, Any]) -> list[str]:
    return first_occurrences(row["member_chunks"])


def doc_ranking(row: Mapping[str, Any]) -> list[str]:
    return first_occurrences(doc_of(c) for c in row["member_chunks"] if not c.startswith("unknown:"))


def standard_measures(ranking: Sequence[str], qrels: Mapping[str, int], cutoffs: Sequence[int]) -> dict[str, float]:
    """P, R, nDCG, Success at each cutoff, and RR, for one query."""
    relevant = {k for k, g in qrels.items() if g >= 1}
    out: dict[str, float] = {}
    gains = [float(qrels.get(item, 0)) if qrels.get(item, 0) >= 1 else 0.0 for item in ranking]
    ideal = sorted((float(g) for g in qrels.values() if g >= 1), reverse=True)
    for k in cutoffs:
        top = ranking[:k]
        hits = sum(1 for item in top if item in relevant)
        out[f"P@{k}"] = hits / k
        out[f"R@{k}"] = hits / len(relevant) if relevant else 0.0
        out[f"Success@{k}"] = 1.0 if hits else 0.0
        dcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains[:k]))
        idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal[:k]))
        out[f"nDCG@{k}"] = dcg / idcg if idcg > 0 else 0.0
    rr = 0.0
    for i, item in enumerate(ranking, start=1):
        if item in relevant:
            rr = 1.0 / i
            break
    out["RR"] = rr
    return out


def measure_names(cutoffs: Sequence[int]) -> list[str]:
    names: list[str] = []
    for prefix in ("P", "R", "nDCG", "Success"):
        names.extend(f"{prefix}@{k}" for k in cutoffs)
    return [*names, "RR"]


def same_doc_pairs(row: Mapping[str, Any], cap: int | None) -> list[tuple[str, int, int, float, float]]:
    """(doc, relevant, delivered, recall, cap-aware recall) for each document with >= 2
    relevant chunks for this query."""
    per_doc: dict[str, list[str]] = {}
    for chunk in row["relevant_chunks"]:
        per_doc.setdefault(doc_of(chunk), []).append(chunk)
    delivered = set(row["delivered_relevant"])
    out = []
    for doc, chunks in sorted(per_doc.items()):
        if len(chunks) < 2:
            continue
        got = sum(1 for c in chunks if c in delivered)
        denom = len(chunks) if cap is None else min(cap, len(chunks))
        out.append((doc, len(chunks), got, got / len(chunks), min(1.0, got / denom)))
    return out


def _duplicates(keys: Sequence[str], shas: Sequence[str]) -> tuple[int, int]:
    """(repeated keys, same content under a different key) among ``keys``, in order."""
    dup_keys, dup_content = _content_duplicates(keys, shas)
    return len(dup_keys), len(dup_content)


def _content_duplicates(keys: Sequence[str], shas: Sequence[str]) -> tuple[list[int], list[tuple[int, int]]]:
    """Positions of repeated keys, and (position, first position) of the same content under a
    different key, among ``keys`` in order. The first position is the earliest item with that
    content (the one the duplicate repeats)."""
    seen_keys: set[str] = set()
    first_of_sha: dict[str, int] = {}
    keys_of_sha: dict[str, set[str]] = {}
    dup_keys: list[int] = []
    dup_content: list[tuple[int, int]] = []
    for i, (key, sha) in enumerate(zip(keys, shas, strict=True)):
        if key in seen_keys:
            dup_keys.append(i)
        elif sha in keys_of_sha and key not in keys_of_sha[sha]:
            dup_content.append((i, first_of_sha[sha]))
        seen_keys.add(key)
        keys_of_sha.setdefault(sha, set()).add(key)
        first_of_sha.setdefault(sha, i)
    return dup_keys, dup_content


COPY = "re-ingested copy"
SAME_TEXT = "same text, other chunk"


def row_identity(key: str, stored_doc_id: str) -> str:
    """What identity the row that carried a delivered chunk had, from its D1 key and stored doc id."""
    kind = key_kind(key)
    if kind == "chunk":
        return "doc_id and chunk_index"
    if kind == "rank":
        return "no identity"
    return "no doc_id" if not stored_doc_id else "no chunk_index"


def content_duplicate_breakdown(row: Mapping[str, Any]) -> list[dict[str, str]]:
    """Each delivered chunk whose normalised content was already delivered under another key:
    its cause (``re-ingested copy``: the same true chunk through a second row; ``same text,
    other chunk``: a different chunk with the same text, such as a page's v2 or boilerplate),
    the D1 key kind of its row (``chunk``, ``vector``, ``rank``) and that row's identity."""
    keys, chunks, docs = row["member_keys"], row["member_chunks"], row["member_doc_ids"]
    out = []
    for i, first in _content_duplicates(keys, row["member_content_sha"])[1]:
        out.append(
            {
                "cause": COPY if chunks[i] == chunks[first] else SAME_TEXT,
                "key_kind": key_kind(keys[i]),
                "row_identity": row_identity(keys[i], docs[i]),
            }
        )
    return out


def true_document_counts(row: Mapping[str, Any]) -> Counter[str]:
    """Delivered chunks per true document (every delivered chunk, copies included)."""
    return Counter(doc_of(c) for c in row["member_chunks"] if not c.startswith("unknown:"))


def per_query_frame(
    table: pd.DataFrame,
    cutoffs: Sequence[int],
    caps: Mapping[str, int | None],
    checked_caps: Mapping[str, int | None] | None = None,
) -> pd.DataFrame:
    """One row per (query, config) with every per-query measure (NaN where not defined).

    ``caps``: the cap of the cap-aware recall per config (None: no cap); ``checked_caps``: the
    cap delivery is checked against (``cap_ok`` by stored doc id, ``cap_ok_true`` by true
    document; NaN where a config has none).
    """
    checked = checked_caps or {}
    records = []
    for raw in table.to_dict("records"):
        row: dict[str, Any] = {str(k): v for k, v in raw.items()}
        rec: dict[str, Any] = {"query_id": row["query_id"], "config": row["config"], "judged": row["judged"]}
        if row["judged"]:
            qrels = dict(zip(row["relevant_chunks"], row["relevant_grades"], strict=True))
            rec.update({f"chunk:{k}": v for k, v in standard_measures(chunk_ranking(row), qrels, cutoffs).items()})
        if len(row["relevant_docs"]):
            dq = dict(zip(row["relevant_docs"], row["relevant_doc_grades"], strict=True))
            rec.update({f"doc:{k}": v for k, v in standard_measures(doc_ranking(row), dq, cutoffs).items()})
        pairs = same_doc_pairs(row, caps.get(row["config"]))
        rec["same_doc_pairs"] = len(pairs)
        rec["same_doc_recall"] = float(np.mean([p[3] for p in pairs])) if pairs else math.nan
        rec["same_doc_recall_cap_aware"] = float(np.mean([p[4] for p in pairs])) if pairs else math.nan
        rec["_pairs"] = pairs
        n_members = len(row["member_keys"])
        dk, dc = _duplicates(row["member_keys"], row["member_content_sha"])
        hk, hc = _duplicates(row["hit_keys"], row["hit_content_sha"])
        causes = Counter(d["cause"] for d in content_duplicate_breakdown(row))
        cap = checked.get(row["config"])
        rec.update(
            members=n_members,
            dup_keys=dk,
            dup_content=dc,
            dup_content_copy=causes[COPY],
            dup_content_same_text=causes[SAME_TEXT],
            hits=len(row["hit_keys"]),
            raw_dup_keys=hk,
            raw_dup_content=hc,
            cap_ok=math.nan if cap is None else float(not _over_cap(_stored_counts(row), cap)),
            cap_ok_true=math.nan if cap is None else float(not _over_cap(true_document_counts(row), cap)),
        )
        records.append(rec)
    return pd.DataFrame.from_records(records)


def _pct(values: pd.Series, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else math.nan


def latency_stats(values: pd.Series) -> dict[str, float]:
    v = values.astype(float)
    return {
        "p50": _pct(v, 50),
        "p90": _pct(v, 90),
        "p95": _pct(v, 95),
        "p99": _pct(v, 99),
        "max": float(v.max()) if len(v) else math.nan,
        "mean": float(v.mean()) if len(v) else math.nan,
    }


def summarize(
    table: pd.DataFrame,
    *,
    configs: Sequence[Mapping[str, Any]],
    cutoffs: Sequence[int],
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Metrics per config, and the per-query measures they were averaged from.

    ``configs``: dicts with ``name``, ``cap`` (the cap compliance is checked against: the
    config's D3 value, for legacy the production cap; None: not checked), ``cap_aware`` (the cap
    of the cap-aware recall; None for no cap) and ``return_n``.
    """
    caps_aware = {c["name"]: c["cap_aware"] for c in configs}
    measures = per_query_frame(table, cutoffs, caps_aware, {c["name"]: c["cap"] for c in configs})
    out: dict[str, Any] = {}
    for cfg in configs:
        name = cfg["name"]
        rows = table[table["config"] == name]
        m = measures[measures["config"] == name]
        judged = m[m["judged"]]
        chunk_cols = [f"chunk:{n}" for n in measure_names(cutoffs)]
        doc_cols = [f"doc:{n}" for n in measure_names(cutoffs)]
        pairs = [p for ps in m["_pairs"] for p in ps]
        members = int(m["members"].sum())
        hits = int(m["hits"].sum())
        violations = _cap_violations(rows, cfg["cap"], _stored_counts)
        true_violations = _cap_violations(rows, cfg["cap"], true_document_counts)
        breakdown = [
            d for r in rows.to_dict("records") for d in content_duplicate_breakdown({str(k): v for k, v in r.items()})
        ]
        stage_losses = Counter(s for stages in rows["lost_stages"] for s in stages)
        latency = {
            col.removesuffix("_us"): latency_stats(rows[col])
            for col in ("search_us", "postprocess_us", "projection_us", "transform_us", "e2e_us")
        }
        mean_e2e = latency["e2e"]["mean"]
        out[name] = {
            "queries": len(rows),
            "judged_queries": len(judged),
            "same_doc_multi_chunk_recall": _mean([p[3] for p in pairs]),
            "same_doc_multi_chunk_recall_cap_aware": _mean([p[4] for p in pairs]),
            "same_doc_pairs": len(pairs),
            "duplicate_rate": _ratio(int(m["dup_keys"].sum()), members),
            "content_duplicate_rate": _ratio(int(m["dup_content"].sum()), members),
            "raw_duplicate_rate": _ratio(int(m["raw_dup_keys"].sum()), hits),
            "raw_content_duplicate_rate": _ratio(int(m["raw_dup_content"].sum()), hits),
            "content_duplicates": {
                "total": len(breakdown),
                **{
                    f"by_{field}": dict(sorted(Counter(d[field] for d in breakdown).items()))
                    for field in ("cause", "key_kind", "row_identity")
                },
            },
            "content_duplicate_rate_copies": _ratio(sum(d["cause"] == COPY for d in breakdown), members),
            "content_duplicate_rate_same_text": _ratio(sum(d["cause"] == SAME_TEXT for d in breakdown), members),
            "cap_checked": cfg["cap"],
            "cap_checked_source": cfg.get("cap_source", "config"),
            "cap_compliance": _compliance(rows, violations, cfg["cap"]),
            "cap_violations": violations[:50],
            "n_cap_violations": len(violations),
            "cap_compliance_true": _compliance(rows, true_violations, cfg["cap"]),
            "true_cap_violations": true_violations[:50],
            "n_true_cap_violations": len(true_violations),
            "evidence_guard_1to1": _ratio(
                int(rows["guard_references"].sum() - rows["guard_violations"].sum()),
                int(rows["guard_references"].sum()),
            ),
            "return_n_compliance": _ratio(int((rows["n_blocks"] <= cfg["return_n"]).sum()), len(rows)),
            "chunk": {c.split(":", 1)[1]: _mean(judged[c]) if c in judged else math.nan for c in chunk_cols},
            "doc": {c.split(":", 1)[1]: _mean(m[c].dropna()) if c in m else math.nan for c in doc_cols},
            "payload": {
                "chars_p50": _pct(rows["payload_chars"], 50),
                "chars_p95": _pct(rows["payload_chars"], 95),
                "blocks_p50": _pct(rows["n_blocks"], 50),
                "blocks_p95": _pct(rows["n_blocks"], 95),
                "chunks_delivered_mean": _ratio(members, len(rows)),
            },
            "stage_losses": dict(sorted(stage_losses.items())),
            "latency_us": latency,
            "qps_serial": 1e6 / mean_e2e if mean_e2e and mean_e2e > 0 else math.nan,
        }
    return out, measures.drop(columns=["_pairs"])


def _stored_counts(row: Mapping[str, Any]) -> Counter[str]:
    """Delivered chunks per doc id as stored (rows without one are not counted: D3 gives each its own bucket)."""
    return Counter(d for d in row["member_doc_ids"] if d)


def _over_cap(counts: Counter[str], cap: int) -> bool:
    return any(n > cap for n in counts.values())


def _cap_violations(
    rows: pd.DataFrame, cap: int | None, counter: Callable[[Mapping[str, Any]], Counter[str]]
) -> list[dict[str, Any]]:
    if cap is None:
        return []
    out = []
    for raw in rows.to_dict("records"):
        row = {str(k): v for k, v in raw.items()}
        for doc, n in sorted(counter(row).items()):
            if n > cap:
                out.append({"query_id": row["query_id"], "doc_id": doc, "chunks": n, "cap": cap})
    return out


def _compliance(rows: pd.DataFrame, violations: list[dict[str, Any]], cap: int | None) -> float:
    """Share of queries with no document over the cap; NaN when there is no cap to check."""
    if cap is None:
        return math.nan
    return _ratio(len(rows) - len({v["query_id"] for v in violations}), len(rows))


def _mean(values: Iterable[float] | pd.Series) -> float:
    arr = np.asarray(list(values), dtype=float)
    return float(arr.mean()) if arr.size else math.nan


def _ratio(num: int, den: int) -> float:
    return num / den if den else math.nan


def summary_frame(summary_configs: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The per-config metrics as one table: a row per config, a column per measure.

    Standard measures are named as ir_measures names them, prefixed by level
    (``chunk:nDCG@5``, ``doc:R@10``); latency columns are ``latency:<stage>:<statistic>``
    in microseconds.
    """
    rows: dict[str, dict[str, Any]] = {}
    for name, cfg in summary_configs.items():
        row: dict[str, Any] = {}
        for key, value in cfg.items():
            if key in ("chunk", "doc"):
                row.update({f"{key}:{m}": v for m, v in value.items()})
            elif key == "payload":
                row.update({f"payload:{m}": v for m, v in value.items()})
            elif key == "latency_us":
                row.update(
                    {f"latency:{stage}:{stat}": v for stage, stats in value.items() for stat, v in stats.items()}
                )
            elif key == "stage_losses":
                row.update({f"lost:{stage}": n for stage, n in value.items()})
            elif key == "content_duplicates":
                row["content_duplicates"] = value["total"]
                row.update(
                    {
                        f"content_duplicates:{part.removeprefix('by_')}:{name}": n
                        for part, counts in value.items()
                        if part != "total"
                        for name, n in counts.items()
                    }
                )
            elif key not in ("cap_violations", "true_cap_violations"):
                row[key] = value
        rows[name] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    lost = [c for c in frame.columns if c.startswith("lost:")]
    frame[lost] = frame[lost].fillna(0).astype(int)
    frame.index.name = "config"
    return frame
