"""In-memory KnowledgeSearchPort: brute-force cosine over given vectors, or scripted hits.

Public API for tests and examples (as httpx ships ``MockTransport``). It honours
``top_k``, the category filter (exact match) and GROUPED mode (at most
``group_size`` hits per doc_id, as Milvus grouping search does), and refuses HYBRID.
Cosine hits come in the adapters' total order (:func:`rag_eval.core.types.hit_order`);
scripted hits come exactly as scripted (a port's order may differ from score order).

>>> port = InMemorySearch.from_rows(
...     [InMemoryRow(vector_id="1", content="lag", vector=(1.0, 0.0), doc_id="d", chunk_index=0),
...      InMemoryRow(vector_id="2", content="lock", vector=(0.0, 1.0), doc_id="e", chunk_index=0)],
...     encoder=lambda text: (1.0, 0.1))
>>> [h.vector_id for h in port.search(KnowledgeSearchRequest(query="q", top_k=2))]
['1', '2']
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_eval.core.errors import DimensionMismatchError, UnsupportedFeatureError
from rag_eval.core.ports import PortBase
from rag_eval.core.types import KnowledgeSearchHit, KnowledgeSearchRequest, SearchMode, hit_order

TextEncoder = Callable[[str], Sequence[float]]  # one text at a time (the Milvus search encodes batches)


@dataclass(frozen=True, slots=True, kw_only=True)
class InMemoryRow:
    vector_id: str
    content: str
    vector: tuple[float, ...]
    doc_id: str | None = None
    chunk_index: int | None = None
    source: str | None = None
    title: str | None = None
    category: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


def _normalise(v: Sequence[float]) -> tuple[float, ...]:
    norm = math.sqrt(sum(x * x for x in v))
    return tuple(x / norm for x in v) if norm else tuple(v)


class InMemorySearch(PortBase):
    """Either ``from_rows(rows, encoder)`` (cosine similarity) or ``scripted({query: hits})``."""

    def __init__(
        self,
        *,
        rows: Iterable[InMemoryRow] = (),
        encoder: TextEncoder | None = None,
        script: Mapping[str, Sequence[KnowledgeSearchHit]] | None = None,
    ) -> None:
        self._rows = [(r, _normalise(r.vector)) for r in rows]
        self._encoder = encoder
        self._script = dict(script) if script is not None else None
        self.requests: list[KnowledgeSearchRequest] = []  # what was asked, for assertions

    @classmethod
    def from_rows(cls, rows: Iterable[InMemoryRow], encoder: TextEncoder) -> InMemorySearch:
        return cls(rows=rows, encoder=encoder)

    @classmethod
    def scripted(cls, script: Mapping[str, Sequence[KnowledgeSearchHit | Mapping[str, Any]]]) -> InMemorySearch:
        """Hits per normalised query text, returned in the scripted order."""
        return cls(
            script={
                q: [h if isinstance(h, KnowledgeSearchHit) else KnowledgeSearchHit(**h) for h in hits]
                for q, hits in script.items()
            }
        )

    def search(self, request: KnowledgeSearchRequest) -> tuple[KnowledgeSearchHit, ...]:
        self.requests.append(request)
        if request.mode is SearchMode.HYBRID:
            raise UnsupportedFeatureError(
                "the in-memory adapter has no full-text index: use mode 'dense' or 'grouped'", feature="hybrid"
            )
        ranked = self._scripted(request) if self._script is not None else self._cosine(request)
        if request.category_filter is not None:
            ranked = [h for h in ranked if h.category == request.category_filter]
        if request.mode is SearchMode.GROUPED:
            per_doc: dict[str, int] = {}
            grouped = []
            for h in ranked:
                bucket = h.doc_id or f"\x00{h.id}"
                if per_doc.get(bucket, 0) < request.group_size:
                    per_doc[bucket] = per_doc.get(bucket, 0) + 1
                    grouped.append(h)
            ranked = grouped
        return tuple(ranked[: request.top_k])

    def search_batch(self, requests: Sequence[KnowledgeSearchRequest]) -> list[tuple[KnowledgeSearchHit, ...]]:
        return [self.search(r) for r in requests]

    def _scripted(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
        assert self._script is not None
        return list(self._script.get(request.query, ()))

    def _cosine(self, request: KnowledgeSearchRequest) -> list[KnowledgeSearchHit]:
        if self._encoder is None:
            raise TypeError("InMemorySearch.from_rows needs an encoder")
        q = _normalise(self._encoder(request.query))
        scored = []
        for row, vec in self._rows:
            if len(vec) != len(q):
                raise DimensionMismatchError(
                    f"query vector has dimension {len(q)} but the rows have {len(vec)}: "
                    "embed queries with the model used for the rows"
                )
            scored.append((sum(a * b for a, b in zip(q, vec, strict=True)), row))
        hits = [
            KnowledgeSearchHit(
                id=row.vector_id,
                content=row.content,
                score=score,
                scores={"dense": score},
                metadata=dict(row.metadata),
                doc_id=row.doc_id,
                chunk_index=row.chunk_index,
                vector_id=row.vector_id,
                source=row.source,
                title=row.title,
                category=row.category,
            )
            for score, row in scored
        ]
        return sorted(hits, key=hit_order)
