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
empty payload scores 0. The project's own measures are documented in the README.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.harness.rows import LATENCY_COLUMNS


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
    seen_keys: set[str] = set()
    key_of_sha: dict[str, set[str]] = {}
    dup_keys = dup_content = 0
    for key, sha in zip(keys, shas, strict=True):
        if key in seen_keys:
            dup_keys += 1
        elif sha in key_of_sha and key not in key_of_sha[sha]:
            dup_content += 1
        seen_keys.add(key)
        key_of_sha.setdefault(sha, set()).add(key)
    return dup_keys, dup_content


def per_query_frame(table: pd.DataFrame, cutoffs: Sequence[int], caps: Mapping[str, int | None]) -> pd.DataFrame:
    """One row per (query, config) with every per-query measure (NaN where not defined)."""
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
        rec.update(
            members=n_members,
            dup_keys=dk,
            dup_content=dc,
            hits=len(row["hit_keys"]),
            raw_dup_keys=hk,
            raw_dup_content=hc,
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

    ``configs``: dicts with ``name``, ``cap`` (the D3 value cap compliance is checked
    against), ``cap_aware`` (the cap of the cap-aware recall; None for no cap) and ``return_n``.
    """
    caps_aware = {c["name"]: c["cap_aware"] for c in configs}
    measures = per_query_frame(table, cutoffs, caps_aware)
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
        violations = _cap_violations(rows, cfg["cap"])
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
            "cap_compliance": _ratio(len(rows) - len({v["query_id"] for v in violations}), len(rows)),
            "cap_violations": violations[:50],
            "n_cap_violations": len(violations),
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


def _cap_violations(rows: pd.DataFrame, cap: int) -> list[dict[str, Any]]:
    out = []
    for row in rows.to_dict("records"):
        counts = Counter(d for d in row["member_doc_ids"] if d)
        for doc, n in sorted(counts.items()):
            if n > cap:
                out.append({"query_id": row["query_id"], "doc_id": doc, "chunks": n, "cap": cap})
    return out


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
            elif key != "cap_violations":
                row[key] = value
        rows[name] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    lost = [c for c in frame.columns if c.startswith("lost:")]
    frame[lost] = frame[lost].fillna(0).astype(int)
    frame.index.name = "config"
    return frame


# -- units of comparison ----------------------------------------------------------------------

PAIR_COLUMNS = ("query_id", "config", "doc_id", "relevant", "delivered", "recall", "recall_cap_aware")


def pair_frame(table: pd.DataFrame, caps: Mapping[str, int | None]) -> pd.DataFrame:
    """One row per (query, config, document with >= 2 relevant chunks): the units that
    same-document multi-chunk recall averages over, so a comparison can pair them.

    ``caps``: config -> the cap of the cap-aware recall (None: no cap).

    >>> t = pd.DataFrame([{"query_id": "q", "config": "c", "relevant_chunks": ["d#chunk-0", "d#chunk-1", "e#chunk-0"],
    ...                    "delivered_relevant": ["d#chunk-1"]}])
    >>> pair_frame(t, {"c": 1})[["doc_id", "relevant", "delivered", "recall", "recall_cap_aware"]].to_dict("records")
    [{'doc_id': 'd', 'relevant': 2, 'delivered': 1, 'recall': 0.5, 'recall_cap_aware': 1.0}]
    """
    records = [
        (row["query_id"], row["config"], doc, relevant, got, recall, cap_aware)
        for raw in table[["query_id", "config", "relevant_chunks", "delivered_relevant"]].to_dict("records")
        for row in [{str(k): v for k, v in raw.items()}]
        for doc, relevant, got, recall, cap_aware in same_doc_pairs(row, caps.get(row["config"]))
    ]
    return pd.DataFrame.from_records(records, columns=list(PAIR_COLUMNS))


def max_chunks_per_document(doc_ids: Sequence[str]) -> int:
    """The most delivered chunks sharing one stored doc id; a chunk without a doc id is its own
    document (D3's bucket rule), so it counts once.

    >>> max_chunks_per_document(["a", "b", "a", "", "", "a"])
    3
    >>> max_chunks_per_document(["", ""]), max_chunks_per_document([])
    (1, 0)
    """
    counts = Counter(d for d in doc_ids if d)
    return max(counts.values(), default=1 if len(doc_ids) else 0)


def query_values(table: pd.DataFrame, *, configs: Sequence[Mapping[str, Any]], cutoffs: Sequence[int]) -> pd.DataFrame:
    """Every per-query value a comparison pairs on, one row per (query, config): the columns of
    :func:`per_query_frame`, and

    ``cap_ok``            1.0 when no stored doc id has more delivered chunks than the config's cap
    ``max_doc_chunks``    :func:`max_chunks_per_document` of the delivered chunks
    ``return_n_ok``       1.0 when at most return-n blocks were delivered
    ``guard_refs``        distinct chunk references; ``guard_ok`` those EvidenceGuard maps 1:1
    ``payload_chars``, ``n_blocks`` and the latency columns (microseconds) as the table has them

    ``configs``: dicts with ``name``, ``cap``, ``cap_aware`` and ``return_n`` (see :func:`summarize`).
    """
    by_name = {c["name"]: c for c in configs}
    frame = per_query_frame(table, cutoffs, {c["name"]: c["cap_aware"] for c in configs}).drop(columns=["_pairs"])
    caps = table["config"].map(lambda name: by_name[name]["cap"])
    return_n = table["config"].map(lambda name: by_name[name]["return_n"])
    max_chunks = table["member_doc_ids"].map(lambda ids: max_chunks_per_document(list(ids)))
    # the most chunks any stored doc id delivered, doc-less chunks left out as _cap_violations does
    stored_max = table["member_doc_ids"].map(lambda ids: max(Counter(d for d in ids if d).values(), default=0))
    extra = pd.DataFrame(
        {
            "cap_ok": (stored_max <= caps).astype(float).to_numpy(),
            "max_doc_chunks": max_chunks.astype(float).to_numpy(),
            "return_n_ok": (table["n_blocks"] <= return_n).astype(float).to_numpy(),
            "guard_refs": table["guard_references"].astype(float).to_numpy(),
            "guard_ok": (table["guard_references"] - table["guard_violations"]).astype(float).to_numpy(),
            "payload_chars": table["payload_chars"].astype(float).to_numpy(),
            "n_blocks": table["n_blocks"].astype(float).to_numpy(),
            **{col: table[col].astype(float).to_numpy() for col in LATENCY_COLUMNS},
        },
        index=frame.index,
    )
    return pd.concat([frame, extra], axis=1)

