"""Labels for a collection someone else built: its rows located in the source documents, as chunks.

Each distinct located range becomes one chunk of its document, so the span labels, the measures and the report
work on a foreign collection as on one of ours; evidence the collection lost becomes a chunk no row carries, so
recall says what the collection costs. The rules: docs/existing-collection.md, "How the labels are resolved".

>>> from rag_eval.datasets.beir import Dataset, Document, Query, Qrel, SpanQrel
>>> from rag_eval.existing.locate import StoredRow
>>> doc = Document(id="d", title="", text="Check the lag. Restart it. Rotate the logs.")
>>> ds = Dataset(name="x", path=None, split="test", documents={"d": doc}, queries={"q": Query(id="q", text="?")},
...              qrels=(Qrel("q", "d", 1),), spans=(SpanQrel("q", "d", 15, 26, 1), SpanQrel("q", "d", 27, 43, 1)),
...              checksum="")
>>> res = resolve(ds, [StoredRow(pk="7", doc_id="d", text="Check the lag. Restart it.")])
>>> (dict(res.chunk_of), [(c.key, c.start, c.end) for c in res.corpus.chunks], sorted(res.uncovered))
({'7': 'd#chunk-0'}, [('d#chunk-0', 0, 26), ('d#chunk-1', 27, 43)], ['d#chunk-1'])
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag_eval.datasets.beir import Dataset, SpanQrel
from rag_eval.datasets.chunking import Chunk
from rag_eval.datasets.labels import ChunkedCorpus
from rag_eval.existing.locate import DEFAULT_FUZZY_THRESHOLD, How, Location, StoredRow, locate_rows

RESOLVED_CHUNKER = "collection"  # the corpus's chunker spec: the collection's own rows, located


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolution:
    """The collection's rows as chunks of the source documents (see the module docstring)."""

    corpus: ChunkedCorpus  # the located chunks of each document, then its lost evidence
    chunk_of: Mapping[str, str]  # primary key -> chunk key, for every located row
    locations: tuple[Location, ...]  # one per row, in the order the rows were given
    uncovered: frozenset[str]  # chunk keys standing for evidence spans no row covers
    labelled_docs: tuple[str, ...]  # documents with a positive label (span or document qrel), sorted
    spans: int  # positive evidence spans of the split
    uncovered_spans: int  # of those, overlapped by no located row

    @property
    def rows(self) -> int:
        return len(self.locations)

    @property
    def unresolved(self) -> int:
        return sum(1 for loc in self.locations if not loc.resolved)

    @property
    def unresolved_share(self) -> float:
        return self.unresolved / self.rows if self.rows else 0.0

    def missing_docs(self) -> list[str]:
        """Labelled documents no row was located in."""
        found = {loc.doc_id for loc in self.locations if loc.resolved}
        return [d for d in self.labelled_docs if d not in found]

    def report(self) -> dict[str, Any]:
        """The counts a reader needs to trust the labels (``resolution`` in ``summary.json``)."""
        how = Counter(loc.how.value for loc in self.locations)
        per_range = Counter((loc.doc_id, loc.start, loc.end) for loc in self.locations if loc.resolved)
        missing = self.missing_docs()
        return {
            "rows": self.rows,
            "located": {h.value: how.get(h.value, 0) for h in How},
            "unresolved_share": self.unresolved_share,
            "labelled_documents": len(self.labelled_docs),
            "labelled_documents_found": len(self.labelled_docs) - len(missing),
            "labelled_documents_missing": missing,
            "evidence_spans": self.spans,
            "evidence_spans_uncovered": self.uncovered_spans,
            "chunks": len(self.corpus.chunks) - len(self.uncovered),
            "rows_copying_another": sum(n - 1 for n in per_range.values()),
            "rows_in_another_document": sum(1 for loc in self.locations if loc.moved),
            "rows_placed_by_guess": sum(1 for loc in self.locations if loc.ambiguous),
            "rows_with_offsets_that_disagree": sum(1 for loc in self.locations if loc.offsets_disagreed),
            "fuzzy_score_min": min((loc.score for loc in self.locations if loc.how is How.FUZZY), default=None),
        }


def labelled_documents(dataset: Dataset) -> list[str]:
    """Documents with a positive label in the split: a document qrel or an evidence span."""
    docs = {q.doc_id for q in dataset.qrels if q.score > 0}
    docs.update(s.doc_id for s in dataset.spans or () if s.score > 0)
    return sorted(docs)


def resolve(
    dataset: Dataset,
    rows: Sequence[StoredRow],
    *,
    fuzzy_threshold: float = DEFAULT_FUZZY_THRESHOLD,
    min_overlap_chars: int = 1,
) -> Resolution:
    """Locate ``rows`` in ``dataset``'s documents and make the chunks the labels are computed on."""
    texts = {d.id: d.text for d in dataset.documents.values()}
    locations = locate_rows(texts, rows, fuzzy_threshold=fuzzy_threshold)
    return from_locations(dataset, locations, min_overlap_chars=min_overlap_chars)


def from_locations(dataset: Dataset, locations: Sequence[Location], *, min_overlap_chars: int = 1) -> Resolution:
    """The chunks of rows already located (a resolution read back from its cache)."""
    ranges: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for loc in locations:
        if loc.doc_id is not None:
            ranges[loc.doc_id].add((loc.start, loc.end))
    spans = [s for s in dataset.spans or () if s.score > 0]
    lost = _uncovered(spans, ranges, min_overlap_chars)
    chunks: list[Chunk] = []
    key_of: dict[tuple[str, int, int], str] = {}
    uncovered: set[str] = set()
    for doc in dataset.documents.values():
        located = sorted(ranges.get(doc.id, ()))
        for index, (start, end) in enumerate([*located, *sorted(lost.get(doc.id, ()))]):
            chunk = Chunk(doc_id=doc.id, chunk_index=index, start=start, end=end, content=doc.text[start:end],
                          title=doc.title, source=doc.source, category=doc.category)  # fmt: skip
            chunks.append(chunk)
            if index < len(located):
                key_of[(doc.id, start, end)] = chunk.key
            else:
                uncovered.add(chunk.key)
    chunk_of = {loc.pk: key_of[(loc.doc_id, loc.start, loc.end)] for loc in locations if loc.doc_id is not None}
    return Resolution(
        corpus=ChunkedCorpus(chunker_spec=RESOLVED_CHUNKER, chunks=tuple(chunks)),
        chunk_of=chunk_of,
        locations=tuple(locations),
        uncovered=frozenset(uncovered),
        labelled_docs=tuple(labelled_documents(dataset)),
        spans=len(spans),
        uncovered_spans=sum(1 for s in spans if (s.start, s.end) in lost.get(s.doc_id, ())),
    )


def _uncovered(
    spans: Sequence[SpanQrel], ranges: Mapping[str, set[tuple[int, int]]], min_overlap_chars: int
) -> dict[str, set[tuple[int, int]]]:
    """The evidence spans no located range overlaps by ``min_overlap_chars``, by document."""
    lost: dict[str, set[tuple[int, int]]] = defaultdict(set)
    for span in spans:
        if not any(min(e, span.end) - max(s, span.start) >= min_overlap_chars for s, e in ranges.get(span.doc_id, ())):
            lost[span.doc_id].add((span.start, span.end))
    return lost
