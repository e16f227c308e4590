"""The jobs behind the CLI: ingest, embed, run (replay + metrics + report).

Each job composes the layers below it; ``cli.py`` only parses arguments and maps
errors to exit codes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import math
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from rag_eval.core.config import PipelineKind
from rag_eval.core.errors import UnsupportedFeatureError
from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.core.types import SearchMode
from rag_eval.datasets.beir import Dataset, load_beir
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.datasets.labels import ChunkedCorpus, ChunkQrels, chunk_dataset, chunk_qrels
from rag_eval.embed.embedders import EmbedderSpec, VectorResolver
from rag_eval.embed.store import EmbeddingCache, VectorFile
from rag_eval.harness.experiment import Experiment
from rag_eval.harness.ingest import IngestResult, IngestRow, ensure_collection, plan_rows
from rag_eval.harness.replay import Replayer, batches, timing_groups
from rag_eval.harness.rows import Truth
from rag_eval.harness.store import RunStore, atomic_write_text
from rag_eval.harness.timing import label_search_timing, latency_note
from rag_eval.harness.whatif import WHAT_IF_NOTES
from rag_eval.metrics.measures import chunk_ranking, doc_ranking, summarize
from rag_eval.reports.markdown import render_markdown
from rag_eval.search.milvus import MilvusSearch, MilvusStore

REGENERATE_HINT = "run `make embeddings` (or `rag-eval embed DATASET`) to rebuild them"


def chunker_slug(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", spec).strip("-")


def vector_files(vectors_dir: Path, chunker_spec: str) -> tuple[Path, Path]:
    return vectors_dir / f"chunks.{chunker_slug(chunker_spec)}.parquet", vectors_dir / "queries.parquet"


def normalized_queries(dataset: Dataset, transformer: KnowledgeQueryTransformer | None = None) -> list[str]:
    t = transformer or KnowledgeQueryTransformer()
    return [t.transform(q.text).normalized_query for q in dataset.queries.values()]


def make_resolver(exp: Experiment, dataset: Dataset, corpus: ChunkedCorpus) -> VectorResolver:
    """Precomputed vectors of the data set (checked against its chunks and queries), then the
    on-disk cache, then the model for whatever is still missing."""
    spec = EmbedderSpec(model=exp.embedder_model, normalize=exp.embedder_normalize)
    chunk_file, query_file = vector_files(exp.resolved_vectors_dir, exp.chunker_spec)
    precomputed = []
    for path, texts in (
        (chunk_file, [c.content for c in corpus.chunks]),
        (query_file, normalized_queries(dataset)),
    ):
        if path.is_file():
            vf = VectorFile.read(path)
            if vf.model_id == spec.model_id:
                vf.check_matches(texts, model_id=spec.model_id, regenerate_hint=REGENERATE_HINT)
                precomputed.append(vf)
    cache = EmbeddingCache(exp.cache_dir, spec.model_id)
    return VectorResolver(spec.model_id, cache=cache, precomputed=precomputed, factory=spec.build)


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    dataset: Dataset
    corpus: ChunkedCorpus
    labels: ChunkQrels
    rows: list[IngestRow]
    resolver: VectorResolver


def prepare(exp: Experiment) -> Prepared:
    dataset = load_beir(exp.dataset_path, exp.split)
    corpus = chunk_dataset(dataset, parse_chunker(exp.chunker_spec))
    labels = chunk_qrels(dataset, corpus, min_overlap_chars=exp.min_overlap_chars)
    return Prepared(
        dataset=dataset,
        corpus=corpus,
        labels=labels,
        rows=plan_rows(corpus, exp.profile),
        resolver=make_resolver(exp, dataset, corpus),
    )


# -- progress ---------------------------------------------------------------------------------


class Progress:
    """rich progress bars on stderr (silent when not a terminal and ``quiet``)."""

    def __init__(self, quiet: bool = False) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self.console = Console(stderr=True)
        self._bar = RichProgress(
            TextColumn("{task.description:<18}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            disable=quiet,
            transient=False,
        )
        self._tasks: dict[str, Any] = {}
        self.quiet = quiet

    @contextmanager
    def running(self) -> Iterator[Progress]:
        with self._bar:
            yield self

    def factory(self, label: str, total: int) -> Callable[[int], None]:
        if total == 0:
            return lambda n: None  # nothing to do: no bar
        task = self._bar.add_task(label, total=total)
        return lambda n: self._bar.advance(task, n)

    def phase(self, label: str, total: int) -> None:
        self._tasks[label] = self._bar.add_task(label, total=total)

    def tick(self, label: str, n: int) -> None:
        if label in self._tasks:
            self._bar.advance(self._tasks[label], n)

    def log(self, message: str) -> None:
        if not self.quiet:
            self._bar.console.print(message)


# -- ingest -----------------------------------------------------------------------------------


def ingest(exp: Experiment, *, force: bool = False, progress: Progress | None = None) -> IngestResult:
    prog = progress or Progress(quiet=True)
    prep = prepare(exp)
    return ensure_collection(
        exp, prep.dataset, prep.corpus, prep.rows, prep.resolver, progress=prog.factory, force=force
    )


def embed_dataset(
    dataset_path: str | Path,
    *,
    chunker: str,
    split: str,
    model: str,
    normalize: bool,
    cache_dir: Path,
    progress: Progress | None = None,
) -> tuple[Path, Path, int]:
    """Write the data set's precomputed vectors (chunks of ``chunker``, and the queries)."""
    prog = progress or Progress(quiet=True)
    root = Path(dataset_path)
    dataset = load_beir(root, split)
    corpus = chunk_dataset(dataset, parse_chunker(chunker))
    spec = EmbedderSpec(model=model, normalize=normalize)
    resolver = VectorResolver(spec.model_id, cache=EmbeddingCache(cache_dir, spec.model_id), factory=spec.build)
    chunk_file, query_file = vector_files(root / "vectors", chunker)
    chunk_texts = [c.content for c in corpus.chunks]
    query_texts = normalized_queries(dataset)
    for path, texts, kind in ((chunk_file, chunk_texts, "chunks"), (query_file, query_texts, "queries")):
        vectors = resolver.resolve(texts, progress=prog.factory(f"embedding {kind}", len(resolver.missing(texts))))
        meta = {"model_id": spec.model_id, "kind": kind, "dataset_checksum": dataset.checksum}
        if kind == "chunks":
            meta["chunker"] = chunker
        VectorFile.write(path, texts, vectors.astype(np.float32), meta)
    return chunk_file, query_file, resolver.embedded


