"""Labels through resolution: a collection's rows, located, label like the chunker that wrote them."""

from __future__ import annotations

import pytest

from rag_eval.datasets.beir import Dataset, Document, Qrel, Query, SpanQrel, load_beir
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.datasets.labels import chunk_dataset, chunk_qrels
from rag_eval.existing.locate import StoredRow
from rag_eval.existing.resolution import resolve
from tests.conftest import SHIPPED, shared_datasets_dir

TEXT = "Check the lag. Restart it. Rotate the logs. Keep 30 days."


def dataset(spans: tuple[SpanQrel, ...]) -> Dataset:
    return Dataset(
        name="x", path=None, split="test", documents={"d": Document(id="d", title="T", text=TEXT)},  # type: ignore[arg-type]
        queries={"q": Query(id="q", text="?"), "r": Query(id="r", text="?")},
        qrels=tuple(Qrel(s.query_id, s.doc_id, 1) for s in spans), spans=spans, checksum="",
    )  # fmt: skip


def span(text: str, query: str = "q") -> SpanQrel:
    start = TEXT.index(text)
    return SpanQrel(query, "d", start, start + len(text), 1)


def test_copies_share_a_chunk_and_lost_evidence_stays_relevant() -> None:
    ds = dataset((span("Restart it."), span("Keep 30 days."), span("Rotate the logs.", "r")))
    rows = [
        StoredRow(pk="1", doc_id="d", text="Check the lag. Restart it."),
        StoredRow(pk="2", doc_id=None, text="check the lag.  restart it."),  # a re-ingested copy, no doc id
        StoredRow(pk="3", doc_id="d", text="Rotate the logs."),
        StoredRow(pk="4", doc_id="d", text="Not from this corpus at all, nothing alike."),
    ]
    res = resolve(ds, rows)
    assert dict(res.chunk_of) == {"1": "d#chunk-0", "2": "d#chunk-0", "3": "d#chunk-1"}
    (lost,) = res.uncovered
    assert next(c for c in res.corpus.chunks if c.key == lost).content == "Keep 30 days."
    labels = chunk_qrels(ds, res.corpus)
    assert dict(labels.relevance["q"]) == {"d#chunk-0": 1, lost: 1}
    assert dict(labels.relevance["r"]) == {"d#chunk-1": 1}
    report = res.report()
    assert report["located"] == {"offsets": 0, "exact": 2, "normalised": 1, "fuzzy": 0, "unresolved": 1}
    assert (report["rows"], report["unresolved_share"], report["rows_copying_another"]) == (4, 0.25, 1)
    assert (report["evidence_spans"], report["evidence_spans_uncovered"], report["chunks"]) == (3, 1, 2)
    assert report["labelled_documents_missing"] == []


def test_a_labelled_document_without_rows_is_missing_and_all_its_evidence_lost() -> None:
    ds = dataset((span("Restart it."),))
    res = resolve(ds, [])
    assert res.missing_docs() == ["d"] and res.uncovered_spans == 1
    assert res.report()["unresolved_share"] == 0.0


def _labels_by_range(ds: Dataset, chunks: dict[str, tuple[str, int, int]], relevance: dict) -> dict:  # type: ignore[type-arg]
    return {q: {chunks[k]: g for k, g in grades.items()} for q, grades in relevance.items()}


