"""The texts behind a run's rows: the chunk keys the rows name, those chunks' texts in corpus order, the
evidence spans of the replayed queries, both files written beside the rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from rag_eval.datasets.beir import Dataset, Document, Query, SpanQrel
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.datasets.labels import chunk_dataset
from rag_eval.rundir.texts import (
    SPANS_SCHEMA,
    TEXTS_SCHEMA,
    chunk_texts,
    chunks_named,
    evidence_spans,
    write_texts,
)

DOCS = {
    "d": Document(id="d", title="T", text="One. Two. Three."),
    "e": Document(id="e", title="E", text="Alpha. Beta.", metadata={"source": "kb/e.md"}),
}
QUERIES = {"q1": Query(id="q1", text="two?"), "q2": Query(id="q2", text="beta?"), "q3": Query(id="q3", text="?")}
SPANS = (SpanQrel("q1", "d", 5, 9, 2), SpanQrel("q2", "e", 7, 12, 1), SpanQrel("q1", "e", 0, 6, 1))


def dataset(spans: tuple[SpanQrel, ...] | None = SPANS) -> Dataset:
    return Dataset(
        name="x", path=Path("x"), split="test", documents=DOCS, queries=QUERIES, qrels=(), spans=spans, checksum=""
    )


CORPUS = chunk_dataset(dataset(), parse_chunker("sentences:size=1,overlap=0"))

ROWS_TYPE = pa.list_(pa.string())


def rows(qids: list[str], relevant: list[list[str]], hits: list[list[str]], members: list[list[str]]) -> pa.Table:
    return pa.table(
        {
            "query_id": qids,
            "relevant_chunks": pa.array(relevant, ROWS_TYPE),
            "hit_chunks": pa.array(hits, ROWS_TYPE),
            "member_chunks": pa.array(members, ROWS_TYPE),
        }
    )


def test_the_chunk_keys_the_rows_name_relevant_hit_or_delivered() -> None:
    table = rows(["q1", "q2"], [["d#chunk-1"], []], [["d#chunk-1", "e#chunk-0"], ["e#chunk-1"]], [["e#chunk-0"], []])
    assert chunks_named(table) == {"d#chunk-1", "e#chunk-0", "e#chunk-1"}
    parts = [table.slice(0, 1), table.slice(1, 1)]
    assert chunks_named(iter(parts)) == {"d#chunk-1", "e#chunk-0", "e#chunk-1"}  # one part at a time
    assert chunks_named(pa.table({"query_id": ["q1"]})) == set()  # rows without those columns
    assert chunks_named([]) == set()


def test_the_texts_of_the_chunks_named_in_corpus_order_unknown_keys_skipped() -> None:
    got = chunk_texts(CORPUS, ["e#chunk-1", "d#chunk-1", "missing#chunk-0", "d#chunk-9"])
    assert got.schema == TEXTS_SCHEMA
    assert got.to_pylist() == [
        {"chunk": "d#chunk-1", "doc_id": "d", "chunk_index": 1, "start": 5, "end": 9, "title": "T", "source": "d",
         "text": "Two."},
        {"chunk": "e#chunk-1", "doc_id": "e", "chunk_index": 1, "start": 7, "end": 12, "title": "E",
         "source": "kb/e.md", "text": "Beta."},
    ]  # fmt: skip
    assert chunk_texts(CORPUS, []).num_rows == 0 and chunk_texts(CORPUS, []).schema == TEXTS_SCHEMA


def test_the_evidence_spans_of_the_queries_asked_in_the_data_sets_order() -> None:
    got = evidence_spans(dataset(), ["q1", "q3"])
    assert got.schema == SPANS_SCHEMA
    assert got.to_pylist() == [
        {"query_id": "q1", "doc_id": "d", "start": 5, "end": 9, "score": 2},
        {"query_id": "q1", "doc_id": "e", "start": 0, "end": 6, "score": 1},
    ]
    assert evidence_spans(dataset(spans=None), ["q1"]).num_rows == 0  # a data set without span qrels
    assert evidence_spans(dataset(), []).schema == SPANS_SCHEMA


def test_both_files_are_written_beside_the_rows_from_their_parts(tmp_path: Path) -> None:
    table = rows(["q2", "q3"], [["e#chunk-1"], []], [["e#chunk-1"], ["d#chunk-0"]], [[], []])
    texts, spans = write_texts(tmp_path, iter([table.slice(0, 1), table.slice(1, 1)]), CORPUS, dataset())
    assert (texts, spans) == (tmp_path / "texts.parquet", tmp_path / "spans.parquet")
    assert pq.read_table(texts).column("chunk").to_pylist() == ["d#chunk-0", "e#chunk-1"]
    assert pq.read_table(texts).column("text").to_pylist() == ["One.", "Beta."]
    assert pq.read_table(spans).to_pylist() == [{"query_id": "q2", "doc_id": "e", "start": 7, "end": 12, "score": 1}]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spans.parquet", "texts.parquet"]  # no temporary left
