"""Every per-query measure, computed column-wise from the per-query table (pyarrow).

The definitions are those of :mod:`rag_eval.metrics.measures` and docs/measures.md (the standard measures, the
duplicate and cap rules, the same-document pairs); here they run on whole columns: a list column
is flattened to (row, code) arrays (:mod:`rag_eval.metrics.columns`), per-row results are
``np.bincount`` sums, and Python runs once per distinct string, never per row. Sums add a row's
values left to right as the definitions do, and discounts come from ``math.log2``, so the values
are the ones the per-row definitions give, to the last bit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from rag_eval.core.identity import CHUNK_SEPARATOR, RANK_PREFIX, VECTOR_PREFIX
from rag_eval.metrics.columns import (
    Array,
    Flat,
    coded,
    first_in_row,
    first_of_row,
    first_position,
    int_values,
    last_in_row,
    lookup,
    pair_key,
    per_row,
    rank_in_row,
    row_coded,
)
from rag_eval.metrics.registry import measure_names
from rag_eval.rundir.rows import TRAFFIC
from rag_eval.threads import ordered_map

COPY = "re-ingested copy"
SAME_TEXT = "same text, other chunk"
UNKNOWN_PREFIX = "unknown:"

COLUMNS = (
    "query_id",
    "config",
    "judged",
    "member_keys",
    "member_chunks",
    "member_doc_ids",
    "member_content_sha",
    "hit_keys",
    "hit_content_sha",
    "relevant_chunks",
    "relevant_grades",
    "relevant_docs",
    "relevant_doc_grades",
    "delivered_relevant",
)


@dataclass(frozen=True, slots=True)
class PerQuery:
    """The per-query frame, and the pieces the summary adds up beside it (rows index ``frame``).

    ``pairs``: one per (query, document with >= 2 relevant chunks), by row then document:
    ``row``, ``recall``, ``cap_aware``. ``breakdown``: one per content duplicate: ``row``,
    ``cause``, ``key_kind``, ``row_identity``. ``over_cap``: one per (query, document) above the
    checked cap, by row then document: ``row``, ``doc_id``, ``chunks``, ``by`` (``stored`` doc id
    or ``true`` document).
    """

    frame: pd.DataFrame
    pairs: pd.DataFrame
    breakdown: pd.DataFrame
    over_cap: pd.DataFrame
    max_doc_chunks: Array  # per row: the most delivered chunks sharing one stored doc id (a doc-less one is 1)


def doc_of(chunk_key: str) -> str:
    return chunk_key.rsplit(CHUNK_SEPARATOR, 1)[0]


BATCH_ROWS = 8192  # rows measured at once: small hash tables and temporaries, and bounded memory


def rebatched(parts: Iterable[pa.Table | pa.RecordBatch], rows: int | None = None) -> Iterator[pa.Table]:
    """A stream of tables (a run's parts, a file's record batches) regrouped into tables of about
    ``rows`` rows (:data:`BATCH_ROWS` as it is when called): per-batch work is then paid per 8,192 rows,
    not per part of a few hundred."""
    rows = BATCH_ROWS if rows is None else rows
    pending: list[pa.Table] = []
    count = 0
    for part in parts:
        table = part if isinstance(part, pa.Table) else pa.Table.from_batches([part])
        pending.append(table)
        count += table.num_rows
        if count >= rows:
            yield pa.concat_tables(pending).combine_chunks()
            pending, count = [], 0
    if pending:
        yield pa.concat_tables(pending).combine_chunks()


def of_origin(batches: Iterable[pa.Table], origin: str, columns: Sequence[str]) -> Iterator[pa.Table]:
    """The rows of ``batches`` of one origin (``labelled``: a data set's queries; ``traffic``: a query log's),
    ``columns`` only; rows written before queries had an origin (no column, or a missing value) are labelled.

    >>> t = pa.table({"query_id": ["q1", "t1", "q2"], "origin": ["labelled", "traffic", None]})
    >>> [b.column("query_id").to_pylist() for b in of_origin([t], "traffic", ["query_id"])]
    [['t1']]
    >>> [b.num_rows for b in of_origin([t.drop(["origin"])], "labelled", ["query_id"])]
    [3]
    >>> [(b.num_rows, b.column_names) for b in of_origin([t.drop(["origin"])], "traffic", ["query_id", "origin"])]
    [(0, ['query_id'])]
    """
    for batch in batches:
        selected = batch.select([c for c in columns if c in batch.column_names])
        if "origin" in batch.column_names:
            traffic = pc.fill_null(pc.equal(batch.column("origin"), TRAFFIC), False)
            keep = traffic if origin == TRAFFIC else pc.invert(traffic)
            if pc.all(keep).as_py() is False:  # a batch of one origin is passed on as it is, not copied
                selected = selected.filter(keep)
        elif origin == TRAFFIC:
            selected = selected.slice(0, 0)
        yield selected


def _in_batches(rows: pa.Table | Iterable[pa.Table | pa.RecordBatch]) -> Iterable[pa.Table]:
    if isinstance(rows, pa.Table):
        return [rows.slice(start, BATCH_ROWS) for start in range(0, max(rows.num_rows, 1), BATCH_ROWS)]
    return rebatched(rows)


def compute(
    batches: pa.Table | Iterable[pa.Table | pa.RecordBatch],
    cutoffs: Sequence[int],
    caps_aware: Mapping[str, int | None],
    checked_caps: Mapping[str, int | None],
) -> PerQuery:
    """Every per-query measure of a table (the columns of :data:`COLUMNS`), or of a stream of its
    batches, measured :data:`BATCH_ROWS` rows at a time (every measure is one row's business; the
    vocabularies and hash tables of a batch stay small, which makes hashing the strings three
    times faster than in one pass over a million rows), two batches at a time on two threads (the
    hashing and sorting run without the GIL), put together in the batches' order."""
    parts: list[PerQuery] = []
    offset = 0
    measure = partial(_compute, cutoffs=cutoffs, caps_aware=caps_aware, checked_caps=checked_caps)
    for table, part in ordered_map(measure, _in_batches(batches)):  # batches on two threads, in order
        if offset:
            part = PerQuery(
                frame=part.frame,
                pairs=part.pairs.assign(row=part.pairs["row"] + offset),
                breakdown=part.breakdown.assign(row=part.breakdown["row"] + offset),
                over_cap=part.over_cap.assign(row=part.over_cap["row"] + offset),
                max_doc_chunks=part.max_doc_chunks,
            )
        parts.append(part)
        offset += table.num_rows
    if len(parts) == 1:
        return parts[0]
    fields = ("frame", "pairs", "breakdown")
    frame, pairs, breakdown = (pd.concat([getattr(p, f) for p in parts], ignore_index=True) for f in fields)
    # each part lists its stored then its true groups: every stored group first, as one part has them
    over_cap = pd.concat([p.over_cap for p in parts], ignore_index=True)
    over_cap = over_cap.iloc[np.argsort(over_cap["by"].to_numpy() != "stored", kind="stable")].reset_index(drop=True)
    return PerQuery(frame, pairs, breakdown, over_cap, np.concatenate([p.max_doc_chunks for p in parts]))


