"""A data set's precomputed vectors (``rag-eval embed``): its chunks' and its queries', beside it in
``DATASET/vectors/``, so that a run embeds nothing.

The files already there are a source too: texts that did not change keep their vectors, byte for byte, and
a file whose content would not change is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rag_eval.datasets.beir import load_beir
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.datasets.labels import chunk_dataset
from rag_eval.embed.embedders import EmbedderSpec, VectorResolver
from rag_eval.embed.vector_files import EmbeddingCache, VectorFile, holds_vectors
from rag_eval.replay.prepare import Progress, normalized_queries, vector_files


@dataclass(frozen=True, slots=True, kw_only=True)
class WrittenVectors:
    """Both vector files, how many texts were embedded (the rest were stored already), the files written."""

    chunks: Path
    queries: Path
    embedded: int
    written: tuple[Path, ...]


def write_vectors(
    dataset_path: Path, *, chunker: str, split: str, spec: EmbedderSpec, cache_dir: Path, progress: Progress
) -> WrittenVectors:
    """Embed the chunks (of ``chunker``) and the queries of the data set in ``dataset_path`` with ``spec``'s
    model, taking every vector already stored (the vector files, the cache in ``cache_dir``) as it is."""
    dataset = load_beir(dataset_path, split)
    corpus = chunk_dataset(dataset, parse_chunker(chunker))
    chunk_file, query_file = vector_files(dataset_path / "vectors", chunker)
    stored = [VectorFile.read(p) for p in (chunk_file, query_file) if p.is_file()]
    resolver = VectorResolver(
        spec.model_id,
        cache=EmbeddingCache(cache_dir, spec.model_id),
        precomputed=[f for f in stored if f.model_id == spec.model_id],
        factory=spec.build,
    )
    written: list[Path] = []
    chunk_texts, query_texts = [c.content for c in corpus.chunks], normalized_queries(dataset)
    for path, texts, kind in ((chunk_file, chunk_texts, "chunks"), (query_file, query_texts, "queries")):
        vectors = resolver.resolve(texts, progress=progress.factory(f"embedding {kind}", len(resolver.missing(texts))))
        meta = {"model_id": spec.model_id, "kind": kind, "dataset_checksum": dataset.checksum}
        if kind == "chunks":
            meta["chunker"] = chunker
        if not holds_vectors(path, texts, vectors, meta):
            VectorFile.write(path, texts, vectors.astype(np.float32), meta)
            written.append(path)
    return WrittenVectors(chunks=chunk_file, queries=query_file, embedded=resolver.embedded, written=tuple(written))