# -- run --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class RunResult:
    out: Path
    summary: dict[str, Any]
    report: Path
    resumed_batches: int


def _git_commit() -> dict[str, Any]:
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True, timeout=5
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=root,
                capture_output=True,
                text=True,
                check=True,
                timeout=5,
            ).stdout.strip()
        )
        return {"commit": commit, "dirty": dirty}
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}


def _machine() -> dict[str, Any]:
    mem = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "cpus": os.cpu_count(),
        "memory_bytes": mem,
        "hostname_sha": hashlib.sha256(platform.node().encode()).hexdigest()[:12],
    }


def _package_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    if isinstance(obj, np.generic):
        return _json_safe(obj.item())
    return obj


def config_rows(exp: Experiment) -> list[dict[str, Any]]:
    out = []
    for spec in exp.configs:
        c = spec.config
        legacy = c.pipeline.is_legacy
        cap, cap_source = exp.checked_cap(spec)
        out.append(
            {
                "name": spec.name,
                "baseline": spec.name == exp.baseline,
                "mode": spec.mode.value,
                "pipeline": c.pipeline.value,
                "models": pipeline_note(spec),
                "what_if": spec.what_if,
                "retrieve_k": c.retrieve_k,
                "return_n": c.return_n,
                "cap": cap,
                "cap_source": cap_source,
                "cap_aware": None if legacy else c.max_chunks_per_document,
                "hash": spec.config_hash(),
                "origin": spec.origin,
                "rag": c.as_properties(),
            }
        )
    return out