def standard_measures(batches: pa.Table | Iterable[pa.Table | pa.RecordBatch], cutoffs: Sequence[int]) -> pd.DataFrame:
    """The chunk-level standard measures alone (the ones pytrec_eval computes: P, R, nDCG and Success at
    each cutoff, and RR), for every row of a table or a stream of its batches; NaN where a row is not
    judged. Only ``member_chunks``, ``relevant_chunks``, ``relevant_grades`` and ``judged`` are read, and
    only the chunk ids are coded: the same values as :func:`compute`'s ``chunk:`` columns."""

    def measure(table: pa.Table) -> pd.DataFrame:
        n = table.num_rows
        judged = table.column("judged").to_numpy(zero_copy_only=False).astype(bool)
        (members, relevant), vocab = row_coded(table, ["member_chunks", "relevant_chunks"])
        grades = int_values(table, "relevant_grades")
        return pd.DataFrame(_standard("chunk", (members, relevant, grades), len(vocab), judged, cutoffs, n))

    return pd.concat([frame for _, frame in ordered_map(measure, _in_batches(batches))], ignore_index=True)


def _compute(
    table: pa.Table,
    cutoffs: Sequence[int],
    caps_aware: Mapping[str, int | None],
    checked_caps: Mapping[str, int | None],
) -> PerQuery:
    n = table.num_rows
    configs = table.column("config").to_pylist()
    judged = table.column("judged").to_numpy(zero_copy_only=False).astype(bool)
    cap_aware = _per_row_cap(table.column("config"), caps_aware)
    checked = _per_row_cap(table.column("config"), checked_caps)

    chunk_columns = ["member_chunks", "relevant_chunks", "delivered_relevant"]
    (members, relevant, delivered), chunk_vocab = row_coded(table, chunk_columns)
    (relevant_docs,), relevant_doc_vocab = coded(table, ["relevant_docs"])
    doc_code, doc_vocab = _doc_codes(chunk_vocab, relevant_doc_vocab)  # chunk -> document (-1: unknown chunk)

    frame: dict[str, object] = {
        "query_id": table.column("query_id").to_pylist(),
        "config": configs,
        "judged": judged,
    }
    chunk_grades = int_values(table, "relevant_grades")
    frame.update(_standard("chunk", (members, relevant, chunk_grades), len(chunk_vocab), judged, cutoffs, n))
    member_docs = Flat(members.row, doc_code[members.code]).where(doc_code[members.code] >= 0)
    has_docs = per_row(relevant_docs.row, n) > 0
    doc_grades = int_values(table, "relevant_doc_grades")
    frame.update(_standard("doc", (member_docs, relevant_docs, doc_grades), len(doc_vocab), has_docs, cutoffs, n))

    pairs = _same_doc_pairs(relevant, delivered, len(chunk_vocab), doc_code, doc_vocab, cap_aware)
    frame.update(_pair_means(pairs, n))
    pairs = pairs[["row", "recall", "cap_aware"]]

    (keys, hit_keys), key_vocab = row_coded(table, ["member_keys", "hit_keys"])
    (shas, hit_shas), _ = row_coded(table, ["member_content_sha", "hit_content_sha"])
    (stored_docs,), stored_vocab = row_coded(table, ["member_doc_ids"])
    new_key = first_in_row(keys)
    first_sha = first_position(shas)
    sha_seen = first_sha != np.arange(len(shas))
    content_dup = np.flatnonzero(new_key & sha_seen)
    breakdown = _breakdown(content_dup, first_sha[content_dup], keys, members, stored_docs, (key_vocab, stored_vocab))
    raw_new_key = first_in_row(hit_keys)
    frame.update(
        members=per_row(keys.row, n),
        dup_keys=per_row(keys.row[~new_key], n),
        dup_content=per_row(keys.row[new_key & sha_seen], n),
        dup_content_copy=per_row(breakdown["row"].to_numpy()[(breakdown["cause"] == COPY).to_numpy()], n),
        dup_content_same_text=per_row(breakdown["row"].to_numpy()[(breakdown["cause"] == SAME_TEXT).to_numpy()], n),
        hits=per_row(hit_keys.row, n),
        raw_dup_keys=per_row(hit_keys.row[~raw_new_key], n),
        raw_dup_content=per_row(hit_keys.row[raw_new_key & ~first_in_row(hit_shas)], n),
    )

    has_id = _np(pc.not_equal(stored_vocab, ""))  # "": no doc id, a D3 bucket of its own
    stored_over, stored_max = _over_cap(stored_docs.where(has_id[stored_docs.code]), stored_vocab, checked, n)
    true_over, true_max = _over_cap(member_docs, doc_vocab, checked, n)
    no_cap = np.isnan(checked)
    frame["cap_ok"] = np.where(no_cap, math.nan, (stored_max <= checked).astype(float))
    frame["cap_ok_true"] = np.where(no_cap, math.nan, (true_max <= checked).astype(float))
    over_cap = pd.concat([stored_over.assign(by="stored"), true_over.assign(by="true")], ignore_index=True)
    max_doc_chunks = np.where(per_row(stored_docs.row, n) > 0, np.maximum(stored_max, 1), 0)
    return PerQuery(
        frame=pd.DataFrame(frame), pairs=pairs, breakdown=breakdown, over_cap=over_cap, max_doc_chunks=max_doc_chunks
    )


