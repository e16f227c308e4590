"""The first steps of a run, shared by every job: prepare (data set, chunks, labels, vectors), ingest the
collection, and the progress bars the steps report to.

>>> chunker_slug("sentences:size=3,overlap=0")
'sentences-size-3-overlap-0'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.datasets.beir import Dataset, load_beir
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.datasets.labels import ChunkedCorpus, ChunkQrels, chunk_dataset, chunk_qrels
from rag_eval.embed.embedders import VectorResolver
from rag_eval.embed.precomputed import query_vector_file
from rag_eval.embed.vector_files import EmbeddingCache, VectorFile
from rag_eval.existing.preflight import Existing, resolve_existing
from rag_eval.experiment import Experiment
from rag_eval.ingest.collection import (
    IngestResult,
    IngestRow,
    IngestSource,
    chunk_texts,
    ensure_collection,
    plan_rows,
)
from rag_eval.traffic.logs import Traffic, read_traffic

TRAFFIC_ID_PREFIX = "traffic:"
REGENERATE_HINT = "run `make embeddings` (or `rag-eval embed DATASET`) to rebuild them"


def chunker_slug(spec: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", spec).strip("-")


def vector_files(vectors_dir: Path, chunker_spec: str, passage: str = "text") -> tuple[Path, Path]:
    """The data set's precomputed chunk and query vector files (chunks embedded with their titles: a file of
    their own, ``chunks.<chunker>.title-text.parquet``)."""
    tail = "" if passage == "text" else f".{chunker_slug(passage)}"
    return vectors_dir / f"chunks.{chunker_slug(chunker_spec)}{tail}.parquet", vectors_dir / "queries.parquet"


def normalized_queries(dataset: Dataset, transformer: KnowledgeQueryTransformer | None = None) -> list[str]:
    t = transformer or KnowledgeQueryTransformer()
    return [t.transform(q.text).normalized_query for q in dataset.queries.values()]


def make_resolver(exp: Experiment, dataset: Dataset, corpus: ChunkedCorpus | None) -> VectorResolver:
    """Precomputed vectors of the data set (checked against its chunks and queries; the queries only
    without a corpus), then the on-disk cache, then the ``[embedder]`` provider for whatever is still missing."""
    settings = exp.embedder
    model_id = settings.model_id
    chunk_file, query_file = vector_files(exp.resolved_vectors_dir, exp.chunker_spec, settings.passage)
    precomputed = []
    sources = [(query_file, normalized_queries(dataset))]
    if corpus is not None:
        sources.insert(0, (chunk_file, chunk_texts(exp, corpus)))
    for path, texts in sources:
        if path.is_file():
            vf = VectorFile.read(path)
            if vf.model_id == model_id:
                vf.check_matches(texts, model_id=model_id, regenerate_hint=REGENERATE_HINT)
                precomputed.append(vf)
    if settings.provider == "precomputed" and settings.file is not None:
        queries = list(zip(dataset.queries, [q.text for q in dataset.queries.values()], normalized_queries(dataset),
                           strict=True))  # fmt: skip
        precomputed.append(query_vector_file(settings.file, queries, model_id=model_id,
                                             normalize=settings.normalize, split=dataset.split))  # fmt: skip
    cache = EmbeddingCache(exp.cache_dir, model_id)
    return VectorResolver(model_id, cache=cache, precomputed=precomputed, factory=settings.build)


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """What a run works from: the data set, its chunks and labels, the rows as written and the vectors; for
    a collection built elsewhere, its rows located as chunks (``existing``) instead of rows of ours."""

    dataset: Dataset
    corpus: ChunkedCorpus
    labels: ChunkQrels
    rows: list[IngestRow]
    resolver: VectorResolver
    existing: Existing | None = None
    traffic: Traffic | None = None  # the [traffic] table's queries, read and deduplicated

    def traffic_queries(self) -> list[tuple[str, str]]:
        """The query log's queries as (id, text), after the data set's: ids prefixed ``traffic:``."""
        return [] if self.traffic is None else [(traffic_id(q.id), q.text) for q in self.traffic.queries]

    def traffic_categories(self) -> dict[str, str]:
        """The category filter a query log recorded for a request, by the query's id as replayed."""
        if self.traffic is None:
            return {}
        return {traffic_id(q.id): q.category for q in self.traffic.queries if q.category is not None}

    def traffic_counts(self) -> dict[str, int]:
        """Each query log query's id (as replayed) -> how often it occurs in the log."""
        return {} if self.traffic is None else {traffic_id(q.id): q.count for q in self.traffic.queries}

    def chunk_of(self) -> dict[str, str]:
        """Vector id (as text) -> the true chunk it is."""
        if self.existing is not None:
            return dict(self.existing.resolution.chunk_of)
        return {str(r.vector_id): r.chunk.key for r in self.rows}

    def lost_evidence(self) -> frozenset[str]:
        """Relevant chunks no row carries (a collection built elsewhere that lost evidence)."""
        return self.existing.resolution.uncovered if self.existing is not None else frozenset()