PIPELINE_NOTES = {
    PipelineKind.EVIDENCE: "D1-D5: chunk-scoped evidence keys, dedup by key, per-document cap, retrieve-k/return-n",
    PipelineKind.LEGACY_MERGE: "legacy that merges every retrieved chunk of a source into one block (no cap)",
    PipelineKind.LEGACY_FIRST: "legacy that keeps a source's top-scored chunk and drops its other chunks as duplicates",
}


def pipeline_note(spec: Any) -> str:
    """One line saying which behaviour a config models."""
    if spec.what_if is not None:
        return WHAT_IF_NOTES[spec.what_if]
    return PIPELINE_NOTES[spec.config.pipeline]


def _preflight(exp: Experiment, port: MilvusSearch) -> None:
    """Every search mode the configs ask for must be really performed by this backend."""
    modes = {spec.mode for spec in exp.configs}
    if not modes & {SearchMode.GROUPED, SearchMode.HYBRID}:
        return
    features = port.features()
    uri = exp.as_dict()["milvus"]["uri"]
    for spec in exp.configs:
        if spec.mode is SearchMode.GROUPED and not features.grouping:
            raise UnsupportedFeatureError(
                f"config {spec.name!r} uses mode 'grouped' but Milvus at {uri} ignores grouping search: "
                "use mode 'dense' (the client-side cap) or Milvus Lite / a server >= 2.4",
                feature="grouping",
                uri=uri,
            )
        if spec.mode is SearchMode.HYBRID and not features.hybrid:
            raise UnsupportedFeatureError(
                f"config {spec.name!r} uses mode 'hybrid' but Milvus at {uri} has no BM25 full-text search: "
                "use mode 'dense' or Milvus Lite / a server >= 2.5",
                feature="hybrid",
                uri=uri,
            )