def _np(array: pa.Array | pa.ChunkedArray) -> Array:
    return np.asarray(array.to_numpy(zero_copy_only=False))


def _per_row_cap(configs: pa.ChunkedArray, caps: Mapping[str, int | None]) -> Array:
    """The cap of each row's config as a float (NaN: none)."""
    encoded = configs.combine_chunks().dictionary_encode()
    by_config = [caps.get(name) for name in encoded.dictionary.to_pylist()]
    per_code = np.array([math.nan if cap is None else float(cap) for cap in by_config])
    return per_code[_np(encoded.indices).astype(np.int64)] if len(per_code) else np.zeros(0)


def _doc_codes(chunk_vocab: pa.Array, relevant_docs: pa.Array) -> tuple[Array, pa.Array]:
    """The document (``doc_of``) of every chunk of the vocabulary, coded in a document vocabulary
    that starts with ``relevant_docs`` (their codes unchanged); -1 for an ``unknown:`` chunk."""
    docs = pc.list_element(pc.split_pattern(chunk_vocab, CHUNK_SEPARATOR, max_splits=1, reverse=True), 0)
    both = pa.concat_arrays([relevant_docs, docs.cast(pa.string())]).dictionary_encode()
    code = _np(both.indices)[len(relevant_docs) :].astype(np.int64)
    code[_np(pc.starts_with(chunk_vocab, UNKNOWN_PREFIX))] = -1
    return code, both.dictionary


