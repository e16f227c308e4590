"""Per-query measures and their aggregation, read from the per-query table only.

Standard measures (trec_eval semantics) at chunk and document level, judged queries only, and the project's
own; their definitions: docs/measures.md. ``summarize`` computes them for a whole table column-wise
(:mod:`rag_eval.metrics.perquery`); the tests hold them equal, to the last bit, to the same definitions
written one row at a time (``tests/unit/rowwise_measures.py``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rag_eval.metrics import perquery
from rag_eval.metrics.columns import flat_values
from rag_eval.metrics.perquery import COPY, SAME_TEXT, doc_of
from rag_eval.metrics.registry import LATENCY_STAGES, MISSION, Measure, measure_names
from rag_eval.rundir.rows import LABELLED, LATENCY_COLUMNS, SCHEMA

__all__ = [
    "COPY", "PAIR_COLUMNS", "SAME_TEXT", "chunk_ranking", "declared_values", "doc_of", "doc_ranking",
    "first_occurrences", "latency_stats", "max_chunks_per_document", "measure_names", "pair_frame", "quantile_ci",
    "query_values", "same_doc_pairs_of_row", "summarize", "summary_frame",
]  # fmt: skip


def first_occurrences(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def chunk_ranking(row: Mapping[str, Any]) -> list[str]:
    return first_occurrences(row["member_chunks"])


def doc_ranking(row: Mapping[str, Any]) -> list[str]:
    return first_occurrences(doc_of(c) for c in row["member_chunks"] if not c.startswith("unknown:"))


def same_doc_pairs_of_row(row: Mapping[str, Any], cap: int | None) -> list[tuple[str, int, int, float, float]]:
    """(doc, relevant, delivered, recall, cap-aware recall) for each document with >= 2
    relevant chunks for this query (one row; :func:`rag_eval.metrics.perquery.same_doc_pairs` does a table)."""
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


def as_arrow(table: pd.DataFrame | pa.Table, columns: Sequence[str]) -> pa.Table:
    """The per-query table's ``columns`` that are present, as Arrow (the run store's types)."""
    if isinstance(table, pa.Table):
        return table.select([c for c in columns if c in table.column_names])
    present = [c for c in columns if c in table.columns]
    schema = pa.schema([SCHEMA.field(c) for c in present])
    return pa.Table.from_pandas(table[present], schema=schema, preserve_index=False)


def _pct(values: Sequence[float] | np.ndarray[Any, Any] | pd.Series, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else math.nan


def latency_stats(values: Sequence[float] | np.ndarray[Any, Any] | pd.Series) -> dict[str, float]:
    """Percentiles, maximum and mean of the measured values (NaN, a query not timed, is left out)."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    percentiles = np.percentile(v, [50, 90, 95, 99]).tolist() if len(v) else [math.nan] * 4  # one partition
    return {
        **dict(zip(("p50", "p90", "p95", "p99"), percentiles, strict=True)),
        "max": float(v.max()) if len(v) else math.nan,
        "mean": float(v.mean()) if len(v) else math.nan,
    }


def quantile_ci(
    values: Sequence[float] | np.ndarray[Any, Any], q: float = 0.95, level: float = 0.95
) -> dict[str, float | int]:
    """A distribution-free confidence interval for the ``q``-quantile of what ``values`` were sampled
    from (NaN, a query not timed, is left out): the order statistics X(lo) <= X(hi) with
    P(X(lo) <= quantile <= X(hi)) >= ``level``, from the binomial count of values below the quantile
    (scipy.stats). ``low``/``high`` are NaN where the sample is too small to bound that side.

    >>> ci = quantile_ci(np.arange(1.0, 1001.0))
    >>> ci["timed_queries"], ci["p95_ci_low_us"], ci["p95_ci_high_us"], ci["p95_ci_coverage"] >= 0.95
    (1000, 936.0, 964.0, True)
    """
    from scipy.stats import binom

    v = np.sort(np.asarray(values, dtype=float))
    v = v[~np.isnan(v)]
    n = len(v)
    if n == 0:
        return {"timed_queries": 0, "p95_ci_low_us": math.nan, "p95_ci_high_us": math.nan, "p95_ci_coverage": math.nan}
    tail = (1.0 - level) / 2.0
    lo = int(binom.ppf(tail, n, q))  # X(lo) <= quantile unless fewer than lo values lie below; lo <= n
    hi = int(binom.ppf(1.0 - tail, n, q)) + 1  # at least 1 + 0; beyond n when too few values lie above
    return {
        "timed_queries": n,
        "p95_ci_low_us": float(v[lo - 1]) if lo >= 1 else math.nan,
        "p95_ci_high_us": float(v[hi - 1]) if hi <= n else math.nan,
        "p95_ci_coverage": float(binom.cdf(hi - 1, n, q) - binom.cdf(lo - 1, n, q)),
    }