@pytest.mark.parametrize(
    "spec", ["sentences:size=3,overlap=0", "sentences:size=2,overlap=1", "chars:size=400,overlap=80"]
)
def test_a_collection_of_any_chunker_labels_as_that_chunker_does(spec: str) -> None:
    """The shipped data set chunked by ``spec`` and stored as another team would (no chunk index on every
    third row, every seventh stored twice): every row is located on its own chunk's range, so the labels are
    exactly the ones the chunker's own chunks give."""
    ds = load_beir(SHIPPED, "test")
    corpus = chunk_dataset(ds, parse_chunker(spec))
    rows = []
    for n, c in enumerate(corpus.chunks):
        rows.append(StoredRow(pk=str(n), doc_id=c.doc_id, text=c.content,
                              chunk_index=None if n % 3 == 2 else c.chunk_index))  # fmt: skip
        if n % 7 == 6:
            rows.append(StoredRow(pk=str(100_000 + n), doc_id=c.doc_id, text=c.content))
    res = resolve(ds, rows)
    assert res.unresolved == 0 and not res.uncovered
    ranges = {c.key: (c.doc_id, c.start, c.end) for c in corpus.chunks}
    located = {c.key: (c.doc_id, c.start, c.end) for c in res.corpus.chunks}
    for n, c in enumerate(corpus.chunks):  # every row on its own chunk's range, copies included
        assert located[res.chunk_of[str(n)]] == ranges[c.key]
        if n % 7 == 6:
            assert res.chunk_of[str(100_000 + n)] == res.chunk_of[str(n)]
    got, expected = chunk_qrels(ds, res.corpus).relevance, chunk_qrels(ds, corpus).relevance
    assert _labels_by_range(ds, located, dict(got)) == _labels_by_range(ds, ranges, dict(expected))
    assert res.report()["rows_copying_another"] == sum(1 for n in range(len(corpus.chunks)) if n % 7 == 6)


@pytest.mark.parametrize("spec", ["sentences:size=3,overlap=0", "chars:size=400,overlap=80"])
def test_rows_without_a_doc_id_are_placed_exactly_where_their_text_is_in_one_place(spec: str) -> None:
    """Every fifth row without a doc id: those whose text is in one place of the corpus land there; those
    whose text two documents share (the shipped set's v1/v2 pages) are counted as placed by a guess."""
    ds = load_beir(SHIPPED, "test")
    corpus = chunk_dataset(ds, parse_chunker(spec))
    rows = [
        StoredRow(pk=str(n), doc_id=None if n % 5 == 4 else c.doc_id, text=c.content,
                  chunk_index=None if n % 3 == 2 else c.chunk_index)
        for n, c in enumerate(corpus.chunks)
    ]  # fmt: skip
    res = resolve(ds, rows)
    ranges = {c.key: (c.doc_id, c.start, c.end) for c in corpus.chunks}
    located = {c.key: (c.doc_id, c.start, c.end) for c in res.corpus.chunks}
    guessed = {loc.pk for loc in res.locations if loc.ambiguous}
    assert guessed and all(rows[int(pk)].doc_id is None for pk in guessed)
    assert res.report()["rows_placed_by_guess"] == len(guessed)
    for n, c in enumerate(corpus.chunks):
        if str(n) not in guessed:
            assert located[res.chunk_of[str(n)]] == ranges[c.key]


@pytest.mark.shared_data
def test_clapnq_rechunked_labels_through_resolution() -> None:
    """ClapNQ re-chunked into overlapping character windows and stored with doc ids but no chunk index:
    the located rows label exactly as the chunker's own chunks do."""
    shared = shared_datasets_dir()
    if shared is None or not (shared / "clapnq" / "corpus.jsonl").is_file():
        pytest.skip("no shared ClapNQ data set here")
    ds = load_beir(shared / "clapnq", "dev")
    corpus = chunk_dataset(ds, parse_chunker("chars:size=300,overlap=40"))
    rows = [StoredRow(pk=str(n), doc_id=c.doc_id, text=c.content) for n, c in enumerate(corpus.chunks)]
    res = resolve(ds, rows)
    assert res.unresolved == 0 and not res.uncovered
    ranges = {c.key: (c.doc_id, c.start, c.end) for c in corpus.chunks}
    located = {c.key: (c.doc_id, c.start, c.end) for c in res.corpus.chunks}
    assert _labels_by_range(ds, located, dict(chunk_qrels(ds, res.corpus).relevance)) == _labels_by_range(
        ds, ranges, dict(chunk_qrels(ds, corpus).relevance)
    )