def _by_row_and_name(rows: Array, names: pa.Array) -> Array:
    """The order that sorts entries by row, then by name (Arrow sorts strings by code point, as Python does)."""
    keys = pa.table({"row": rows, "name": names})
    return _np(pc.sort_indices(keys, sort_keys=[("row", "ascending"), ("name", "ascending")])).astype(np.int64)


def _discounts(max_rank: int) -> Array:
    """``log2(rank + 1)`` for ranks 0..max_rank (from ``math.log2``, as the per-query definition)."""
    return np.array([math.log2(r + 1) if r else 1.0 for r in range(max_rank + 1)])


def _standard(
    level: str, judged: tuple[Flat, Flat, Array], width: int, scored: Array, cutoffs: Sequence[int], n: int
) -> dict[str, Array]:
    """P, R, nDCG, Success at each cutoff and RR, over each row's ranking (first occurrences, in
    order) against its qrels and their grades (``judged``); NaN where the row is not ``scored``."""
    ranking, qrels, grades = judged
    ranked = ranking.where(first_in_row(ranking))
    rank = rank_in_row(ranked.row, n)
    last = last_in_row(qrels)  # a qrel given twice: the last grade counts, as in a dict
    qrels, grades = qrels.where(last), grades[last]
    grade = lookup(pair_key(ranked.row, ranked.code, width), pair_key(qrels.row, qrels.code, width), grades, 0)
    relevant = grade >= 1
    gain = np.where(relevant, grade, 0).astype(float)
    ideal_rows, ideal_gain = qrels.row[grades >= 1], grades[grades >= 1].astype(float)
    n_relevant = per_row(ideal_rows, n)
    order = np.lexsort((-ideal_gain, ideal_rows))
    ideal_rows, ideal_gain = ideal_rows[order], ideal_gain[order]
    ideal_rank = rank_in_row(ideal_rows, n)
    discount = _discounts(max(int(rank.max()) if len(rank) else 0, int(ideal_rank.max()) if len(ideal_rank) else 0))
    out: dict[str, Array] = {}
    for k in cutoffs:
        top = rank <= k
        hits = per_row(ranked.row[top & relevant], n)
        out[f"P@{k}"] = hits / k
        out[f"R@{k}"] = hits / np.maximum(n_relevant, 1)  # no relevant chunk: no hit either, 0
        out[f"Success@{k}"] = (hits > 0).astype(float)
        dcg = per_row(ranked.row[top], n, gain[top] / discount[rank[top]])
        itop = ideal_rank <= k
        idcg = per_row(ideal_rows[itop], n, ideal_gain[itop] / discount[ideal_rank[itop]])
        out[f"nDCG@{k}"] = dcg / np.where(idcg > 0, idcg, 1.0)  # no relevant chunk: no gain either, 0
    found_rows, found_rank = ranked.row[relevant], rank[relevant]
    first = first_of_row(found_rows)
    rr = np.zeros(n)
    rr[found_rows[first]] = 1.0 / found_rank[first]
    out["RR"] = rr
    return {f"{level}:{name}": np.where(scored, out[name], math.nan) for name in measure_names(cutoffs)}


def same_doc_pairs(
    batches: pa.Table | Iterable[pa.Table | pa.RecordBatch], caps: Mapping[str, int | None]
) -> pd.DataFrame:
    """Every (query, document with >= 2 relevant chunks) pair of a table (``config``,
    ``relevant_chunks`` and ``delivered_relevant`` are read): ``row`` (in the table), ``doc_id``,
    ``relevant``, ``delivered``, ``recall`` and ``cap_aware`` (``caps``: config -> cap, None: none)."""
    batches = _in_batches(batches)
    parts = []
    offset = 0
    for batch in batches:
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        (relevant, delivered), chunk_vocab = row_coded(table, ["relevant_chunks", "delivered_relevant"])
        doc_code, doc_vocab = _doc_codes(chunk_vocab, pa.array([], pa.string()))
        cap = _per_row_cap(table.column("config"), caps)
        part = _same_doc_pairs(relevant, delivered, len(chunk_vocab), doc_code, doc_vocab, cap)
        parts.append(part.assign(row=part["row"] + offset))
        offset += table.num_rows
    return pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]