# summary.json's order of the stages (transform, timed last, comes before the end-to-end total)
SUMMARY_LATENCY_ORDER = tuple(sorted(LATENCY_STAGES, key=lambda stage: (stage == "e2e", stage == "transform")))
SUMMARY_COLUMNS = (
    *perquery.COLUMNS,
    "origin",
    "lost_stages",
    "guard_references",
    "guard_violations",
    "n_blocks",
    "payload_chars",
    *(f"{stage}_us" for stage in SUMMARY_LATENCY_ORDER),
)


Rows: TypeAlias = pd.DataFrame | pa.Table | Iterable[pa.Table | pa.RecordBatch]
SCALAR_COLUMNS = ("guard_references", "guard_violations", "n_blocks", "payload_chars", *LATENCY_COLUMNS)


def arrow_batches(rows: Rows, columns: Sequence[str]) -> Iterator[pa.Table]:
    """The per-query rows as Arrow tables of about :data:`perquery.BATCH_ROWS` rows, with those of
    ``columns`` they have: a DataFrame or table is sliced, a stream of parts regrouped."""
    if isinstance(rows, pd.DataFrame | pa.Table):
        arrow = as_arrow(rows, columns)
        for start in range(0, max(arrow.num_rows, 1), perquery.BATCH_ROWS):
            yield arrow.slice(start, perquery.BATCH_ROWS)
        return
    empty = True
    for table in perquery.rebatched(rows):
        empty = False
        yield table.select([c for c in columns if c in table.column_names])
    if empty:  # a stream of no parts holds no rows: measured as the empty table, not an error
        yield as_arrow(SCHEMA.empty_table(), columns)


def of_origin(rows: Rows, origin: str, columns: Sequence[str]) -> Iterator[pa.Table]:
    """The rows of one origin, ``columns`` only, as :func:`arrow_batches` gives them (see
    :func:`rag_eval.metrics.perquery.of_origin`)."""
    return perquery.of_origin(arrow_batches(rows, tuple(dict.fromkeys((*columns, "origin")))), origin, columns)


