"""The shipped incident knowledge base: built files match the sources, and the set is hard enough.

``datasets/incident-kb/src`` holds the sources (markdown documents, TOML queries
with quoted evidence); the files next to it are built from them by
``python -m rag_eval.datasets.quotes datasets/incident-kb/src datasets/incident-kb``.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections import Counter, defaultdict
from functools import cache
from pathlib import Path
from typing import Any

from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC, parse_chunker
from rag_eval.datasets.quotes import build_dataset
from tests.conftest import SHIPPED as KB

SRC = KB / "src"
BUILT = ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv", "qrels/test.spans.tsv")


@cache
def corpus() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (KB / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    return {row["_id"]: row for row in rows}


@cache
def queries() -> dict[str, dict[str, Any]]:
    rows = [json.loads(line) for line in (KB / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    return {row["_id"]: row for row in rows}


@cache
def spans() -> dict[str, list[tuple[str, int, int]]]:
    lines = (KB / "qrels" / "test.spans.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "query-id\tcorpus-id\tstart\tend\tscore"
    out: dict[str, list[tuple[str, int, int]]] = defaultdict(list)
    for line in lines[1:]:
        qid, doc_id, start, end, _score = line.split("\t")
        out[qid].append((doc_id, int(start), int(end)))
    return dict(out)


@cache
def source_quotes() -> dict[str, Counter[tuple[str, str]]]:
    """Evidence (doc, quote) of every query, read straight from the TOML sources."""
    out: dict[str, Counter[tuple[str, str]]] = {}
    for path in sorted((SRC / "queries").rglob("*.toml")):
        for query in tomllib.loads(path.read_text(encoding="utf-8")).get("query", []):
            out[query["id"]] = Counter((ev["doc"], ev["quote"]) for ev in query.get("evidence", []))
    return out


def paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def multi_chunk_queries() -> set[str]:
    chunker = parse_chunker(DEFAULT_CHUNKER_SPEC)
    ranges = {doc_id: chunker.ranges(row["text"]) for doc_id, row in corpus().items()}
    found = set()
    for qid, query_spans in spans().items():
        by_doc: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for doc_id, start, end in query_spans:
            by_doc[doc_id].append((start, end))
        for doc_id, doc_spans in by_doc.items():
            hit = {i for i, (cs, ce) in enumerate(ranges[doc_id]) for s, e in doc_spans if s < ce and cs < e}
            if len(doc_spans) >= 2 and len(hit) >= 2:
                found.add(qid)
    return found


def test_built_files_equal_a_fresh_build(tmp_path: Path) -> None:
    report = build_dataset(SRC, tmp_path)
    for name in BUILT:
        assert (KB / name).read_bytes() == (tmp_path / name).read_bytes(), (
            f"{name} is stale or edited by hand: rebuild with "
            "python -m rag_eval.datasets.quotes datasets/incident-kb/src datasets/incident-kb"
        )
    assert report.documents == len(corpus())
    assert report.queries == len(queries())
    assert report.multi_chunk_queries == len(multi_chunk_queries())


def test_documents() -> None:
    docs = corpus()
    assert len(docs) >= 40
    for doc_id, row in docs.items():
        assert 2_000 <= len(row["text"]) <= 6_000, doc_id
        assert row["metadata"]["category"].strip(), doc_id
        assert row["metadata"]["source"].strip(), doc_id
        assert row["title"].strip(), doc_id


def test_queries() -> None:
    assert len(queries()) >= 200
    unanswerable = [qid for qid, q in queries().items() if not q["metadata"]["answerable"]]
    assert len(unanswerable) >= 5
    for qid in unanswerable:
        assert qid not in spans()


def test_every_answerable_query_has_one_to_four_spans() -> None:
    for qid, query in queries().items():
        if query["metadata"]["answerable"]:
            assert 1 <= len(spans().get(qid, [])) <= 4, qid
    assert set(spans()) <= set(queries())


def test_every_span_is_its_quote_inside_its_document() -> None:
    docs, quotes = corpus(), source_quotes()
    for qid, query_spans in spans().items():
        found: Counter[tuple[str, str]] = Counter()
        for doc_id, start, end in query_spans:
            text = docs[doc_id]["text"]
            assert 0 <= start < end <= len(text), (qid, doc_id)
            found[(doc_id, text[start:end])] += 1
        assert found == quotes[qid], qid


def test_document_qrels_match_spans() -> None:
    lines = (KB / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "query-id\tcorpus-id\tscore"
    pairs = {tuple(line.split("\t")[:2]) for line in lines[1:]}
    assert pairs == {(qid, doc_id) for qid, found in spans().items() for doc_id, _, _ in found}


def test_most_queries_need_several_chunks() -> None:
    share = len(multi_chunk_queries()) / len(queries())
    assert share >= 0.60, f"only {share:.1%} of queries are multi-chunk under {DEFAULT_CHUNKER_SPEC}"


def test_revised_documents_repeat_most_of_their_first_version() -> None:
    docs = corpus()
    revisions = {doc_id: row["metadata"]["revises"] for doc_id, row in docs.items() if "revises" in row["metadata"]}
    close = []
    for v2, v1 in revisions.items():
        assert v1 in docs, v2
        old, new = paragraphs(docs[v1]["text"]), set(paragraphs(docs[v2]["text"]))
        assert docs[v1]["text"] != docs[v2]["text"], v2
        if sum(p in new for p in old) / len(old) >= 0.5:
            close.append(v2)
    assert len(close) >= 3, close


def test_boilerplate_paragraphs_repeat_across_documents() -> None:
    seen: dict[str, set[str]] = defaultdict(set)
    for doc_id, row in corpus().items():
        for paragraph in paragraphs(row["text"]):
            if len(paragraph) >= 80 and not paragraph.startswith("#"):
                seen[paragraph].add(doc_id)
    # a v1 and its revision share paragraphs by design; count distinct documents outside such pairs
    revises = {doc_id: row["metadata"].get("revises", doc_id) for doc_id, row in corpus().items()}
    boilerplate = [p for p, ids in seen.items() if len({revises[i] for i in ids}) >= 3]
    assert len(boilerplate) >= 3


def test_total_size_under_10_mb() -> None:
    total = sum(p.stat().st_size for p in KB.rglob("*") if p.is_file())
    assert total < 10 * 1024 * 1024


def test_shipped_vectors_match_their_chunks_and_queries() -> None:
    """The loader path of `make eval`: no model needed, and stale vectors would be refused."""
    from rag_eval.datasets.beir import load_beir
    from rag_eval.datasets.labels import chunk_dataset
    from rag_eval.embed.embedders import EmbedderSpec
    from rag_eval.embed.vector_files import VectorFile
    from rag_eval.replay.prepare import normalized_queries, vector_files

    dataset = load_beir(KB, "test")
    chunks = chunk_dataset(dataset, parse_chunker(DEFAULT_CHUNKER_SPEC))
    chunk_file, query_file = vector_files(KB / "vectors", DEFAULT_CHUNKER_SPEC)
    model = EmbedderSpec().model_id
    VectorFile.read(chunk_file).check_matches([c.content for c in chunks.chunks], model_id=model, regenerate_hint="")
    VectorFile.read(query_file).check_matches(normalized_queries(dataset), model_id=model, regenerate_hint="")
    assert len(chunks.chunks) == 587  # the count the data set README gives
    assert int(VectorFile.read(chunk_file).metadata["dim"]) == 384
