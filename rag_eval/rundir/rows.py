"""Per-query rows: one per (query, config), the single source of truth for every metric.

A row holds facts, not scores: what Milvus returned, what the payload delivered, which relevant chunks were
delivered and, for each that was not, the stage that lost it, so any measure can be computed again from the
rows. Chunks are named by their true evidence key even when the row that carried them had no identity. The
columns and the loss stages: docs/harness.md, "The run directory".
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple, Protocol

import pyarrow as pa

from rag_eval.content import content_sha
from rag_eval.core.guard import EvidenceGuard
from rag_eval.core.lookup import LookupRecord
from rag_eval.core.postprocess import Stage
from rag_eval.core.projector import ProjectedPayload
from rag_eval.core.types import EvidenceBlock, KnowledgeSearchHit
from rag_eval.datasets.chunking import Chunk

NOT_IN_COLLECTION = "not_in_collection"  # relevant evidence no row of the collection holds
LOSS_STAGE = {
    Stage.DEDUP: "dedup",
    Stage.CAP: "cap",
    Stage.TRUNCATION: "return_n",
    Stage.DOCUMENT_DEDUP: "document_dedup",
    Stage.CONTENT_DEDUP: "content_dedup",
}

_STR_LIST = pa.list_(pa.string())
_INT_LIST = pa.list_(pa.int32())
_FLOAT_LIST = pa.list_(pa.float64())

SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("config", pa.string()),
        ("query_index", pa.int32()),
        ("query_text", pa.string()),
        ("judged", pa.bool_()),  # has at least one relevant chunk
        ("origin", pa.string()),  # "labelled" (the data set's queries) or "traffic" (a query log's, no labels)
        ("occurrences", pa.int32()),  # how often the query occurs (a log's identical requests; 1 for a data set's)
        # delivered payload, one entry per excerpt
        ("returned_keys", _STR_LIST),  # projected document_id (evidence key, or source for legacy)
        ("returned_doc_ids", _STR_LIST),  # doc_id as stored ("" when missing)
        ("returned_ranks", _INT_LIST),
        ("returned_scores", _FLOAT_LIST),
        ("returned_content_sha", _STR_LIST),
        ("returned_chars", _INT_LIST),
        # delivered chunks (members of the excerpts), in payload order
        ("member_keys", _STR_LIST),  # D1 evidence key of the row that carried it
        ("member_chunks", _STR_LIST),  # true chunk key
        ("member_doc_ids", _STR_LIST),  # doc_id as stored ("" when missing)
        ("member_content_sha", _STR_LIST),
        ("member_block", _INT_LIST),  # 1-based excerpt the member sits in
        # raw hits of this config (its own retrieve-k), in Milvus order
        ("hit_keys", _STR_LIST),
        ("hit_chunks", _STR_LIST),
        ("hit_content_sha", _STR_LIST),
        ("hit_scores", _FLOAT_LIST),
        # labels and where relevant chunks were lost
        ("relevant_chunks", _STR_LIST),
        ("relevant_grades", _INT_LIST),
        ("relevant_docs", _STR_LIST),
        ("relevant_doc_grades", _INT_LIST),
        ("delivered_relevant", _STR_LIST),
        ("lost_chunks", _STR_LIST),
        ("lost_stages", _STR_LIST),
        # post-process trace counts and payload size
        ("n_hits", pa.int32()),
        ("n_dedup", pa.int32()),
        ("n_cap", pa.int32()),
        ("n_truncated", pa.int32()),
        ("n_blocks", pa.int32()),
        ("guard_references", pa.int32()),  # distinct chunk references (D1 keys of delivered chunks)
        ("guard_violations", pa.int32()),  # of those, not mapping 1:1 to an excerpt (EvidenceGuard)
        ("payload_chars", pa.int32()),
        # latency, microseconds
        ("transform_us", pa.float64()),
        ("search_us", pa.float64()),
        ("postprocess_us", pa.float64()),
        ("projection_us", pa.float64()),
        ("e2e_us", pa.float64()),
        ("postsearch_cpu_us", pa.float64()),  # the thread's CPU time of post-process + projection
    ]
)
LABELLED, TRAFFIC = "labelled", "traffic"  # the origins of a query
LATENCY_COLUMNS = ("transform_us", "search_us", "postprocess_us", "projection_us", "e2e_us", "postsearch_cpu_us")


class WrittenRow(Protocol):
    """A row rag_eval wrote itself (the ingest plan's): its vector id and the chunk it really is."""

    @property
    def vector_id(self) -> int: ...

    @property
    def chunk(self) -> Chunk: ...


@dataclass(frozen=True, slots=True)
class Truth:
    """Ground truth of one run: which chunk each vector id is, and the labels.

    ``lost``: relevant chunks no row of the collection carries (evidence a collection built elsewhere does
    not hold); they stay relevant and are reported as lost ``not_in_collection``. ``traffic``: the queries
    of a query log (no labels), by id, with how often each occurs; ``categories``: the category filter a log
    recorded for a request, searched with in place of the config's.
    """

    chunks: Mapping[str, str]  # vector id (as text) -> true chunk key
    relevance: Mapping[str, Mapping[str, int]]  # query -> true chunk key -> grade
    doc_relevance: Mapping[str, Mapping[str, int]]  # query -> doc id -> grade
    lost: frozenset[str] = frozenset()
    traffic: Mapping[str, int] = field(default_factory=dict)  # a query log's query id -> its occurrences
    categories: Mapping[str, str] = field(default_factory=dict)  # a query log's query id -> its request's filter
    # answers already given (a replay asks about the same rows again and again)
    _chunks: dict[str | None, str] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def of_rows(
        cls,
        rows: Iterable[WrittenRow],
        relevance: Mapping[str, Mapping[str, int]],
        doc_relevance: Mapping[str, Mapping[str, int]],
    ) -> Truth:
        """The truth of rows rag_eval wrote itself: each vector id is the chunk its ingest plan says."""
        return cls(chunks={str(r.vector_id): r.chunk.key for r in rows}, relevance=relevance,
                   doc_relevance=doc_relevance)  # fmt: skip

    def chunks_of(self, vector_ids: Iterable[str | None]) -> list[str]:
        """:meth:`chunk_of` of each vector id, in order (those answered before without a call each)."""
        known = self._chunks.get
        return [c if (c := known(v)) is not None else self.chunk_of(v) for v in vector_ids]

    def chunk_of(self, vector_id: str | None) -> str:
        known = self._chunks.get(vector_id)
        if known is not None:
            return known
        chunk = self.chunks.get(vector_id) if vector_id is not None else None
        chunk = chunk if chunk is not None else f"unknown:{vector_id}"
        self._chunks[vector_id] = chunk
        return chunk


class RowTiming(NamedTuple):
    """What a lookup's record does not carry of its timing: the search as timed for it, and the thread's CPU
    time of post-process and projection (NaN when it was not measured)."""

    search_us: float
    cpu_us: float = float("nan")


class RowLookup(NamedTuple):
    """One lookup to make a row of: the query, the config's name, its record and timing."""

    query_id: str
    query_index: int
    config: str
    record: LookupRecord
    timing: RowTiming


class _HitColumns(NamedTuple):
    """What a row holds of its hits alone: the hit columns, and each evidence key's true chunk and stored doc id."""

    keys: list[str]
    chunks: list[str]
    content_sha: list[str]
    scores: list[float]
    true_of_key: dict[str, str]
    stored_doc_of_key: dict[str, str]


def _hit_columns(record: LookupRecord, truth: Truth) -> _HitColumns:
    hit_keys, hits = record.candidates.keys, record.candidates.hits  # columns: no candidate objects needed
    hit_chunks = truth.chunks_of([h.vector_id for h in hits])
    true_of_key, stored_doc_of_key = _key_identities(hit_keys, hits, hit_chunks)
    sha = list(map(content_sha, [h.content for h in hits]))
    return _HitColumns(list(hit_keys), hit_chunks, sha, [float(h.score) for h in hits], true_of_key, stored_doc_of_key)


def build_row(
    *, query_id: str, query_index: int, config: str, record: LookupRecord, truth: Truth, timing: RowTiming
) -> dict[str, Any]:
    """The per-query row of one lookup (:data:`SCHEMA`): what was returned and delivered, the true chunk
    behind every key, the labels, the relevant chunks lost and at which stage, the counts and the timings."""
    return _row(RowLookup(query_id, query_index, config, record, timing), truth, _hit_columns(record, truth))


def build_rows(lookups: Iterable[RowLookup], truth: Truth) -> list[dict[str, Any]]:
    """:func:`build_row` of each lookup, in order. Lookups of one search (the same tuple of hits, as configs
    sharing a search at one width get it) share the columns made of their hits: made once, the same lists in
    each of their rows (equal values, as :func:`build_row` makes them for each)."""
    made: dict[int, tuple[object, _HitColumns]] = {}  # id of a tuple of hits -> (the tuple, kept alive; its columns)
    out = []
    for lookup in lookups:
        hits = lookup.record.candidates.hits
        entry = made.get(id(hits))
        if entry is None:
            entry = made[id(hits)] = (hits, _hit_columns(lookup.record, truth))
        out.append(_row(lookup, truth, entry[1]))
    return out


def _row(lookup: RowLookup, truth: Truth, hit_columns: _HitColumns) -> dict[str, Any]:
    query_id, query_index, config, record, (search_us, cpu_us) = lookup
    payload = record.payload
    true_of_key, stored_doc_of_key = hit_columns.true_of_key, hit_columns.stored_doc_of_key
    block_by_key = {b.key: b for b in record.result.blocks}
    member_keys, member_block, member_sha = _delivered_members(payload, block_by_key)
    member_chunks = [true_of_key[k] for k in member_keys]
    delivered = set(member_chunks)
    relevant = truth.relevance.get(query_id, {})
    relevant_chunks = sorted(relevant)
    lost_chunks, lost_stages = _losses(record, truth, relevant_chunks, delivered, true_of_key)
    guard = EvidenceGuard().check(payload, member_keys)
    timings = record.timings
    transform_us = timings.transform_ns / 1e3
    post_us = timings.postprocess_ns / 1e3
    proj_us = timings.projection_ns / 1e3
    counts = record.outcome.stage_counts()
    docs = truth.doc_relevance.get(query_id, {})
    relevant_docs = sorted(docs)
    return {
        "query_id": query_id,
        "config": config,
        "query_index": query_index,
        "query_text": record.hints.normalized_query,
        "judged": bool(relevant),
        "origin": TRAFFIC if query_id in truth.traffic else LABELLED,
        "occurrences": truth.traffic.get(query_id, 1),
        "returned_keys": [e.document_id for e in payload.excerpts],
        "returned_doc_ids": [block_by_key[e.document_id].doc_id or "" for e in payload.excerpts],
        "returned_ranks": [e.rank for e in payload.excerpts],
        "returned_scores": [float(e.score) for e in payload.excerpts],
        "returned_content_sha": [content_sha(e.content) for e in payload.excerpts],
        "returned_chars": [len(e.content) for e in payload.excerpts],
        "member_keys": member_keys,
        "member_chunks": member_chunks,
        "member_doc_ids": [stored_doc_of_key[k] for k in member_keys],
        "member_content_sha": member_sha,
        "member_block": member_block,
        "hit_keys": hit_columns.keys,
        "hit_chunks": hit_columns.chunks,
        "hit_content_sha": hit_columns.content_sha,
        "hit_scores": hit_columns.scores,
        "relevant_chunks": relevant_chunks,
        "relevant_grades": [relevant[c] for c in relevant_chunks],
        "relevant_docs": relevant_docs,
        "relevant_doc_grades": [docs[d] for d in relevant_docs],
        "delivered_relevant": [c for c in relevant_chunks if c in delivered],
        "lost_chunks": lost_chunks,
        "lost_stages": lost_stages,
        "n_hits": len(hit_columns.keys),
        "n_dedup": counts["dedup"],
        "n_cap": counts["cap"],
        "n_truncated": counts["truncation"],
        "n_blocks": len(payload.excerpts),
        "guard_references": len(set(member_keys)),
        "guard_violations": len(guard.violations),
        "payload_chars": payload.total_chars,
        "transform_us": transform_us,
        "search_us": search_us,
        "postprocess_us": post_us,
        "projection_us": proj_us,
        "e2e_us": transform_us + search_us + post_us + proj_us,
        "postsearch_cpu_us": cpu_us,
    }


def _key_identities(
    hit_keys: Sequence[str], hits: Sequence[KnowledgeSearchHit], hit_chunks: Sequence[str]
) -> tuple[dict[str, str], dict[str, str]]:
    """Evidence key -> true chunk and stored doc id, from the first candidate that carried it."""
    true_of_key: dict[str, str] = {}
    stored_doc_of_key: dict[str, str] = {}
    for key, hit, chunk in zip(hit_keys, hits, hit_chunks, strict=True):
        if key not in true_of_key:
            true_of_key[key] = chunk
            stored_doc_of_key[key] = hit.doc_id or ""
    return true_of_key, stored_doc_of_key


def _delivered_members(
    payload: ProjectedPayload, block_by_key: Mapping[str, EvidenceBlock]
) -> tuple[list[str], list[int], list[str]]:
    """(key, block rank, content hash) of every member delivered, in payload order."""
    member_keys: list[str] = []
    member_block: list[int] = []
    member_sha: list[str] = []
    for excerpt in payload.excerpts:
        block = block_by_key[excerpt.document_id]
        for span in block.members:
            if span.key in excerpt.delivered_members:
                member_keys.append(span.key)
                member_block.append(excerpt.rank)
                member_sha.append(content_sha(block.content[span.start : span.end]))
    return member_keys, member_block, member_sha


def _losses(
    record: LookupRecord,
    truth: Truth,
    relevant_chunks: Sequence[str],
    delivered: set[str],
    true_of_key: Mapping[str, str],
) -> tuple[list[str], list[str]]:
    """The relevant chunks (given in key order) not delivered, and the stage that lost each."""
    lost_chunks: list[str] = []
    lost_stages: list[str] = []
    best_stage: dict[str, tuple[int, Stage]] | None = None  # from the trace, made only when a chunk is lost
    budget_of: dict[str, str] = {}
    for chunk in relevant_chunks:
        if chunk in delivered:
            continue
        lost_chunks.append(chunk)
        if chunk in truth.lost:
            lost_stages.append(NOT_IN_COLLECTION)
            continue
        if best_stage is None:
            best_stage = _best_stage_per_chunk(record, truth)
            budget_of = {loss.key: loss.budget.value for loss in record.payload.member_losses}
        lost_stages.append(_loss_stage(chunk, best_stage, budget_of, true_of_key))
    return lost_chunks, lost_stages


def _best_stage_per_chunk(record: LookupRecord, truth: Truth) -> dict[str, tuple[int, Stage]]:
    """For each true chunk among the hits, the trace stage of its best-ranked non-dedup copy."""
    out: dict[str, tuple[int, Stage]] = {}
    for entry in record.outcome.trace:
        if entry.stage is Stage.DEDUP:
            continue  # its key's primary is a copy of the same chunk and carries the fate
        chunk = truth.chunk_of(entry.vector_id)
        if chunk not in out or entry.original_rank < out[chunk][0]:
            out[chunk] = (entry.original_rank, entry.stage)
    return out


def _loss_stage(
    chunk: str, best: Mapping[str, tuple[int, Stage]], budget_of: Mapping[str, str], true_of_key: Mapping[str, str]
) -> str:
    if chunk not in best:
        return "not_retrieved"
    stage = best[chunk][1]
    if stage in LOSS_STAGE:
        return LOSS_STAGE[stage]
    # selected (returned or merged into a block) but not delivered whole: a projector budget
    for key, budget in budget_of.items():
        if true_of_key.get(key) == chunk:
            return f"projector_{budget}"
    return "projector"


_ROW_VALUES = itemgetter(*SCHEMA.names)  # a row's values in column order


def rows_to_table(rows: list[dict[str, Any]]) -> pa.Table:
    """The rows as a table of :data:`SCHEMA`: the table ``pa.Table.from_pylist`` makes of them, its columns taken
    by one transposition in C (rows missing a column: theirs, the missing values null)."""
    try:
        columns = list(zip(*map(_ROW_VALUES, rows), strict=True))
    except KeyError:  # a row without some column
        return pa.Table.from_pylist(rows, schema=SCHEMA)
    if not columns:  # no rows
        return pa.Table.from_pylist(rows, schema=SCHEMA)
    return pa.Table.from_arrays(columns, schema=SCHEMA)