def summarize(
    table: Rows,
    *,
    configs: Sequence[Mapping[str, Any]],
    cutoffs: Sequence[int],
    origin: str = LABELLED,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """Metrics per config, and the per-query measures they were averaged from.

    ``table``: the per-query rows, as a DataFrame, an Arrow table, or a stream of Arrow tables
    (a run's parts, a Parquet file's batches: read one batch at a time, never all at once).
    ``configs``: dicts with ``name``, ``cap`` (the cap compliance is checked against: the
    config's D3 value, for legacy the production cap; None: not checked), ``cap_aware`` (the cap
    of the cap-aware recall; None for no cap) and ``return_n``. ``origin``: the rows measured (a data
    set's queries; a query log's are measured apart, :mod:`rag_eval.metrics.labelfree`).
    """
    scalars: dict[str, list[np.ndarray[Any, Any]]] = {name: [] for name in SCALAR_COLUMNS}
    losses: list[tuple[np.ndarray[Any, Any], pa.Array]] = []
    query_ids: list[pa.ChunkedArray] = []
    offset = 0

    def tapped() -> Iterator[pa.Table]:
        """The batches on their way to the per-query measures; what the summary adds up beside them is kept."""
        nonlocal offset
        for batch in arrow_batches(of_origin(table, origin, SUMMARY_COLUMNS), SUMMARY_COLUMNS):
            for name in SCALAR_COLUMNS:
                scalars[name].append(_numbers(batch, name))
            rows, stages = flat_values(batch, "lost_stages")
            losses.append((rows + offset, stages))
            query_ids.append(batch.column("query_id"))
            offset += batch.num_rows
            yield batch.select([c for c in perquery.COLUMNS if c in batch.column_names])

    computed = perquery.compute(
        tapped(), cutoffs, {c["name"]: c["cap_aware"] for c in configs}, {c["name"]: c["cap"] for c in configs}
    )
    m = computed.frame
    column = {name: np.concatenate(parts) if parts else np.zeros(0) for name, parts in scalars.items()}
    loss_rows = np.concatenate([r for r, _ in losses]) if losses else np.zeros(0, dtype=np.int64)
    loss_stage = pa.concat_arrays([stages.cast(pa.string()) for _, stages in losses])  # a batch at least (empty)
    config_of = m["config"].to_numpy(dtype=object)
    ids = pa.chunked_array([c for ids in query_ids for c in ids.chunks], type=pa.string())
    measured = _Measured(
        computed=computed, column=column, loss_rows=loss_rows, loss_stage=loss_stage, config_of=config_of, ids=ids,
        names=measure_names(cutoffs),
    )  # fmt: skip
    return {cfg["name"]: _config_summary(cfg, measured) for cfg in configs}, m


@dataclass(frozen=True, slots=True, kw_only=True)
class _Measured:
    """What the summary of every config is read from: the per-query measures, the scalar columns, the
    stage of every relevant chunk lost, the config and query id of every row, the standard measures' names."""

    computed: perquery.PerQuery
    column: dict[str, np.ndarray[Any, Any]]
    loss_rows: np.ndarray[Any, Any]
    loss_stage: pa.Array
    config_of: np.ndarray[Any, Any]
    ids: pa.ChunkedArray
    names: list[str]


def _config_summary(cfg: Mapping[str, Any], measured: _Measured) -> dict[str, Any]:
    """The summary of one config: its rows' measures averaged, its compliances, losses and latencies."""
    computed, column, ids, names = measured.computed, measured.column, measured.ids, measured.names
    loss_rows, loss_stage, config_of, m = measured.loss_rows, measured.loss_stage, measured.config_of, computed.frame
    name = cfg["name"]
    mine = config_of == name
    rows = np.flatnonzero(mine)
    sub = m[mine]
    judged = sub[sub["judged"].to_numpy(dtype=bool)]
    pairs = computed.pairs[mine[computed.pairs["row"].to_numpy()]] if len(computed.pairs) else computed.pairs
    breakdown = computed.breakdown[mine[computed.breakdown["row"].to_numpy()]]
    members = int(sub["members"].sum())
    hits = int(sub["hits"].sum())
    violations, n_violations, compliance = _violations(computed.over_cap, ids, mine, "stored", cfg["cap"])
    true_violations, n_true, true_compliance = _violations(computed.over_cap, ids, mine, "true", cfg["cap"])
    stage_losses = _counts(loss_stage.filter(pa.array(mine[loss_rows], type=pa.bool_())))
    latency = {stage: latency_stats(column[f"{stage}_us"][rows]) for stage in SUMMARY_LATENCY_ORDER}
    mean_e2e = latency["e2e"]["mean"]
    references = int(column["guard_references"][rows].sum())
    n_blocks = column["n_blocks"][rows]
    copies = int((breakdown["cause"] == COPY).sum())
    summary = {
        "queries": len(rows),
        "judged_queries": len(judged),
        "same_doc_multi_chunk_recall": _mean(pairs["recall"]),
        "same_doc_multi_chunk_recall_cap_aware": _mean(pairs["cap_aware"]),
        "same_doc_pairs": len(pairs),
        "duplicate_rate": _ratio(int(sub["dup_keys"].sum()), members),
        "content_duplicate_rate": _ratio(int(sub["dup_content"].sum()), members),
        "raw_duplicate_rate": _ratio(int(sub["raw_dup_keys"].sum()), hits),
        "raw_content_duplicate_rate": _ratio(int(sub["raw_dup_content"].sum()), hits),
        "content_duplicates": {
            "total": len(breakdown),
            **{f"by_{field}": _counts(breakdown[field]) for field in ("cause", "key_kind", "row_identity")},
        },
        "content_duplicate_rate_copies": _ratio(copies, members),
        "content_duplicate_rate_same_text": _ratio(len(breakdown) - copies, members),
        "cap_checked": cfg["cap"],
        "cap_checked_source": cfg.get("cap_source", "config"),
        "cap_compliance": compliance,
        "cap_violations": violations,
        "n_cap_violations": n_violations,
        "cap_compliance_true": true_compliance,
        "true_cap_violations": true_violations,
        "n_true_cap_violations": n_true,
        "evidence_guard_1to1": _ratio(references - int(column["guard_violations"][rows].sum()), references),
        "return_n_compliance": _ratio(int((n_blocks <= cfg["return_n"]).sum()), len(rows)),
        "chunk": {n: _mean(judged[f"chunk:{n}"]) for n in names},
        "doc": {n: _mean(sub[f"doc:{n}"].dropna()) for n in names},
        "payload": {
            "chars_p50": _pct(column["payload_chars"][rows], 50),
            "chars_p95": _pct(column["payload_chars"][rows], 95),
            "blocks_p50": _pct(n_blocks, 50),
            "blocks_p95": _pct(n_blocks, 95),
            "chunks_delivered_mean": _ratio(members, len(rows)),
        },
        "stage_losses": stage_losses,
        "latency_us": latency,
        "qps_serial": 1e6 / mean_e2e if mean_e2e and mean_e2e > 0 else math.nan,
        "search_latency": quantile_ci(column["search_us"][rows]),
    }
    summary.update(declared_values(sub, MISSION, summary))
    return summary


def _numbers(table: pa.Table, name: str) -> np.ndarray[Any, Any]:
    return np.asarray(table.column(name).to_numpy(), dtype=float)  # every run's rows have it (SCHEMA)


def _violations(
    over_cap: pd.DataFrame, query_ids: pa.ChunkedArray, mine: np.ndarray[Any, Any], by: str, cap: int | None
) -> tuple[list[dict[str, Any]], int, float]:
    """The first 50 (query, document) pairs of this config above ``cap`` (by query, then document),
    how many there are, and the share of queries without any (NaN without a cap)."""
    n_rows = int(mine.sum())
    if cap is None:
        return [], 0, math.nan
    over = over_cap[(over_cap["by"] == by).to_numpy() & mine[over_cap["row"].to_numpy()]]
    rows = over["row"].to_numpy()
    qids = query_ids.take(pa.array(rows[:50], type=pa.int64())).to_pylist()
    first = [
        {"query_id": q, "doc_id": d, "chunks": int(n), "cap": cap}
        for q, d, n in zip(qids, over["doc_id"].iloc[:50], over["chunks"].iloc[:50], strict=True)
    ]
    violating = len(pc.unique(query_ids.take(pa.array(rows, type=pa.int64()))))
    return first, len(over), _ratio(n_rows - violating, n_rows)


def _counts(values: pd.Series | pa.Array) -> dict[str, int]:
    """How often each value occurs, by value (a missing one is not counted).

    >>> _counts(pa.array(["cap", None, "dedup", "cap"])), _counts(pd.Series(["b", "a", None], dtype=object))
    ({'cap': 2, 'dedup': 1}, {'a': 1, 'b': 1})
    """
    counted = pc.value_counts(pc.drop_null(pa.array(values, from_pandas=True))).to_pylist()
    return {str(c["values"]): int(c["counts"]) for c in sorted(counted, key=lambda c: c["values"])}


def _mean(values: Sequence[float] | pd.Series) -> float:
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()) if arr.size else math.nan


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def declared_values(frame: pd.DataFrame, entries: Sequence[Measure], summary: Mapping[str, Any]) -> dict[str, float]:
    """The summary value of each measure of ``entries`` compared by query as a mean or a rate of
    per-query columns of ``frame`` that ``summary`` does not hold yet: a measure declared in the
    registry (:mod:`rag_eval.metrics.registry`) with its column needs no code of its own here.

    >>> from rag_eval.metrics.registry import Compared
    >>> frame = pd.DataFrame({"ok": [1.0, 0.0, math.nan], "n": [1, 2, 3], "of": [2, 2, 4]})
    >>> how = {"a": Compared(kind="mean", column="ok"), "b": Compared(kind="rate", numerator="n", denominator="of"),
    ...        "c": Compared(kind="max", column="ok")}
    >>> entries = [Measure(name=n, label=n, group="mission", higher_is_better=None, unit="share", digits=1,
    ...                    compared=c) for n, c in how.items()]
    >>> declared_values(frame, entries, {}), declared_values(frame, entries, {"a": 0.1})
    ({'a': 0.5, 'b': 0.75}, {'b': 0.75})
    """
    out: dict[str, float] = {}
    for entry in entries:
        how = entry.compared
        if entry.name in summary or how is None or how.per != "query":
            continue
        if how.kind == "mean" and how.column in frame.columns:
            out[entry.name] = _mean(frame[how.column].dropna())
        elif how.kind == "rate" and how.numerator in frame.columns and how.denominator in frame.columns:
            out[entry.name] = _ratio(float(frame[how.numerator].sum()), float(frame[how.denominator].sum()))
    return out


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
            elif key == "search_latency":
                row.update(
                    {f"search_latency:{k}": ", ".join(v) if isinstance(v, list) else v for k, v in value.items()}
                )
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
            elif key == "traffic":  # a query log's measures, flattened as the config's are, under traffic:
                row.update({f"traffic:{k}": v for k, v in summary_frame({name: value}).iloc[0].items()})
            elif key not in ("cap_violations", "true_cap_violations"):
                row[key] = value
        rows[name] = row
    frame = pd.DataFrame.from_dict(rows, orient="index")
    lost = [c for c in frame.columns if c.startswith("lost:")]
    frame[lost] = frame[lost].fillna(0).astype(int)
    frame.index.name = "config"
    return frame


