"""Ingest: chunk a data set, write its rows into Milvus the way production has them.

Rows follow an :class:`IngestProfile`: a deterministic share of chunks is written as
legacy rows (no chunk_index), a share without doc_id, and a share is written twice
(a re-ingested copy: same content and metadata, new vector id), so D1's fallbacks
and D2's dedup meet real data. Vector ids are 1..N for the chunks in corpus order,
then N+1.. for the copies, so the same inputs always give the same collection.

The collection carries a manifest (data set checksum, chunker, embedder, index,
profile, row count); it is reused when the manifest matches and every row is there,
rebuilt otherwise.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rag_eval.core.errors import UnsupportedFeatureError
from rag_eval.core.types import SearchMode
from rag_eval.datasets.beir import Dataset
from rag_eval.datasets.chunking import Chunk
from rag_eval.datasets.labels import ChunkedCorpus
from rag_eval.embed.embedders import VectorResolver
from rag_eval.experiment import Experiment, IngestProfile
from rag_eval.search.milvus import ChunkRow, MilvusStore, SearchTarget

MANIFEST_VERSION = 2


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestRow:
    """One row as written, and the chunk it really is (the harness's ground truth)."""

    vector_id: int
    chunk: Chunk
    doc_id: str | None  # as written: None for rows without doc_id
    chunk_index: int | None  # as written: None for legacy rows
    kind: str  # clean | legacy | missing_doc | duplicate
    copy_of: int | None = None


def _unit(seed: int, key: str, purpose: str) -> float:
    digest = hashlib.sha256(f"{seed}:{purpose}:{key}".encode()).digest()
    return int.from_bytes(digest[:7], "big") / float(1 << 56)


def plan_rows(corpus: ChunkedCorpus, profile: IngestProfile) -> list[IngestRow]:
    """The rows to write for ``corpus`` under ``profile`` (deterministic)."""
    rows: list[IngestRow] = []
    for i, chunk in enumerate(corpus.chunks, start=1):
        u = _unit(profile.seed, chunk.key, "identity")
        if u < profile.legacy_share:
            rows.append(IngestRow(vector_id=i, chunk=chunk, doc_id=chunk.doc_id, chunk_index=None, kind="legacy"))
        elif u < profile.legacy_share + profile.missing_doc_share:
            rows.append(
                IngestRow(vector_id=i, chunk=chunk, doc_id=None, chunk_index=chunk.chunk_index, kind="missing_doc")
            )
        else:
            rows.append(
                IngestRow(vector_id=i, chunk=chunk, doc_id=chunk.doc_id, chunk_index=chunk.chunk_index, kind="clean")
            )
    next_id = len(rows) + 1
    copies: list[IngestRow] = []
    for row in rows:
        if _unit(profile.seed, row.chunk.key, "duplicate") < profile.duplicate_share:
            copies.append(
                IngestRow(
                    vector_id=next_id,
                    chunk=row.chunk,
                    doc_id=row.doc_id,
                    chunk_index=row.chunk_index,
                    kind="duplicate",
                    copy_of=row.vector_id,
                )
            )
            next_id += 1
    return rows + copies


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestSource:
    """What a collection is built from: the data set, its chunks, and the rows the ingest plan writes."""

    dataset: Dataset
    corpus: ChunkedCorpus
    rows: Sequence[IngestRow]


def collection_manifest(exp: Experiment, source: IngestSource, resolver: VectorResolver) -> dict[str, Any]:
    """What a collection was built from; a collection is reused only when all of it matches (a changed
    vector file or dimension rebuilds it rather than leaving a poisoned collection in place)."""
    dataset, corpus, n_rows, model_id, dim = (
        source.dataset, source.corpus, len(source.rows), resolver.model_id, resolver.dim
    )
    vector_files = [(f.path.name, f.checksum) for f in resolver.precomputed]
    return {
        "manifest_version": MANIFEST_VERSION,
        "dataset": dataset.name,
        "dataset_checksum": dataset.checksum,
        "chunker": corpus.chunker_spec,
        "chunks": len(corpus.chunks),
        "embedder": model_id,
        "index": exp.index.to_json(),
        "profile": exp.profile.as_dict(),
        "rows": n_rows,
        "full_text": needs_full_text(exp),
        "dim": dim,
        "vector_files": sorted([name, sha] for name, sha in vector_files),
        **({"passage": exp.embedder.passage} if exp.embedder.passage != "text" else {}),
    }


def chunk_texts(exp: Experiment, corpus: ChunkedCorpus) -> list[str]:
    """What is embedded for each chunk: its text, or its document's title and its text (``[embedder]
    passage = "title+text"``, the BEIR convention)."""
    return [exp.embedder.passage_text(c.title, c.content) for c in corpus.chunks]


def needs_full_text(exp: Experiment) -> bool:
    """Hybrid search needs the BM25 full-text field, which only some backends can create."""
    return any(c.mode is SearchMode.HYBRID for c in exp.configs)


def manifest_hash(manifest: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()[:10]


def collection_name(exp: Experiment, manifest: dict[str, Any]) -> str:
    """The experiment's collection, or ``<data set>_<manifest hash>``."""
    if exp.collection:
        return exp.collection
    slug = "".join(ch if ch.isalnum() else "_" for ch in str(manifest["dataset"])).lower()
    return f"{slug}_{manifest_hash(manifest)}"[:255]


@dataclass(frozen=True, slots=True, kw_only=True)
class IngestResult:
    """What the ingest leaves: where the later steps search (the target, its collection named), and how."""

    target: SearchTarget  # the experiment's target with the collection the ingest filled
    manifest: dict[str, Any]
    reused: bool
    rows: int
    embedded: int  # texts that had to be embedded (0 when vectors were stored)
    seconds: float
    reason: str  # why it was (re)built or reused

    @property
    def collection(self) -> str:
        assert self.target.collection is not None  # the ingest always names it
        return self.target.collection


ProgressFactory = Callable[[str, int], Callable[[int], None]]


def _build(
    store: MilvusStore,
    exp: Experiment,
    rows: Sequence[IngestRow],
    vectors: tuple[Mapping[str, Any], int],
    manifest: dict[str, Any],
    progress: ProgressFactory,
) -> None:
    """Create the collection and write ``rows`` with their chunks' ``vectors`` (by chunk key, and their
    dimension)."""
    by_key, dim = vectors
    try:
        store.create(dim=dim, index=exp.index, manifest=manifest, full_text=needs_full_text(exp))
    except UnsupportedFeatureError as exc:
        hybrid = [c.name for c in exp.configs if c.mode is SearchMode.HYBRID]
        raise UnsupportedFeatureError(
            f"configs {hybrid} use mode 'hybrid', which needs BM25 full-text search: {exc}",
            feature=exc.feature,
            uri=exc.uri,
        ) from exc
    store.insert(
        (
            ChunkRow(
                vector_id=r.vector_id,
                doc_id=r.doc_id,
                chunk_index=r.chunk_index,
                content=r.chunk.content,
                title=r.chunk.title,
                source=r.chunk.source,
                category=r.chunk.category,
                start=r.chunk.start,
                end=r.chunk.end,
                vector=by_key[r.chunk.key].tolist(),
            )
            for r in rows
        ),
        on_batch=progress("inserting rows", len(rows)),
    )
    store.finalize()


def _no_progress(label: str, total: int) -> Callable[[int], None]:
    return lambda n: None


def ensure_collection(
    exp: Experiment,
    source: IngestSource,
    resolver: VectorResolver,
    *,
    progress: ProgressFactory = _no_progress,
    force: bool = False,
) -> IngestResult:
    """Create and fill the collection unless a matching one is already complete."""
    t0 = time.perf_counter()
    corpus, rows = source.corpus, source.rows
    manifest = collection_manifest(exp, source, resolver)
    target = exp.target.named(collection_name(exp, manifest))
    with MilvusStore(target) as store:
        reason = "forced rebuild" if force else "new collection"
        if store.exists() and not force:
            stored = store.read_manifest()
            if stored == manifest and store.count() == len(rows):
                return IngestResult(
                    target=target,
                    manifest=manifest,
                    reused=True,
                    rows=len(rows),
                    embedded=0,
                    seconds=time.perf_counter() - t0,
                    reason="manifest matches",
                )
            reason = "manifest differs" if stored != manifest else "incomplete collection"
        texts = chunk_texts(exp, corpus)
        vectors = resolver.resolve(texts, progress=progress("embedding chunks", len(resolver.missing(texts))))
        by_key = {c.key: v for c, v in zip(corpus.chunks, vectors, strict=True)}
        try:
            _build(store, exp, rows, (by_key, int(vectors.shape[1])), manifest, progress)
        except BaseException:
            # never leave a half-built collection (no index, missing rows) that a later run could reuse
            with contextlib.suppress(Exception):
                store.drop()
            raise
        return IngestResult(
            target=target,
            manifest=manifest,
            reused=False,
            rows=len(rows),
            embedded=resolver.embedded,
            seconds=time.perf_counter() - t0,
            reason=reason,
        )