def _same_doc_pairs(
    relevant: Flat, delivered: Flat, n_chunks: int, doc_code: Array, doc_vocab: pa.Array, cap: Array
) -> pd.DataFrame:
    """(row, doc_id, relevant, delivered, recall, cap_aware) for every (query, document) with two or more
    relevant chunks, by row then document name; the cap-aware recall divides by min(cap, relevant chunks)
    and is clipped at 1."""
    width = max(n_chunks, 1)
    got = np.isin(pair_key(relevant.row, relevant.code, width), pair_key(delivered.row, delivered.code, width))
    docs = Flat(relevant.row, doc_code[relevant.code])
    first = first_position(docs)  # a (query, document) group is named by its first relevant chunk
    size = np.bincount(first, minlength=len(docs))
    got_n = np.bincount(first, weights=got.astype(float), minlength=len(docs)).astype(np.int64)
    pair = np.flatnonzero(size >= 2)
    rows, size, got_n = docs.row[pair], size[pair], got_n[pair]
    names = doc_vocab.take(pa.array(docs.code[pair]))
    order = _by_row_and_name(rows, names)
    rows, size, got_n = rows[order], size[order], got_n[order]
    row_cap = cap[rows]
    denom = np.where(np.isnan(row_cap), size, np.minimum(row_cap, size))
    return pd.DataFrame(
        {
            "row": rows,
            "doc_id": np.asarray(names.take(pa.array(order)).to_pylist(), dtype=object),
            "relevant": size,
            "delivered": got_n,
            "recall": got_n / size,
            "cap_aware": np.minimum(1.0, got_n / denom),
        }
    )


def _pair_means(pairs: pd.DataFrame, n: int) -> dict[str, Array]:
    """Pairs per row and the row's mean recalls (NaN without pairs), as ``np.mean`` of the row's pairs gives."""
    rows = pairs["row"].to_numpy()
    count = per_row(rows, n)
    out = {"same_doc_pairs": count}
    for name, column in (("same_doc_recall", "recall"), ("same_doc_recall_cap_aware", "cap_aware")):
        values = pairs[column].to_numpy()
        mean = np.divide(per_row(rows, n, values), count, out=np.full(n, math.nan), where=count > 0)
        # np.mean adds eight or more values pairwise, not left to right: do the same for those rows
        for r in np.flatnonzero(count >= 8):
            mean[r] = float(np.mean(values[rows == r]))
        out[name] = mean
    return out


KIND_LABELS = np.array(["chunk", "vector", "rank"], dtype=object)


def _breakdown(
    dup: Array, first: Array, keys: Flat, chunks: Flat, docs: Flat, vocabs: tuple[pa.Array, pa.Array]
) -> pd.DataFrame:
    """For the content duplicates at positions ``dup`` (``first``: the first chunk with that content):
    the cause (the same true chunk, or another), the D1 kind of the key and the identity of the row
    (``vocabs``: the keys' and the stored doc ids' vocabularies)."""
    key_vocab, doc_vocab = vocabs
    same_chunk = chunks.code[dup] == chunks.code[first]
    kind = np.where(_np(pc.starts_with(key_vocab, VECTOR_PREFIX)), 1, 0)  # key_kind, on the vocabulary
    kind = np.where(_np(pc.starts_with(key_vocab, RANK_PREFIX)), 2, kind)[keys.code[dup]]
    no_doc = _np(pc.equal(doc_vocab, ""))[docs.code[dup]] if len(dup) else np.zeros(0, dtype=bool)
    identity = np.select(
        [kind == 0, kind == 2, no_doc], ["doc_id and chunk_index", "no identity", "no doc_id"], "no chunk_index"
    )
    return pd.DataFrame(
        {
            "row": keys.row[dup],
            "cause": np.where(same_chunk, COPY, SAME_TEXT).astype(object),
            "key_kind": KIND_LABELS[kind],
            "row_identity": identity.astype(object),
        }
    )


def _over_cap(docs: Flat, vocab: pa.Array, cap: Array, n: int) -> tuple[pd.DataFrame, Array]:
    """The (row, document, chunks) groups above the row's cap, by row then document name; and each
    row's largest count (0 for a row without documents)."""
    first = first_position(docs)  # a (query, document) group is named by its first chunk
    count = np.bincount(first, minlength=len(docs))
    heads = np.flatnonzero(count)
    rows, code, count = docs.row[heads], docs.code[heads], count[heads]
    largest = np.zeros(n, dtype=np.int64)
    np.maximum.at(largest, rows, count)
    over = count > cap[rows]
    rows, count = rows[over], count[over]
    names = vocab.take(pa.array(code[over]))
    order = _by_row_and_name(rows, names)
    doc_ids = names.take(pa.array(order)).to_pylist()
    frame = pd.DataFrame({"row": rows[order], "doc_id": doc_ids, "chunks": count[order]})
    return frame, largest
