"""Resolving a collection's labels: 1,000 documents x 50 rows located in their source documents (`make bench`).

The rows are sentence chunks of synthetic runbooks, as a collection built elsewhere holds them: one in ten
without a doc id (located across the corpus), one in twenty with its case and spacing changed (found
folded), a few re-ingested copies. Untimed (``make test``): 50 documents.
"""

from __future__ import annotations

import random

import pytest

from rag_eval.datasets.beir import Dataset, Document, Qrel, Query, SpanQrel
from rag_eval.datasets.chunking import SentenceWindowChunker
from rag_eval.existing.locate import StoredRow
from rag_eval.existing.resolution import resolve
from tests.benchmarks.conftest import Results, timed


def collection(n_docs: int, rows_per_doc: int = 50, seed: int = 11) -> tuple[Dataset, list[StoredRow]]:
    rng = random.Random(seed)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 9))) for _ in range(6000)]
    docs = {}
    for i in range(n_docs):
        sentences = [" ".join(rng.choice(words) for _ in range(rng.randint(6, 18))).capitalize() + "."
                     for _ in range(rows_per_doc)]  # fmt: skip
        docs[f"d{i}"] = Document(id=f"d{i}", title="", text=" ".join(sentences))
    spans = []
    for n, doc in enumerate(docs.values()):
        a = rng.randrange(0, len(doc.text) - 200)
        spans.append(SpanQrel(f"q{n}", doc.id, a, a + 150, 1))
    queries = {s.query_id: Query(id=s.query_id, text="?") for s in spans}
    qrels = tuple(Qrel(s.query_id, s.doc_id, 1) for s in spans)
    dataset = Dataset(name="bench", path=None, split="test", documents=docs,  # type: ignore[arg-type]
                      queries=queries, qrels=qrels, spans=tuple(spans), checksum="")  # fmt: skip
    rows: list[StoredRow] = []
    for doc in docs.values():
        for c in SentenceWindowChunker(size=1, overlap=0).split(doc.id, doc.text):
            r = rng.random()
            text = c.content.upper() if r < 0.05 else c.content
            rows.append(StoredRow(pk=str(len(rows) + 1), doc_id=None if r > 0.9 else doc.id, text=text))
            if rng.random() < 0.02:
                rows.append(StoredRow(pk=str(len(rows) + 1), doc_id=doc.id, text=c.content))
    return dataset, rows


@pytest.fixture(scope="module")
def labelled(pytestconfig: pytest.Config) -> tuple[Dataset, list[StoredRow]]:
    return collection(1000 if timed(pytestconfig) else 50)


def test_resolution_1000_documents(benchmark, results: Results, labelled: tuple[Dataset, list[StoredRow]]) -> None:  # type: ignore[no-untyped-def]
    dataset, rows = labelled
    res = benchmark.pedantic(resolve, args=(dataset, rows), rounds=3, iterations=1)
    results.record("resolution[1000x50]", benchmark)
    assert res.unresolved == 0 and not res.uncovered