# -- units of comparison ----------------------------------------------------------------------

PAIR_COLUMNS = ("query_id", "config", "doc_id", "relevant", "delivered", "recall", "recall_cap_aware")


def pair_frame(table: Rows, caps: Mapping[str, int | None]) -> pd.DataFrame:
    """One row per (query, config, document with >= 2 relevant chunks): the units that
    same-document multi-chunk recall averages over, so a comparison can pair them
    (:func:`rag_eval.metrics.perquery.same_doc_pairs`, a stream read one batch at a time).

    ``caps``: config -> the cap of the cap-aware recall (None: no cap).

    >>> t = pd.DataFrame([{"query_id": "q", "config": "c", "relevant_chunks": ["d#chunk-0", "d#chunk-1", "e#chunk-0"],
    ...                    "delivered_relevant": ["d#chunk-1"]}])
    >>> pair_frame(t, {"c": 1})[["doc_id", "relevant", "delivered", "recall", "recall_cap_aware"]].to_dict("records")
    [{'doc_id': 'd', 'relevant': 2, 'delivered': 1, 'recall': 0.5, 'recall_cap_aware': 1.0}]
    """
    frames = []
    for batch in arrow_batches(table, ("query_id", "config", "relevant_chunks", "delivered_relevant")):
        pairs = perquery.same_doc_pairs(batch, caps)
        rows = pa.array(pairs["row"].to_numpy(), type=pa.int64())
        frames.append(
            pd.DataFrame(
                {
                    "query_id": batch.column("query_id").take(rows).to_pylist(),
                    "config": batch.column("config").take(rows).to_pylist(),
                    "doc_id": pairs["doc_id"].tolist(),
                    "relevant": pairs["relevant"].to_numpy(),
                    "delivered": pairs["delivered"].to_numpy(),
                    "recall": pairs["recall"].to_numpy(),
                    "recall_cap_aware": pairs["cap_aware"].to_numpy(),
                },
                columns=list(PAIR_COLUMNS),
            )
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(PAIR_COLUMNS))


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


