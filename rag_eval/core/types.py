"""Domain types of the pipeline (D6 and the L2 DTOs): small, immutable, named.

Flow: ``KnowledgeSearchRequest`` -> port -> ``KnowledgeSearchHit`` ->
``RetrievedEvidenceCandidate`` (+ identity) -> post-process -> ``EvidenceBlock``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rag_eval.core.identity import evidence_key

MetadataValue = str | int | float | bool | None


class SearchMode(enum.StrEnum):
    """How the port searches. ``DENSE`` is the design's only mode; the others are
    offered by adapters whose backend really supports them and refused elsewhere."""

    DENSE = "dense"
    GROUPED = "grouped"  # server-side per-document grouping (Milvus group_by_field)
    HYBRID = "hybrid"  # BM25 full text + dense, fused with RRF


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeSearchRequest:
    """What the pipeline asks of the port (D6): query text, width, optional category filter.

    ``group_size`` is read only in ``GROUPED`` mode (hits per document).
    """

    query: str
    top_k: int
    category_filter: str | None = None
    mode: SearchMode = SearchMode.DENSE
    group_size: int = 1

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")


@dataclass(frozen=True, slots=True, kw_only=True)
class KnowledgeSearchHit:
    """One hit as the port returns it (D6): id, content, score fields, metadata and the
    identity fields extracted when the row has them (None when missing)."""

    id: str
    content: str
    score: float
    scores: Mapping[str, float] = field(default_factory=dict)
    metadata: Mapping[str, MetadataValue] = field(default_factory=dict)
    doc_id: str | None = None
    chunk_index: int | None = None
    vector_id: str | None = None
    source: str | None = None
    title: str | None = None
    category: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class HitReason:
    """Why a candidate is in the list: which channel found it, at which original rank."""

    channel: str
    original_rank: int
    score: float
    vector_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RetrievedEvidenceCandidate:
    """A hit with its identity (D1). ``original_rank`` is 1-based in the port's order."""

    key: str
    hit: KnowledgeSearchHit
    original_rank: int
    hit_reasons: tuple[HitReason, ...]

    @property
    def score(self) -> float:
        return self.hit.score

    @property
    def doc_id(self) -> str | None:
        return self.hit.doc_id

    @classmethod
    def from_hit(
        cls, hit: KnowledgeSearchHit, original_rank: int, channel: str = "dense"
    ) -> RetrievedEvidenceCandidate:
        key = evidence_key(
            doc_id=hit.doc_id,
            chunk_index=hit.chunk_index,
            vector_id=hit.vector_id,
            original_rank=original_rank,
        )
        reason = HitReason(channel=channel, original_rank=original_rank, score=hit.score, vector_id=hit.vector_id)
        return cls(key=key, hit=hit, original_rank=original_rank, hit_reasons=(reason,))


def to_candidates(
    hits: tuple[KnowledgeSearchHit, ...] | list[KnowledgeSearchHit], channel: str = "dense"
) -> tuple[RetrievedEvidenceCandidate, ...]:
    """Map the port's hits, in the order returned, to candidates (ranks from 1)."""
    return tuple(RetrievedEvidenceCandidate.from_hit(h, i, channel) for i, h in enumerate(hits, start=1))


def sort_score(score: float) -> float:
    """Score used for ordering: NaN sorts last, as if it were minus infinity."""
    return -math.inf if math.isnan(score) else score


def hit_order(hit: KnowledgeSearchHit) -> tuple[float, int, int, str]:
    """The total order adapters return hits in: score descending (NaN last), then the row's id
    ascending (numerically when it is a decimal integer, those first), so that hits with equal
    scores come in the same order on every backend and every run.

    >>> hits = [KnowledgeSearchHit(id=i, content="", score=s) for i, s in (("10", 0.5), ("9", 0.5), ("x", 0.9))]
    >>> [h.id for h in sorted(hits, key=hit_order)]
    ['x', '9', '10']
    """
    ident = hit.vector_id or hit.id
    numeric = ident.isascii() and ident.isdigit()
    return (-sort_score(hit.score), 0 if numeric else 1, int(ident) if numeric else 0, ident)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberSpan:
    """Where one constituent candidate's content sits inside a block's content."""

    key: str
    start: int
    end: int


@dataclass(frozen=True, slots=True, kw_only=True)
class EvidenceBlock:
    """One packed evidence block (L1 fact evidence).

    ``key`` is the block's identity: the evidence key in the evidence pipeline, the
    document identity (source) in the legacy one. ``members`` are the candidates the
    block carries: one key for an evidence block (true duplicates merged), several
    chunks for a legacy document block.
    """

    key: str
    position: int
    content: str
    score: float
    doc_id: str | None
    source: str | None
    title: str | None
    category: str | None
    hit_reasons: tuple[HitReason, ...]
    members: tuple[MemberSpan, ...]
    metadata: Mapping[str, Any] = field(default_factory=dict)
