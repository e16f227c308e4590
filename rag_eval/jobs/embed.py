"""``rag-eval ingest`` (prepare -> ingest) and ``rag-eval embed`` (the data set's precomputed vectors)."""

from __future__ import annotations

from pathlib import Path

from rag_eval.core.errors import ConfigError, ConfigProblem
from rag_eval.embed.embedders import EmbedderSpec
from rag_eval.experiment import Experiment
from rag_eval.ingest.collection import IngestResult, IngestSource, ensure_collection
from rag_eval.replay.prepare import Progress, prepare
from rag_eval.replay.vectors import write_vectors


def ingest(exp: Experiment, *, force: bool = False, progress: Progress | None = None) -> IngestResult:
    """Chunk, embed and write the data set into its collection (reused when its manifest matches,
    unless ``force``)."""
    if exp.existing is not None:
        why = "a [collection] experiment replays a collection built elsewhere as it is: nothing to ingest"
        raise ConfigError([ConfigProblem("collection", why)])
    prog = progress or Progress(quiet=True)
    prep = prepare(exp)
    source = IngestSource(dataset=prep.dataset, corpus=prep.corpus, rows=prep.rows)
    return ensure_collection(exp, source, prep.resolver, progress=prog.factory, force=force)


def embed_dataset(
    dataset_path: str | Path,
    *,
    chunker: str,
    split: str,
    spec: EmbedderSpec,
    cache_dir: Path,
    progress: Progress | None = None,
) -> tuple[Path, Path, int, list[Path]]:
    """Write the data set's precomputed vectors (chunks of ``chunker``, and the queries); a file whose
    content would not change is left as it is. Returns both paths, the texts embedded, the files written."""
    vectors = write_vectors(
        Path(dataset_path), chunker=chunker, split=split, spec=spec,
        cache_dir=cache_dir, progress=progress or Progress(quiet=True),
    )  # fmt: skip
    return vectors.chunks, vectors.queries, vectors.embedded, list(vectors.written)