def query_values(
    table: Rows, *, configs: Sequence[Mapping[str, Any]], cutoffs: Sequence[int], origin: str = LABELLED
) -> pd.DataFrame:
    """Every per-query value a comparison pairs on, one row per (query, config): the per-query measures
    (:func:`rag_eval.metrics.perquery.compute`), and

    ``cap_ok``            1.0 when no stored doc id has more delivered chunks than the cap it is checked
                          against (NaN when there is none); ``cap_ok_true`` the same by true document
    ``max_doc_chunks``    :func:`max_chunks_per_document` of the delivered chunks
    ``return_n_ok``       1.0 when at most return-n blocks were delivered
    ``guard_refs``        distinct chunk references; ``guard_ok`` those EvidenceGuard maps 1:1
    ``payload_chars``, ``n_blocks`` and the latency columns (microseconds) as the table has them

    ``table``: the rows as for :func:`summarize` (a stream is read one batch at a time).
    ``configs``: dicts with ``name``, ``cap``, ``cap_aware`` and ``return_n`` (see :func:`summarize`).
    ``origin``: the rows valued (see :func:`of_origin`).
    """
    return_n = {c["name"]: float(c["return_n"]) for c in configs}
    extras: list[pd.DataFrame] = []

    def tapped() -> Iterator[pa.Table]:
        wanted = (*perquery.COLUMNS, *SCALAR_COLUMNS)
        for batch in arrow_batches(of_origin(table, origin, wanted), wanted):
            n_blocks = _numbers(batch, "n_blocks")
            limit = np.array([return_n[c] for c in batch.column("config").to_pylist()], dtype=float)
            refs = _numbers(batch, "guard_references")
            extras.append(
                pd.DataFrame(
                    {
                        "return_n_ok": (n_blocks <= limit).astype(float),
                        "guard_refs": refs,
                        "guard_ok": refs - _numbers(batch, "guard_violations"),
                        "payload_chars": _numbers(batch, "payload_chars"),
                        "n_blocks": n_blocks,
                        **{col: _numbers(batch, col) for col in LATENCY_COLUMNS},
                    }
                )
            )
            yield batch.select(list(perquery.COLUMNS))

    computed = perquery.compute(
        tapped(), cutoffs, {c["name"]: c["cap_aware"] for c in configs}, {c["name"]: c["cap"] for c in configs}
    )
    frame = computed.frame
    extra = pd.concat(extras, ignore_index=True) if extras else pd.DataFrame()
    extra.insert(0, "max_doc_chunks", computed.max_doc_chunks.astype(float))
    extra.index = frame.index
    return pd.concat([frame, extra], axis=1)
