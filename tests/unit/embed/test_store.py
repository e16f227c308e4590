"""Embedding cache and precomputed vector files: keyed by text hash, checked against their texts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from rag_eval.core.errors import EmbedderUnavailableError, EmbeddingMismatchError
from rag_eval.embed.embedders import VectorResolver
from rag_eval.embed.vector_files import EmbeddingCache, VectorFile


class CountingEmbedder:
    model_id = "toy"

    def __init__(self) -> None:
        self.calls: list[int] = []

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return np.array([[len(t), 1.0, 0.0] for t in texts], dtype=np.float32)


def test_second_resolve_embeds_nothing(tmp_path: Path) -> None:
    emb = CountingEmbedder()
    texts = ["a", "bb", "a", "ccc"]
    first = VectorResolver("toy", cache=EmbeddingCache(tmp_path, "toy"), factory=lambda: emb)
    m1 = first.resolve(texts)
    assert first.embedded == 3 and m1.shape == (4, 3) and m1[1][0] == 2.0
    second = VectorResolver("toy", cache=EmbeddingCache(tmp_path, "toy"), factory=lambda: emb)
    m2 = second.resolve(texts)
    assert second.embedded == 0 and emb.calls == [3]
    assert np.array_equal(m1, m2)


def test_cache_is_per_model(tmp_path: Path) -> None:
    c = EmbeddingCache(tmp_path, "toy")
    c.put(["a"], np.ones((1, 3), dtype=np.float32))
    c.flush()
    assert EmbeddingCache(tmp_path, "other").get("a") is None


def test_no_embedder_and_missing_vectors_is_a_clear_error() -> None:
    with pytest.raises(EmbedderUnavailableError, match="2 texts have no stored vector"):
        VectorResolver("toy").resolve(["x", "y"])


def test_precomputed_file_is_checked_against_its_texts(tmp_path: Path) -> None:
    texts = ["one", "two"]
    f = VectorFile.write(tmp_path / "v.parquet", texts, np.eye(2, 3, dtype=np.float32), {"model_id": "toy"})
    f.check_matches(texts, model_id="toy", regenerate_hint="run make embeddings")
    with pytest.raises(EmbeddingMismatchError, match=r"1 without a vector.*run make embeddings"):
        f.check_matches(["one", "three"], model_id="toy", regenerate_hint="run make embeddings")
    with pytest.raises(EmbeddingMismatchError, match="from model 'toy'"):
        f.check_matches(texts, model_id="other", regenerate_hint="x")
    resolver = VectorResolver("toy", precomputed=[VectorFile.read(tmp_path / "v.parquet")])
    assert resolver.resolve(["two"]).tolist() == [[0.0, 1.0, 0.0]]
