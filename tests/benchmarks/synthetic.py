"""Synthetic inputs for the benchmarks, shaped like production: hit lists for post-processing and a
per-query table for the measures.

Hit lists (:func:`hits`): skewed documents (a few long runbooks hold most chunks), 10% re-ingested
copies (a key seen earlier in the list, new vector id), 10% rows without chunk_index, 5% without
doc_id, scores decreasing with ties, contents of a few hundred characters.

Per-query table (:func:`per_query_table`): one row per query of one config with ``width`` hits,
all delivered (the widest ranking the measures see), 1-6 relevant chunks in one or two documents
(grades 1-2), half of them among the hits, the same identity mix, vectorised so that 100,000 rows
take seconds to build.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pyarrow as pa

from rag_eval.core.types import KnowledgeSearchHit
from rag_eval.rundir.rows import LATENCY_COLUMNS, SCHEMA

DUPLICATE_SHARE = 0.10
NO_CHUNK_INDEX_SHARE = 0.10
NO_DOC_ID_SHARE = 0.05


def hits(k: int, seed: int = 1) -> list[KnowledgeSearchHit]:
    """``k`` hits in the port's order (score descending), the realistic candidate mix."""
    rnd = random.Random(seed)
    n_docs = max(2, k // 4)
    out: list[KnowledgeSearchHit] = []
    next_chunk: dict[str, int] = {}
    score = 1.0
    for i in range(k):
        if out and rnd.random() < DUPLICATE_SHARE:
            twin = out[rnd.randrange(len(out))]  # a re-ingested copy: same identity and text, new vector id
            doc, chunk, content, source = twin.doc_id, twin.chunk_index, twin.content, twin.source
        else:
            doc = f"doc-{min(int(rnd.paretovariate(1.1)) - 1, n_docs - 1)}"  # skewed: doc-0 is the longest
            chunk = next_chunk.get(doc, 0)
            next_chunk[doc] = chunk + 1
            content = f"{doc} part {chunk}: " + "x" * rnd.randrange(100, 400)
            source = f"kb/{doc}.md"
            if rnd.random() < NO_CHUNK_INDEX_SHARE:
                chunk = None
            if rnd.random() < NO_DOC_ID_SHARE:
                doc = None
        if rnd.random() > 0.2:  # 20% tie with the previous hit
            score -= rnd.random() / (2 * k)
        out.append(
            KnowledgeSearchHit(
                id=str(10_000_000 + i),
                content=content,
                score=score,
                scores={"dense": score},
                doc_id=doc,
                chunk_index=chunk,
                vector_id=str(10_000_000 + i),
                source=source,
                title=source,
            )
        )
    return out


def copies(k: int) -> list[KnowledgeSearchHit]:
    """The worst case: ``k`` re-ingested copies of one chunk (one evidence key), equal scores."""
    return [
        KnowledgeSearchHit(
            id=str(i),
            content="The replica applies the relay log in one thread.",
            score=0.5,
            doc_id="runbook-7",
            chunk_index=3,
            vector_id=str(i),
            source="kb/runbook-7.md",
        )
        for i in range(k)
    ]


def distinct(k: int) -> list[KnowledgeSearchHit]:
    """``k`` hits of ``k`` different chunks of different documents: what :func:`copies` is compared with."""
    return [
        KnowledgeSearchHit(
            id=str(i),
            content="The replica applies the relay log in one thread.",
            score=1.0 - i / (2 * k),
            doc_id=f"runbook-{i}",
            chunk_index=3,
            vector_id=str(i),
            source=f"kb/runbook-{i}.md",
        )
        for i in range(k)
    ]


def _lists(values: pa.Array, width: int, n: int) -> pa.ListArray:
    return pa.ListArray.from_arrays(pa.array(np.arange(0, (n + 1) * width, width, dtype=np.int32)), values)


def _ragged(values: pa.Array, lengths: np.ndarray) -> pa.ListArray:  # type: ignore[type-arg]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), values)


def per_query_table(
    n: int, width: int = 20, *, seed: int = 7, config: str = "evidence", offset: int = 0
) -> pa.Table:
    """``n`` per-query rows of one config, ``width`` hits each (all delivered), as the run store holds them
    (queries ``q<offset>`` on: a larger run is made of such tables, each with its own seed)."""
    rng = np.random.default_rng(seed)
    n_docs = max(100, n // 5)
    chunks_per_doc = 40
    # hits: 70% distinct chunks of the query's topic document, the rest from others; 10% copies
    topic = rng.integers(0, n_docs, size=(n, 1))
    doc = np.where(rng.random((n, width)) < 0.7, topic, rng.integers(0, n_docs, size=(n, width)))
    chunk = np.argsort(rng.random((n, chunks_per_doc)), axis=1)[:, :width] % chunks_per_doc
    copy = rng.random((n, width)) < DUPLICATE_SHARE  # a re-ingested copy of an earlier hit of the row
    copy[:, 0] = False
    for col in range(1, width):
        source = rng.integers(0, col, size=n)
        doc[:, col] = np.where(copy[:, col], doc[np.arange(n), source], doc[:, col])
        chunk[:, col] = np.where(copy[:, col], chunk[np.arange(n), source], chunk[:, col])
    chunk_id = (doc * chunks_per_doc + chunk).ravel()
    no_index = rng.random(n * width) < NO_CHUNK_INDEX_SHARE
    no_doc = rng.random(n * width) < NO_DOC_ID_SHARE
    n_chunks = n_docs * chunks_per_doc
    chunk_keys = pa.array([f"doc-{c // chunks_per_doc}#chunk-{c % chunks_per_doc}" for c in range(n_chunks)])
    doc_names = pa.array([f"doc-{d}" for d in range(n_docs)])
    text_of = np.where(np.arange(n_chunks) % 31 == 30, 0, np.arange(n_chunks))  # some boilerplate: one text
    shas = pa.array([f"{(t * 2654435761) % 2**64:016x}" for t in text_of.tolist()])
    true_chunk = chunk_keys.take(pa.array(chunk_id))
    keys = true_chunk.to_numpy(zero_copy_only=False).astype(object)
    legacy = np.flatnonzero(no_index | no_doc)  # a row without identity gets a vector: key (its own id)
    keys[legacy] = [f"vector:{v}" for v in legacy.tolist()]
    member_keys = pa.array(keys, type=pa.string())
    stored_doc = np.where(no_doc, "", doc_names.take(pa.array(doc.ravel())).to_numpy(zero_copy_only=False))
    sha = shas.take(pa.array(chunk_id))
    # relevant chunks: 1-6 in the topic document (sometimes a second one), about half among the hits
    n_rel = rng.integers(1, 7, size=n)
    rel_doc = np.repeat(topic.ravel(), n_rel)
    second = rng.random(len(rel_doc)) < 0.2
    rel_doc = np.where(second, (rel_doc + 1) % n_docs, rel_doc)
    rel_chunk = np.minimum(rng.geometric(0.15, size=len(rel_doc)) - 1, chunks_per_doc - 1)
    rel_id = rel_doc * chunks_per_doc + rel_chunk
    rel_row = np.repeat(np.arange(n), n_rel)
    order = np.lexsort((chunk_keys.take(pa.array(rel_id)).to_numpy(zero_copy_only=False), rel_row))
    rel_row, rel_id, rel_doc = rel_row[order], rel_id[order], rel_doc[order]
    keep = np.ones(len(rel_id), dtype=bool)
    keep[1:] = (rel_row[1:] != rel_row[:-1]) | (rel_id[1:] != rel_id[:-1])  # each relevant chunk once
    rel_row, rel_id, rel_doc = rel_row[keep], rel_id[keep], rel_doc[keep]
    rel_len = np.bincount(rel_row, minlength=n)
    space = n_docs * chunks_per_doc
    delivered = np.isin(rel_row * space + rel_id, np.repeat(np.arange(n), width) * space + chunk_id)
    docs_row, docs_first = np.unique(rel_row * n_docs + rel_doc, return_index=True)
    doc_row = docs_row // n_docs
    doc_len = np.bincount(doc_row, minlength=n)
    lost_len = np.bincount(rel_row[~delivered], minlength=n)
    stages = np.array(["not_retrieved", "cap", "return_n", "dedup"], dtype=object)
    columns = {
        "query_id": pa.array([f"q{i}" for i in range(offset, offset + n)]),
        "config": pa.array([config] * n),
        "query_index": pa.array(np.arange(offset, offset + n, dtype=np.int32)),
        "query_text": pa.array([f"query {i}" for i in range(offset, offset + n)]),
        "judged": pa.array(np.ones(n, dtype=bool)),
        "origin": pa.array(["labelled"] * n),
        "occurrences": pa.array(np.ones(n, dtype=np.int32)),
        "returned_keys": _lists(member_keys, width, n),
        "returned_doc_ids": _lists(pa.array(stored_doc), width, n),
        "returned_ranks": _lists(pa.array(np.tile(np.arange(1, width + 1, dtype=np.int32), n)), width, n),
        "returned_scores": _lists(pa.array(np.sort(rng.random((n, width)))[:, ::-1].ravel()), width, n),
        "returned_content_sha": _lists(sha, width, n),
        "returned_chars": _lists(pa.array(rng.integers(100, 400, n * width, dtype=np.int32)), width, n),
        "member_keys": _lists(member_keys, width, n),
        "member_chunks": _lists(true_chunk, width, n),
        "member_doc_ids": _lists(pa.array(stored_doc), width, n),
        "member_content_sha": _lists(sha, width, n),
        "member_block": _lists(pa.array(np.tile(np.arange(1, width + 1, dtype=np.int32), n)), width, n),
        "hit_keys": _lists(member_keys, width, n),
        "hit_chunks": _lists(true_chunk, width, n),
        "hit_content_sha": _lists(sha, width, n),
        "hit_scores": _lists(pa.array(np.sort(rng.random((n, width)))[:, ::-1].ravel()), width, n),
        "relevant_chunks": _ragged(chunk_keys.take(pa.array(rel_id)), rel_len),
        "relevant_grades": _ragged(pa.array(rng.integers(1, 3, len(rel_id), dtype=np.int32)), rel_len),
        "relevant_docs": _ragged(doc_names.take(pa.array(rel_doc[docs_first])), doc_len),
        "relevant_doc_grades": _ragged(pa.array(np.ones(len(docs_row), dtype=np.int32)), doc_len),
        "delivered_relevant": _ragged(chunk_keys.take(pa.array(rel_id[delivered])), rel_len - lost_len),
        "lost_chunks": _ragged(chunk_keys.take(pa.array(rel_id[~delivered])), lost_len),
        "lost_stages": _ragged(pa.array(stages[rng.integers(0, 4, int(lost_len.sum()))].tolist()), lost_len),
        "n_hits": pa.array(np.full(n, width, dtype=np.int32)),
        "n_dedup": pa.array(np.zeros(n, dtype=np.int32)),
        "n_cap": pa.array(np.zeros(n, dtype=np.int32)),
        "n_truncated": pa.array(np.zeros(n, dtype=np.int32)),
        "n_blocks": pa.array(np.full(n, width, dtype=np.int32)),
        "guard_references": pa.array(np.full(n, width, dtype=np.int32)),
        "guard_violations": pa.array(np.zeros(n, dtype=np.int32)),
        "payload_chars": pa.array(rng.integers(1000, 8000, n, dtype=np.int32)),
        **{
            col: pa.array(rng.lognormal(3, 0.5, n))
            for col in LATENCY_COLUMNS
        },
    }
    return pa.table(columns, schema=SCHEMA)


def write_dataset(root: Path, n_queries: int, *, n_docs: int = 2000, seed: int = 11) -> Path:
    """A BEIR data set with span labels and its precomputed vectors (no model needed): ``n_docs`` runbooks of
    six sentences, ``n_queries`` queries each with evidence in one or two documents, random unit vectors.
    For runs with many queries (the memory of a 100,000-query run)."""
    from rag_eval.core.transform import KnowledgeQueryTransformer
    from rag_eval.datasets.beir import load_beir
    from rag_eval.datasets.chunking import DEFAULT_CHUNKER_SPEC, parse_chunker
    from rag_eval.datasets.labels import chunk_dataset
    from rag_eval.embed.embedders import DEFAULT_MODEL, EmbedderSpec
    from rag_eval.embed.vector_files import VectorFile

    rng = np.random.default_rng(seed)
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    sentence = "Step {i} of runbook {d}: check the {w} counter and compare it with the {v} threshold."
    words = ["lag", "lock", "disk", "cache", "pool", "queue", "index", "backup"]
    docs = []
    for d in range(n_docs):
        text = " ".join(sentence.format(i=i, d=d, w=words[(d + i) % 8], v=words[(d * 3 + i) % 8]) for i in range(6))
        docs.append({"_id": f"rb-{d}", "title": f"Runbook {d}", "text": text})
    (root / "corpus.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in docs))
    queries, qrels, spans = [], ["query-id\tcorpus-id\tscore\n"], ["query-id\tcorpus-id\tstart\tend\tscore\n"]
    for q in range(n_queries):
        queries.append({"_id": f"q{q}", "text": f"question {q}: the {words[q % 8]} counter of runbook {q % n_docs}"})
        for d in sorted({int(q % n_docs), int(rng.integers(0, n_docs))}):
            text = docs[d]["text"]
            first = int(rng.integers(0, 4))
            start = text.index(f"Step {first} of")
            end = text.index(f"Step {first + 2} of")  # two sentences: evidence across a chunk boundary at times
            qrels.append(f"q{q}\trb-{d}\t1\n")
            spans.append(f"q{q}\trb-{d}\t{start}\t{end}\t1\n")
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels" / "test.tsv").write_text("".join(qrels))
    (root / "qrels" / "test.spans.tsv").write_text("".join(spans))
    dataset = load_beir(root, "test")
    corpus = chunk_dataset(dataset, parse_chunker(DEFAULT_CHUNKER_SPEC))
    model = EmbedderSpec(model=DEFAULT_MODEL, normalize=True).model_id
    transformer = KnowledgeQueryTransformer()
    texts = {
        "chunks": [c.content for c in corpus.chunks],
        "queries": [transformer.transform(q.text).normalized_query for q in dataset.queries.values()],
    }
    slug = "".join(ch if ch.isalnum() else "-" for ch in DEFAULT_CHUNKER_SPEC).strip("-")
    for kind, items in texts.items():
        vectors = rng.standard_normal((len(items), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        meta = {"model_id": model, "kind": kind, "dataset_checksum": dataset.checksum}
        if kind == "chunks":
            meta["chunker"] = DEFAULT_CHUNKER_SPEC
        name = f"chunks.{slug}.parquet" if kind == "chunks" else "queries.parquet"
        VectorFile.write(root / "vectors" / name, items, vectors, meta)
    return root
