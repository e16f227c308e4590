"""The first steps of a run, shared by every job: prepare (data set, chunks, labels, vectors), ingest the
collection, and the progress bars the steps report to.

>>> chunker_slug("sentences:size=3,overlap=0")
'sentences-size-3-overlap-0'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_eval.core.transform import KnowledgeQueryTransformer
from rag_eval.datasets.beir import Dataset, load_beir
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.datasets.labels import ChunkedCorpus, ChunkQrels, chunk_dataset, chunk_qrels
from rag_eval.embed.embedders import EmbedderSpec, VectorResolver
from rag_eval.embed.store import EmbeddingCache, VectorFile
from rag_eval.harness.experiment import Experiment
from rag_eval.harness.ingest import IngestResult, IngestRow, ensure_collection, plan_rows

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
        """Print a line of plain text (never read as rich markup: names and paths are the user's)."""
        if not self.quiet:
            self._bar.console.print(message, markup=False, highlight=False)


def ingest_collection(exp: Experiment, prep: Prepared, progress: Progress) -> IngestResult:
    """Create the collection, or reuse it when its manifest matches."""
    ingested = ensure_collection(exp, prep.dataset, prep.corpus, prep.rows, prep.resolver, progress=progress.factory)
    progress.log(
        f"collection {ingested.collection}: {'reused' if ingested.reused else 'built'} "
        f"({ingested.reason}; {ingested.rows} rows, {ingested.embedded} texts embedded, {ingested.seconds:.1f} s)"
    )
    return ingested