def traffic_id(query_id: str) -> str:
    """A query log query's id as a run names it (apart from every data set query's).

    >>> traffic_id("q-0f3a")
    'traffic:q-0f3a'
    """
    return f"{TRAFFIC_ID_PREFIX}{query_id}"


def prepare(exp: Experiment) -> Prepared:
    dataset = load_beir(exp.dataset_path, exp.split)
    traffic = read_traffic(exp.traffic) if exp.traffic is not None else None  # a bad log is refused first
    return replace(_prepare(exp, dataset), traffic=traffic)


def _prepare(exp: Experiment, dataset: Dataset) -> Prepared:
    if exp.existing is not None:
        return _prepare_existing(exp, dataset)
    corpus = chunk_dataset(dataset, parse_chunker(exp.chunker_spec))
    labels = chunk_qrels(dataset, corpus, min_overlap_chars=exp.min_overlap_chars)
    return Prepared(
        dataset=dataset,
        corpus=corpus,
        labels=labels,
        rows=plan_rows(corpus, exp.profile),
        resolver=make_resolver(exp, dataset, corpus),
    )


def _prepare_existing(exp: Experiment, dataset: Dataset) -> Prepared:
    """A collection built elsewhere: checked, its labelled rows located (:mod:`rag_eval.existing.preflight`);
    the query vectors only are ours (the first resolved now, for the dimension check)."""
    assert exp.existing is not None
    resolver = make_resolver(exp, dataset, None)
    first = normalized_queries(dataset)[:1]
    dim = int(resolver.resolve(first).shape[1]) if first else 0
    existing = resolve_existing(exp, dataset, query_dim=dim, cache_dir=exp.cache_dir.parent / "resolution",
                                load=exp.existing.loads(server=exp.target.is_server), resolver=resolver)  # fmt: skip
    corpus = existing.resolution.corpus
    labels = chunk_qrels(dataset, corpus, min_overlap_chars=exp.min_overlap_chars)
    return Prepared(dataset=dataset, corpus=corpus, labels=labels, rows=[], resolver=resolver, existing=existing)


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
        """Print a line of plain text (never read as rich markup: names and paths are the user's)."""
        if not self.quiet:
            self._bar.console.print(message, markup=False, highlight=False)


def ingest_collection(exp: Experiment, prep: Prepared, progress: Progress) -> IngestResult:
    """Create the collection, or reuse it when its manifest matches; a collection built elsewhere is used
    as it is (read through its field map; nothing written)."""
    if prep.existing is not None:
        ingested = prep.existing.as_ingested()
        progress.log(f"collection {ingested.collection}: {ingested.reason} ({ingested.rows:,} rows)")
        return ingested
    source = IngestSource(dataset=prep.dataset, corpus=prep.corpus, rows=prep.rows)
    ingested = ensure_collection(exp, source, prep.resolver, progress=progress.factory)
    progress.log(
        f"collection {ingested.collection}: {'reused' if ingested.reused else 'built'} "
        f"({ingested.reason}; {ingested.rows} rows, {ingested.embedded} texts embedded, {ingested.seconds:.1f} s)"
    )
    return ingested
