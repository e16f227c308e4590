"""A data set's precomputed vectors written beside it: every distinct text embedded once, nothing embedded
or rewritten a second time, and after a change only what changed embedded again (the rest kept byte for
byte). The embedder here is a small deterministic one that counts what it is asked."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from rag_eval.datasets.beir import load_beir
from rag_eval.datasets.chunking import parse_chunker
from rag_eval.datasets.labels import chunk_dataset
from rag_eval.embed.vector_files import VectorFile
from rag_eval.replay.prepare import Progress, normalized_queries
from rag_eval.replay.vectors import write_vectors
from tests.report_runs import write_dataset

CHUNKER = "sentences:size=3,overlap=0"


@dataclass
class Counting:
    """Vectors from a text's length and its first letters; how many texts each call embedded."""

    model_id: str = "toy"
    calls: list[int] = field(default_factory=list)

    def encode(self, texts: Any) -> np.ndarray:
        self.calls.append(len(texts))
        return np.array([[len(t), ord(t[0]) if t else 0, ord(t[-1]) if t else 0] for t in texts], dtype=np.float32)

    def build(self) -> Counting:
        return self


def write(root: Path, cache: Path, embedder: Counting) -> Any:
    return write_vectors(root, chunker=CHUNKER, split="test", spec=cast(Any, embedder), cache_dir=cache,
                         progress=Progress(quiet=True))  # fmt: skip


def distinct_texts(root: Path) -> tuple[int, int]:
    dataset = load_beir(root, "test")
    corpus = chunk_dataset(dataset, parse_chunker(CHUNKER))
    return len({c.content for c in corpus.chunks}), len(set(normalized_queries(dataset)))


def test_every_distinct_text_is_embedded_once_and_a_second_write_changes_nothing(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "kb", n_queries=6, hostile=False, seed=3)
    chunks, queries = distinct_texts(root)
    embedder = Counting()
    first = write(root, tmp_path / "cache", embedder)
    assert first.embedded == chunks + queries and sum(embedder.calls) == chunks + queries
    assert (first.chunks.parent, first.queries.name) == (root / "vectors", "queries.parquet")
    assert first.written == (first.chunks, first.queries)
    stored = VectorFile.read(first.chunks)
    assert stored.model_id == "toy" and stored.metadata["chunker"] == CHUNKER and stored.dim == 3
    assert len(stored.vectors) == chunks and len(VectorFile.read(first.queries).vectors) == queries
    before = (first.chunks.read_bytes(), first.queries.read_bytes())
    again = write(root, tmp_path / "other-cache", Counting())  # the files alone are the source now
    assert (again.embedded, again.written) == (0, ())
    assert (first.chunks.read_bytes(), first.queries.read_bytes()) == before


def test_after_a_query_changes_only_it_is_embedded_and_the_chunk_vectors_are_kept(tmp_path: Path) -> None:
    root = write_dataset(tmp_path / "kb", n_queries=6, hostile=False, seed=3)
    first = write(root, tmp_path / "cache", Counting())
    chunk_vectors = VectorFile.read(first.chunks).vectors
    lines = (root / "queries.jsonl").read_text(encoding="utf-8").splitlines()
    changed = {**json.loads(lines[0]), "text": "an entirely new question about rotation"}
    (root / "queries.jsonl").write_text("\n".join([json.dumps(changed), *lines[1:]]) + "\n", encoding="utf-8")
    embedder = Counting()
    second = write(root, tmp_path / "other-cache", embedder)
    assert second.embedded == 1 and embedder.calls == [1]
    assert second.queries in second.written  # its data set checksum changed with it
    kept = VectorFile.read(second.chunks).vectors
    assert kept.keys() == chunk_vectors.keys()
    assert all(np.array_equal(kept[k], chunk_vectors[k]) for k in kept)
