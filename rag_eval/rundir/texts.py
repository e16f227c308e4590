"""Texts behind the per-query rows, for reading a run: chunk texts and evidence spans.

``per_query.parquet`` names chunks by their true evidence key only; a report that shows what was delivered
and what was lost needs the texts too, so the run writes ``texts.parquet`` (every chunk relevant to, hit by or
delivered for any row) and ``spans.parquet`` (the evidence spans of the replayed queries), both from what it
already prepared. Their columns: docs/harness.md, "The run directory".

>>> from rag_eval.datasets.beir import Dataset, Document, Query, SpanQrel
>>> from rag_eval.datasets.chunking import parse_chunker
>>> from rag_eval.datasets.labels import chunk_dataset
>>> doc = Document(id="d", title="T", text="One. Two. Three.")
>>> ds = Dataset(name="x", path=None, split="test", documents={"d": doc}, queries={"q": Query(id="q", text="?")},
...              qrels=(), spans=(SpanQrel("q", "d", 5, 9, 1),), checksum="")
>>> corpus = chunk_dataset(ds, parse_chunker("sentences:size=1,overlap=0"))
>>> chunk_texts(corpus, ["d#chunk-1", "unknown:7"]).to_pylist()[0]["text"]
'Two.'
>>> evidence_spans(ds, ["q"]).to_pylist()
[{'query_id': 'q', 'doc_id': 'd', 'start': 5, 'end': 9, 'score': 1}]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from rag_eval.datasets.beir import Dataset
from rag_eval.datasets.labels import ChunkedCorpus
from rag_eval.files import write_parquet

TEXTS_FILE = "texts.parquet"
SPANS_FILE = "spans.parquet"

TEXTS_SCHEMA = pa.schema(
    [
        ("chunk", pa.string()),
        ("doc_id", pa.string()),
        ("chunk_index", pa.int32()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("title", pa.string()),
        ("source", pa.string()),
        ("text", pa.string()),
    ]
)
SPANS_SCHEMA = pa.schema(
    [
        ("query_id", pa.string()),
        ("doc_id", pa.string()),
        ("start", pa.int64()),
        ("end", pa.int64()),
        ("score", pa.int32()),
    ]
)
_CHUNK_COLUMNS = ("relevant_chunks", "hit_chunks", "member_chunks")
TEXT_COLUMNS = ("query_id", *_CHUNK_COLUMNS)  # what write_texts reads of the rows


def chunks_named(per_query: pa.Table | Iterable[pa.Table]) -> set[str]:
    """Every true chunk key the rows mention (relevant, hit or delivered); the rows may come
    one part at a time (each part's distinct keys are taken, never every row's lists)."""
    out: set[str] = set()
    for part in [per_query] if isinstance(per_query, pa.Table) else per_query:
        for column in _CHUNK_COLUMNS:
            if column in part.column_names:
                out.update(pc.unique(pc.list_flatten(part.column(column))).to_pylist())
    return out


def chunk_texts(corpus: ChunkedCorpus, keys: Iterable[str]) -> pa.Table:
    """The chunks of ``corpus`` named in ``keys``, in corpus order; unknown keys are skipped
    (a hit the ingest plan does not know is shown by its key alone)."""
    wanted = set(keys)
    rows = [
        {
            "chunk": c.key,
            "doc_id": c.doc_id,
            "chunk_index": c.chunk_index,
            "start": c.start,
            "end": c.end,
            "title": c.title,
            "source": c.source,
            "text": c.content,
        }
        for c in corpus.chunks
        if c.key in wanted
    ]
    return pa.Table.from_pylist(rows, schema=TEXTS_SCHEMA)


def evidence_spans(dataset: Dataset, query_ids: Iterable[str]) -> pa.Table:
    """The evidence spans of the given queries (none for a data set without span qrels)."""
    wanted = set(query_ids)
    rows = [
        {"query_id": s.query_id, "doc_id": s.doc_id, "start": s.start, "end": s.end, "score": s.score}
        for s in dataset.spans or ()
        if s.query_id in wanted
    ]
    return pa.Table.from_pylist(rows, schema=SPANS_SCHEMA)


def write_texts(
    directory: Path, per_query: pa.Table | Iterable[pa.Table], corpus: ChunkedCorpus, dataset: Dataset
) -> tuple[Path, Path]:
    """Write ``texts.parquet`` and ``spans.parquet`` of a run (atomically) beside its rows (a table,
    or its parts one at a time)."""
    query_ids: set[str] = set()

    def parts() -> Iterator[pa.Table]:
        for part in [per_query] if isinstance(per_query, pa.Table) else per_query:
            query_ids.update(part.column("query_id").to_pylist())
            yield part

    chunks = chunks_named(parts())
    texts, spans = directory / TEXTS_FILE, directory / SPANS_FILE
    write_parquet(texts, chunk_texts(corpus, chunks))
    write_parquet(spans, evidence_spans(dataset, query_ids))
    return texts, spans
