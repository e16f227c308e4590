"""RagResultProjector (D5): the agent-facing payload.

``document_id`` is the block's identity: the chunk-scoped evidence key in the evidence
pipeline (an observable behaviour change: references stay 1:1 with excerpts), the
source in the legacy one. ``source`` and ``title`` stay human-readable and may repeat
across excerpts. The projector dedupes by ``document_id`` and applies its budgets
after post-processing, in this order: blocks, characters per excerpt, total
characters. Every cut is recorded.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from rag_eval.core.packing import RagResult
from rag_eval.core.transform import QueryHints
from rag_eval.core.types import EvidenceBlock, fast_constructor


class Budget(enum.StrEnum):
    DUPLICATE_DOCUMENT_ID = "duplicate_document_id"
    BLOCKS = "blocks"
    EXCERPT_CHARS = "excerpt_chars"
    TOTAL_CHARS = "total_chars"


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetCut:
    """One budget at work: ``chars_after == 0`` means the excerpt was dropped."""

    document_id: str
    budget: Budget
    chars_before: int
    chars_after: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberLoss:
    """A member (evidence key) of a block that a budget cut, partly or wholly; the
    first budget that reached it is named."""

    key: str
    budget: Budget


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectedExcerpt:
    document_id: str
    source: str | None
    title: str | None
    content: str
    score: float
    rank: int
    truncated: bool
    delivered_members: tuple[str, ...]  # evidence keys whose whole content is in ``content``

    def as_dict(self) -> dict[str, Any]:
        return {
            "document_id": self.document_id,
            "source": self.source,
            "title": self.title,
            "content": self.content,
            "score": self.score,
            "rank": self.rank,
            "truncated": self.truncated,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ProjectedPayload:
    """What ``lookup_knowledge(query)`` returns: L1 ``excerpts`` and, beside them, L0 ``hints``."""

    query: str
    excerpts: tuple[ProjectedExcerpt, ...]
    hints: QueryHints
    cuts: tuple[BudgetCut, ...]
    member_losses: tuple[MemberLoss, ...] = ()

    @property
    def document_ids(self) -> tuple[str, ...]:
        return tuple(e.document_id for e in self.excerpts)

    @property
    def total_chars(self) -> int:
        return sum(len(e.content) for e in self.excerpts)

    def as_dict(self) -> dict[str, Any]:
        """The JSON-ready tool result the agent sees."""
        return {
            "query": self.query,
            "evidence": [e.as_dict() for e in self.excerpts],
            "hints": self.hints.as_dict(),
        }


@dataclass(frozen=True, slots=True)
class RagResultProjector:
    """Applies D5 identity and the budgets.

    Two chunks of one runbook stay two excerpts with their own ``document_id``; the second is cut
    first by the excerpt budget (32 -> 25 characters), then by what the total budget leaves (19):

    >>> from rag_eval.core.config import RagConfig
    >>> from rag_eval.core.lookup import Pipeline
    >>> from rag_eval.core.transform import KnowledgeQueryTransformer
    >>> from rag_eval.core.types import KnowledgeSearchHit
    >>> hits = [KnowledgeSearchHit(id=str(i), content=text, score=0.9 - i / 10, doc_id="lag", chunk_index=i,
    ...                            source="kb/lag.md") for i, text in
    ...         enumerate(["Check the SQL thread.", "Raise the relay log space limit."])]
    >>> result = Pipeline(RagConfig()).process(KnowledgeQueryTransformer().transform("replica lag"), hits).result
    >>> payload = RagResultProjector(max_excerpt_chars=25, max_total_chars=40, max_blocks=8).project(result)
    >>> for e in payload.excerpts:
    ...     print(e.rank, e.document_id, e.source, repr(e.content), "truncated" if e.truncated else "whole")
    1 lag#chunk-0 kb/lag.md 'Check the SQL thread.' whole
    2 lag#chunk-1 kb/lag.md 'Raise the relay log' truncated
    >>> [(c.budget.value, c.chars_before, c.chars_after) for c in payload.cuts]
    [('excerpt_chars', 32, 25), ('total_chars', 25, 19)]
    >>> [(m.key, m.budget.value) for m in payload.member_losses]
    [('lag#chunk-1', 'excerpt_chars')]
    """

    max_excerpt_chars: int
    max_total_chars: int
    max_blocks: int

    def project(self, result: RagResult) -> ProjectedPayload:
        max_blocks, max_excerpt, max_total = self.max_blocks, self.max_excerpt_chars, self.max_total_chars
        seen: set[str] = set()
        excerpts: list[ProjectedExcerpt] = []
        cuts: list[BudgetCut] = []
        losses: list[MemberLoss] = []
        total = 0
        for block in result.blocks:
            content = block.content
            full = len(content)
            doc_id = block.key
            if doc_id in seen:
                _drop(block, Budget.DUPLICATE_DOCUMENT_ID, full, 0, (cuts, losses, set()))
                continue
            seen.add(doc_id)
            if len(excerpts) >= max_blocks:
                _drop(block, Budget.BLOCKS, full, 0, (cuts, losses, set()))
                continue
            kept = full
            remaining = max_total - total
            if kept > max_excerpt or kept > remaining or not kept:  # cut, or nothing to deliver (rare)
                lost: set[str] = set()  # members of this block already reported lost (by either budget)
                if kept > max_excerpt:
                    _drop(block, Budget.EXCERPT_CHARS, kept, max_excerpt, (cuts, losses, lost))
                    kept = max_excerpt
                remaining = max(remaining, 0)
                if kept > remaining:
                    _drop(block, Budget.TOTAL_CHARS, kept, remaining, (cuts, losses, lost))
                    kept = remaining
                if kept == 0:
                    continue
            total += kept
            members = block.members
            delivered: tuple[str, ...]
            if len(members) == 1:  # the one member, when delivered whole (kept characters reach its end)
                delivered = (members[0].key,) if members[0].end <= kept else ()
            else:
                delivered = tuple([m.key for m in members if m.end <= kept])
            excerpts.append(
                _new_excerpt(
                    doc_id,
                    block.source,
                    block.title,
                    content[:kept] if kept < full else content,
                    block.score,
                    len(excerpts) + 1,
                    kept < full,  # truncated
                    delivered,
                )
            )
        return _new_payload(result.hints.original_query, tuple(excerpts), result.hints, tuple(cuts), tuple(losses))


_new_excerpt = fast_constructor(ProjectedExcerpt)
_new_payload = fast_constructor(ProjectedPayload)


def _drop(
    block: EvidenceBlock,
    budget: Budget,
    before: int,
    limit: int,
    into: tuple[list[BudgetCut], list[MemberLoss], set[str]],
) -> None:
    """Record a cut of ``block`` to ``limit`` characters, and the members it reaches (each once per block):
    ``into`` is (the cuts, the member losses, the members already lost of this block)."""
    cuts, losses, lost = into
    cuts.append(BudgetCut(document_id=block.key, budget=budget, chars_before=before, chars_after=limit))
    for m in block.members:
        if m.end > limit and m.key not in lost:
            lost.add(m.key)
            losses.append(MemberLoss(key=m.key, budget=budget))