def run_experiment(
    exp: Experiment, out: str | Path, *, resume: bool = False, progress: Progress | None = None
) -> RunResult:
    prog = progress or Progress(quiet=True)
    started = dt.datetime.now(dt.UTC)
    t_start = time.perf_counter()
    prep = prepare(exp)
    ingest_result = ensure_collection(exp, prep.dataset, prep.corpus, prep.rows, prep.resolver, progress=prog.factory)
    prog.log(
        f"collection {ingest_result.collection}: {'reused' if ingest_result.reused else 'built'} "
        f"({ingest_result.reason}; {ingest_result.rows} rows, {ingest_result.embedded} texts embedded, "
        f"{ingest_result.seconds:.1f} s)"
    )

    transformer = KnowledgeQueryTransformer()
    queries = [(q.id, q.text) for q in prep.dataset.queries.values()]
    if exp.query_limit is not None:
        queries = queries[: exp.query_limit]
    texts = [transformer.transform(t).normalized_query for _, t in queries]
    qvecs = prep.resolver.resolve(texts, progress=prog.factory("embedding queries", len(prep.resolver.missing(texts))))
    vector_of = {t: v.tolist() for t, v in zip(texts, qvecs, strict=True)}

    def encoder(batch: Sequence[str]) -> list[list[float]]:
        return [vector_of[t] for t in batch]

    truth = Truth(
        rows={r.vector_id: r for r in prep.rows},
        relevance=prep.labels.relevance,
        doc_relevance=prep.dataset.relevant_docs(),
    )
    with MilvusStore(exp.resolved_uri, ingest_result.collection, token_env=exp.token_env, timeout=exp.timeout) as ms:
        backend = ms.backend()
    store = RunStore(out)
    with MilvusSearch(
        exp.resolved_uri,
        ingest_result.collection,
        encoder,
        index=exp.index,
        token_env=exp.token_env,
        timeout=exp.timeout,
    ) as port:
        _preflight(exp, port)  # refuse unsupported modes before anything is written
        done = store.begin(exp.fingerprint(), resume=resume)
        n_batches = len(batches(len(queries), exp.batch_size))
        replayer = Replayer(
            port, exp.configs, truth, transformer=transformer, warmup=exp.warmup, timing=exp.timing, tick=prog.tick
        )
        n_sig = len(replayer.signatures)
        n_timed = sum(len({s.config.retrieve_k for s in specs}) for specs in replayer.signatures.values())
        todo_batches = [b for i, b in enumerate(batches(len(queries), exp.batch_size)) if i not in done]
        todo = sum(len(b) for b in todo_batches)
        timed = exp.timing.timed(len(queries))
        prog.phase("retrieve", todo * n_sig)
        prog.phase("timing", sum(1 for b in todo_batches for i in b if i in timed) * n_timed)
        prog.phase("post-process", todo * len(exp.configs))
        if done:
            prog.log(f"resuming: {len(done)} of {n_batches} query batches already finished")
        replayer.run(queries, store, batch_size=exp.batch_size, skip=done)

    table = store.read_parts()
    frame = table.to_pandas()
    configs = config_rows(exp)
    summary_configs, _ = summarize(frame, configs=configs, cutoffs=exp.cutoffs)
    finished = dt.datetime.now(dt.UTC)
    manifest = {
        "rag_eval_version": _package_version("rag-eval"),
        "git": _git_commit(),
        "experiment": exp.as_dict(),
        "fingerprint": exp.fingerprint(),
        "dataset": {
            "name": prep.dataset.name,
            "path": str(prep.dataset.path),
            "split": prep.dataset.split,
            "checksum": prep.dataset.checksum,
            "documents": len(prep.dataset.documents),
            "queries": len(prep.dataset.queries),
            "chunks": len(prep.corpus.chunks),
            "label_level": prep.labels.level,
        },
        "milvus": {
            "uri": exp.as_dict()["milvus"]["uri"],
            "collection": ingest_result.collection,
            "backend": backend.kind,
            "server_version": backend.server_version,
            "index": exp.index.to_json(),
            "collection_manifest": ingest_result.manifest,
            "reused": ingest_result.reused,
            "ingest_seconds": ingest_result.seconds,
        },
        "versions": {
            "python": sys.version.split()[0],
            "pymilvus": backend.pymilvus_version,
            "milvus_lite": _package_version("milvus-lite"),
            "pandas": pd.__version__,
            "numpy": np.__version__,
        },
        "machine": _machine(),
        "configs": configs,
        "started": started.isoformat(),
        "finished": finished.isoformat(),
        "wall_seconds": round(time.perf_counter() - t_start, 3),
        "resumed_batches": len(done),
    }
    provenance = {
        "git": manifest["git"],
        "fingerprint": manifest["fingerprint"],
        "dataset_checksum": prep.dataset.checksum,
        "config_hashes": {c["name"]: c["hash"] for c in configs},
        "started": manifest["started"],
    }
    summary = _json_safe(
        {
            "provenance": provenance,
            "experiment": exp.name,
            "baseline": exp.baseline,
            "label_level": prep.labels.level,
            "label_note": (
                "chunk relevance from span overlap"
                if prep.labels.level == "span"
                else "no span qrels: every chunk of a relevant document counts as relevant (document-level fallback)"
            ),
            "queries": len(queries),
            "judged_queries": int(frame[frame["config"] == exp.baseline]["judged"].sum()),
            "cutoffs": list(exp.cutoffs),
            "backend": backend.kind,
            "latency": latency_note(
                exp.timing,
                backend=f"Milvus {'Lite' if backend.kind == 'lite' else 'server'} {backend.server_version}",
                warmup=exp.warmup,
                queries=len(queries),
                timing_seconds=replayer.timing_seconds,
            ),
            "configs": label_search_timing(summary_configs, timing_groups(exp.configs)),
        }
    )
    store.write_per_query(table, provenance)
    for spec in exp.configs:
        rows = frame[frame["config"] == spec.name].to_dict("records")
        store.write_trec_run(spec.name, {r["query_id"]: chunk_ranking(r) for r in rows}, spec.name)
        store.write_trec_run(f"{spec.name}.docs", {r["query_id"]: doc_ranking(r) for r in rows}, spec.name)
    store.remove_stale_runs(c.name for c in exp.configs)
    store.write_trec_qrels(f"{exp.split}.chunks", prep.labels.relevance)
    store.write_trec_qrels(f"{exp.split}.docs", prep.dataset.relevant_docs())
    store.write_json("summary.json", summary)
    report = store.dir / "report.md"
    atomic_write_text(report, render_markdown(summary, manifest))
    store.write_json("manifest.json", _json_safe(manifest))
    store.finish()
    return RunResult(out=store.dir, summary=summary, report=report, resumed_batches=len(done))


