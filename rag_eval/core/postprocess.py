"""Post-processing (D2, D3, D4): sort, dedup by evidence key, per-document cap, return-n.

Ordering rule (documented, total, deterministic): score descending (NaN last), then
original rank ascending (the port's own order), then evidence key ascending. Inputs
that tie on score are therefore ordered as the search engine ordered them, and the
result does not depend on the order in which candidates are handed in.

Stages, in order, each recorded in the trace for every candidate:

``dedup``       a later candidate with an evidence key already kept (a true duplicate):
                its hit reasons are merged into the kept one, its content is dropped
``cap``         its document already has ``max_chunks_per_document`` blocks; a candidate
                without docId is a bucket of its own (its evidence key)
``truncation``  beyond ``return_n`` blocks
``returned``    kept, with its final 1-based position

The legacy processor (what D1-D5 replace) is here too, so both run on the same hits.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass

from rag_eval.core.identity import RANK_PREFIX, VECTOR_PREFIX
from rag_eval.core.types import HitReason, RetrievedEvidenceCandidate, sort_score


class Stage(enum.StrEnum):
    RETURNED = "returned"
    DEDUP = "dedup"
    CAP = "cap"
    TRUNCATION = "truncation"
    MERGED = "merged"  # legacy only: merged into its document's block (delivered with it)


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceEntry:
    """What post-processing did with one candidate.

    ``position`` is the 1-based position of the block that carries the candidate
    (``returned``, ``merged``, or ``dedup`` into a returned key), else None.
    ``merged_into`` names the kept key for ``dedup`` and ``merged``.
    """

    key: str
    original_rank: int
    vector_id: str | None
    stage: Stage
    position: int | None = None
    merged_into: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SelectedEvidence:
    """One block-to-be: its key, the candidate whose content it keeps (the first after
    sorting) and every candidate it stands for (primary first)."""

    key: str
    primary: RetrievedEvidenceCandidate
    members: tuple[RetrievedEvidenceCandidate, ...]
    hit_reasons: tuple[HitReason, ...]

    def as_candidate(self) -> RetrievedEvidenceCandidate:
        """This selection as one candidate again (merged hit reasons kept)."""
        return RetrievedEvidenceCandidate(
            key=self.key, hit=self.primary.hit, original_rank=self.primary.original_rank, hit_reasons=self.hit_reasons
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PostProcessOutcome:
    selected: tuple[SelectedEvidence, ...]
    trace: tuple[TraceEntry, ...]  # one entry per input candidate, in original-rank order

    def stage_counts(self) -> dict[str, int]:
        counts = {s.value: 0 for s in Stage}
        for entry in self.trace:
            counts[entry.stage.value] += 1
        return counts


def sort_candidates(candidates: Iterable[RetrievedEvidenceCandidate]) -> list[RetrievedEvidenceCandidate]:
    """The documented order: score desc (NaN last, after minus infinity too), original rank asc, key asc."""
    return sorted(candidates, key=lambda c: (math.isnan(c.score), -sort_score(c.score), c.original_rank, c.key))


def _merge_reasons(a: tuple[HitReason, ...], b: tuple[HitReason, ...]) -> tuple[HitReason, ...]:
    return a + tuple(r for r in b if r not in a)


def _trace_order(entries: list[TraceEntry]) -> tuple[TraceEntry, ...]:
    return tuple(sorted(entries, key=lambda e: (e.original_rank, e.key)))


@dataclass(frozen=True, slots=True)
class EvidencePostProcessor:
    """D2 + D3 + D4 on one lookup's candidates.

    >>> from rag_eval.core.types import KnowledgeSearchHit, to_candidates
    >>> hits = [KnowledgeSearchHit(id=str(i), content=f"c{i}", score=1 - i / 10, doc_id="d", chunk_index=i)
    ...         for i in range(3)]
    >>> outcome = EvidencePostProcessor(return_n=5, max_chunks_per_document=2)(to_candidates(hits))
    >>> [s.key for s in outcome.selected], [e.stage.value for e in outcome.trace]
    (['d#chunk-0', 'd#chunk-1'], ['returned', 'returned', 'cap'])
    """

    return_n: int
    max_chunks_per_document: int

    def __call__(self, candidates: Iterable[RetrievedEvidenceCandidate]) -> PostProcessOutcome:
        # D2: dedup by evidence key; the first after sorting keeps its content
        kept: dict[str, SelectedEvidence] = {}
        order: list[str] = []
        trace: list[TraceEntry] = []
        dedup_into: list[RetrievedEvidenceCandidate] = []
        for cand in sort_candidates(candidates):
            existing = kept.get(cand.key)
            if existing is None:
                kept[cand.key] = SelectedEvidence(
                    key=cand.key, primary=cand, members=(cand,), hit_reasons=cand.hit_reasons
                )
                order.append(cand.key)
            else:
                kept[cand.key] = SelectedEvidence(
                    key=existing.key,
                    primary=existing.primary,
                    members=(*existing.members, cand),
                    hit_reasons=_merge_reasons(existing.hit_reasons, cand.hit_reasons),
                )
                dedup_into.append(cand)

        # D3: per-document cap, then D4: return-n
        per_doc: dict[str, int] = {}
        selected: list[SelectedEvidence] = []
        position_of: dict[str, int] = {}
        for key in order:
            sel = kept[key]
            bucket = sel.primary.doc_id or f"\x00{key}"  # missing docId: own bucket
            if per_doc.get(bucket, 0) >= self.max_chunks_per_document:
                trace.append(_entry(sel.primary, Stage.CAP))
                continue
            per_doc[bucket] = per_doc.get(bucket, 0) + 1
            if len(selected) >= self.return_n:
                trace.append(_entry(sel.primary, Stage.TRUNCATION))
                continue
            selected.append(sel)
            position_of[key] = len(selected)
            trace.append(_entry(sel.primary, Stage.RETURNED, position=len(selected)))
        for cand in dedup_into:
            trace.append(_entry(cand, Stage.DEDUP, position=position_of.get(cand.key), merged_into=cand.key))
        return PostProcessOutcome(selected=tuple(selected), trace=_trace_order(trace))


def legacy_document_key(candidate: RetrievedEvidenceCandidate) -> str:
    """Legacy identity: the document (``source``, else docId), else the row itself."""
    hit = candidate.hit
    if hit.source:
        return hit.source
    if hit.doc_id:
        return hit.doc_id
    if hit.vector_id:
        return f"{VECTOR_PREFIX}{hit.vector_id}"
    return f"{RANK_PREFIX}{candidate.original_rank}"


@dataclass(frozen=True, slots=True)
class LegacyPostProcessor:
    """The behaviour D1-D5 replace: one width (``rag.top-k``) for retrieval and
    return, and document-level identity: every chunk of a document is merged into
    that document's block (in score order), no per-document cap, and the first
    ``top_k`` document blocks are returned.

    >>> from rag_eval.core.types import KnowledgeSearchHit, to_candidates
    >>> hits = [KnowledgeSearchHit(id=str(i), content=f"c{i}", score=1 - i / 10, doc_id="d", chunk_index=i,
    ...         source="kb/d.md") for i in range(3)]
    >>> outcome = LegacyPostProcessor(top_k=5)(to_candidates(hits))
    >>> [(s.key, len(s.members)) for s in outcome.selected]
    [('kb/d.md', 3)]
    """

    top_k: int

    def __call__(self, candidates: Iterable[RetrievedEvidenceCandidate]) -> PostProcessOutcome:
        groups: dict[str, list[RetrievedEvidenceCandidate]] = {}
        for cand in sort_candidates(candidates):
            groups.setdefault(legacy_document_key(cand), []).append(cand)
        selected: list[SelectedEvidence] = []
        trace: list[TraceEntry] = []
        for key, members in groups.items():  # dicts keep first-seen (= score) order
            primary = members[0]
            if len(selected) >= self.top_k:
                trace.extend(_entry(m, Stage.TRUNCATION) for m in members)
                continue
            reasons: tuple[HitReason, ...] = ()
            for m in members:
                reasons = _merge_reasons(reasons, m.hit_reasons)
            selected.append(SelectedEvidence(key=key, primary=primary, members=tuple(members), hit_reasons=reasons))
            pos = len(selected)
            trace.append(_entry(primary, Stage.RETURNED, position=pos))
            trace.extend(_entry(m, Stage.MERGED, position=pos, merged_into=key) for m in members[1:])
        return PostProcessOutcome(selected=tuple(selected), trace=_trace_order(trace))


def _entry(
    cand: RetrievedEvidenceCandidate, stage: Stage, *, position: int | None = None, merged_into: str | None = None
) -> TraceEntry:
    return TraceEntry(
        key=cand.key,
        original_rank=cand.original_rank,
        vector_id=cand.hit.vector_id,
        stage=stage,
        position=position,
        merged_into=merged_into,
    )
