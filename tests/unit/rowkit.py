"""Build per-query rows the way the harness does, from hand-written hits, without Milvus.

A stored row is written as production has it (clean, without chunk_index, without doc_id, or a
re-ingested copy) and always knows the chunk it really is, so a test states the ground truth once
and the pipeline, ``build_row`` and the measures run exactly as in a replay.

>>> rows = [stored(1, "d#chunk-0"), stored(2, "d#chunk-0", chunk_index=False)]
>>> row = replay_row(RagConfig(), [(rows[0], 0.9), (rows[1], 0.8)], {"d#chunk-0": 1})
>>> row["member_keys"], row["member_chunks"]
(['d#chunk-0', 'vector:2'], ['d#chunk-0', 'd#chunk-0'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from rag_eval.core.config import RagConfig
from rag_eval.core.lookup import LookupRecord, Pipeline
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.core.types import KnowledgeSearchHit
from rag_eval.datasets.chunking import Chunk
from rag_eval.ingest.collection import IngestRow
from rag_eval.rundir.rows import RowTiming, Truth, build_row, rows_to_table

HINTS = KnowledgeQueryTransformer().transform("why is the replica behind")


def stored(
    vid: int, chunk: str, *, doc_id: bool = True, chunk_index: bool = True, content: str | None = None
) -> IngestRow:
    """Row ``vid`` really holding ``chunk`` (``doc#chunk-i``), written with or without its identity."""
    doc, _, index = chunk.partition("#chunk-")
    text = content if content is not None else f"text of {chunk}"
    true = Chunk(doc_id=doc, chunk_index=int(index), start=0, end=len(text), content=text, source=f"kb/{doc}.md")
    kind = "clean" if doc_id and chunk_index else ("legacy" if doc_id else "missing_doc")
    return IngestRow(
        vector_id=vid,
        chunk=true,
        doc_id=doc if doc_id else None,
        chunk_index=true.chunk_index if chunk_index else None,
        kind=kind,
    )


def as_hit(row: IngestRow, score: float) -> KnowledgeSearchHit:
    """The hit Milvus returns for ``row``: identity as written, source and title always present."""
    return KnowledgeSearchHit(
        id=str(row.vector_id),
        content=row.chunk.content,
        score=score,
        doc_id=row.doc_id,
        chunk_index=row.chunk_index,
        vector_id=str(row.vector_id),
        source=row.chunk.source,
        title=row.chunk.doc_id.upper(),
    )


def truth_for(rows: Sequence[IngestRow], relevance: Mapping[str, int], query_id: str = "q") -> Truth:
    docs: dict[str, int] = {}
    for chunk, grade in relevance.items():
        doc = chunk.split("#chunk-")[0]
        docs[doc] = max(docs.get(doc, 0), grade)
    return Truth.of_rows(rows, relevance={query_id: dict(relevance)}, doc_relevance={query_id: docs})


def replay_record(config: RagConfig, hits: Sequence[tuple[IngestRow, float]]) -> LookupRecord:
    """Post-process, pack and project ``hits`` (in the port's order) under ``config``."""
    return Pipeline(config).process(HINTS, [as_hit(row, score) for row, score in hits])


def replay_row(
    config: RagConfig,
    hits: Sequence[tuple[IngestRow, float]],
    relevance: Mapping[str, int],
    *,
    extra_rows: Sequence[IngestRow] = (),
    name: str = "c",
    query_id: str = "q",
) -> dict[str, Any]:
    """The per-query row of one query under one config; ``extra_rows`` are stored but not hit."""
    truth = truth_for([row for row, _ in hits] + list(extra_rows), relevance, query_id)
    record = replay_record(config, hits)
    return build_row(
        query_id=query_id, query_index=0, config=name, record=record, truth=truth, timing=RowTiming(search_us=10.0)
    )


def as_table(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Rows through the Parquet schema, as the run store writes and reads them."""
    return rows_to_table(list(rows)).to_pandas()