def _cap_label(cfg: dict[str, Any]) -> str:
    cap = cfg.get("cap_checked")
    if cap is None:
        return "none"
    return str(cap) if cfg.get("cap_checked_source") == "config" else f"{cap} (production)"


def summary_table(summary: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(measure, values per config) for printing."""
    configs = summary["configs"]
    names = list(configs)
    k = 5 if 5 in summary["cutoffs"] else summary["cutoffs"][-1]

    def fmt(v: Any, pct: bool = False) -> str:
        if v is None:
            return "-"
        return f"{v:.1%}" if pct else (f"{v:.3f}" if isinstance(v, float) else str(v))

    rows: list[tuple[str, list[str]]] = [
        ("same-doc multi-chunk recall", [fmt(configs[n]["same_doc_multi_chunk_recall"]) for n in names]),
        ("  cap-aware", [fmt(configs[n]["same_doc_multi_chunk_recall_cap_aware"]) for n in names]),
        ("  (query, doc) pairs", [fmt(configs[n]["same_doc_pairs"]) for n in names]),
        ("duplicate rate (key)", [fmt(configs[n]["duplicate_rate"], True) for n in names]),
        ("duplicate rate (content)", [fmt(configs[n]["content_duplicate_rate"], True) for n in names]),
        ("  re-ingested copies", [fmt(configs[n]["content_duplicate_rate_copies"], True) for n in names]),
        ("  same text, other chunk", [fmt(configs[n]["content_duplicate_rate_same_text"], True) for n in names]),
        (
            "raw hits dup (key/content)",
            [
                f"{fmt(configs[n]['raw_duplicate_rate'], True)} / {fmt(configs[n]['raw_content_duplicate_rate'], True)}"
                for n in names
            ],
        ),
        ("chunk refs 1:1 (EvidenceGuard)", [fmt(configs[n]["evidence_guard_1to1"], True) for n in names]),
        ("cap checked against", [_cap_label(configs[n]) for n in names]),
        ("cap compliance (stored doc id)", [fmt(configs[n]["cap_compliance"], True) for n in names]),
        ("cap compliance (true document)", [fmt(configs[n]["cap_compliance_true"], True) for n in names]),
        ("return-n compliance", [fmt(configs[n]["return_n_compliance"], True) for n in names]),
    ]
    for m in (f"nDCG@{k}", f"R@{k}", f"P@{k}", "RR", f"Success@{k}"):
        rows.append((f"chunk {m}", [fmt(configs[n]["chunk"].get(m)) for n in names]))
    rows.append((f"doc nDCG@{k}", [fmt(configs[n]["doc"].get(f"nDCG@{k}")) for n in names]))
    rows.append(
        (
            "payload chars p50/p95",
            [
                "{:.0f}/{:.0f}".format(configs[n]["payload"]["chars_p50"], configs[n]["payload"]["chars_p95"])
                for n in names
            ],
        )
    )
    def ms(us: Any) -> str:
        return "-" if us is None else f"{us / 1e3:.2f}"

    rows.append(
        (
            "search p50/p95 ms",
            [
                f"{ms(configs[n]['latency_us']['search']['p50'])}/{ms(configs[n]['latency_us']['search']['p95'])}"
                for n in names
            ],
        )
    )
    rows.append(("post-process p50 us", [f"{configs[n]['latency_us']['postprocess']['p50']:.0f}" for n in names]))
    losses = sorted({s for n in names for s in configs[n]["stage_losses"]})
    for s in losses:
        rows.append((f"lost: {s}", [str(configs[n]["stage_losses"].get(s, 0)) for n in names]))
    return rows
