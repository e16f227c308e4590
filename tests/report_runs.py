"""Run directories for report tests, made by the real pipeline without a Milvus server.

A small BEIR data set with span qrels is written and loaded as a run loads one; rows are
planned with the production ingest profile (legacy rows, rows without doc_id, re-ingested
copies); each query's hits come from cosine similarity over seeded vectors (numpy), served by
the public in-memory port in scripted mode; the replay, the per-query rows, the summary and
the run artifacts are the harness's own. ``hostile=True`` puts markup, script, Markdown and
template syntax into document text, titles and query text.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval import jobs
from rag_eval.core.config import RagConfig
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.core.types import KnowledgeSearchHit
from rag_eval.datasets.beir import load_beir
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.datasets.labels import chunk_dataset, chunk_qrels
from rag_eval.experiment import ConfigSpec, Experiment, IngestProfile
from rag_eval.files import json_safe, write_json
from rag_eval.ingest.collection import plan_rows
from rag_eval.metrics.measures import summarize
from rag_eval.replay.batches import Replayer
from rag_eval.rundir.directory import MARKER, RunStore
from rag_eval.rundir.rows import Truth
from rag_eval.rundir.texts import write_texts
from rag_eval.search.memory import InMemorySearch
from tests.unit.frames import read_parts

HOSTILE = (
    '<script>window.__pwned = "script";</script>',
    "<img src=x onerror=\"window.__pwned = 'img'\">",
    "</textarea><textarea>",
    "</script><script>window.__pwned = 'breakout'</script>",
    "{{ 7*7 }} {% if true %}jinja{% endif %} ${7*7}",
    "**bold** [link](javascript:alert(1)) <b>bold tag</b> &amp; &lt;",
)
DEFAULT_CONFIGS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("legacy", {"rag.pipeline": "legacy", "rag.top-k": 5}),
    ("evidence", {"rag.retrieve-k": 20, "rag.return-n": 5, "rag.max-chunks-per-document": 2}),
    ("evidence-cap3", {"rag.retrieve-k": 20, "rag.return-n": 5, "rag.max-chunks-per-document": 3}),
)
_WORDS = (
    "replica lag primary binlog gtid lock wait timeout deadlock vacuum autovacuum index bloat checkpoint "
    "buffer pool connection pool failover switchover backup restore snapshot partition shard query plan "
    "statistics analyze disk latency throughput thread worker queue retry alert dashboard runbook"
).split()


def _sentence(rng: np.random.Generator, n: int = 18) -> str:
    words = [str(w) for w in rng.choice(_WORDS, size=n)]
    return " ".join(words).capitalize() + "."


def write_dataset(root: Path, *, n_queries: int, hostile: bool, seed: int, judged: int | None = None) -> Path:
    rng = np.random.default_rng(seed)
    n_docs = max(8, n_queries // 3)
    docs, queries, qrels, spans = [], [], [], []
    texts: dict[str, str] = {}
    for d in range(n_docs):
        sentences = [_sentence(rng) for _ in range(int(rng.integers(8, 13)))]
        if hostile and d == 0:
            sentences = [f"{h} evidence sentence." for h in HOSTILE] + sentences
        text = " ".join(sentences)
        doc_id = f"doc-{d:04d}"
        title = f"Runbook {d}" + (f" {HOSTILE[1]}" if hostile and d == 0 else "")
        texts[doc_id] = text
        docs.append({"_id": doc_id, "title": title, "text": text, "metadata": {"source": f"kb/{doc_id}.md"}})
    for q in range(n_queries):
        doc_id = f"doc-{(q % n_docs):04d}" if not hostile else "doc-0000" if q == 0 else f"doc-{(q % n_docs):04d}"
        text = texts[doc_id]
        bounds = [0] + [i + 2 for i, ch in enumerate(text) if ch == "." and i + 2 < len(text)]
        picks = sorted(rng.choice(len(bounds) - 1, size=min(3, len(bounds) - 1), replace=False))
        qtext = f"why does {' '.join(str(w) for w in rng.choice(_WORDS, size=5))} happen"
        if hostile and q == 0:
            qtext = " ".join(HOSTILE)
        qid = f"q{q:04d}"
        queries.append({"_id": qid, "text": qtext})
        if judged is not None and q >= judged:
            continue  # a query without a relevance label
        qrels.append(f"{qid}\t{doc_id}\t1")
        for p in picks:
            spans.append(f"{qid}\t{doc_id}\t{bounds[p]}\t{bounds[p + 1] - 1}\t1")
    (root / "qrels").mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n")
    spans_header = "query-id\tcorpus-id\tstart\tend\tscore\n"
    (root / "qrels" / "test.spans.tsv").write_text(spans_header + "\n".join(spans) + "\n")
    return root


def synthetic_run(
    out: Path,
    *,
    n_queries: int = 40,
    configs: Sequence[tuple[str, dict[str, Any]]] = DEFAULT_CONFIGS,
    hostile: bool = False,
    seed: int = 7,
    render: bool = True,
    judged: int | None = None,
) -> Path:
    """A complete run directory in ``out`` (and its data set in ``out.parent``); ``judged``: only the first
    that many queries have relevance labels."""
    data_dir = write_dataset(
        out.parent / f"{out.name}-dataset", n_queries=n_queries, hostile=hostile, seed=seed, judged=judged
    )
    dataset = load_beir(data_dir, "test")
    corpus = chunk_dataset(dataset, parse_chunker("sentences:size=3,overlap=0"))
    labels = chunk_qrels(dataset, corpus)
    profile = IngestProfile(name="production", legacy_share=0.1, missing_doc_share=0.05, duplicate_share=0.1, seed=7)
    rows = plan_rows(corpus, profile)

    rng = np.random.default_rng(seed)
    dim = 16
    doc_base = {d: rng.normal(size=dim) for d in dataset.documents}
    chunk_vec = {c.key: doc_base[c.doc_id] + 0.7 * rng.normal(size=dim) for c in corpus.chunks}
    matrix = np.array([chunk_vec[r.chunk.key] + 0.01 * rng.normal(size=dim) for r in rows])
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    transformer = KnowledgeQueryTransformer()
    script: dict[str, list[KnowledgeSearchHit]] = {}
    queries = [(q.id, q.text) for q in dataset.queries.values()]
    for qid, text in queries:
        rel = list(labels.relevant(qid)) or [corpus.chunks[0].key]
        v = np.mean([chunk_vec[k] for k in rel], axis=0) + 0.9 * rng.normal(size=dim)
        scores = matrix @ (v / np.linalg.norm(v))
        top = np.argsort(-scores, kind="stable")[:60]
        script[transformer.transform(text).normalized_query] = [
            KnowledgeSearchHit(
                id=str(rows[i].vector_id),
                content=rows[i].chunk.content,
                score=float(scores[i]),
                doc_id=rows[i].doc_id,
                chunk_index=rows[i].chunk_index,
                vector_id=str(rows[i].vector_id),
                source=rows[i].chunk.source,
                title=rows[i].chunk.title,
            )
            for i in top
        ]
    specs = tuple(ConfigSpec(name=n, config=RagConfig.from_mapping(p)) for n, p in configs)
    exp = Experiment(
        name="report-fixture" + ("-hostile" if hostile else ""),
        source=None,
        dataset_path=data_dir,
        split="test",
        milvus_uri=str(out.parent / "unused.db"),
        configs=specs,
        baseline=specs[0].name,
        warmup=0,
    )
    truth = Truth.of_rows(rows, relevance=labels.relevance, doc_relevance=dataset.relevant_docs())
    store = RunStore(out)
    started = dt.datetime.now(dt.UTC)
    store.begin({"fingerprint": exp.fingerprint()}, resume=False)
    with InMemorySearch.scripted(script) as port:
        Replayer(port, specs, truth, warmup=0).run(queries, store, batch_size=256)
    table = read_parts(store)
    frame = table.to_pandas()
    config_rows = jobs.config_rows(exp)
    summary_configs, _ = summarize(frame, configs=config_rows, cutoffs=exp.cutoffs)
    provenance = {"git": {"commit": "0" * 40, "dirty": False}, "fingerprint": exp.fingerprint()}
    summary = json_safe(
        {
            "provenance": provenance,
            "experiment": exp.name,
            "baseline": exp.baseline,
            "label_level": labels.level,
            "label_note": "chunk relevance from span overlap",
            "queries": len(queries),
            "judged_queries": int(frame[frame["config"] == exp.baseline]["judged"].sum()),
            "cutoffs": list(exp.cutoffs),
            "backend": "memory",
            "configs": summary_configs,
        }
    )
    manifest = {
        "rag_eval_version": "test",
        "git": provenance["git"],
        "experiment": exp.as_dict(),
        "fingerprint": exp.fingerprint(),
        "dataset": {
            "name": dataset.name,
            "path": str(data_dir),
            "split": "test",
            "checksum": dataset.checksum,
            "documents": len(dataset.documents),
            "queries": len(dataset.queries),
            "chunks": len(corpus.chunks),
            "label_level": labels.level,
        },
        "milvus": {
            "uri": "(in-memory port)",
            "collection": "none",
            "backend": "memory",
            "server_version": "scripted",
            "index": {"index_type": "FLAT", "metric": "COSINE"},
            "reused": False,
        },
        "versions": {"python": "3"},
        "machine": {"platform": "test", "cpus": 1},
        "configs": config_rows,
        "started": started.isoformat(),
        "finished": dt.datetime.now(dt.UTC).isoformat(),
        "wall_seconds": 0.0,
    }
    store.write_per_query(table, provenance)
    write_texts(store.dir, table, corpus, dataset)
    store.write_json("summary.json", summary)
    store.write_json("manifest.json", json_safe(manifest))
    write_json(store.dir / MARKER, {"files": ["per_query.parquet", "summary.json", "manifest.json"]})
    store.finish()
    if render:
        from rag_eval.reports.html import render_html

        render_html(store.dir)
    return store.dir
