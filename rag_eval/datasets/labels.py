"""Chunk-level relevance from span-level evidence, so labels survive re-chunking.

A chunk is relevant to a query when its character range overlaps one of the query's
evidence spans in that document by at least ``min_overlap_chars`` characters and at
least ``min_overlap_fraction`` of the span. Its grade is the highest score among the
spans it overlaps. A data set without spans (plain BEIR) falls back to document-level
relevance: every chunk of a relevant document is relevant, and ``level`` says so.

>>> from rag_eval.datasets.beir import Dataset, Document, Query, Qrel, SpanQrel
>>> from rag_eval.datasets.chunking import parse_chunker
>>> doc = Document(id="d", title="", text="One. Two. Three. Four.")
>>> ds = Dataset(name="x", path=None, split="test", documents={"d": doc}, queries={"q": Query(id="q", text="?")},
...              qrels=(Qrel("q", "d", 1),), spans=(SpanQrel("q", "d", 0, 4, 1), SpanQrel("q", "d", 17, 22, 1)),
...              checksum="")
>>> corpus = chunk_dataset(ds, parse_chunker("sentences:size=2,overlap=0"))
>>> dict(chunk_qrels(ds, corpus).relevance["q"])
{'d#chunk-0': 1, 'd#chunk-1': 1}
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from rag_eval.datasets.beir import Dataset
from rag_eval.datasets.chunking import Chunk, Chunker


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkedCorpus:
    chunker_spec: str
    chunks: tuple[Chunk, ...]  # in document order, then chunk order

    def by_doc(self) -> dict[str, list[Chunk]]:
        out: dict[str, list[Chunk]] = {}
        for c in self.chunks:
            out.setdefault(c.doc_id, []).append(c)
        return out


def chunk_dataset(dataset: Dataset, chunker: Chunker) -> ChunkedCorpus:
    chunks: list[Chunk] = []
    for doc in dataset.documents.values():
        chunks.extend(chunker.split(doc.id, doc.text, title=doc.title, source=doc.source, category=doc.category))
    return ChunkedCorpus(chunker_spec=chunker.spec, chunks=tuple(chunks))


@dataclass(frozen=True, slots=True, kw_only=True)
class ChunkQrels:
    level: Literal["span", "document"]
    relevance: Mapping[str, Mapping[str, int]]  # query id -> chunk key -> grade (> 0)
    min_overlap_chars: int
    min_overlap_fraction: float

    def relevant(self, query_id: str) -> Mapping[str, int]:
        return self.relevance.get(query_id, {})

    def per_document(self, query_id: str) -> dict[str, list[str]]:
        """Relevant chunk keys of one query grouped by document id."""
        out: dict[str, list[str]] = {}
        for key in self.relevant(query_id):
            doc_id = key.rsplit("#chunk-", 1)[0]
            out.setdefault(doc_id, []).append(key)
        return out


def chunk_qrels(
    dataset: Dataset, corpus: ChunkedCorpus, *, min_overlap_chars: int = 1, min_overlap_fraction: float = 0.0
) -> ChunkQrels:
    if min_overlap_chars < 1:
        raise ValueError("min_overlap_chars must be >= 1")
    if not 0.0 <= min_overlap_fraction <= 1.0:
        raise ValueError("min_overlap_fraction must be within [0, 1]")
    by_doc = corpus.by_doc()
    relevance: dict[str, dict[str, int]] = {}
    if dataset.spans is None:
        for qid, docs in dataset.relevant_docs().items():
            for did, grade in docs.items():
                for c in by_doc.get(did, ()):
                    relevance.setdefault(qid, {})[c.key] = grade
        return ChunkQrels(level="document", relevance=relevance, min_overlap_chars=1, min_overlap_fraction=0.0)
    for span in dataset.spans:
        if span.score <= 0:
            continue
        need = max(min_overlap_chars, math.ceil(min_overlap_fraction * (span.end - span.start)))
        for c in by_doc.get(span.doc_id, ()):
            overlap = min(c.end, span.end) - max(c.start, span.start)
            if overlap >= need:
                grades = relevance.setdefault(span.query_id, {})
                grades[c.key] = max(grades.get(c.key, 0), span.score)
    return ChunkQrels(
        level="span",
        relevance=relevance,
        min_overlap_chars=min_overlap_chars,
        min_overlap_fraction=min_overlap_fraction,
    )
